"""The roots a project gets where no capture site speaks for its code: the forward of every
top-level nn.Module, outside what the resolved capture sites cover.

A capture site speaks for the code its files import, and for the code of the applications
that use the captured model: a serving engine that imports the model and its audio tokenizer
runs the tokenizer eagerly around the replays, so the tokenizer's modules are not roots. In a
tree of unrelated models linted together (one model compiled with reduce-overhead among
hundreds), the other models' forwards still are.
"""
from __future__ import annotations

from typing import Mapping

from graphlint.analysis import catalog
from graphlint.callgraph.values import DICT, FN, INST, LIST, TUPLE, Project

_NN = catalog.prefix("namespaces", "nn")


def is_module(project: Project, cls: tuple[str, str]) -> bool:
    """An nn.Module subclass, as far as the linted files tell (a base from torch.nn, or a
    project base outside the lint named like a module or model)."""
    for base in project.mro(cls)[1]:
        name = base[1]
        if name.startswith(_NN) or name.endswith(("Module", "Model", "PreTrainedModel", "Layer")):
            return True
    return False


def submodule_classes(project: Project, holders: Mapping | None = None) -> set[tuple[str, str]]:
    """Linted classes that another linted class (one of `holders`, by default any) holds as an
    attribute (`self.lm_head = ParallelLMHead(...)`, items of a ModuleList): their forward runs
    where the holder calls it. A back-reference is no holding: a layer given its model
    (`self.model = model` in a layer the model builds) closes a cycle through a name, and the
    model is still the top."""
    edges: dict[tuple[str, str], dict[tuple[str, str], bool]] = {}  # holder -> held -> only through a name

    def collect(values: frozenset, into: dict, by_name: bool, depth: int = 0) -> None:
        for value in values:
            if value[0] == INST:
                into[value[1]] = into.get(value[1], True) and by_name
            elif value[0] == LIST and depth < 3:
                collect(value[1], into, by_name, depth + 1)
            elif value[0] == TUPLE and depth < 3:
                for part in value[1]:
                    collect(part, into, by_name, depth + 1)
            elif value[0] == DICT and depth < 3:
                collect(value[2], into, by_name, depth + 1)

    for cls, info in (project.classes if holders is None else holders).items():
        held_here = edges.setdefault(cls, {})
        for attr, assigned in info["attrs"].items():
            for method, expr in assigned:
                if type(expr) is tuple and expr[:1] == ("ann",):
                    continue  # a declared type says nothing about what the module builds
                scope = (cls[0], method, cls) if method else (cls[0], None, None)
                collect(frozenset(v for v in project.eval(expr, scope) if v[1] != cls), held_here, type(expr) is str)
    return {held for holder, targets in edges.items() for held, by_name in targets.items()
            if not (by_name and _reaches(project, edges, held, holder))}


def _reaches(project: Project, edges: Mapping, start: tuple[str, str], goal: tuple[str, str]) -> bool:
    """Whether `start` holds a `goal` (an instance of it or of a subclass), directly or through
    what it holds (with what its linted bases hold: a layer inherits its base's `self.model`)."""
    seen = {start}
    stack = [start]
    while stack:
        current = stack.pop()
        for held in [h for cls in project.mro(current)[0] for h in edges.get(cls, ())]:
            if goal in project.mro(held)[0]:
                return True
            if held not in seen:
                seen.add(held)
                stack.append(held)
    return False


def import_closure(project: Project, paths: set[str]) -> set[str]:
    """The linted files `paths` import, directly or not (themselves included)."""
    seen: set[str] = set()
    stack = list(paths)
    while stack:
        path = stack.pop()
        if path in seen:
            continue
        seen.add(path)
        stack.extend(project.imported_files(path) - seen)
    return seen


def forward_roots(project: Project, covered: set[str] = frozenset(),
                  orchestration: Mapping[tuple[str, str], str] | None = None) -> list[tuple[tuple, str]]:
    """The `forward` of every top-level linted nn.Module: one no other linted class holds as a
    submodule (an LM head or a sampler held by the model and called outside its forward is not
    per-step unless a forward reaches it). Modules in `covered` files (what the files holding a
    resolved capture site import) are left to the capture sites, and a forward that calls a
    function capturing or replaying a graph (`orchestration`: an engine wrapping the model, whose
    forward replays it) drives the step rather than being it."""
    roots = []
    held: set[tuple[str, str]] | None = None
    for cls, info in project.classes.items():
        if cls[0] in covered:
            continue
        key = (cls[0], f"{cls[1]}.forward")
        if "forward" in info["methods"] and key in project.functions and is_module(project, cls):
            if held is None:
                held = submodule_classes(project)
            if cls not in held and not drives_step(project, key, cls, orchestration or {}):
                why = "no capture site imports its file" if covered else "no resolved capture site"
                roots.append(((FN, key, cls), f"forward of nn.Module {cls[1]} ({why})"))
    return roots


def plain_forward_roots(project: Project) -> list[tuple[tuple, str]]:
    """Where a project has no capture site and no nn.Module (layers written as plain classes,
    called through their `forward`): the `forward` of every linted class that no other class
    with a `forward` holds. The layers a model holds run where its forward calls them, and the
    project's loaders, converters and scripts are not the step."""
    with_forward = [cls for cls, info in project.classes.items()
                    if "forward" in info["methods"] and (cls[0], f"{cls[1]}.forward") in project.functions]
    if not with_forward:
        return []
    holders = {cls: info for cls, info in project.classes.items() if "forward" in info["methods"]}
    held = submodule_classes(project, holders)
    return [((FN, (cls[0], f"{cls[1]}.forward"), cls),
             f"forward of {cls[1]} (no capture site or nn.Module in the linted files)")
            for cls in with_forward if cls not in held]


def covered_files(project: Project, involved: set[str], applications: bool = True) -> set[str]:
    """The files whose modules the capture sites speak for: what `involved` (the capture sites'
    and the captured functions' files) import, and what each application importing them
    imports, and the files nothing imports in their folders. An application is a file that
    defines no nn.Module and is not a package's `__init__` (a re-export says nothing of what
    runs together). Without `applications`, only what `involved` imports."""
    if not applications:
        return import_closure(project, involved)
    importers: dict[str, set[str]] = {}
    for path in project.module_of:
        for imported in project.imported_files(path):
            importers.setdefault(imported, set()).add(path)
    users: set[str] = set()
    stack = list(involved)
    while stack:
        path = stack.pop()
        for importer in importers.get(path, ()):
            if importer not in users and importer not in involved:
                users.add(importer)
                stack.append(importer)
    defines_module = {cls[0] for cls in project.classes if is_module(project, cls)}
    applications = {path for path in users if path not in defines_module and not path.endswith("__init__.py")}
    covered = import_closure(project, involved | applications)
    # A file nothing imports, beside covered ones (an older version of a quantizer left in
    # the tokenizer's package), belongs to their component, not to another model.
    folders = {path.rpartition("/")[0] for path in covered}
    orphans = {path for path in project.module_of if path not in importers and path.rpartition("/")[0] in folders}
    return covered | orphans


def drives_step(project: Project, key: tuple[str, str], cls: tuple[str, str] | None, orchestration: Mapping) -> bool:
    """Whether the function captures or replays a graph, or calls one that does."""
    if not orchestration:
        return False
    if key in orchestration:
        return True
    scope = (key[0], key[1], cls)
    return any(target[1] in orchestration for call in project.functions[key]["calls"]
               for target in project.call_targets(frozenset(project.eval(call[1], scope))))
