"""The static call graph across the linted files, and the regions it implies.

Roots of the captured region, combined: capture sites found in the linted code (what is called
inside `with torch.cuda.graph(...)`, between `capture_begin`/`capture_end`, handed to
`make_graphed_callables`, compiled with `mode="reduce-overhead"`), configured `entry-points` and
`# graphlint: entry` markers; and, where the linted code has no capture site or a capture
site's callee cannot be resolved, every `nn.Module` subclass's `forward`. Functions that capture
or replay a graph are orchestration (`host`). From the roots the graph follows plain calls and
imports, `self.method()`, submodules assigned in `__init__` and called (`self.attn(x)` reaches
`Attention.forward`), module lists iterated (`for layer in islice(self.layers, a, b)`), every
override of a method called on a base class, `super().forward`, and functions passed as
arguments; a step handed to the capturing function as a parameter is what its callers pass.
Nothing is imported or run: the per-file facts (graphlint.analysis.facts.call_facts) are evaluated
lazily by graphlint.callgraph.values. A method called on a receiver of unknown type reaches the
few linted methods of that name as candidates (the chain says so); any other call whose target
cannot be determined is listed in `unresolved` with the reason, and a capture site whose region
meets one is `incomplete` (GL905); calls into libraries (torch, the standard library) are not
listed. Regions: roots and their callees are `captured`; an `eager` function
and what only it reaches are `eager`; a `host` function is `host` and is not followed; the rest
is `unreached`. Every placement carries the reason for it.
"""
from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Collection, Mapping, Sequence

from graphlint.analysis.arm_guards import contradicts
from graphlint.analysis.facts.call_facts import MODULE_SCOPE
from graphlint.callgraph import recorded
from graphlint.callgraph.arguments.argument_states import ArgumentStates, bound_call
from graphlint.callgraph.arguments.narrowing import narrow_parameters
from graphlint.callgraph.calls import TENSOR_METHODS
from graphlint.callgraph.outside import outside_model
from graphlint.callgraph.regions import (CAPTURED, EAGER, HOST, UNREACHED, Placement, default_placements, listed,
                                         module_name)
from graphlint.callgraph.roots.capture_roots import (call_records, callee_text, candidate_calls, capture_roots,
                                                     compiled_only, fullgraph_only, incomplete_sites, is_parameter, passed_by_reached,
                                                     passing_files, root_calls, site_conditions, warmed_by_caller)
from graphlint.callgraph.roots.fallback_roots import covered_files, drives_step, forward_roots, is_module, plain_forward_roots
from graphlint.callgraph.values import DYN, EXT, FN, INST, LAMBDA, PEXT, Project
from graphlint.config import Config, ConfigError


class EntryPointError(ConfigError):
    """An entry point that names no linted function (exit code 2 in the CLI)."""


@dataclass
class CallGraph:
    """What `build` returns: regions for every linted function, the reachable set with its
    edges, and the calls that could not be resolved."""

    placements: dict[tuple[str, str], Placement] = field(default_factory=dict)
    unresolved: list[dict[str, Any]] = field(default_factory=list)
    entries: list[tuple[str, str]] = field(default_factory=list)
    # (path, qualname) -> callees, for every function reached (host ones have none).
    edges: dict[tuple[str, str], list[tuple[str, str]]] = field(default_factory=dict)
    order: list[tuple[str, str]] = field(default_factory=list)  # reachable, in discovery order
    names: dict[tuple[str, str], str] = field(default_factory=dict)  # how reached_via names a function
    external_calls: int = 0  # calls into libraries (torch, the standard library), not listed
    fallback: bool = False  # nn.Module forwards were roots (no capture site, or one unresolved)
    warmed_up: list[tuple[str, str]] = field(default_factory=list)  # capture functions warmed by a caller
    # Capture sites whose region could not be followed to its end: {path, function, line,
    # message, reason, calls}, reported as GL905 and making the audit INCOMPLETE.
    incomplete: list[dict[str, Any]] = field(default_factory=list)
    # A capture's model is not known (its callee, or a model the captured code calls, is not
    # followed): it may be any linted module, the applications' included.
    model_unknown: bool = False


