"""Where a tensor allocated in a function goes, by dataflow within that function: nowhere past
the step (an intermediate: a capture serves it from the graph's private pool at every replay),
back to the caller (`returned`), or into state that outlives the step (`stored`)."""
from __future__ import annotations

from typing import Callable, Iterable

from graphlint.lazy import cst

from graphlint.analysis import catalog
from graphlint.analysis.capture_sites import capture_context
from graphlint.analysis.children import code_children, iter_code
from graphlint.analysis.names import dotted
from graphlint.analysis.walk.rule import Context

RETURNED = "returned"
STORED = "stored"

_ALIAS_METHODS = catalog.names("aliasing", "methods")
_ALIAS_FUNCTIONS = catalog.names("aliasing", "functions")
_STORE_METHODS = catalog.names("persistent_store", "methods")
_STORE_FUNCTIONS = catalog.names("persistent_store", "functions")
_CONTAINERS = frozenset({"dict", "list", "tuple", "set", "dataclasses.replace"})
_METADATA = catalog.names("metadata", "attributes")

Env = dict[str, frozenset[int]]


class Escapes:
    """The fate of every allocation call of one function: `fate(call)` is STORED, RETURNED or
    None (used and dropped inside the function). Flow-sensitive over straight-line code,
    joined over branches and loops; calls into other functions are assumed to keep nothing."""

    def __init__(self, function: cst.FunctionDef, ctx: Context, is_allocation: Callable[[cst.Call], bool]):
        self._ctx = ctx
        self._allocations = {id(node) for node in iter_code(function.body, skip=(cst.FunctionDef, cst.ClassDef))
                             if isinstance(node, cst.Call) and is_allocation(node)}
        self._fates: dict[int, str] = {}
        self.where: dict[int, str] = {}  # allocation -> what it is stored on, for the message
        params = function.params
        self._params = {p.name.value for p in [*params.posonly_params, *params.params, *params.kwonly_params]}
        for star in (params.star_arg, params.star_kwarg):
            if isinstance(star, cst.Param):
                self._params.add(star.name.value)
        self._globals: set[str] = set()
        self._lazy = False  # inside a block that creates state only when it is missing
        self._locals: set[str] = set()  # names the function binds itself (objects it owns) ...
        if function.name.value == "__init__" and ctx.parents and self._first_param(function) == "self":
            # A constructor builds a new object: what it keeps on `self` goes where the caller
            # puts the object, as with a local the function builds.
            self._params.discard("self")
            self._locals.add("self")
        self._borrowed: set[str] = set()  # ... unless bound to state it reaches (`cache = self.cache`)
        if self._allocations:
            self._block(function.body, {})

    @staticmethod
    def _first_param(function: cst.FunctionDef) -> str | None:
        params = [*function.params.posonly_params, *function.params.params]
        return params[0].name.value if params else None

    def fate(self, call: cst.Call) -> str | None:
        return self._fates.get(id(call))

    # ----- values ------------------------------------------------------------------------------

    def carriers(self, node: cst.CSTNode | None, env: Env) -> frozenset[int]:
        """The allocations `node` may be, or hold (a view, a tuple, an output object)."""
        if node is None:
            return frozenset()
        if isinstance(node, cst.Name):
            return env.get(node.value, frozenset())
        if isinstance(node, cst.Call):
            return self._call_carriers(node, env)
        if isinstance(node, cst.Attribute) and node.attr.value in _METADATA:
            return frozenset()  # `x.shape` is host metadata, not the tensor
        if isinstance(node, cst.Subscript) and self._gathers(node):
            return frozenset()  # `x[idx]` with a tensor index copies: a new tensor
        if isinstance(node, (cst.Subscript, cst.Attribute)):
            return self.carriers(node.value, env)  # an element or a view, a field of an owned object
        if isinstance(node, (cst.Tuple, cst.List, cst.Set)):
            return _union(self.carriers(e.value, env) for e in node.elements)
        if isinstance(node, cst.Dict):
            return _union(self.carriers(getattr(e, "value", None), env) for e in node.elements)
        if isinstance(node, cst.IfExp):
            return self.carriers(node.body, env) | self.carriers(node.orelse, env)
        if isinstance(node, cst.BooleanOperation):
            return self.carriers(node.left, env) | self.carriers(node.right, env)
        if isinstance(node, (cst.ListComp, cst.SetComp, cst.GeneratorExp)):
            return self.carriers(node.elt, env)
        if isinstance(node, cst.DictComp):
            return self.carriers(node.value, env)
        if isinstance(node, (cst.NamedExpr, cst.StarredElement)):
            return self.carriers(node.value, env)
        if isinstance(node, cst.Await):
            return self.carriers(node.expression, env)
        return frozenset()

    def _gathers(self, node: cst.Subscript) -> bool:
        """Advanced indexing of a tensor (a tensor, a list or a value of unknown kind as an index)."""
        for element in node.slice:
            index = element.slice
            # Anything but a Python int (or a slice) may be a tensor: reading through it copies.
            if isinstance(index, cst.Index) and not isinstance(index.value, (cst.Integer, cst.Ellipsis)) \
                    and self._ctx.value(index.value).kind not in ("host", "none"):
                return True
        return False

    def _call_carriers(self, call: cst.Call, env: Env) -> frozenset[int]:
        own = frozenset({id(call)}) if id(call) in self._allocations else frozenset()
        func = call.func
        qualified = self._ctx.qualified(func)
        if qualified in _ALIAS_FUNCTIONS and call.args:
            return own | self.carriers(call.args[0].value, env)
        if qualified is None and isinstance(func, cst.Attribute):
            method = func.attr.value
            if method in _ALIAS_METHODS or (method.endswith("_") and not method.startswith("_")):
                return own | self.carriers(func.value, env)  # a view, or the receiver itself
        name = dotted(func) or ""
        last = name.rsplit(".", 1)[-1]
        if name in _CONTAINERS or qualified in _CONTAINERS or (last[:1].isupper() and qualified is None):
            # A container or an object built around the values (`Output(logits=x)`): by the
            # convention that classes are capitalised, it holds its arguments.
            return own | _union(self.carriers(arg.value, env) for arg in call.args)
        return own

    # ----- statements --------------------------------------------------------------------------

    def _block(self, body: cst.CSTNode, env: Env) -> Env:
        statements = body.body if isinstance(body, (cst.IndentedBlock, cst.SimpleStatementSuite)) else [body]
        for statement in statements:
            env = self._statement(statement, env)
        return env

    def _statement(self, node: cst.CSTNode, env: Env) -> Env:
        if isinstance(node, cst.SimpleStatementLine):
            for small in node.body:
                env = self._small(small, env)
            return env
        if isinstance(node, (cst.FunctionDef, cst.ClassDef)):
            return env
        if isinstance(node, cst.If):
            self._scan_calls(node.test, env)
            lazy = self._lazy
            if _reinitialises(node):
                self._lazy = True  # `if self.state is None or ...: self.state = zeros(...)`: once per shape
            taken = self._block(node.body, dict(env))
            self._lazy = lazy
            other = self._statement(node.orelse, dict(env)) if node.orelse is not None else env
            return _join(taken, other)
        if isinstance(node, cst.Else):
            return self._block(node.body, env)
        if isinstance(node, (cst.For, cst.While)):
            return self._loop(node, env)
        if isinstance(node, cst.With):
            return self._with(node, env)
        if isinstance(node, cst.Try):
            outcomes = [self._block(node.body, dict(env))]
            outcomes += [self._block(h.body, dict(env)) for h in node.handlers]
            if node.orelse is not None:
                outcomes.append(self._block(node.orelse.body, dict(outcomes[0])))
            joined = env
            for outcome in outcomes:
                joined = _join(joined, outcome)
            return self._block(node.finalbody.body, joined) if node.finalbody is not None else joined
        # match statements and anything newer: every block, joined.
        joined = env
        for child in code_children(node):
            if isinstance(child, cst.BaseSuite):
                joined = _join(joined, self._block(child, dict(env)))
            elif isinstance(child, cst.CSTNode) and hasattr(child, "body"):
                joined = _join(joined, self._statement(child, dict(env)))
        return joined

    def _loop(self, node: cst.For | cst.While, env: Env) -> Env:
        state = dict(env)
        for _ in range(2):  # twice, so values carried around the loop reach their uses
            inner = dict(state)
            if isinstance(node, cst.For):
                self._scan_calls(node.iter, inner)
                self._bind(node.target, self.carriers(node.iter, inner), inner, node.iter)
            else:
                self._scan_calls(node.test, inner)
            state = _join(state, self._block(node.body, inner))
        if node.orelse is not None:
            state = _join(state, self._block(node.orelse.body, dict(state)))
        return state

    def _with(self, node: cst.With, env: Env) -> Env:
        for item in node.items:
            self._scan_calls(item.item, env)
            if item.asname is not None:
                self._bind(item.asname.name, self.carriers(item.item, env), env, item.item)
        capture = any(isinstance(i.item, cst.Call) and capture_context(i.item, self._ctx.qualified(i.item.func))
                      for i in node.items)
        env = self._block(node.body, env)
        if capture:
            # What the captured block binds and the function reads after it is the graph's output.
            inside = {id(n) for n in iter_code(node.body)}
            function = self._ctx.parents[0] if self._ctx.parents else None
            read_later = {n.value for n in iter_code(function.body, skip=(cst.FunctionDef, cst.ClassDef))
                          if isinstance(n, cst.Name) and id(n) not in inside} if function is not None else set()
            for name, held in env.items():
                if held and name in read_later:
                    self._mark(held, STORED, "the output of the capture")
        return env

    def _small(self, node: cst.CSTNode, env: Env) -> Env:
        if isinstance(node, (cst.Global, cst.Nonlocal)):
            self._globals.update(n.name.value for n in node.names)
            return env
        if isinstance(node, cst.Return):
            self._scan_calls(node.value, env)
            self._mark(self.carriers(node.value, env), RETURNED)
            return env
        if isinstance(node, cst.Expr) and isinstance(node.value, (cst.Yield, cst.Await)):
            # `yield x` holds its value in `.value`, `await f(x)` its awaited call in `.expression`.
            value = node.value.value if isinstance(node.value, cst.Yield) else node.value.expression
            self._scan_calls(value, env)
            if isinstance(node.value, cst.Yield) and not isinstance(value, cst.From):
                self._mark(self.carriers(value, env), RETURNED)
            return env
        if isinstance(node, cst.Assign):
            self._scan_calls(node.value, env)
            held = self.carriers(node.value, env)
            lazy = self._lazy
            self._lazy = lazy or _made_when_missing(node)
            for target in node.targets:
                self._assign(target.target, node.value, held, env)
            self._lazy = lazy
            return env
        if isinstance(node, cst.AnnAssign) and node.value is not None:
            self._scan_calls(node.value, env)
            self._assign(node.target, node.value, self.carriers(node.value, env), env)
            return env
        if isinstance(node, cst.AugAssign):
            self._scan_calls(node.value, env)
            # `outputs += (x,)` keeps x; `t += x` and `t *= x` on tensors are arithmetic.
            held = self.carriers(node.value, env) if isinstance(node.value, (cst.Tuple, cst.List)) else frozenset()
            if held and isinstance(node.operator, cst.AddAssign) and self._ctx.value(node.target).kind != "device":
                self._store_into(node.target, held, env)
            return env
        self._scan_calls(node, env)
        return env

    def _assign(self, target: cst.BaseExpression, value: cst.BaseExpression, held: frozenset[int], env: Env) -> None:
        if isinstance(target, (cst.Tuple, cst.List)):
            pairs = (isinstance(value, (cst.Tuple, cst.List)) and len(value.elements) == len(target.elements)
                     and not any(isinstance(e, cst.StarredElement) for e in target.elements))
            for index, element in enumerate(target.elements):
                part = self.carriers(value.elements[index].value, env) if pairs else held
                self._assign(element.value, value.elements[index].value if pairs else value, part, env)
            return
        if isinstance(target, cst.StarredElement):
            self._assign(target.value, value, held, env)
            return
        if isinstance(target, cst.Name):
            self._bind(target, held, env, value)
            return
        if held:
            self._store_into(target, held, env)

    def _bind(self, target: cst.BaseExpression, held: frozenset[int], env: Env,
              value: cst.BaseExpression | None = None) -> None:
        """`target` now holds `held`; `value` is what it is bound to (an element of it, in a
        loop), to tell an object the function owns from state it reaches."""
        if isinstance(target, cst.Name):
            name = target.value
            if name in self._globals:
                self._mark(held, STORED, f"the global `{name}`")
                return
            env[name] = held
            self._locals.add(name)
            if value is not None and self._is_borrowed(value):
                self._borrowed.add(name)
            else:
                self._borrowed.discard(name)
        elif isinstance(target, (cst.Tuple, cst.List)):
            for element in target.elements:
                self._bind(element.value, held, env, value)
        elif isinstance(target, cst.StarredElement):
            self._bind(target.value, held, env, value)
        elif held:
            self._store_into(target, held, env)

    def _store_into(self, target: cst.BaseExpression, held: frozenset[int], env: Env) -> None:
        """`target = x`, `target[i] = x`, `target.append(x)`: the owner of `target` now holds x,
        unless `target` is an element or slice of a device tensor (that write copies)."""
        if isinstance(target, cst.Subscript) and (self._ctx.value(target.value).kind == "device" or _tensor_index(target)):
            return
        root = target
        while isinstance(root, (cst.Attribute, cst.Subscript)):
            root = root.value
        if isinstance(target, cst.Name):
            root = target
        owner = root.value if isinstance(root, cst.Name) else None
        if owner is not None and self._owned(owner):
            env[owner] = env.get(owner, frozenset()) | held  # a local object the function owns
            return
        if self._lazy and owner == "self":
            return  # state made when missing (or of another shape): the warm-up makes it, not each step
        what = dotted(target) or dotted(root) or "an object the step does not own"
        self._mark(held, STORED, f"`{what}`")

    def _owned(self, name: str) -> bool:
        return (name in self._locals and name not in self._borrowed and name not in self._params
                and name not in self._globals)

    def _is_borrowed(self, value: cst.BaseExpression) -> bool:
        """`self.cache`, `caches[i]`, `state.layers`, a parameter or a module name: something
        that exists before the call and after it."""
        root = value
        while isinstance(root, (cst.Attribute, cst.Subscript)):
            root = root.value
        if isinstance(root, cst.Call) and isinstance(root.func, cst.Name) and root.func.value in ("enumerate", "zip",
                                                                                               "reversed", "iter"):
            return any(self._is_borrowed(arg.value) for arg in root.args)
        return isinstance(root, cst.Name) and not self._owned(root.value)

    def _scan_calls(self, node: cst.CSTNode | None, env: Env) -> None:
        """Store methods anywhere in an expression: `self.cache.append(x)`, `setattr(o, n, x)`,
        `past_key_values.update(k, v, i)`."""
        if node is None:
            return
        calls = [node] if isinstance(node, cst.Call) else []
        calls += [n for n in iter_code(node, skip=(cst.Lambda, cst.FunctionDef)) if isinstance(n, cst.Call)]
        for call in calls:
            func = call.func
            qualified = self._ctx.qualified(func)
            name = dotted(func)
            if name in _STORE_FUNCTIONS and len(call.args) >= 3:
                held = self.carriers(call.args[2].value, env)
                if held:
                    self._store_into(call.args[0].value, held, env)
            elif qualified is None and isinstance(func, cst.Attribute) and func.attr.value in _STORE_METHODS:
                held = _union(self.carriers(arg.value, env) for arg in call.args)
                if held and self._ctx.value(func.value).kind != "device":
                    self._store_into(func.value, held, env)

    def _mark(self, held: Iterable[int], fate: str, where: str = "") -> None:
        for allocation in held:
            if self._fates.get(allocation) != STORED:  # stored outranks returned
                self._fates[allocation] = fate
                if where:
                    self.where[allocation] = where


