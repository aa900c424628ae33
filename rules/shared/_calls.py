"""Small helpers the rule modules share for reading calls: method names, receivers, positional
and keyword arguments, whether a value may be or is a device tensor, and whether a node only
runs when the step fails."""
from __future__ import annotations

import functools

from graphlint.lazy import cst

from graphlint.analysis.inference.lattice import DEVICE, HOST, HOST_TENSOR, NONE, Value
from graphlint.analysis.inference.syntax import keyword, positional
from graphlint.analysis.walk.rule import Context

__all__ = ["method_name", "receiver", "keyword", "positional", "maybe_device", "is_device", "first_arg"]


@functools.cache
def _empty_module() -> cst.Module:
    return cst.Module(body=[])  # built on first use: libcst loads lazily (graphlint/lazy.py)


def source_text(node: cst.CSTNode) -> str:
    """A node's code as written."""
    return _empty_module().code_for_node(node)


def method_name(call: cst.Call) -> str | None:
    """`x.item()` -> "item"; None for plain function calls."""
    return call.func.attr.value if type(call.func) is cst.Attribute else None  # never subclassed


def receiver(call: cst.Call) -> cst.BaseExpression | None:
    return call.func.value if type(call.func) is cst.Attribute else None


def is_device(ctx: Context, node: cst.CSTNode | None) -> bool:
    return node is not None and ctx.value(node).kind == DEVICE


def maybe_device(ctx: Context, node: cst.CSTNode | None) -> bool:
    """Device or not known to be host: for methods that only tensors have (`.item()`),
    where the method name itself is the evidence."""
    if node is None:
        return False
    value: Value = ctx.value(node)
    return value.kind not in (HOST, HOST_TENSOR, NONE, "self", "module", "module_list")


def first_arg(call: cst.Call, name: str | None = None) -> cst.BaseExpression | None:
    args = positional(call)
    if args:
        return args[0]
    return keyword(call, name) if name else None


def failure_message(node: cst.CSTNode, ctx: Context) -> bool:
    """Inside a `raise` or an assert's message: formatted only when the step fails, never on
    a step that runs (`raise NotImplementedError(f"mask={attention_mask}")`)."""
    chain = [*ctx.parents, node]
    for index, parent in enumerate(chain[:-1]):
        if isinstance(parent, cst.Raise):
            return True
        if isinstance(parent, cst.Assert) and chain[index + 1] is parent.msg:
            return True
    return False