# ----- regions ----------------------------------------------------------------------------------

def _designation(project: Project, key: tuple[str, str], config: Config,
                 orchestration: Mapping[tuple[str, str], str] | None = None) -> tuple[str | None, str]:
    """(HOST | EAGER | None, the reason): markers and config first, then orchestration."""
    path, qualname = key
    marker = project.markers.get(key)
    modules = [m for m in (project.module_of.get(path), project.alt_module_of.get(path), module_name(path)) if m]
    if marker == "host":
        return HOST, "`# graphlint: host` marker"
    if any(listed(config.host, m, qualname) for m in modules):
        return HOST, "listed in host (config)"
    if marker == "eager":
        return EAGER, "`# graphlint: eager` marker"
    if any(listed(config.eager, m, qualname) for m in modules):
        return EAGER, "listed in eager (config)"
    if orchestration and key in orchestration:
        return HOST, orchestration[key]
    return None, ""


def _spec_matches(project: Project, spec: str, path: str) -> bool:
    if ":" not in spec:
        return True
    wanted = spec.partition(":")[0]
    names = {project.module_of.get(path), project.alt_module_of.get(path), module_name(path)}
    return any(n and (n == wanted or n.endswith("." + wanted)) for n in names)


def _resolve_entries(project: Project, config: Config) -> list[tuple]:
    entries: list[tuple] = []
    for spec in config.entry_points:
        qualname = spec.partition(":")[2] if ":" in spec else spec
        found = [key for key in project.functions if key[1] == qualname and _spec_matches(project, spec, key[0])]
        if not found and ":" not in spec:
            found = [key for key in project.functions if key[1].endswith("." + qualname)]
        targets = [(FN, key, (key[0], project.functions[key]["class"]) if project.functions[key]["class"] else None)
                   for key in found]
        if not targets:
            # `Class.method` inherited from a base, or a class itself (its forward / __call__).
            owner, _, method = qualname.rpartition(".")
            for key in project.classes:
                if _spec_matches(project, spec, key[0]):
                    if key[1] == qualname:
                        targets.extend(project.call_targets(frozenset({(INST, key)})))
                    elif owner and key[1] == owner:
                        targets.extend(v for v in project.member(key, method, key) if v[0] == FN)
        if not targets:
            raise EntryPointError(
                f"entry point '{spec}' names no function in the linted files "
                f"(expected module:Qualified.name, e.g. dsv4_model.model:GraphSafeDSV4.step)")
        entries.extend((target, f"configured entry point `{spec}`") for target in targets)
    for key, marker in project.markers.items():
        if marker == "entry" and key in project.functions:
            owner = project.functions[key]["class"]
            entries.append(((FN, key, (key[0], owner) if owner else None), "`# graphlint: entry` marker"))
    return entries


def _display_names(project: Project) -> dict[tuple[str, str], str]:
    """qualname, or module:qualname where two linted files define the same qualname."""
    counts: dict[str, int] = {}
    for _, qualname in project.functions:
        counts[qualname] = counts.get(qualname, 0) + 1
    return {key: key[1] if counts[key[1]] == 1 else f"{project.module_of.get(key[0], key[0])}:{key[1]}"
            for key in project.functions}


# Rebuilds at most this often: each drops the calls in arms that what the step passes makes
# dead, which can make more arms dead below them.
_MAX_PRUNES = 3


def build(files: Sequence[Mapping[str, Any]], config: Config) -> CallGraph:
    """Regions of every linted function from the roots (capture sites, configured entry points
    and markers, nn.Module forwards where needed); raises EntryPointError when an entry point
    names nothing. A call in an arm the captured step never takes (`else:` of `if spec:` where
    every call passes `spec=True`) is not followed, and a parameter annotated with a base class
    holds only the subclasses the region's calls pass (graphlint.callgraph.arguments.narrowing): the
    regions are built again with both."""
    project = Project(files, Path(config.root))
    entries = _resolve_entries(project, config)
    dead: frozenset = frozenset()
    applications = True
    for _ in range(_MAX_PRUNES + 1):
        graph, found, narrowed = _build(files, config, project, entries, dead, applications)
        if applications and graph.model_unknown:
            # A captured model not followed may be any module the applications hold: their
            # modules are roots again, and what the smaller regions pruned is not known.
            applications, dead = False, frozenset()
            project.widen()
            continue
        if found <= dead and not narrowed:
            break
        dead = dead | found
    return graph


