"""The capture sites of the linted code as roots of the captured region: what each site
captures (resolved through the step handed to a capturing function as a parameter), which
functions are orchestration, how each root is called (the inline call a capture records, the
calls a forward taken as a root may stand in for), the configuration tests a site sits under,
which captured functions only torch.compile captures, which capture sites have a region that
could not be followed to its end (GL905) and which capture functions a caller warms up (GL510).
graphlint.callgraph.graph walks the region from these roots.
"""
from __future__ import annotations

from typing import Any, Mapping, Sequence

from graphlint.analysis.argument_records import NONE, SET
from graphlint.analysis.arm_guards import FAILS, HOLDS, contradicts
from graphlint.callgraph.arguments.argument_states import ArgumentStates, bound_call
from graphlint.callgraph.arguments.call_sites import last_name
from graphlint.callgraph.outside import outside_model
from graphlint.callgraph.values import BUILTIN, CLS, EXT, FN, INST, LAMBDA, Project


def callee_text(expr: Any) -> str:
    """A call's callee as source-like text, rebuilt from its encoding."""
    if type(expr) is str:
        return expr
    if expr is None:
        return "<expression>"
    tag = expr[0]
    if tag == "a":
        return f"{callee_text(expr[1])}.{expr[2]}"
    if tag == "c":
        return f"{callee_text(expr[1])}(...)"
    if tag in ("i", "ix", "s"):
        return f"{callee_text(expr[1])}[...]"
    return "<expression>"


_SITE_KINDS = {"cuda-graph": "torch.cuda.graph", "capture-begin": "capture_begin", "graphed-callables":
               "make_graphed_callables", "compile": "torch.compile(mode=reduce-overhead)",
               "compile-decorator": "@torch.compile(mode=reduce-overhead)",
               "compile-fullgraph": "torch.compile(fullgraph=True)",
               "compile-fullgraph-decorator": "@torch.compile(fullgraph=True)"}
_DECORATOR_SITES = frozenset({"compile-decorator", "compile-fullgraph-decorator"})
# torch.compile(fullgraph=True) without CUDA graphs: what it compiles must trace whole (a sync or
# a data-dependent shape is an error), but nothing is replayed: its functions are in the eager
# region (graphlint.callgraph.regions), where the replay rules do not hold.
FULLGRAPH_SITES = frozenset({"compile-fullgraph", "compile-fullgraph-decorator"})


