"""Per-step host values a function hands out: what it returns, element by element, and what it
passes by keyword, each as the sources it comes from. A source is a `self` attribute the class
advances itself (`self.cumulative_length += n`, a counter that moves every step) or the result
of a call by name (`cache.get_mask_sizes(...)`, element i of a tuple it returns). The sources
stay symbolic, so graphlint.callgraph.project_summaries can resolve calls across files without
analysing any file again: transformers' static sliding-window layer returns its mask offsets from
its counter, `Cache.get_mask_sizes` returns the layer's, the mask helpers unpack and pass them
on as `kv_offset=`, and the function that adds them to an `arange` takes a per-step scalar.

Flow-insensitive and deliberately narrow: arithmetic, `min`/`max`/`abs`/`int`/`round`, a
conditional expression and tuple unpacking carry a source; subscripts, comparisons, attributes
other than the advanced ones and tensor metadata do not.
"""
from __future__ import annotations

from typing import Any, Callable, Iterable

from graphlint.lazy import cst

from graphlint.analysis import catalog
from graphlint.analysis.children import iter_code
from graphlint.analysis.inference.lattice import DEVICE, HOST_TENSOR, MODULE, MODULE_LIST, Value

# A source: ("s",) an advanced self attribute; ("c", name, position) the result of a call of
# that name (position -1: the whole value, i >= 0: element i of the tuple it returns); ("m",
# name, position) the same for a method called on `self`, which the class's own method answers.
Source = tuple
_CARRIERS = frozenset({"min", "max", "abs", "int", "round"})
_META = catalog.names("tensor", "shape_metadata")
# A tensor or a module is no Python scalar a capture freezes (`torch.arange(n) + past_len` is a
# device tensor read at replay), whatever per-step value went into it.
_NOT_SCALARS = frozenset({DEVICE, HOST_TENSOR, MODULE, MODULE_LIST})


def step_values(function: cst.FunctionDef, advanced: set[str],
                value_of: Callable[[cst.CSTNode], Value] | None = None) -> dict[str, Any]:
    """{"sret": {position: [source, ...]}, "skw": {keyword: [source, ...]}} for `function`,
    only the non-empty parts; `advanced`: the host attributes its class advances; `value_of`:
    what graphlint.analysis.inference made of each expression (tensors carry no source)."""
    walker = _Walker(advanced, value_of)
    statements = list(_statements(function.body))
    for final in (False, True):  # a second pass lets loop-carried and out-of-order assignments settle
        flagged: dict[int, bool] = {}  # per test, once a pass (a block's statements share them)
        for statement, tests in statements:
            # Under a test of a per-step value (`if is_full:` on the class's fill counter) a value
            # is one phase's (the window filling, then full), not one that moves every step:
            # transformers' sliding layer returns a kv_length that is constant once full.
            phase = False
            for test in tests:
                key = id(test)
                if key not in flagged:
                    flagged[key] = walker.flags(test)
                if flagged[key]:
                    phase = True
                    break
            walker.phase = phase
            # Returns and keywords are read once the names have settled, on the last pass.
            walker.statement(statement, final)
    out: dict[str, Any] = {}
    if walker.returns:
        out["sret"] = {str(pos): sorted(map(list, found)) for pos, found in sorted(walker.returns.items())}
    if walker.keywords:
        out["skw"] = {kw: sorted(map(list, found)) for kw, found in sorted(walker.keywords.items())}
    return out


def unconditional_counters(module: cst.Module) -> dict[str, set[str]]:
    """Per class (by name, nested classes included): the `self` attributes one of its methods
    other than the dunders advances (`self.filled += n`) on every call, not under an `if`,
    `while` or `match` (a prefill-only counter moves in one phase, not every step)."""
    found: dict[str, set[str]] = {}
    stack: list[cst.CSTNode] = [module]
    while stack:
        node = stack.pop()
        for child in getattr(getattr(node, "body", None), "body", getattr(node, "body", ())) or ():
            if isinstance(child, cst.ClassDef):
                stack.append(child)
                counters = found.setdefault(child.name.value, set())
                for method in child.body.body:
                    if isinstance(method, cst.FunctionDef) and not method.name.value.startswith("__"):
                        counters |= _advanced_on_every_call(method.body)
    return found