def _dead_calls(project: Project, per_step: set, known: Mapping) -> frozenset:
    """(function, index of the call) of calls under a test that what every call of the function
    passes contradicts."""
    found = set()
    for key in per_step:
        states = known.get(key)
        for index, held in (project.function_facts.get(key, {}).get("call_guards", {}) if states else {}).items():
            if any(name in states and contradicts(state, states[name]) for name, state in held):
                found.add((key, int(index)))
    return frozenset(found)


def _build(files: Sequence[Mapping[str, Any]], config: Config, project: Project, entries: list,
           dead: frozenset, applications: bool) -> tuple[CallGraph, frozenset, bool]:
    graph = CallGraph()
    names = graph.names = _display_names(project)
    unresolved: dict[tuple, dict] = {}
    site_calls: dict[tuple[str, str], list] = {}
    # What each captured function's parameters are, None-wise, over the calls that reach it.
    arguments = ArgumentStates(project.function_facts, lambda key: call_records(project, arguments, key))
    site_roots, orchestration, blind, sites = capture_roots(project, unresolved, names, site_calls,
                                                             arguments.functions, arguments)
    has_sites = bool(sites)
    if blind or not has_sites:
        fallback = forward_roots(project, orchestration=orchestration)
        if not has_sites and not fallback and not orchestration:
            fallback = plain_forward_roots(project)
    else:
        # A capture site speaks for the code its file can reach, not for a whole tree of
        # unrelated models linted with it (one model compiled with reduce-overhead among hundreds).
        # The files that hand the step to a capturing function or class (`CUDAGraphed(self.encoder)`,
        # `capture(self.forward_decode)`) and the captured functions' own files belong to it too.
        involved = {key[0] for key, *_ in sites} | {target[1][0] for _, _, _, site_roots, *_ in sites for target in site_roots}
        covered = covered_files(project, involved | passing_files(project, [key for key, *_ in sites]), applications)
        fallback = forward_roots(project, covered, orchestration)
    # --- region file (graphlint.callgraph.recorded): functions a real run executed are roots.
    learned = recorded.roots(project, config)
    roots = entries + learned + site_roots + fallback
    root_calls(project, arguments, site_roots, site_calls)
    for root, _ in entries + learned:
        arguments.add_call(root[1])  # an entry point says nothing of what it is passed
    candidate_calls(project, arguments, fallback, site_calls.get(None, ()))
    # --- end region file
    # Nothing discovered: configured entry points say where the step is (only what they reach
    # is per-step); otherwise every function is, as in the sweep mode, and a marker only adds
    # its reach (a `# graphlint: entry` on one function never hides the rest of the run).
    nothing_found = not site_roots and not fallback and not orchestration and not learned
    swept = _sweep(files, config) if nothing_found and not config.entry_points else {}
    walk = _Walk(project, config, orchestration, graph, unresolved, arguments, dead)
    walk.start(roots, fullgraph_only(site_calls))
    standing_in, stood_in = _stand_in_roots(project, walk, arguments)
    if standing_in:
        walk.start(standing_in)
        roots = roots + standing_in
        fallback = fallback + standing_in
    region = walk.region
    for key, why in orchestration.items():
        # The functions that capture or replay are listed (host) even when nothing reaches them
        # (a module's own statements are no function).
        if key not in region and key[1] != MODULE_SCOPE and _designation(project, key, config, orchestration)[0] == HOST:
            region[key], walk.parent[key], walk.reasons[key] = HOST, None, _designation(
                project, key, config, orchestration)[1]
            graph.order.append(key)
    graph.entries = list(dict.fromkeys(e[0][1] for e in roots))
    per_step = {key for key, where in region.items() if where in (CAPTURED, EAGER)}
    known = arguments.solve(per_step)
    unconditioned = {root[1] for root, _ in entries + learned + fallback}
    for key, held in site_conditions(site_calls, arguments, per_step, unconditioned).items():
        known[key] = {**known.get(key, {}), **held}
    compiled = compiled_only(site_calls, roots, graph.edges, per_step)
    for file in files:
        for function in file.get("functions", []):
            key = (file["path"], function["qualname"])
            if key in region:
                graph.placements[key] = Placement(region[key], walk.chain(key), walk.reasons.get(key, ""),
                                                  tuple(sorted(known.get(key, {}).items())), key in compiled)
            else:
                graph.placements[key] = swept.get(key) or _unreached(project, key, config, orchestration)
    graph.unresolved = sorted(unresolved.values(), key=lambda u: (u["path"], u["caller"], u["call"]))
    graph.incomplete = incomplete_sites(sites, graph, unresolved, names, bool(fallback), stood_in)
    graph.fallback = bool(fallback)
    graph.model_unknown = blind or bool(walk.module_calls) or any(
        region.get(caller) == CAPTURED and not _in_a_module(project, project.scope_of(caller))
        for caller, _ in unresolved)  # a runner's call not followed: its model, perhaps
    graph.warmed_up = warmed_by_caller(project)
    return graph, _dead_calls(project, per_step, known), narrow_parameters(project, arguments, graph.order)


