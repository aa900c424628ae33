"""The tags of the call graph's symbolic values (graphlint.callgraph.values says what each holds),
and what a set of values says of the code it names."""
from __future__ import annotations

from typing import Iterable

INST, CLS, FN, SUPER, MOD = "inst", "cls", "fn", "super", "mod"
LIST, TUPLE, DICT, BOUND = "list", "tuple", "dict", "bound"
EXT, PEXT, DYN, BUILTIN = "ext", "pext", "dyn", "builtin"  # library, project outside the lint, unknown
LAMBDA = "lambda"  # (LAMBDA, body, defining scope): calling it gives the body's value
STR = "str"  # (STR, text): a string literal, read only as the name `getattr` is given

EMPTY: frozenset = frozenset()


def join(base: str, attr: str) -> str:
    joined = f"{base}{attr}" if attr in ("()", "[]") else f"{base}.{attr}"
    return joined if len(joined) <= 120 else joined[:117] + "..."


def uninformative(value: tuple) -> bool:
    """A declared type that names no linted code: a library type, an unknown, or a container
    of nothing known (`List[T]` with a type variable, `list[Any]`)."""
    if value[0] in (DYN, EXT):
        return True
    if value[0] == LIST:
        return all(uninformative(v) for v in value[1])
    if value[0] == TUPLE:  # (TUPLE, (part values, ...))
        return all(uninformative(v) for part in value[1] for v in part)
    if value[0] == DICT:
        return all(uninformative(v) for v in value[2])
    return False


def linted_leaves(values: Iterable[tuple]) -> int:
    """How many linted classes, functions and instances `values` hold, through containers; -1
    when any of them is something else (a library object, an unknown). An empty container
    (`layers = nn.ModuleList()` before its appends) counts for nothing. Only linted code is
    what a registry of implementations, or one builder per architecture, passes."""
    count = 0
    for value in values:
        tag = value[0]
        if tag in (CLS, FN, INST):
            count += 1
            continue
        if tag == LIST:
            inner = linted_leaves(value[1])
        elif tag == TUPLE:
            inner = linted_leaves([v for part in value[1] for v in part])
        elif tag == DICT:
            inner = linted_leaves(value[2])
        else:
            return -1
        if inner < 0:
            return -1
        count += inner
    return count
