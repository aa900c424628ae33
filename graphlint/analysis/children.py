"""Fast child access for libcst trees: the children `CSTNode.children` returns, in the same
order, without rebuilding each node through a visitor (which is what `.children` does, and
what made it the largest cost of a walk).

`code_children` leaves out the trivia (whitespace, comments, commas, brackets, operators):
nothing graphlint reads is below them, and they are half the nodes of a tree.
"""
from __future__ import annotations

import functools
import inspect
import re
from typing import Iterator, Sequence

from graphlint.lazy import cst


@functools.cache
def trivia_types() -> tuple[type[cst.CSTNode], ...]:
    """Node types that hold only layout: no expression or statement is ever below one of them.
    (A function, not a constant: importing this module must not load libcst, which a warm
    check never needs; see graphlint/lazy.py.)"""
    return (
        cst.BaseParenthesizableWhitespace, cst.TrailingWhitespace, cst.EmptyLine, cst.Newline,
        cst.Comment, cst.Comma, cst.Colon, cst.Dot, cst.Semicolon, cst.AssignEqual,
        cst.LeftParen, cst.RightParen, cst.LeftSquareBracket, cst.RightSquareBracket,
        cst.LeftCurlyBrace, cst.RightCurlyBrace, cst.Asynchronous,
        cst.BaseBinaryOp, cst.BaseBooleanOp, cst.BaseCompOp, cst.BaseUnaryOp, cst.BaseAugOp,
    )


# Fields that only ever hold trivia, with every field whose name says "whitespace"
# (tests/test_children.py checks this against libcst's own field types, so a libcst upgrade
# that breaks it fails there, not silently here).
TRIVIA_FIELDS = frozenset({
    "lpar", "rpar", "comma", "semicolon", "equal", "colon", "first_colon", "second_colon",
    "dot", "operator", "relative", "asynchronous", "leading_lines", "lines_after_decorators",
    "header", "footer", "lbracket", "rbracket", "lbrace", "rbrace", "trailing_comma", "separator",
})


def is_trivia_field(name: str) -> bool:
    return name in TRIVIA_FIELDS or "whitespace" in name


# libcst's MaybeSentinel.DEFAULT, bound by the first _field_order: every node type passes
# there before its fields are read.
_SENTINEL: object = None
_ALL_FIELDS: dict[type, tuple[str, ...]] = {}
_CODE_FIELDS: dict[type, tuple[str, ...]] = {}
_SKIPPED: dict[tuple[type, ...], dict[type, bool]] = {}
_VISIT_CALL = re.compile(r"\bvisit_[a-z_]+\(\s*self\s*,\s*[\"'](\w+)[\"']")


def _field_order(node: cst.CSTNode) -> tuple[str, ...]:
    # libcst visits a node's fields in the order its `_visit_and_replace_children` names them
    # (`visit_required(self, "func", ...)`); that order is read from the source once per type
    # and process, so it stays right for fields a given node leaves empty.
    global _SENTINEL
    _SENTINEL = cst.MaybeSentinel.DEFAULT
    source = inspect.getsource(type(node)._visit_and_replace_children)
    order = tuple(dict.fromkeys(_VISIT_CALL.findall(source)))
    _ALL_FIELDS[type(node)] = order
    _CODE_FIELDS[type(node)] = () if isinstance(node, trivia_types()) else tuple(
        name for name in order if not is_trivia_field(name))
    return order


def _collect(node: cst.CSTNode, names: tuple[str, ...]) -> list[cst.CSTNode]:
    # A visited field holds a node, a sequence of nodes, None or MaybeSentinel.DEFAULT; the
    # checks avoid isinstance against libcst's abstract base classes, which is slow.
    found: list[cst.CSTNode] = []
    for name in names:
        value = getattr(node, name)
        if value is None or value is _SENTINEL:
            continue
        kind = type(value)
        if kind is tuple or kind is list:
            found.extend(value)
        else:
            found.append(value)
    return found


def children(node: cst.CSTNode) -> list[cst.CSTNode]:
    """Exactly `node.children`, faster."""
    names = _ALL_FIELDS.get(type(node))
    if names is None:
        names = _field_order(node)
    return _collect(node, names)


def code_children(node: cst.CSTNode) -> list[cst.CSTNode]:
    """`node.children` without trivia, in the same order."""
    names = _CODE_FIELDS.get(type(node))
    if names is None:
        _field_order(node)
        names = _CODE_FIELDS[type(node)]
    return _collect(node, names)