def _some_module(project: Project, func: Any, scope: tuple) -> bool:
    """A call of a module whose class is not known: `m.forward(...)` or `m(...)` where `m` is
    annotated nn.Module or a library's model, or `.forward(...)` on any receiver graphlint cannot follow. An element
    of a container (`self.layers[i](x)`, `modules[k].forward(x)`) is one of this model's own
    layers, not a model built elsewhere."""
    receiver = func[1] if type(func) is tuple and func[0] == "a" else None
    if _indexed(func) or (receiver is not None and _indexed(receiver)):
        return False
    if receiver is not None and func[2] == "forward":
        # A receiver graphlint cannot follow (a parameter, an undefined name, what a project
        # module outside the lint returns: its loader may build a linted model); another
        # library's object (flashinfer's wrapper from a ContextVar, transformers' model) runs
        # that library's code.
        held = project.eval(receiver, scope)
        return not held or any(value[0] in (DYN, PEXT) for value in held)
    values = project.eval(receiver if receiver is not None and func[2] == "__call__" else func, scope)
    # A model another library built runs that library's code, not a linted forward (it is
    # listed as unresolved all the same: graphlint.callgraph.outside).
    return any(value == (DYN, _ANY_MODULE) for value in values)


def _in_a_module(project: Project, scope: tuple) -> bool:
    """Whether the function is a method of an nn.Module (a layer calling its own submodules),
    as opposed to a runner or an engine that calls the model."""
    return scope[2] is not None and scope[2] in project.classes and is_module(project, scope[2])


def _indexed(expr: Any) -> bool:
    return type(expr) is tuple and bool(expr) and expr[0] in ("i", "ix", "s", "it")


# What the evaluation gives for a value declared as some nn.Module (graphlint.callgraph.calls).
_ANY_MODULE = "a value annotated nn.Module"


def _stand_in_roots(project: Project, walk: "_Walk", arguments: ArgumentStates) -> tuple[list[tuple], set[str]]:
    """For captured calls of a module graphlint cannot name, made by a runner (not by a layer of
    a model), every top-level nn.Module forward not reached yet is checked in its place, bound
    to those calls' arguments as the capture's own callee would be (a model a loader or a
    registry builds: `self.model.forward(...)`). The roots, and the calls as text."""
    if not walk.module_calls:
        return [], set()
    calls = [(caller, index, project.functions[caller]["calls"][index][1]) for caller, index in walk.module_calls]
    texts = {callee_text(func) for _, _, func in calls}
    shown = "`, `".join(sorted(texts)[:3])
    roots = []
    for root, _ in forward_roots(project, orchestration=walk.orchestration):
        if root[1] in walk.region:
            continue
        for caller, index, func in calls:
            arguments.add_candidate(root[1], caller, index, bound_call(func))
        roots.append((root, f"forward of nn.Module {root[2][1] if root[2] else root[1][1]} "
                            f"(in place of `{shown}`, a module graphlint cannot name)"))
    return roots, (texts if roots else set())


