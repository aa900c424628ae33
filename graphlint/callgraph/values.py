"""Symbolic values of the call graph: what a name, an attribute or a call in the linted code
may hold (an instance of a linted class, a function, a list of modules, a library object, a
value from a project module outside the lint, or something unknown), evaluated lazily from the
per-file facts of graphlint.analysis.facts.call_facts (bindings: lookups, calls: calls). Nothing runs.

A value is a tuple whose first item is its tag:
  (INST, class) (CLS, class) (FN, function, self_class) (SUPER, start_class, self_class)
  (MOD, module) (LIST, elements) (TUPLE, (parts..)) (DICT, keys, values) (BOUND, method, container)
  (EXT, dotted)   a library object (torch, the standard library): calls into it are not listed
  (PEXT, dotted)  from a project module that is not among the linted files
  (DYN, why)      not known statically (an unannotated parameter, a computed value)
  (LAMBDA, body, scope, params)  a lambda: calling it evaluates its body where it was defined
  (STR, text)     a string literal: the attribute a `getattr` of it names
where a class or function is (path, qualname).
"""
from __future__ import annotations

import builtins
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

from graphlint.analysis import catalog
from graphlint.callgraph.calls import MAX_SUBCLASSES, CallResults
from graphlint.callgraph.lookups import Lookups
from graphlint.callgraph.module_names import namespace_parents, package_module
from graphlint.callgraph.outside import outside_model
from graphlint.callgraph.regions import module_name
from graphlint.callgraph.tags import (BOUND, BUILTIN, CLS, DICT, DYN, EMPTY as _EMPTY, EXT, FN, INST, LAMBDA,  # noqa: F401
                                      LIST, MOD, PEXT, STR, SUPER, TUPLE, join as _join)

_NN = catalog.prefix("namespaces", "nn")
_BUILTINS = frozenset(dir(builtins))
_CONTAINER_METHODS = frozenset({"items", "values", "keys", "get", "pop", "setdefault", "copy", "__getitem__"})
# nn.Module methods that return the module (`Model(cfg).to(device)`): graphlint/data/call_graph.toml.
RETURNS_RECEIVER = catalog.call_graph("returns_receiver", "methods")
CONSTRUCTS_CLASS = catalog.call_graph("constructs_class", "methods")
# What calling a module instance runs, in lookup order (graphlint/data/torch_values.toml).
_CALL_METHODS = catalog.ordered("modules", "call_methods")


def _freeze(value: Any) -> Any:
    """JSON lists -> tuples (hashable, so evaluations can be memoised); kwargs dict -> pairs."""
    kind = type(value)
    if kind is list:
        # Leaves (names, numbers) need no call: most items of the facts are strings.
        return tuple([v if type(v) is str else _freeze(v) for v in value])
    if kind is dict:
        return tuple(sorted([(k, _freeze(v)) for k, v in value.items()]))
    return value