# Scans of indented blocks, by (id, skip): the body of one function is scanned whole by
# several rules and by inference, so its nodes are listed once and the list is read again.
# Each entry holds its block, so no id is reused while the entry stands; forget_scans()
# drops them when the file's analysis ends.
_BLOCK_SCANS: dict[tuple[int, tuple[type, ...]], tuple[cst.CSTNode, list[cst.CSTNode]]] = {}
_MAX_BLOCK_SCANS = 20_000  # a bound for callers that never forget (one file holds far fewer)


def forget_scans() -> None:
    """Drop the listed scans: the trees they list are about to go."""
    _BLOCK_SCANS.clear()


def iter_code(node: cst.CSTNode, skip: tuple[type[cst.CSTNode], ...] = ()) -> Iterator[cst.CSTNode]:
    """Every non-trivia node below `node` (not `node` itself), in pre-order, the order a
    libcst visitor meets them. Nodes of a `skip` type are yielded but not entered."""
    if type(node) is not cst.IndentedBlock:
        return _iter_code(node, skip)
    key = (id(node), skip)
    known = _BLOCK_SCANS.get(key)
    if known is None or known[0] is not node:
        if len(_BLOCK_SCANS) >= _MAX_BLOCK_SCANS:
            _BLOCK_SCANS.clear()
        known = _BLOCK_SCANS[key] = (node, list(_iter_code(node, skip)))
    return iter(known[1])


def _iter_code(node: cst.CSTNode, skip: tuple[type[cst.CSTNode], ...]) -> Iterator[cst.CSTNode]:
    # The hot loop of every whole-function scan: per-type answers are looked up, not recomputed.
    skipped = _SKIPPED.setdefault(skip, {})
    fields = _CODE_FIELDS
    stack = code_children(node)
    stack.reverse()
    while stack:
        current = stack.pop()
        yield current
        kind = type(current)
        is_skipped = skipped.get(kind)
        if is_skipped is None:
            is_skipped = skipped[kind] = bool(skip) and issubclass(kind, skip)
        if is_skipped:
            continue
        names = fields.get(kind)
        if names is None:
            _field_order(current)
            names = fields[kind]
        below: list[cst.CSTNode] = []
        for name in names:
            value = getattr(current, name)
            if value is None or value is _SENTINEL:
                continue
            if type(value) is tuple or type(value) is list:
                below.extend(value)
            else:
                below.append(value)
        if below:
            below.reverse()
            stack.extend(below)


@functools.cache
def definition_types() -> frozenset[type[cst.CSTNode]]:
    """Function and class definitions: libcst's node classes are final, so a type test against
    this set is `isinstance` without its abstract-base-class cost."""
    return frozenset({cst.FunctionDef, cst.ClassDef})


def iter_scope(node: cst.CSTNode) -> Iterator[cst.CSTNode]:
    """`node` and every non-trivia node below it, in pre-order, leaving out nested function and
    class definitions and all below them (they are their own scopes)."""
    definitions = definition_types()
    stack = [node]
    while stack:
        current = stack.pop()
        yield current
        below = [child for child in code_children(current) if type(child) not in definitions]
        below.reverse()
        stack.extend(below)


def suite_body(suite: cst.BaseSuite) -> Sequence[cst.CSTNode]:
    """The statements of an indented block (a one-line suite holds no definitions)."""
    return suite.body if isinstance(suite, cst.IndentedBlock) else ()


def compound_bodies(stmt: cst.CSTNode) -> list[Sequence[cst.CSTNode]]:
    """The statement lists under an if/elif/else, with or try: where definitions may sit
    (`if TYPE_CHECKING:` blocks, try-import fallbacks)."""
    bodies: list[Sequence[cst.CSTNode]] = []
    if isinstance(stmt, (cst.If, cst.With)):
        bodies.append(suite_body(stmt.body))
        orelse = getattr(stmt, "orelse", None)
        if isinstance(orelse, cst.If):
            bodies.extend(compound_bodies(orelse))
        elif isinstance(orelse, cst.Else):
            bodies.append(suite_body(orelse.body))
    elif isinstance(stmt, cst.Try):
        bodies.append(suite_body(stmt.body))
        bodies.extend(suite_body(h.body) for h in stmt.handlers)
    return bodies
