"""`with` blocks that may capture a CUDA graph through a function of the project: an accelerator
abstraction's `with get_accelerator().capture_to_graph(g):`, whose CUDA implementation returns
`torch.cuda.graph(g)`. Per file, the blocks whose context graphlint cannot name there, and the
functions that return (or yield inside) a capture context; the call graph joins the two
(graphlint.callgraph.roots.capture_roots)."""
from __future__ import annotations

import builtins
from typing import Any, Sequence

from graphlint.lazy import cst

from graphlint.analysis.capture_sites import calls_in, capture_context
from graphlint.analysis.children import iter_code
from graphlint.analysis.facts.encoding import encode
from graphlint.analysis.names import ImportMap, torch_or_stdlib

_BUILTIN_NAMES = frozenset(dir(builtins))
# Nested definitions are scopes of their own (the same scan the rules read: listed once).
_DEFINITIONS = (cst.FunctionDef, cst.ClassDef)


def graph_contexts(function: Any, imports: ImportMap) -> list[tuple[cst.Call, list[cst.BaseExpression]]]:
    """`with <call>:` blocks whose context graphlint cannot name here (not torch's, the standard
    library's or a builtin): a project function that may hand back a capture context (an
    accelerator's `capture_to_graph(g)` returning `torch.cuda.graph(g)`); the call graph decides.
    Each with its body's callees."""
    found = []
    for node in iter_code(function.body, skip=_DEFINITIONS):
        if type(node) is cst.With:
            for item in node.items:
                if type(item.item) is cst.Call and _maybe_project_context(item.item, imports):
                    found.append((item.item, calls_in(node.body)))
    return found


def makes_graph_context(function: Any, imports: ImportMap) -> bool:
    """Whether the function returns a capture context (`return torch.cuda.graph(graph, pool)`)
    or yields inside one (a `@contextmanager` around `with torch.cuda.graph(g):`)."""
    for node in iter_code(function.body, skip=_DEFINITIONS):
        if type(node) is cst.Return and type(node.value) is cst.Call and capture_context(node.value, imports.resolve(node.value.func)):
            return True
        if type(node) is cst.With and any(type(item.item) is cst.Call and capture_context(item.item, imports.resolve(item.item.func))
                                          for item in node.items):
            if any(type(inner) is cst.Expr and type(inner.value) is cst.Yield
                   for inner in iter_code(node.body, skip=_DEFINITIONS)):
                return True
    return False


def _maybe_project_context(call: cst.Call, imports: ImportMap) -> bool:
    qualified = imports.resolve(call.func)
    if qualified is not None:
        return not torch_or_stdlib(qualified)
    return not (type(call.func) is cst.Name and call.func.value in _BUILTIN_NAMES)


def context_facts(functions: Sequence[Any], imports: ImportMap, hinted: bool) -> dict[str, tuple[list, bool]]:
    """qualname -> (`with` blocks that may capture through a project function, whether the
    function makes a capture context) for functions with either; `hinted`: the file names a
    capture context at all."""
    found: dict[str, tuple[list, bool]] = {}
    for info in functions:
        blocks = graph_contexts(info.node, imports)
        maker = hinted and makes_graph_context(info.node, imports)
        if blocks or maker:
            found[info.qualname] = (blocks, maker)
    return found


def record_contexts(calls: dict, contexts: dict[str, tuple[list, bool]], positions: dict) -> None:
    """The blocks (with their lines) and the makers into the file's call facts."""
    for qualname, (blocks, maker) in contexts.items():
        entry = calls["functions"].get(qualname)
        if entry is None:
            continue
        blocks = [[positions[call].start.line, encode(call.func), [e for e in map(encode, callees) if e is not None]]
                  for call, callees in blocks]
        if blocks:
            entry["graph_contexts"] = [block for block in blocks if block[1] is not None]
        if maker:
            entry["makes_graph_context"] = True