class Project(CallResults, Lookups):
    """Every linted file's facts, indexed, and the evaluator of the facts' expressions."""

    def __init__(self, files: Sequence[Mapping[str, Any]], root: Path):
        self.modules: dict[str, str] = {}  # module name -> path
        self.module_of: dict[str, str] = {}
        self.alt_module_of: dict[str, str] = {}  # the path-based name, for entry-point specs
        self.is_package: dict[str, bool] = {}
        self.functions: dict[tuple[str, str], dict] = {}
        self.classes: dict[tuple[str, str], dict] = {}
        self.imports: dict[str, dict[str, str]] = {}
        self.globals: dict[str, dict[str, tuple]] = {}
        self.markers: dict[tuple[str, str], str | None] = {}
        # Each function's call facts as the file gave them (graphlint.callgraph.arguments.argument_states
        # reads what its calls pass).
        self.function_facts: dict[tuple[str, str], Mapping[str, Any]] = {}
        self.method_names: dict[str, list[str]] = {}
        self.skipped: dict[str, str] = {}  # module -> path of linted files that were not analysed
        self.skipped_hint: dict[str, str] = {}  # name imported through a skipped package -> its path
        self._naming: set[tuple[str, str]] = set()  # (module, name)s being resolved: import cycles
        for file in files:
            path = file["path"]
            facts = (file.get("extra") or {}).get("calls") or {}
            for function in file.get("functions", []):
                self.markers[(path, function["qualname"])] = function.get("marker")
            if not facts:
                if file.get("skipped"):
                    # Never mentions torch, so never parsed: a package __init__ that re-exports.
                    self.skipped[package_module(path, root)] = path
                continue
            module = package_module(path, root)
            self.modules.setdefault(module, path)
            self.module_of[path] = module
            self.alt_module_of[path] = module_name(path)
            # The path-based name too: a namespace package linted from its parent folder.
            if "/" in path and all(p.isidentifier() for p in self.alt_module_of[path].split(".")):
                self.modules.setdefault(self.alt_module_of[path], path)
            if "." in module or path.endswith("__init__.py"):
                parents = namespace_parents(path, root, module)
                for k in range(1, len(parents) + 1):
                    self.modules.setdefault(".".join(parents[-k:] + [module]), path)
            self.is_package[path] = path.endswith("__init__.py")
            self.imports[path] = dict(facts.get("imports", {}))
            self.globals[path] = {k: _freeze(v) for k, v in facts.get("globals", {}).items()}
            for qualname, data in facts.get("classes", {}).items():
                self.classes[(path, qualname)] = {
                    "bases": _freeze(data.get("bases", [])),
                    "methods": frozenset(data.get("methods", ())),
                    "attrs": {k: _freeze(v) for k, v in data.get("attrs", {}).items()},
                }
                for method in data.get("methods", {}):
                    self.method_names.setdefault(method, []).append(f"{qualname}.{method}")
            for qualname, data in facts.get("functions", {}).items():
                self.function_facts[(path, qualname)] = data
                self.functions[(path, qualname)] = {
                    "params": [(p, None) if type(p) is str else (p[0], _freeze(p[1])) for p in data.get("params", [])],
                    "class": data.get("class"),
                    "decorators": data.get("decorators", []),
                    "env": {k: _freeze(v) for k, v in data.get("env", {}).items()},
                    "calls": _freeze(data.get("calls", [])),
                    "returns": _freeze(data.get("returns", [])),
                    "yields": _freeze(data.get("yields", [])),
                    "once": _freeze(data.get("once", [])),
                    "returns_ann": _freeze(data.get("returns_ann")),
                    "default_values": {k: _freeze(v) for k, v in data.get("default_values", {}).items()},
                }
                for key in ("captures", "graph_contexts"):  # capture sites, `with` blocks that may be ones
                    if key in data:
                        self.functions[(path, qualname)][key] = _freeze(data[key])
                if "replays" in data:
                    self.functions[(path, qualname)]["replays"] = data["replays"]
        self._add_folder_roots()
        self.project_tops = {name.split(".")[0] for name in [*self.modules, *self.skipped]}
        self._memo: dict[tuple, frozenset] = {}
        self._active: set[tuple] = set()
        self._mro: dict[tuple[str, str], tuple[list, list]] = {}
        self._subclasses: dict[tuple[str, str], list[tuple[str, str]]] | None = None
        self._sites: dict[str, list[tuple[tuple, tuple]]] | None = None
        self._passing: set[tuple] = set()
        # What a parameter's call sites pass, by (path, qualname, index, param), and the functions a
        # set of values runs when called: asked again for every scope a function is evaluated in.
        self._passed: dict[tuple, frozenset] = {}
        self.narrowing: dict[tuple[str, str, str], frozenset] = {}  # graphlint.callgraph.arguments.narrowing
        self._targets: dict[frozenset, tuple] = {}
        self._run_keys: dict[frozenset, frozenset] = {}  # calls._functions_run
        self._class_keys: dict[frozenset, frozenset] = {}  # calls._classes_of
        self._classes_named: dict[str, list[tuple[str, str]]] | None = None
        # Names imported from project modules outside the lint (`Cache`), as opposed to
        # values derived from them (`w.wo_a`, `get_interface()`).
        self.pext_roots: set[str] = set()

    def _add_folder_roots(self) -> None:
        """Any folder above a linted file may be where the project puts its code on sys.path
        (`python/minisgl/core.py` imported as `minisgl.core`, with no `__init__.py` in either
        folder): each dotted tail of a file's path-based name is its module too, where only one
        linted file has that tail, no module has that name already, and no folder it leaves out
        is a linted package."""
        tails: dict[str, list[str]] = {}
        # A package (a folder with an `__init__.py`) and what lies in one is code, not a place
        # sys.path points at (`kernel/triton/moe.py` is not the module `triton.moe`). A plain
        # folder of scripts (`app.py` beside `infer/`) is where they run from: its folders'
        # modules are top-level. An empty `__init__.py` is skipped, not analysed.
        packages = {module_name(path) for path in [*self.alt_module_of, *self.skipped.values()]
                    if path.endswith("__init__.py")}
        for path, dotted_name in self.alt_module_of.items():
            parts = dotted_name.split(".")
            for start in range(1, len(parts) - 1):
                if any(".".join(parts[:end]) in packages for end in range(1, start + 1)):
                    break
                tails.setdefault(".".join(parts[start:]), []).append(path)
        for tail, paths in tails.items():
            if len(paths) == 1 and tail not in self.modules:
                self.modules[tail] = paths[0]

    # ----- names ------------------------------------------------------------------------------
    def eval(self, expr: Any, scope: tuple) -> frozenset:
        if expr is None:
            return _EMPTY
        key = (scope, expr)
        cached = self._memo.get(key)
        if cached is not None:
            return cached
        if key in self._active:
            return _EMPTY  # a cycle (x = f(x)): what the other assignments give is enough
        self._active.add(key)
        try:
            result = frozenset(self._eval(expr, scope))
        finally:
            self._active.discard(key)
        self._memo[key] = result
        return result

    def _eval(self, expr: tuple | str, scope: tuple) -> Iterable[tuple]:
        if type(expr) is str:
            return self.name(expr, scope)
        tag = expr[0]
        if tag == "a":
            return self.attr(self.eval(expr[1], scope), expr[2])
        if tag == "c":
            return self.call_result(expr, scope)
        if tag in ("i", "ix"):
            return self.index(self.eval(expr[1], scope), expr[2] if tag == "ix" else None)
        if tag == "s":
            return self.sliced(self.eval(expr[1], scope))
        if tag == "it":
            return self.element(self.eval(expr[1], scope))
        if tag == "l":
            return {(LIST, self._elements(expr[1], scope))}
        if tag == "t":
            return {(TUPLE, tuple(self.eval(e, scope) for e in expr[1]))}
        if tag == "d":
            keys = frozenset().union(*(self.eval(k, scope) for k in expr[1])) if expr[1] else _EMPTY
            values = frozenset().union(*(self.eval(v, scope) for v in expr[2])) if expr[2] else _EMPTY
            return {(DICT, keys, values)}
        if tag == "u":
            return frozenset().union(*(self.eval(e, scope) for e in expr[1]))
        if tag == "ann":
            return self.annotation(expr[1], scope)
        if tag == "enter":
            out: set = set()
            made = expr[1]
            if type(made) is tuple and made[:1] == ("c",):
                # `with patch_model(model) as forward:` on a @contextmanager: what it yields.
                for value in self.eval(made[1], scope):
                    if value[0] == FN and "contextmanager" in self.functions.get(value[1], {}).get("decorators", ()):
                        out |= self.yields_of(value)
            for value in self.eval(made, scope):
                if value[0] == INST:
                    out |= self.returns_of(self.member(value[1], "__enter__", value[1]))
            return out
        if tag == "star":
            return self.element(self.eval(expr[1], scope))
        if tag == "?":
            return {(DYN, "a computed value")}
        if tag == "lam":
            return {(LAMBDA, expr[1], scope, expr[2] if len(expr) > 2 else ())}
        if tag == "str":
            return {(STR, expr[1])}
        return _EMPTY

    def _elements(self, items: Sequence, scope: tuple) -> frozenset:
        out: set = set()
        for item in items:
            if type(item) is tuple and item[0] == "star":
                out |= self.element(self.eval(item[1], scope))
            else:
                out |= self.eval(item, scope)
        return frozenset(out)

    def name(self, name: str, scope: tuple) -> set:
        path, qualname, self_class = scope
        while qualname is not None:
            function = self.functions.get((path, qualname))
            if function is None:
                # A class between two functions: its body is not a scope for inner functions.
                qualname = qualname.rsplit(".", 1)[0] if "." in qualname else None
                continue
            found: set = set()
            bound = False
            for index, (param, annotation) in enumerate(function["params"]):
                if param.lstrip("*") != name:
                    continue
                bound = True
                decorators = function["decorators"]
                owner = (path, function["class"]) if function["class"] else None
                if index == 0 and owner is not None and "staticmethod" not in decorators:
                    cls = self_class or owner
                    found.add((CLS, cls) if "classmethod" in decorators else (INST, cls))
                elif param.startswith("**"):
                    found.add((DICT, _EMPTY, frozenset({(DYN, f"keyword arguments `**{name}`")})))
                elif param.startswith("*"):
                    found.add((LIST, frozenset({(DYN, f"positional arguments `*{name}`")})))
                else:
                    found |= self.parameter_value(function, (path, qualname, self_class), index, param, annotation)
            assignments = function["env"].get(name)
            if assignments:
                bound = True
                for expr in assignments:
                    found |= self.eval(expr, (path, qualname, self_class))
            nested = (path, f"{qualname}.{name}")
            if nested in self.functions:
                bound = True
                found.add((FN, nested, None))
            if bound:
                return found
            qualname = qualname.rsplit(".", 1)[0] if "." in qualname else None
        return self.module_name_value(path, name)

    def module_name_value(self, path: str, name: str) -> set:
        if (path, name) in self.classes:
            return {(CLS, (path, name))}
        if (path, name) in self.functions:
            return {(FN, (path, name), None)}
        assignments = self.globals.get(path, {}).get(name)
        if assignments:
            out: set = set()
            for expr in assignments:
                out |= self.eval(expr, (path, None, None))
            return out
        target = self.imports.get(path, {}).get(name)
        if target is not None:
            return self.resolve_import(path, target)
        if self.star_defines(path, name):
            return self.star_value(path, name)
        if name in _BUILTINS:
            return {(BUILTIN, name)}
        return {(DYN, f"undefined name `{name}`")}

    def resolve_import(self, path: str, target: str) -> set:
        if not target.startswith("."):
            return self.resolve_absolute(target, relative=False)
        level = len(target) - len(target.lstrip("."))
        rest = target[level:]
        parts = self.module_of.get(path, "").split(".")
        package = parts if self.is_package.get(path) else parts[:-1]
        if level - 1 > len(package):
            return {(PEXT, target)}
        base = package[: len(package) - (level - 1)]
        return self.resolve_absolute(".".join(base + ([rest] if rest else [])), relative=True)

    def imported_files(self, path: str) -> set[str]:
        """The linted files the imports of `path` name (a module, or the module a name comes from)."""
        out: set[str] = set()
        for target in self.imports.get(path, {}).values():
            dotted = target
            if target.startswith("."):
                level = len(target) - len(target.lstrip("."))
                parts = self.module_of.get(path, "").split(".")
                package = parts if self.is_package.get(path) else parts[:-1]
                if level - 1 > len(package):
                    continue
                dotted = ".".join(package[: len(package) - (level - 1)] + ([target[level:]] if target[level:] else []))
            parts = dotted.split(".")
            for k in range(len(parts), 0, -1):
                found = self.modules.get(".".join(parts[:k]))
                if found is not None:
                    out.add(found)
                    break
        return out

    def resolve_absolute(self, dotted: str, relative: bool) -> set:
        parts = dotted.split(".")
        for k in range(len(parts), 0, -1):
            prefix = ".".join(parts[:k])
            if prefix in self.skipped and k < len(parts):
                self.pext_roots.add(dotted)
                self.skipped_hint[dotted] = self.skipped[prefix]
                return {(PEXT, dotted)}
            if prefix in self.modules:
                values: set = {(MOD, prefix)}
                for attr in parts[k:]:
                    values = self.attr(frozenset(values), attr)
                return values
        if relative or parts[0] in self.project_tops:
            self.pext_roots.add(dotted)
            return {(PEXT, dotted)}
        return {(EXT, dotted)}

    # ----- types ------------------------------------------------------------------------------
    def mro(self, cls: tuple[str, str]) -> tuple[list, list]:
        """Linted classes in method-resolution order (depth-first, left to right, as C3 for
        single inheritance), and the bases outside the linted files."""
        cached = self._mro.get(cls)
        if cached is not None:
            return cached
        self._mro[cls] = ([cls], [])  # cycle guard
        order: list = [cls]
        outside: list = []
        path, qualname = cls
        outer = qualname.rsplit(".", 1)[0] if "." in qualname else None
        scope = (path, outer if (path, outer or "") in self.functions else None, None)
        for base in self.classes[cls]["bases"]:
            for value in self.eval(base, scope):
                if value[0] == CLS and value[1] != cls:
                    sub, sub_outside = self.mro(value[1])
                    order.extend(c for c in sub if c not in order)
                    outside.extend(b for b in sub_outside if b not in outside)
                elif value[0] in (EXT, PEXT) and value not in outside:
                    outside.append(value)
        self._mro[cls] = (order, outside)
        return order, outside

    def defines(self, cls: tuple[str, str], method: str) -> bool:
        """Whether a linted class of `cls`'s MRO defines `method`."""
        return any(method in self.classes[owner]["methods"] for owner in self.mro(cls)[0])

    def subclasses(self, cls: tuple[str, str]) -> list[tuple[str, str]]:
        """The linted classes that derive from `cls` (directly or not)."""
        if self._subclasses is None:
            self._subclasses = {}
            for other in self.classes:
                for base in self.mro(other)[0][1:]:
                    self._subclasses.setdefault(base, []).append(other)
        return self._subclasses.get(cls, [])

    def member(self, cls: tuple[str, str], attr: str, self_class: tuple[str, str] | None,
               instance: bool = True, after: tuple[str, str] | None = None) -> set:
        order, outside = self.mro(self_class if after is not None and self_class else cls)
        if after is not None:
            order = order[order.index(after) + 1:] if after in order else []
        for owner in order:
            key = (owner[0], f"{owner[1]}.{attr}")
            if attr not in self.classes[owner]["methods"] or key not in self.functions:
                continue
            decorators = self.functions[key]["decorators"]
            if "property" in decorators or "cached_property" in decorators:
                return self.returns_of({(FN, key, self_class or owner)}) if instance else set()
            if "staticmethod" in decorators:
                return {(FN, key, None)}
            return {(FN, key, self_class or owner)}
        found = self.assigned_values(order, attr, self_class)
        if found:
            return found
        if outside:
            base = next((b for b in outside if b[0] == PEXT), outside[0])
            if attr == "__call__" and instance and self_class and str(base[1]).startswith(_NN):
                # nn.Module's __call__ runs the instance's forward: `super(Base, layer).__call__`
                # skips the project's own __call__ overrides, not its forward.
                return {v for v in self.member(self_class, "forward", self_class) if v[0] == FN} or \
                    {(base[0], f"{base[1]}.{attr}")}
            return {(base[0], f"{base[1]}.{attr}")}
        if after is not None:
            return set()
        # A base class's method reading what only its subclasses set (`transformer_layer_infer_class
        # = None` on the base, the class itself on each model): `self` is one of them.
        subclasses = self.subclasses(cls)
        if subclasses and len(subclasses) <= MAX_SUBCLASSES:
            for sub in subclasses:
                found |= {v for v in self.member(sub, attr, sub) if v[0] != DYN}
            if found:
                return found
        return {(DYN, f"`{attr}`, which {cls[1]} does not define")}

    def attr(self, values: frozenset, attr: str) -> set:
        out: set = set()
        for value in values:
            tag = value[0]
            if tag == INST:
                out |= self.member(value[1], attr, value[1])
            elif tag == CLS:
                out |= self.member(value[1], attr, value[1], instance=False)
            elif tag == SUPER:
                out |= self.member(value[1], attr, value[2], after=value[1])
            elif tag == MOD:
                out |= self._module_attr(value[1], attr)
            elif tag in (LIST, TUPLE, DICT):
                if attr in _CONTAINER_METHODS:
                    out.add((BOUND, attr, value))
                elif tag == DICT:
                    out |= value[2]  # a ModuleDict's entries are its attributes (`self.transformer.h`)
            elif tag in (EXT, PEXT):
                out.add((tag, _join(value[1], attr)))
            elif tag == DYN:
                out.add(value)
        return out

    def _module_attr(self, module: str, attr: str) -> set:
        submodule, path = f"{module}.{attr}", self.modules[module]
        # `import pkg.sub as sub` in pkg/__init__ names itself through pkg: the submodule.
        if (module, attr) not in self._naming and (self.module_defines(path, attr) or self.star_defines(path, attr)):
            self._naming.add((module, attr))
            try:
                return self.module_name_value(path, attr)
            finally:
                self._naming.discard((module, attr))
        if submodule in self.modules:
            return {(MOD, submodule)}
        return {(PEXT, submodule)}

    # ----- calls --------------------------------------------------------------------------------
    def returns_of(self, callees: Iterable[tuple]) -> set:
        out: set = set()
        for value in callees:
            if value[0] != FN:
                continue
            key, self_class = value[1], value[2]
            function = self.functions.get(key)
            if function is None:
                continue
            scope = (key[0], key[1], self_class)
            annotated = self.annotation(function["returns_ann"], scope) if function["returns_ann"] else set()
            # `-> nn.Sequential` says less than `return nn.Sequential(Linear(), Gelu())`.
            if not annotated or all(v[0] in (EXT, PEXT) for v in annotated):
                for expr in function["returns"]:
                    annotated |= self.eval(expr, scope)
            out |= annotated
        return out

    def yields_of(self, value: tuple) -> set:
        key, self_class = value[1], value[2]
        function = self.functions[key]
        if self_class is None and function["class"]:
            self_class = (key[0], function["class"])
        out: set = set()
        for expr in function["yields"]:
            out |= self.eval(expr, (key[0], key[1], self_class))
        return out

    def classes_named(self, qualname: str) -> list[tuple[str, str]]:
        """The linted classes with this qualified name, in any file (indexed on first use)."""
        if self._classes_named is None:
            self._classes_named = {}
            for cls in self.classes:
                self._classes_named.setdefault(cls[1], []).append(cls)
        return self._classes_named.get(qualname, [])

    def call_targets(self, values: frozenset) -> list[tuple]:
        """The functions a call of these values runs: FN values with their `self` class."""
        known = self._targets.get(values)
        if known is None:
            known = self._targets[values] = tuple(self._call_targets(values))
        return list(known)  # a new list: callers extend it

    def _call_targets(self, values: frozenset) -> list[tuple]:
        targets: list[tuple] = []
        for value in values:
            tag = value[0]
            if tag == FN:
                key, self_class = value[1], value[2]
                owner = self.functions.get(key, {}).get("class")
                if self_class is None and owner is not None:
                    self_class = (key[0], owner)
                targets.append((FN, key, self_class))
            elif tag == CLS:
                targets.extend(v for v in self.member(value[1], "__init__", value[1]) if v[0] == FN)
            elif tag == INST:
                found = self._called(value[1])
                if not found and not self.mro(value[1])[1]:
                    # A mixin's `self` called (`decode(ids, self)` in a GenerationMixin): the
                    # linted classes that mix it in.
                    subclasses = self.subclasses(value[1])
                    if len(subclasses) <= MAX_SUBCLASSES:
                        for sub in subclasses:
                            found.extend(self._called(sub))
                targets.extend(found)
            elif tag == LIST:
                # Only an `nn.Sequential` among the containers is called (a list or a
                # ModuleList is not callable): it runs each element's forward, in order.
                elements = {item for item in value[1] if item[0] != LIST}
                elements |= {inner for item in value[1] if item[0] == DICT for inner in item[2]}
                targets.extend(self.call_targets(frozenset(e for e in elements if e[0] != DICT)))
        # `values` is a set, iterated in an order that changes with the process's hash seed: in a
        # fixed order, the graph reaches each function along the same chain in every run.
        return sorted(dict.fromkeys(targets), key=lambda target: (target[1], target[2] or ()))

    def _called(self, cls: tuple[str, str]) -> list[tuple]:
        """What calling an instance of `cls` runs: its `__call__` and `forward`."""
        found: list[tuple] = []
        order, _ = self.mro(cls)
        for method in _CALL_METHODS:
            if any(method in self.classes[c]["methods"] for c in order):
                found.extend(v for v in self.member(cls, method, cls) if v[0] == FN)
        return found

    def call_result(self, expr: tuple, scope: tuple) -> set:
        func = self.eval(expr[1], scope)
        args = expr[2] if len(expr) > 2 else ()
        kwargs = dict(expr[3]) if len(expr) > 3 else {}
        out: set = set()
        callee = expr[1]
        if type(callee) is tuple and callee[0] == "a" and callee[2] in RETURNS_RECEIVER:
            # `Model(cfg).to(device)`: a module method the linted class does not override (or a
            # library's model's) returns the module itself.
            out.update(value for value in self.eval(callee[1], scope)
                       if (value[0] == INST and not self.defines(value[1], callee[2])) or outside_model(value))
        if type(callee) is tuple and callee[0] == "a" and callee[2] in CONSTRUCTS_CLASS:
            # `Model.from_pretrained(path)`, inherited from a library base: an instance of Model.
            out.update((INST, value[1]) for value in self.eval(callee[1], scope)
                       if value[0] == CLS and not self.defines(value[1], callee[2]))
        for value in func:
            tag = value[0]
            if tag == FN:
                out |= self.returns_of(self.call_targets(frozenset({value})))
            elif tag == CLS:
                out.add((INST, value[1]))
            elif tag == INST:
                out |= self.returns_of(self.call_targets(frozenset({value})))
            elif tag == BUILTIN:
                out |= self._builtin_call(value[1], args, kwargs, scope)
            elif tag == BOUND:
                out |= self._container_call(value[1], value[2])
            elif tag == EXT:
                out |= self._library_call(value[1], args, scope)
            elif tag == PEXT:
                out.add((PEXT, _join(value[1], "()")))
            elif tag == DYN:
                out.add((DYN, f"the result of {value[1]}"[:120]))
            elif tag == LAMBDA:
                out |= self.eval(value[1], value[2])
        return out

    def _arg(self, args: Sequence, index: int, scope: tuple) -> frozenset:
        if index >= len(args) or args[index] is None:
            return _EMPTY
        arg = args[index]
        if type(arg) is tuple and arg[0] == "star":
            return frozenset(self.element(self.eval(arg[1], scope)))
        return self.eval(arg, scope)