def _unreached(project: Project, key: tuple[str, str], config: Config, orchestration: Mapping) -> Placement:
    designation, why = _designation(project, key, config, orchestration)
    if designation == HOST:
        return Placement(HOST, (), why)
    return Placement(UNREACHED, (), "not reached from a capture site, an entry point or an nn.Module forward")


class _Walk:
    """The walk from the roots: each reached function's region (captured wins over eager), the
    function that first reached it and why; callees are queued once per (function, self class,
    region), and again for each new caller of a function that calls a callable it was given.
    Every followed call is told to the argument states."""

    def __init__(self, project: Project, config: Config, orchestration: Mapping, graph: CallGraph,
                 unresolved: dict, arguments: ArgumentStates, dead: frozenset = frozenset()):
        self.project, self.config, self.orchestration = project, config, orchestration
        self.dead = dead  # (function, call index) of calls in arms the step never takes
        self.graph, self.unresolved, self.arguments = graph, unresolved, arguments
        self.region: dict[tuple[str, str], str] = {}
        self.reasons: dict[tuple[str, str], str] = {}
        self.parent: dict[tuple[str, str], tuple[str, str] | None] = {}
        self.seen_contexts: set[tuple] = set()
        self.candidate_edges: dict[tuple[str, str], str] = {}  # function -> the call it is a candidate of
        self.reached_from: dict[tuple[str, str], set] = {}  # function -> the functions that reached it
        self.calls_a_parameter: set[tuple[str, str]] = set()  # functions that call a callable parameter
        self.eager_seeds: list[tuple] = []
        self.queue: deque = deque()
        # Captured calls of some module graphlint cannot name (`self.model.forward(...)` on a
        # model a loader returns): (caller, index of the call).
        self.module_calls: list[tuple[tuple[str, str], int]] = []

    def start(self, roots: Sequence[tuple], traced: Collection[tuple[str, str]] = ()) -> None:
        """Walk from `roots`; those in `traced` (compiled with fullgraph=True alone) start eager."""
        for root, reason in roots:
            designation, why = _designation(self.project, root[1], self.config, self.orchestration)
            if designation == EAGER:
                self.eager_seeds.append((root, None, why))
            elif root[1] in traced:
                self.eager_seeds.append((root, None, reason))
            else:
                self.reach(root, CAPTURED, None, reason)
        self.run()
        for target, via, why in self.eager_seeds:
            self.place(target, EAGER, via, why)
            self.run()

    def chain(self, key: tuple[str, str]) -> tuple[str, ...]:
        out: list[str] = []
        node: tuple[str, str] | None = key
        while node is not None and len(out) < 64:
            name = self.graph.names.get(node, node[1])
            via_call = self.candidate_edges.get(node)
            # Reached as one of a few same-named methods of a receiver of unknown type: said so.
            out.append(f"{name} [candidate for `{via_call}`]" if via_call else name)
            node = self.parent.get(node)
        return tuple(reversed(out))

    def reach(self, target: tuple, mode: str, via: tuple[str, str] | None, reason: str) -> None:
        key = target[1]
        designation, why = _designation(self.project, key, self.config, self.orchestration)
        if designation == HOST:
            if key not in self.region:
                self.region[key], self.parent[key], self.reasons[key] = HOST, via, why
                self.graph.order.append(key)
            return
        wanted = EAGER if designation == EAGER or mode == EAGER else CAPTURED
        if wanted == EAGER and mode == CAPTURED:
            self.eager_seeds.append((target, via, why))
            return
        self.place(target, wanted, via, reason)

    def place(self, target: tuple, wanted: str, via: tuple[str, str] | None, reason: str) -> None:
        """Give `target` its region (captured wins over eager) and queue its callees once
        per (function, self class, region)."""
        key, region = target[1], self.region
        if region.get(key) == CAPTURED and wanted == EAGER:
            return  # already captured: what it reaches is captured too
        if key not in region or (region[key] != CAPTURED and wanted == CAPTURED):
            if key not in region:
                self.graph.order.append(key)
            region[key], self.parent[key], self.reasons[key] = wanted, via, reason
        context = (key, target[2], wanted)
        new_passer = via is not None and key in self.calls_a_parameter and via not in self.reached_from.get(key, ())
        if via is not None:
            self.reached_from.setdefault(key, set()).add(via)
        if context not in self.seen_contexts or new_passer:
            # A function that calls a callable it was given is walked again for each new caller:
            # what it runs depends on what that caller passes.
            self.seen_contexts.add(context)
            self.queue.append((target, wanted, self.reasons[key]))

    def run(self) -> None:
        project, graph = self.project, self.graph
        while self.queue:
            target, mode, reason = self.queue.popleft()
            key, self_class = target[1], target[2]
            scope = (key[0], key[1], self_class)
            callees = graph.edges.setdefault(key, [])
            for index, call in enumerate(project.functions[key]["calls"]):
                if (key, index) in self.dead:
                    continue
                targets, candidates = _callees(project, call, scope, key, graph.names, self.unresolved, graph)
                # A captured call is never the code that captures or replays the graph (a wrapper's
                # own `decode` as a candidate for the `self.vae.decode(...)` it captures).
                kept = [c for c in candidates if not drives_step(project, c[1], c[2], self.orchestration)]
                if candidates and not kept and not targets:
                    text = callee_text(call[1])
                    self.unresolved.setdefault((key, text), {
                        "path": key[0], "caller": graph.names.get(key, key[1]), "call": text,
                        "reason": "receiver type unknown; the linted methods of that name capture or replay "
                                  "a graph themselves"})
                candidates = kept
                if targets and is_parameter(project, key, call[1]):
                    self.calls_a_parameter.add(key)
                    targets = passed_by_reached(project, key, call[1], self.reached_from.get(key, set()), targets)
                if (not targets and not candidates and mode == CAPTURED and not _in_a_module(project, scope)
                        and _some_module(project, call[1], scope)):
                    self.module_calls.append((key, index))
                for callee in candidates:
                    if callee[1] not in self.region:
                        self.candidate_edges.setdefault(callee[1], callee_text(call[1]))
                for callee in targets + candidates:
                    self.arguments.add_call(callee[1], key, index, bound_call(call[1]))
                    if callee[1] not in callees:
                        callees.append(callee[1])
                    self.reach(callee, mode, key, reason)