def _advanced_on_every_call(body: cst.BaseSuite) -> set[str]:
    found = set()
    for statement in getattr(body, "body", ()):
        if isinstance(statement, cst.SimpleStatementLine):
            for small in statement.body:
                if isinstance(small, cst.AugAssign) and isinstance(small.operator, (cst.AddAssign, cst.SubtractAssign)) \
                        and isinstance(small.target, cst.Attribute) and isinstance(small.target.value, cst.Name) \
                        and small.target.value.value == "self":
                    found.add(small.target.attr.value)
        elif isinstance(statement, (cst.For, cst.With, cst.Try)):
            found |= _advanced_on_every_call(statement.body)
    return found


def _statements(body: cst.BaseSuite, tests: tuple = ()) -> Iterable[tuple[cst.CSTNode, tuple]]:
    """Every simple statement and compound header in source order, nested blocks included, each
    with the tests of the `if`/`while`/`match` blocks around it; nested functions and classes
    are left out (they run at another time)."""
    for statement in getattr(body, "body", ()):
        if isinstance(statement, cst.SimpleStatementLine):
            for small in statement.body:
                yield small, tests
        elif isinstance(statement, (cst.FunctionDef, cst.ClassDef)):
            continue
        elif isinstance(statement, cst.BaseCompoundStatement):
            yield statement, tests
            for child, inner in _blocks(statement, tests):
                yield from _statements(child, inner)


def _blocks(statement: cst.BaseCompoundStatement, tests: tuple) -> Iterable[tuple[cst.BaseSuite, tuple]]:
    if isinstance(statement, cst.Match):
        for case in statement.cases:
            yield case.body, (*tests, statement.subject)
        return
    if isinstance(statement, cst.If):
        chain = statement
        seen = list(tests)
        while isinstance(chain, cst.If):
            seen.append(chain.test)
            yield chain.body, tuple(seen)
            chain = chain.orelse
        if chain is not None:  # the final else
            yield chain.body, tuple(seen)
        return
    inner = (*tests, statement.test) if isinstance(statement, cst.While) else tests
    yield statement.body, inner
    orelse = getattr(statement, "orelse", None)
    if orelse is not None:
        yield orelse.body, inner
    for handler in getattr(statement, "handlers", ()):
        yield handler.body, tests
    final = getattr(statement, "finalbody", None)
    if final is not None:
        yield final.body, tests