def capture_roots(project: Project, unresolved: dict, names: dict, calls: dict | None = None,
                   facts: Mapping[tuple[str, str], Mapping[str, Any]] | None = None,
                   arguments: ArgumentStates | None = None) -> tuple[list, dict, bool, list]:
    """(roots with reasons, orchestration functions -> reason, whether a capture site's callee
    could not be resolved, the capture sites [(key, line, reason, roots, unresolved callees, those of
    them that another library's models are)])
    from the capture sites in the linted code. `calls` gets, per root, (capturing function,
    callee expression, the configuration tests the site sits under, the site's kind) for each
    site: the first two for a call captured inline (a `with torch.cuda.graph` body, capture_begin..end), None
    where the capture does not show the call; under the key None, every call captured inline
    as (capturing function, callee expression), resolved or not. `facts`: the functions' call
    facts, by key. A site under a test that what every call of its function passes rules out
    (`if compile:` where the one call passes `compile=False`) never captures: it is none."""
    calls = {} if calls is None else calls
    facts = facts or {}
    roots: list[tuple[tuple, str]] = []
    orchestration: dict[tuple[str, str], str] = {}
    sites: list[tuple] = []
    blind = False
    for key, function in project.functions.items():
        owner = (key[0], function["class"]) if function["class"] else None
        scope = (key[0], key[1], owner)
        site_guards = facts.get(key, {}).get("capture_guards") or ()
        name_guards = facts.get(key, {}).get("capture_name_guards") or ()
        captures = list(function.get("captures", ())) + _wrapped_captures(project, function, scope)
        for number, (kind, line, callees) in enumerate(captures):
            conditions = frozenset(tuple(g) for g in site_guards[number]) if number < len(site_guards) else frozenset()
            where = f"{key[0]}:{line}"
            reason = f"capture site at {where} ({_SITE_KINDS.get(kind, kind)})"
            if kind in _DECORATOR_SITES:
                roots.append(((FN, key, owner), reason))
                calls.setdefault(key, []).append((None, None, conditions, kind))
                sites.append((key, line, reason, [(FN, key, owner)], [], []))
                continue
            orchestration.setdefault(key, f"compiles the step at {where} (set-up)" if kind in FULLGRAPH_SITES
                                     else f"captures a CUDA graph at {where} (orchestration)")
            if arguments is not None and number < len(name_guards) and _never_runs(
                    project, arguments, key, frozenset(tuple(g) for g in name_guards[number])):
                continue
            site_roots: list[tuple] = []
            missing: list[str] = []
            library_models: list[str] = []  # of `missing`: what only another library's models are
            for expr in callees:
                values = project.eval(expr, scope)
                targets = project.call_targets(values)
                for value in values:
                    if value[0] == LAMBDA:  # `torch.compile(lambda model, x: model.verify(x))`
                        found = project.lambda_targets(value, _calls_of_callee(project, key, expr))
                        targets.extend(t for t in found if t not in targets)
                if not targets and type(expr) is str:
                    # `f = torch.compile(f, ...)` rebinds the name: the function is the module's.
                    targets = project.call_targets(project.eval(expr, (key[0], None, None)))
                if not targets and is_parameter(project, key, expr):
                    # The step handed to the capturing function (`capture(self.forward_decode, ...)`):
                    # what its callers pass.
                    targets = _passed_callables(project, key)
                if not values and not targets and kind in _INLINE_SITES:
                    # A statement of the captured block whose callee holds nothing graphlint can
                    # name (`comms.get(...)` on what a library's context manager yields): as a
                    # call in any function of the region, not a lost callee.
                    continue
                library = bool(values) and all(_library_value(v) for v in values)
                if kind in _INLINE_SITES and (targets or not library):
                    calls.setdefault(None, []).append((key, expr))  # not a library's call (`torch.cuda.set_device`)
                if targets:
                    site_roots.extend(targets)
                    inline = kind in _INLINE_SITES
                    for target in targets:
                        calls.setdefault(target[1], []).append((key, expr, conditions, kind) if inline else
                                                               (None, None, conditions, kind))
                elif not library:  # `range(n)` is no callee
                    text = callee_text(expr)
                    missing.append(text)
                    model = next((v[1] for v in values if outside_model(v)), None)
                    # A model another library built runs that library's code: the linted forwards
                    # are no stand-in for it (transformers' logits warpers, a loader's model).
                    outside = bool(values) and all(outside_model(v) for v in values)
                    blind = blind or not outside
                    if outside:
                        library_models.append(text)
                    what = f"runs `{model}`, a model outside the linted files" if model else "cannot be resolved"
                    instead = "nothing linted stands in for it" if outside else "every nn.Module forward is checked instead"
                    unresolved.setdefault((key, text), {
                        "path": key[0], "caller": names.get(key, key[1]), "call": text,
                        "reason": f"the callee of the capture site at {where} {what}; {instead}"})
            roots.extend((target, reason) for target in site_roots)
            sites.append((key, line, reason, site_roots, missing, library_models))
        if function.get("replays"):
            orchestration.setdefault(key, f"replays a CUDA graph at {key[0]}:{function['replays']} (orchestration)")
    return roots, orchestration, blind, sites


def _wrapped_captures(project: Project, function: Mapping[str, Any], scope: tuple) -> list[tuple]:
    """The `with` blocks of the function whose context a project function makes a capture
    context (`with get_accelerator().capture_to_graph(g):` of an accelerator whose CUDA
    `capture_to_graph` returns `torch.cuda.graph(g)`), as capture sites."""
    found = []
    for line, func_expr, callees in function.get("graph_contexts", ()):
        targets = project.call_targets(frozenset(project.eval(func_expr, scope))) or project.candidates(func_expr)
        if any(project.function_facts.get(target[1], {}).get("makes_graph_context") for target in targets):
            found.append(("cuda-graph", line, callees))
    return found


def _never_runs(project: Project, arguments: ArgumentStates, key: tuple[str, str], conditions: frozenset) -> bool:
    """Whether every call of the capturing function passes what a test the site sits under
    rules out; never when a call of it is not seen (or none is)."""
    if not conditions:
        return False
    records = call_records(project, arguments, key)
    if not records:
        return False
    passed = arguments.passed_states(key, records)
    rebound = set(arguments.functions.get(key, {}).get("rebound", ()))  # tested after the body binds it again
    return any(name in passed and name not in rebound and contradicts(state, passed[name]) for name, state in conditions)


