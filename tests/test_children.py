"""graphlint.analysis.children must be libcst's `.children`, only faster: same nodes, same order, for
every node of real code and of a snippet that uses every kind of syntax."""
from __future__ import annotations

import inspect
import typing
from pathlib import Path

import libcst as cst
import pytest

from graphlint.analysis import children as fast

REPO = Path(__file__).resolve().parents[1]

# Syntax that libcst visits in an order other than its fields' (IfExp, Arg, ExceptHandler),
# fields that are conditionally visited (f-string format specs, ImportFrom names), and the
# rarer statements.
EVERY_SYNTAX = '''
from __future__ import annotations
from . import a as b, c
from .pkg import *
import os.path as osp
x: int = 1 if y else (2)
z = [i for i in range(3) if i] + {k: v for k, v in d.items()} and not q or {*s} - (w := 2)
f"{x!r:>{width}.{prec}} {y=} {z:{fmt}}" f"plain" "{}".format(1)
call(a, *args, b=2, **kw)[1:2, ::3, ...]
lambda p, /, q=1, *r, s, **t: p
@decorator(arg)
async def g[T](a: int = 1, *, b: T | None = None) -> list[T]:
    async with ctx() as (u, v), other:
        async for i in aiter():
            await i
    global G
    del x[0], y.z
    try:
        raise E from err
    except* (A, B) as e:
        pass
    else:
        yield from gen
    finally:
        return
class C(Base, metaclass=M):
    attr: "Tensor"
    def m(self): x = yield; nonlocal_thing = -x ** 2 @ y
match point:
    case Point(x=0, y=1) | [1, 2, *rest] | {"k": v, **others} if v > 1:
        pass
    case str() as s:
        pass
type Alias = dict[str, int]
assert x, "msg"
while x:
    x >>= 1
    continue
'''


def corpus() -> list[cst.Module]:
    files = (sorted((REPO / "dsv4_model").glob("*.py"))[:6]
             + sorted((REPO / "graphlint" / "analysis" / "inference").glob("*.py")))
    return [cst.parse_module(EVERY_SYNTAX)] + [cst.parse_module(f.read_text("utf-8")) for f in files]


def every_node(module: cst.Module):
    stack: list[cst.CSTNode] = [module]
    while stack:
        node = stack.pop()
        yield node
        stack.extend(node.children)


@pytest.fixture(scope="module")
def modules() -> list[cst.Module]:
    return corpus()


def test_children_are_libcsts_children_in_the_same_order(modules):
    for module in modules:
        for node in every_node(module):
            expected = node.children
            got = fast.children(node)
            assert len(got) == len(expected) and all(a is b for a, b in zip(got, expected)), type(node).__name__


def test_code_children_drop_exactly_the_trivia(modules):
    for module in modules:
        for node in every_node(module):
            if isinstance(node, fast.trivia_types()):
                continue
            expected = [c for c in node.children if not isinstance(c, fast.trivia_types())]
            got = fast.code_children(node)
            assert len(got) == len(expected) and all(a is b for a, b in zip(got, expected)), type(node).__name__


def test_iter_code_is_a_visitors_preorder(modules):
    class Order(cst.CSTVisitor):
        def __init__(self) -> None:
            self.seen: list[cst.CSTNode] = []

        def on_visit(self, node: cst.CSTNode) -> bool:
            if not isinstance(node, fast.trivia_types()):
                self.seen.append(node)
            return not isinstance(node, cst.FunctionDef) or node is root

    for module in modules:
        root = module
        order = Order()
        module.visit(order)
        assert list(fast.iter_code(module, skip=(cst.FunctionDef,))) == order.seen[1:]


def _node_classes() -> list[type[cst.CSTNode]]:
    return [obj for obj in vars(cst).values()
            if isinstance(obj, type) and issubclass(obj, cst.CSTNode) and not inspect.isabstract(obj)
            and "_visit_and_replace_children" in vars(obj)]


def _node_types(annotation) -> set[type]:
    if typing.get_origin(annotation) is None:
        return {annotation} if isinstance(annotation, type) and issubclass(annotation, cst.CSTNode) else set()
    return set().union(*(_node_types(arg) for arg in typing.get_args(annotation)))


def test_trivia_fields_hold_only_trivia_and_the_rest_can_hold_code():
    """Checked against libcst's own field types for every node class, so a libcst release
    that adds or retypes a field fails here instead of hiding code from the rules."""
    for cls in _node_classes():
        hints = typing.get_type_hints(cls)
        source = inspect.getsource(cls._visit_and_replace_children)
        for name in dict.fromkeys(fast._VISIT_CALL.findall(source)):
            types = _node_types(hints[name])
            only_trivia = bool(types) and all(issubclass(t, fast.trivia_types()) for t in types)
            if fast.is_trivia_field(name):
                assert only_trivia, f"{cls.__name__}.{name} can hold {types}"
            elif not issubclass(cls, fast.trivia_types()):
                assert not only_trivia, f"{cls.__name__}.{name} holds only trivia: add it to TRIVIA_FIELDS"