class _Walker:
    def __init__(self, advanced: set[str], value_of: Callable[[cst.CSTNode], Value] | None):
        self.advanced = advanced
        self.value_of = value_of
        self.env: dict[str, set[Source]] = {}
        self.returns: dict[int, set[Source]] = {}
        self.keywords: dict[str, set[Source]] = {}
        self.phase = False  # the statement runs under a test of a per-step value
        self.flag_env: dict[str, set[Source]] = {}  # names bound to tests of per-step values

    def flags(self, test: cst.BaseExpression) -> bool:
        """A test reads a per-step value, directly or through a name bound to such a test."""
        if not (self.env or self.flag_env or self.advanced):
            return False
        for node in (test, *iter_code(test, skip=(cst.Lambda,))):
            if isinstance(node, cst.Name) and (self.env.get(node.value) or self.flag_env.get(node.value)):
                return True
            if isinstance(node, cst.Attribute) and isinstance(node.value, cst.Name) \
                    and node.value.value == "self" and node.attr.value in self.advanced:
                return True
        return False

    def statement(self, node: cst.CSTNode, final: bool = True) -> None:
        if isinstance(node, cst.Assign):
            for target in node.targets:
                self.bind(target.target, node.value)
        elif isinstance(node, cst.AnnAssign) and node.value is not None:
            self.bind(node.target, node.value)
        elif isinstance(node, cst.AugAssign) and isinstance(node.target, cst.Name) and not self.phase:
            self.env.setdefault(node.target.value, set()).update(self.sources(node.value))
        elif isinstance(node, cst.Return) and node.value is not None and not self.phase and final:
            value = node.value
            if isinstance(value, cst.Tuple) and not any(isinstance(e, cst.StarredElement) for e in value.elements):
                for position, element in enumerate(value.elements):
                    self._add(self.returns, position, self.sources(element.value))
            else:
                self._add(self.returns, -1, self.sources(value))
        if final:
            self.calls(node)

    def calls(self, node: cst.CSTNode) -> None:
        """The keyword arguments of every call in a simple statement or a compound header."""
        headers: list[cst.CSTNode] = [node]
        if isinstance(node, cst.BaseCompoundStatement):
            if isinstance(node, cst.With):
                headers = [item.item for item in node.items]
            else:
                header = getattr(node, "test", None) or getattr(node, "iter", None) or getattr(node, "subject", None)
                headers = [header] if header is not None else []
        for call in (c for header in headers for c in _calls_in(header)):
            for arg in call.args:
                if arg.keyword is not None and not arg.star:
                    found = self.sources(arg.value)
                    if found:
                        self._add(self.keywords, arg.keyword.value, found)

    def bind(self, target: cst.BaseExpression, value: cst.BaseExpression) -> None:
        if isinstance(target, cst.Name) and isinstance(value, (cst.Comparison, cst.UnaryOperation, cst.BooleanOperation)) \
                and self.flags(value):
            self.flag_env.setdefault(target.value, set()).add(("s",))
        if self.phase:
            return
        if isinstance(target, cst.Name):
            self.env.setdefault(target.value, set()).update(self.sources(value))
        elif isinstance(target, (cst.Tuple, cst.List)):
            names = [e.value for e in target.elements]
            if isinstance(value, (cst.Tuple, cst.List)) and len(value.elements) == len(names):
                for name, element in zip(names, value.elements):
                    self.bind(name, element.value)
            elif isinstance(value, cst.Call) and (callee := _callee(value)) is not None:
                tag = "m" if _on_self(value) else "c"
                for position, name in enumerate(names):
                    if isinstance(name, cst.Name):
                        self.env.setdefault(name.value, set()).add((tag, callee, position))

    def sources(self, node: cst.BaseExpression) -> set[Source]:
        if self.value_of is not None and self.value_of(node).kind in _NOT_SCALARS:
            return set()
        if isinstance(node, cst.Name):
            return set(self.env.get(node.value, ()))
        if isinstance(node, cst.Attribute):
            if isinstance(node.value, cst.Name) and node.value.value == "self" and node.attr.value in self.advanced:
                return {("s",)}
            return set()
        if isinstance(node, cst.Call):
            callee = _callee(node)
            if callee in _CARRIERS:
                return set().union(*(self.sources(a.value) for a in node.args if not a.star)) if node.args else set()
            if callee is None or callee in _META:
                return set()
            return {("m" if _on_self(node) else "c", callee, -1)}
        if isinstance(node, cst.BinaryOperation):
            return self.sources(node.left) | self.sources(node.right)
        if isinstance(node, cst.UnaryOperation):
            return self.sources(node.expression)
        if isinstance(node, cst.IfExp):
            return self.sources(node.body) | self.sources(node.orelse)
        if isinstance(node, cst.BooleanOperation):
            return self.sources(node.left) | self.sources(node.right)
        return set()

    @staticmethod
    def _add(table: dict, key, found: set[Source]) -> None:
        if found:
            table.setdefault(key, set()).update(found)


def _callee(call: cst.Call) -> str | None:
    """The name a call goes by: `f` of `f(...)`, `m` of `x.m(...)`."""
    func = call.func
    if isinstance(func, cst.Name):
        return func.value
    if isinstance(func, cst.Attribute):
        return func.attr.value
    return None


def _on_self(call: cst.Call) -> bool:
    return (isinstance(call.func, cst.Attribute) and isinstance(call.func.value, cst.Name)
            and call.func.value.value == "self")


def _calls_in(node: cst.CSTNode) -> Iterable[cst.Call]:
    """The calls in `node` (itself included), not inside lambdas (they run at another time)."""
    call = cst.Call  # libcst's node classes are never subclassed: identity, not isinstance
    if type(node) is call:
        yield node
    for current in iter_code(node, skip=(cst.Lambda,)):
        if type(current) is call:
            yield current