def _library_value(value: tuple) -> bool:
    """A library's callable (`range`, `torch.cuda.set_device`, a stream's method), as opposed to
    code loaded by name at run time (`getattr(importlib.import_module(name), "Model")()`) and a
    model another library builds (graphlint.callgraph.outside.outside_model)."""
    return value[0] == BUILTIN or (value[0] == EXT and not str(value[1]).startswith(_DYNAMIC_LOADS)
                                   and not outside_model(value))


# Library calls that load code by name: what they return is the project's, not the library's.
_DYNAMIC_LOADS = ("importlib.import_module", "importlib.util.", "__import__")

# Capture sites whose captured calls are in the capturing function's own body.
_INLINE_SITES = frozenset({"cuda-graph", "capture-begin"})


def _calls_of_callee(project: Project, key: tuple[str, str], expr: Any) -> list[tuple]:
    """(call, scope) of the calls in the capturing function's file of what the capture compiles
    (`self.model_forward(model=self.model, ...)` after `self.model_forward =
    torch.compile(self.model_forward)`; an entry of a dict of them, whatever its key)."""
    wanted = _container_of(expr)
    found = []
    for caller, function in project.functions.items():
        if caller[0] == key[0]:
            found.extend((call, project.scope_of(caller)) for call in function["calls"] + function["once"]
                         if len(call) > 2 and _container_of(call[1]) == wanted)
    return found


def _container_of(expr: Any) -> Any:
    """An indexed expression's container (`self.draft_forward[n]` -> `self.draft_forward`)."""
    while type(expr) is tuple and expr[:1] in (("i",), ("ix",), ("s",)):
        expr = expr[1]
    return expr


def _calls_of(project: Project, caller: tuple[str, str], expr: Any) -> list[int]:
    """Where the caller's calls (the order its argument records follow) call `expr`."""
    return [index for index, call in enumerate(project.functions[caller]["calls"]) if call[1] == expr]


def root_calls(project: Project, arguments: ArgumentStates, roots: Sequence[tuple],
               site_calls: Mapping[tuple[str, str], list]) -> None:
    """How the capture sites' roots are called: a capture's inline call with its arguments; a
    compiled callable, whose callers are not seen, says nothing."""
    for root, _ in roots:
        key = root[1]
        for caller, expr, _, _ in site_calls.get(key, [(None, None, None, None)]):
            indices = _calls_of(project, caller, expr) if caller is not None else []
            for index in indices:
                arguments.add_call(key, caller, index, bound_call(expr))
            if not indices:
                arguments.add_call(key)


def candidate_calls(project: Project, arguments: ArgumentStates, roots: Sequence[tuple],
                     captured: Sequence[tuple]) -> None:
    """A forward taken as a root (no capture site resolves to it, or none imports its file) may
    be what a capture runs, as the callee it could not resolve or in place of a module it calls
    (a model injected at run time): the calls captured inline whose arguments it accepts say
    what it gets; with none, it knows nothing of them."""
    calls = [(caller, index, bound_call(expr)) for caller, expr in captured
             for index in _calls_of(project, caller, expr)]
    for root, _ in roots:
        for caller, index, bound in calls:
            arguments.add_candidate(root[1], caller, index, bound)
        if not calls:
            arguments.add_call(root[1])


# Capture sites where Inductor, not stream capture, records the step: the eager ops of the code
# are traced and lowered, so host constants become graph constants (the rules that set
# `stream_capture_only`).
_COMPILE_SITES = frozenset({"compile", "compile-decorator"}) | FULLGRAPH_SITES


def fullgraph_only(site_calls: Mapping) -> set:
    """Roots that only torch.compile(fullgraph=True) compiles (no CUDA graph captures them)."""
    return {key for key, entries in site_calls.items()
            if key is not None and entries and all(entry[3] in FULLGRAPH_SITES for entry in entries)}


def compiled_only(site_calls: Mapping, roots: Sequence[tuple], edges: Mapping, per_step: set) -> set:
    """Captured functions that only torch.compile captures: reached from compiled roots and
    from no root that stream capture (or nothing known) records."""
    strict = [root[1] for root, _ in roots if not site_calls.get(root[1]) or any(
        entry[3] not in _COMPILE_SITES for entry in site_calls[root[1]])]
    seen = set(strict)
    stack = list(strict)
    while stack:
        for callee in edges.get(stack.pop(), ()):
            if callee not in seen and callee in per_step:
                seen.add(callee)
                stack.append(callee)
    return per_step - seen


# Guard states a capture site lends its root: None tests and configuration tests.
_SITE_STATES = frozenset({NONE, SET, HOLDS, FAILS})