def _sweep(files: Sequence[Mapping[str, Any]], config: Config) -> dict[tuple[str, str], Placement]:
    """Placements when nothing is discovered (no capture site, no nn.Module forward: loose
    functions or plain classes linted alone): every function per-step, as in the sweep mode."""
    why = "no capture site or nn.Module forward in the linted files: every function is per-step"
    return {key: Placement(CAPTURED, (), why) if placement.region == CAPTURED else placement
            for key, placement in default_placements(files, config.host, config.eager).items()}


def _callees(project: Project, call: tuple, scope: tuple, caller: tuple[str, str], names: dict,
             unresolved: dict, graph: CallGraph) -> tuple[list[tuple], list[tuple]]:
    """(the functions a call runs, the candidates: same-named methods a call on a receiver of
    unknown type may run); what cannot be resolved goes to `unresolved` with the reason."""
    func_expr = call[1]
    values = project.eval(func_expr, scope)
    targets = project.call_targets(values)
    reasons: list[str] = []
    candidates: list[tuple] = []
    for value in values:
        tag = value[0]
        unknown: tuple | None = None
        if tag == LAMBDA and project.lambda_call(value) is not None:
            # `self.model_forward(model=self.model, ...)` of `lambda model, x: model.verify(x)`:
            # what the body calls with what this call passes, else where the lambda was written.
            found = project.lambda_targets(value, [(call, scope)])
            maybe: list = []
            if not found:
                inner, inner_scope = project.lambda_call(value)
                found, maybe = _callees(project, inner, inner_scope, caller, names, unresolved, graph)
            targets.extend(t for t in found if t not in targets)
            candidates.extend(c for c in maybe if c not in candidates)
        if tag == PEXT:
            receiver = value[1][: -len(func_expr[2]) - 1] if type(func_expr) is tuple and func_expr[0] == "a" and value[1].endswith(
                "." + func_expr[2]) else ""
            if receiver and receiver not in project.pext_roots:
                # A method of a value derived outside the lint (attn_output.reshape, w.wo_a.view):
                # most likely a tensor; listed only when a linted class has a method of that name.
                unknown = (DYN, f"a value computed by `{receiver}`")
            elif value[1] in project.skipped_hint:
                reasons.append(f"`{value[1]}` is outside the linted files, or re-exported by "
                               f"{project.skipped_hint[value[1]]}, which graphlint skipped (it never mentions torch)")
            else:
                reasons.append(f"`{value[1]}` is outside the linted files")
        elif tag == DYN:
            unknown = value
        elif tag == EXT:
            graph.external_calls += 1
            if outside_model(value) and not targets:  # beside linted code: the loader's own result
                reasons.append(f"`{value[1]}` is a model or layer outside the linted files")
        elif tag == INST and not targets:
            outside = [b[1] for b in project.mro(value[1])[1] if b[0] == PEXT]
            if outside:
                reasons.append(f"{value[1][1]} inherits its forward from {outside[0]}, outside the linted files")
            elif not project.mro(value[1])[1]:
                reasons.append(f"an instance of {value[1][1]}, which defines neither forward nor __call__")
        if unknown is not None and targets:
            continue  # resolved, with an unknown value besides (an over-approximation): not listed
        if unknown is not None:
            found = project.candidates(func_expr)
            if found:
                candidates.extend(t for t in found if t not in candidates)
            else:
                reason = _dynamic_reason(project, func_expr, unknown, scope)
                if reason:
                    reasons.append(reason)
    # Functions passed as arguments are assumed to be called (callbacks, functools.partial).
    for arg in list(call[2] if len(call) > 2 else ()) + [v for _, v in (call[3] if len(call) > 3 else ())]:
        if type(arg) is str or (type(arg) is tuple and arg[0] == "a"):
            for value in project.eval(arg, scope):
                if value[0] == FN:
                    targets.extend(project.call_targets(frozenset({value})))
    if reasons:
        text = callee_text(func_expr)
        entry = unresolved.setdefault((caller, text), {
            "path": caller[0], "caller": names.get(caller, caller[1]), "call": text, "reason": ""})
        entry["reason"] = "; ".join(sorted(set(reasons) | ({entry["reason"]} if entry["reason"] else set())))
    return targets, [c for c in candidates if c not in targets]


