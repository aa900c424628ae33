"""Small readings of syntax the inference shares: a call's keyword and positional arguments, a
literal, the literal None."""
from __future__ import annotations

from graphlint.lazy import cst


def keyword(call: cst.Call, name: str) -> cst.BaseExpression | None:
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value == name:
            return arg.value
    return None


def positional(call: cst.Call) -> list[cst.BaseExpression]:
    return [a.value for a in call.args if a.keyword is None and not a.star]


def is_literal(node: cst.BaseExpression) -> bool:
    if isinstance(node, (cst.Integer, cst.Float, cst.Imaginary, cst.SimpleString, cst.ConcatenatedString)):
        return True
    if isinstance(node, cst.Name) and node.value in ("True", "False", "None"):
        return True
    if isinstance(node, cst.UnaryOperation):
        return is_literal(node.expression)
    if isinstance(node, cst.BinaryOperation):
        return is_literal(node.left) and is_literal(node.right)
    if isinstance(node, (cst.Tuple, cst.List)):
        return all(is_literal(e.value) for e in node.elements)
    return False


def is_none(node: cst.BaseExpression) -> bool:
    return isinstance(node, cst.Name) and node.value == "None"