def site_conditions(site_calls: Mapping[tuple[str, str], list], arguments: ArgumentStates,
                     per_step: set, unconditioned: set) -> dict[tuple[str, str], dict[str, str]]:
    """The configuration tests that hold wherever a captured function is captured: those every
    capture site of it sits under, for a root that no per-step function calls and that is not a
    root in any other way (`else: self.step = torch.compile(self.step)` under a model-type test)."""
    found: dict[tuple[str, str], dict[str, str]] = {}
    for key, entries in site_calls.items():
        if key is None or key in unconditioned or any(caller in per_step for caller, _ in arguments.incoming.get(key, {})):
            continue
        # None tests and configuration tests; a flag or a comparison at the site speaks of the
        # capturing function's own names, not of the root's parameters.
        held = frozenset(guard for guard in frozenset.intersection(*(conditions for _, _, conditions, _ in entries))
                         if guard[1] in _SITE_STATES)
        if held:
            found[key] = dict(sorted(held))
    return found


def call_records(project: Project, arguments: ArgumentStates, key: tuple[str, str]) -> list | None:
    """The argument records of every call of `key` in the linted code (a capturing function
    whose `**kwargs` the captured call passes on); None when a call by its name does not
    resolve, or resolves to it without a record, since a call not seen may pass anything."""
    name = key[1].rsplit(".", 1)[-1]
    found = []
    for caller, function in project.functions.items():
        owner = (caller[0], function["class"]) if function["class"] else None
        for field, group in (("args", function["calls"]), ("once_args", function["once"])):
            for index, call in enumerate(group):
                if last_name(call[1]) != name:
                    continue
                targets = {t[1] for t in project.call_targets(project.eval(call[1], (caller[0], caller[1], owner)))}
                if not targets:
                    return None
                if key in targets:
                    record = arguments.record(caller, index, field)
                    if record is None:
                        return None
                    found.append((record, bound_call(call[1])))
    return found


def is_parameter(project: Project, key: tuple[str, str], expr: Any) -> bool:
    name = expr if type(expr) is str else None
    return name is not None and any(p.lstrip("*") == name for p, _ in project.functions[key]["params"])


def _passed_callables(project: Project, key: tuple[str, str], depth: int = 0) -> list[tuple]:
    """What the call sites of `key` (a capturing function that takes the step as a parameter)
    pass as arguments: functions, modules, instances. A caller that passes one of its own
    parameters on is followed to its callers in turn (a few levels). Calls are matched by name
    first, then resolved."""
    found: list[tuple] = []
    for call, scope in project.call_sites(key[1].rsplit(".", 1)[-1]):
        caller = scope[:2]
        if key not in {t[1] for t in project.call_targets(project.eval(call[1], scope))}:
            continue
        args = list(call[2]) + [v for _, v in (call[3] if len(call) > 3 else ())]
        for arg in args:
            if type(arg) is tuple and arg[:1] == ("star",):
                arg = arg[1]
            if not (type(arg) is str or (type(arg) is tuple and arg and arg[0] in ("a", "lam"))):
                continue
            if depth < _MAX_PASS_DEPTH and caller != key and is_parameter(project, caller, arg):
                found.extend(_passed_callables(project, caller, depth + 1))
                continue
            for value in project.eval(arg, scope):
                if value[0] in (FN, INST):
                    found.extend(project.call_targets(frozenset({value})))
                elif value[0] == LAMBDA:  # `capture(lambda: self.decode(x))`: what its body calls
                    found.extend(project.lambda_targets(value))
    return sorted(dict.fromkeys(found), key=lambda target: (target[1], target[2] or ()))


def passing_files(project: Project, keys: Sequence[tuple[str, str]]) -> set[str]:
    """The files that call the capturing functions `keys`, or construct the class that owns one
    (a wrapper that captures the callable it was given)."""
    files: set[str] = set()
    for key in keys:
        owner = project.functions.get(key, {}).get("class")
        wanted = {(FN, key)} | ({(CLS, (key[0], owner))} if owner else set())
        for name in {key[1].rsplit(".", 1)[-1]} | ({owner.rsplit(".", 1)[-1]} if owner else set()):
            for call, scope in project.call_sites(name):
                values = project.eval(call[1], scope)
                if {(v[0], v[1]) for v in values} & wanted or key in {t[1] for t in project.call_targets(values)}:
                    files.add(scope[0])
    return files