def _reinitialises(node: cst.If) -> bool:
    """An `if` whose test asks whether `self.<x>` is missing (`self.x is None`, as one term of
    an `or` too) and whose block assigns `self.<x>`: state made once (or again for a new
    shape), as the lazy initialisation of analysis/capture_sites, with more shapes of test."""
    missing = set()
    for test in [node.test, *iter_code(node.test)]:
        tested = _none_test(test)
        if tested is not None and tested[1]:
            missing.add(tested[0])
    if not missing:
        return False
    for assign in iter_code(node.body, skip=(cst.FunctionDef, cst.ClassDef)):
        if isinstance(assign, cst.Assign) and any(dotted(t.target) in missing for t in assign.targets):
            return True
    return False


def _made_when_missing(node: cst.Assign) -> bool:
    """`self.x = zeros(...) if self.x is None else self.x` (or `self.x if self.x is not None
    else zeros(...)`): the one-line form of a lazy initialisation."""
    value = node.value
    tested = _none_test(value.test) if isinstance(value, cst.IfExp) else None
    if tested is None:
        return False
    name, missing = tested
    kept = value.orelse if missing else value.body
    return dotted(kept) == name and any(dotted(t.target) == name for t in node.targets)


def _none_test(node: cst.CSTNode) -> tuple[str, bool] | None:
    """(`self.<x>`, True) for `self.x is None`, (`self.<x>`, False) for `self.x is not None`."""
    if not (isinstance(node, cst.Comparison) and len(node.comparisons) == 1
            and isinstance(node.comparisons[0].operator, (cst.Is, cst.IsNot))
            and isinstance(node.comparisons[0].comparator, cst.Name) and node.comparisons[0].comparator.value == "None"):
        return None
    name = dotted(node.left)
    if name is None or not name.startswith("self."):
        return None
    return name, isinstance(node.comparisons[0].operator, cst.Is)


def _tensor_index(node: cst.Subscript) -> bool:
    """`x[:, 0]`, `x[a:b]`, `x[..., i]`: an index a dict or a list never takes, so `x` is a tensor."""
    return len(node.slice) > 1 or any(isinstance(e.slice, cst.Slice) or (isinstance(e.slice, cst.Index)
                                      and isinstance(e.slice.value, cst.Ellipsis)) for e in node.slice)


def _union(parts: Iterable[frozenset[int]]) -> frozenset[int]:
    out: frozenset[int] = frozenset()
    for part in parts:
        out |= part
    return out


def _join(a: Env, b: Env) -> Env:
    if a is b:
        return dict(a)
    joined = dict(a)
    for name, held in b.items():
        joined[name] = joined.get(name, frozenset()) | held
    return joined
