"""Parameters annotated with a linted base class, narrowed to what the region's calls pass.

`graph_cache: Optional[Cache]` stands for every linted subclass of `Cache`, so a call on it
reaches every cache's override, the prefill cache's and the offloading cache's included. Inside
the regions the calls that reach a function are known (graphlint.callgraph.arguments.argument_states
records each one the walk followed): when every one of them passes an instance of some of those
classes, or None, the parameter holds only those, and the regions are built again with it.
A function reached in any other way (a root, a candidate of an unresolved call) keeps the
annotation: what it is passed is not known.
"""
from __future__ import annotations

from typing import Any, Iterable

from graphlint.callgraph.arguments.argument_states import ArgumentStates
from graphlint.callgraph.tags import BUILTIN, INST
from graphlint.callgraph.values import Project

_NONE = (BUILTIN, "None")


def narrow_parameters(project: Project, arguments: ArgumentStates, order: Iterable[tuple[str, str]]) -> bool:
    """Narrow every parameter the region's calls agree on, callers first (a caller's narrowed
    parameter passed on narrows its callee's in the same pass); whether anything changed."""
    changed = False
    for key in order:
        function = project.functions.get(key)
        incoming = arguments.incoming.get(key)
        if function is None or not incoming or (None, -1) in incoming or key in arguments.candidates:
            for stale in [name for name in project.narrowing if name[:2] == key]:
                project.narrow(stale, None)  # reached in a way that says nothing of its arguments now
                changed = True
            continue
        owner = (key[0], function["class"]) if function["class"] else None
        for index, (param, annotation) in enumerate(function["params"]):
            if annotation is None or param.startswith("*") or param in function["default_values"]:
                continue
            declared = project.annotation(annotation, (key[0], key[1], owner))
            if sum(1 for value in declared if value[0] == INST) < 2:
                continue  # one class: nothing to narrow
            passed = _passed_in_region(project, arguments, key, index, param, incoming)
            narrowed = frozenset(passed) if passed and all(value[0] == INST and value in declared
                                                           for value in passed) else None
            if project.narrowing.get((*key, param)) != narrowed:
                project.narrow((*key, param), narrowed)  # None: the region passes more now
                changed = True
    return changed


def _passed_in_region(project: Project, arguments: ArgumentStates, key: tuple[str, str], index: int, param: str,
                      incoming: dict) -> set | None:
    """What the followed calls pass to the parameter (a call that leaves it out passes its
    default, None); None when one of them passes something not written out (`*args`)."""
    function = project.functions[key]
    method = function["class"] is not None and "staticmethod" not in function["decorators"]
    out: set = set()
    for (caller, call_index), bound in incoming.items():
        calls = project.functions.get(caller, {}).get("calls", ())
        if not 0 <= call_index < len(calls):
            return None
        call = calls[call_index]
        args = call[2] if len(call) > 2 else ()
        kwargs = dict(call[3]) if len(call) > 3 else {}
        if any(type(arg) is tuple and arg[:1] == ("star",) for arg in args):
            return None
        position = index - 1 if method and bound else index
        scope = project.scope_of(caller)
        if param in kwargs:
            out |= project.eval(kwargs[param], scope)
        elif 0 <= position < len(args) and args[position] is not None:
            out |= project.eval(args[position], scope)
        elif not _left_out(arguments.record(caller, call_index), len(call), param, position):
            return None  # passed as something the facts do not spell out
    return out - {_NONE}


def _left_out(record: Any, call_length: int, param: str, position: int) -> bool:
    """Whether the call does not pass the parameter at all (its argument record lists every
    argument written, followed or not)."""
    if record is None:
        return call_length == 2  # a call with no arguments
    positional, keywords = record
    return param not in keywords and position >= len(positional)