def passed_by_reached(project: Project, key: tuple[str, str], param: str, callers: set,
                       targets: list[tuple]) -> list[tuple]:
    """A call of the parameter `param` of `key` runs what the callers that reached `key` pass
    (`_apply(fn)` called from the captured step with one closure and from set-up with others
    runs the step's closure only); all of `targets` when no reached caller says."""
    function = project.functions[key]
    index = next(i for i, (p, _) in enumerate(function["params"]) if p.lstrip("*") == param)
    by_caller: dict = {}
    project.passed_arguments(key[0], key[1], index, param, by_caller)
    passed = set().union(*(by_caller.get(c, set()) for c in callers)) if callers else set()
    chosen = project.call_targets(frozenset(passed)) if passed else []
    chosen_keys = {t[1] for t in chosen}
    kept = [t for t in targets if t[1] in chosen_keys]
    return kept or targets


# How many callers up a step handed from parameter to parameter is followed.
_MAX_PASS_DEPTH = 3


def incomplete_sites(sites: list[tuple], graph: Any, unresolved: dict, names: dict,
                     fallback: bool, stood_in: set[str] = frozenset()) -> list[dict[str, Any]]:
    """The capture sites whose region graphlint could not follow: the callee itself unknown, or
    a function of the region calling what could not be resolved (one record per site)."""
    out: list[dict[str, Any]] = []
    by_caller: dict[tuple[str, str], list[str]] = {}
    for caller, text in unresolved:
        by_caller.setdefault(caller, []).append(text)
    for key, line, reason, site_roots, missing, library_models in sites:
        seen: set[tuple[str, str]] = set()
        stack = [target[1] for target in site_roots]
        while stack:
            node = stack.pop()
            if node in seen:
                continue
            seen.add(node)
            stack.extend(graph.edges.get(node, ()))
        beyond = sorted({f"{names.get(caller, caller[1])}: {text}" for caller in seen
                         for text in by_caller.get(caller, ())})
        if not missing and not beyond:
            continue
        if missing and len(library_models) == len(missing):
            message = (f"the callee of this capture, `{', '.join(missing)}`, runs a model another library builds: "
                       "what it runs is not checked (no linted code stands in for it)")
        elif missing:
            instead = "every nn.Module forward was checked in its place" if fallback else \
                "no nn.Module forward was found to check in its place"
            message = (f"the callee of this capture, `{', '.join(missing)}`, cannot be resolved: what it runs is "
                       f"not checked ({instead})")
        else:
            shown = "; ".join(beyond[:3]) + (f"; and {len(beyond) - 3} more" if len(beyond) > 3 else "")
            replaced = sorted(text for text in stood_in if any(b.endswith(": " + text) for b in beyond))
            instead = (f" (every top-level nn.Module forward was checked in place of `{'`, `'.join(replaced)}`)"
                       if replaced else "")
            message = (f"the captured region calls {len(beyond)} call(s) graphlint could not follow ({shown}): "
                       f"what they run is not checked{instead}")
        out.append({"path": key[0], "function": key[1], "line": line, "message": message, "reason": reason,
                    "calls": missing + beyond, "callee_unresolved": bool(missing)})
    return sorted(out, key=lambda item: (item["path"], item["line"], item["function"]))


def warmed_by_caller(project: Project) -> list[tuple[str, str]]:
    """Functions that capture a graph and whose caller runs a warm-up before calling them
    (`self.warmup_model(); self.capture_cudagraph()`): GL510 accepts that warm-up."""
    capturing: dict[str, list[tuple[str, str]]] = {}
    for key, f in project.functions.items():
        if any(site[0] not in _DECORATOR_SITES for site in f.get("captures", ())):
            capturing.setdefault(key[1].rsplit(".", 1)[-1], []).append(key)
    if not capturing:
        return []
    # What each capture function captures, by name (`self._model_forward`): a caller that
    # runs it first has warmed the step up.
    captured_names = {key: {last_name(e[1] if type(e) is tuple and e[:1] == ("c",) else e)
                            for site in project.functions[key]["captures"] for e in site[2]} - {""}
                      for keys in capturing.values() for key in keys}
    warmed: set[tuple[str, str]] = set()
    for key, function in project.functions.items():
        earlier: list[str] = []
        owner = (key[0], function["class"]) if function["class"] else None
        for call in function["calls"]:
            name = last_name(call[1])
            candidates = [t for t in capturing.get(name, ()) if t not in warmed and any(
                "warm" in e.lower() or e in captured_names[t] for e in earlier)]
            if candidates:
                callees = {c[1] for c in project.call_targets(project.eval(call[1], (key[0], key[1], owner)))}
                warmed.update(t for t in candidates if t in callees)
            earlier.append(name)
    return sorted(warmed)