def _held_by_linted_instance(project: Project, func_expr: tuple, scope: tuple) -> bool:
    """Whether the call's receiver is an instance of a linted class (`self`, `self.engine`)."""
    values = project.eval(func_expr[1], scope)
    return bool(values) and all(v[0] == INST and v[1] in project.classes for v in values)


def _dynamic_reason(project: Project, func_expr: tuple, value: tuple, scope: tuple) -> str | None:
    """Why a call of an unknown value is unresolved, or None when it is most likely a library
    method on an unannotated value (`x.float()` on a tensor parameter): those are not listed
    unless a linted class defines a method of that name."""
    if type(func_expr) is tuple and func_expr[0] == "a":
        method = func_expr[2]
        defined = project.method_names.get(method)
        if not defined and value[1] != _ANY_MODULE and _held_by_linted_instance(project, func_expr, scope):
            # `self.backbone(x)`: an attribute of the project's own object, called, whose value
            # graphlint could not follow (not a library method on an unannotated value).
            return f"`{callee_text(func_expr)}` holds {value[1]}, which is not known statically"
        if not defined or method in TENSOR_METHODS:
            return None
        shown = ", ".join(sorted(defined)[:3]) + (", ..." if len(defined) > 3 else "")
        return f"receiver type unknown ({value[1]}); linted classes define `{method}` ({shown})"
    return f"{value[1]} is not known statically"
