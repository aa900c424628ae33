"""Per-file facts for the cross-module call graph, gathered from the parse the rules use.

Nothing is resolved here: each function's calls, the values its local names may hold and the
attributes its class assigns to `self` are recorded as small symbolic expressions (JSON lists),
and graphlint.callgraph.graph evaluates them once every linted file is known. The facts are cached
with the file's analysis, so they must stay JSON-serialisable and small.

Expression encoding (a string is a name; a list's first item is its tag):
  "name"                 a name              ["a", E, attr]        an attribute
  ["c", E, [args], {kw}] a call (empty args and kwargs left out)
  ["i", E] / ["s", E]    an index / a slice of E
  ["ix", E, k]           E[k], k a literal   ["it", E]             an element of iterating E
  ["l", [E..]]           a list/set (or comprehension) of those elements
  ["t", [E..]]           a tuple literal     ["d", [K..], [V..]]  a dict literal or comprehension
  ["u", [E..]]           one of (if-else, `or`)
  ["str", s]             a short string literal
  ["ann", T]             a value of annotated type T
  ["?"]                  a value the call graph cannot follow (arithmetic, a literal)
Annotations: "dotted" (`torch.Tensor`), ["ty", dotted, [T..]] (`dict[str, Rope]`), ["tu", [T..]]
(`A | B`).
"""
from __future__ import annotations

from typing import Any, Sequence

from graphlint.lazy import cst

from graphlint.analysis import catalog
from graphlint.analysis.capture_sites import one_time_blocks, rest_zones
from graphlint.analysis.children import compound_bodies, suite_body
from graphlint.analysis.names import class_bases, dotted
from graphlint.analysis.argument_records import (SET, argument_record, default_states, join_records, resolve_record,
                                                  value_state)

_MAX_DEPTH = 12  # deeper expressions are never receivers the call graph can follow (`M(c).to(d).eval()` is 9)
_MAX_PER_NAME = 8  # assignments kept per local name (flow-insensitive union)
_MAX_RETURNS = 4


def _ann(node: cst.BaseExpression | None, depth: int = 0) -> list | None:
    """An annotation as a type expression."""
    if node is None or depth > _MAX_DEPTH:
        return None
    if isinstance(node, cst.SimpleString):
        try:
            return _ann(cst.parse_expression(node.evaluated_value.strip()), depth + 1)
        except (cst.ParserSyntaxError, ValueError):
            return None
    if isinstance(node, cst.BinaryOperation) and isinstance(node.operator, cst.BitOr):
        parts = [p for p in (_ann(node.left, depth + 1), _ann(node.right, depth + 1)) if p not in ("None", None)]
        return parts[0] if len(parts) == 1 else ["tu", parts] if parts else None
    if isinstance(node, cst.Subscript):
        outer = dotted(node.value)
        if outer is None:
            return None
        if outer in ("Optional", "typing.Optional") and len(node.slice) == 1 and isinstance(node.slice[0].slice, cst.Index):
            return _ann(node.slice[0].slice.value, depth + 1)
        args = [_ann(e.slice.value, depth + 1) if isinstance(e.slice, cst.Index) else None for e in node.slice]
        return ["ty", outer, args]
    if isinstance(node, cst.List):
        return ["ty", "[]", [_ann(e.value, depth + 1) for e in node.elements]]
    if isinstance(node, cst.Ellipsis):
        return "..."
    name = dotted(node)  # a plain name: ["ty", name, []] written short
    if name in _TYPE_VARIABLES:
        # `ops: List[T]`, `state: StateT | None`: a type variable says what its bound says, or
        # nothing (the values at the call sites decide).
        bound = _TYPE_VARIABLES[name]
        return _ann(bound, depth + 1) if bound is not None else None
    return name


# The file's type variables (`T = TypeVar("T", bound=Base)`) while its facts are encoded.
_TYPE_VARIABLES: dict[str, cst.BaseExpression | None] = {}


def _type_variables(module: cst.Module) -> dict[str, cst.BaseExpression | None]:
    found: dict[str, cst.BaseExpression | None] = {}
    for stmt in module.body:
        if not isinstance(stmt, cst.SimpleStatementLine):
            continue
        for small in stmt.body:
            if (isinstance(small, cst.Assign) and len(small.targets) == 1 and isinstance(small.targets[0].target, cst.Name)
                    and isinstance(small.value, cst.Call)
                    and (dotted(small.value.func) or "").rsplit(".", 1)[-1] == "TypeVar"):
                bound = next((a.value for a in small.value.args if a.keyword is not None and a.keyword.value == "bound"), None)
                found[small.targets[0].target.value] = bound
    return found


# Calls whose arguments shape the result the call graph follows (containers of modules,
# iteration helpers, partials); for any other call only name-like arguments are kept.
_ARG_AWARE = frozenset({
    "list", "tuple", "sorted", "reversed", "iter", "set", "frozenset", "enumerate", "zip", "next", "dict",
    "getattr", "super", "partial", "wraps", "lru_cache", "cache", "islice", "chain",
}) | catalog.names("call_facts", "arg_aware") | frozenset(
    # What a compiled, scripted or graphed callable runs (graphlint/data/call_graph.toml).
    name.rsplit(".", 1)[-1] for name in catalog.call_graph("wraps_callable", "names"))


def _ref(node: cst.BaseExpression) -> list | str | None:
    """`f` or `self.helper` (a possible callback) as an expression; None otherwise."""
    if type(node) is cst.Name:
        return node.value
    if type(node) is cst.Attribute and type(node.value) in (cst.Name, cst.Attribute):
        inner = _ref(node.value)
        return ["a", inner, node.attr.value] if inner is not None else None
    return None


def _enc(node: cst.CSTNode | None, depth: int = 0) -> list | None:
    """An expression in the encoding above; None for what the call graph cannot use."""
    if node is None or depth > _MAX_DEPTH:
        return None
    d = depth + 1
    if type(node) is cst.Name:
        return node.value
    if type(node) is cst.Attribute:
        inner = _enc(node.value, d)
        return ["a", inner, node.attr.value] if inner is not None else None
    if type(node) is cst.Call:
        func = _enc(node.func, d)
        name = node.func.attr.value if type(node.func) is cst.Attribute else (
            node.func.value if type(node.func) is cst.Name else "")
        args: list = []
        kwargs: dict[str, Any] = {}
        # A class's constructor arguments too (`LayerStack(layers)`, `Engine(model)`): what an
        # instance holds often comes from them.
        if name in _ARG_AWARE or name[:1].isupper():
            for arg in node.args:
                if arg.keyword is not None:
                    kwargs[arg.keyword.value] = _enc(arg.value, d)
                elif arg.star:
                    args.append(["star", _enc(arg.value, d)])
                else:
                    args.append(_enc(arg.value, d))
            # Trailing unknown arguments carry nothing; dropping them keeps the cache small.
            while args and args[-1] is None:
                args.pop()
            kwargs = {k: v for k, v in kwargs.items() if v is not None}
        # Other calls' arguments do not shape their result; the call records add the
        # name-like ones (possible callbacks) themselves.
        return ["c", func] + ([args, kwargs] if kwargs else [args] if args else [])
    if type(node) is cst.Subscript:
        inner = _enc(node.value, d)
        if inner is None:
            return None
        if len(node.slice) == 1:
            part = node.slice[0].slice
            if type(part) is cst.Slice:
                return ["s", inner]
            if type(part) is cst.Index and type(part.value) is cst.Integer:
                return ["ix", inner, int(part.value.value, 0)]
        return ["i", inner]
    if type(node) in (cst.List, cst.Set):
        return ["l", [_enc(e.value, d) for e in node.elements]]
    if type(node) is cst.Tuple:
        return ["t", [_enc(e.value, d) for e in node.elements]]
    if type(node) in (cst.ListComp, cst.SetComp, cst.GeneratorExp):
        return ["l", [_enc(node.elt, d)]]
    if type(node) is cst.Dict:
        keys = [_enc(e.key, d) for e in node.elements if type(e) is cst.DictElement]
        values = [_enc(e.value, d) for e in node.elements if type(e) is cst.DictElement]
        return ["d", keys, values]
    if type(node) is cst.DictComp:
        return ["d", [_enc(node.key, d)], [_enc(node.value, d)]]
    if type(node) is cst.IfExp:
        return ["u", [_enc(node.body, d), _enc(node.orelse, d)]]
    if type(node) is cst.BooleanOperation:
        return ["u", [_enc(node.left, d), _enc(node.right, d)]]
    if type(node) is cst.SimpleString and len(node.value) <= 66:
        try:
            value = node.evaluated_value
        except (ValueError, SyntaxError):
            return None
        # A bytes literal is no module or attribute name, and JSON cannot hold it.
        return ["str", value] if isinstance(value, str) else None
    if type(node) is cst.Lambda:
        body = _enc(node.body, d)
        return ["lam", body] if body is not None else None
    if type(node) is cst.NamedExpr:
        return _enc(node.value, depth)
    if type(node) is cst.Await:
        return _enc(node.expression, depth)
    return None


def is_library_method(func: cst.BaseExpression) -> bool:
    """`x.view`, `out.copy_`: a tensor's or a container's method, never a linted function."""
    return type(func) is cst.Attribute and (func.attr.value in _LIBRARY_METHODS or func.attr.value.endswith("_"))


def encode(node: cst.CSTNode) -> list | str | None:
    """An expression in the encoding above (None when the call graph cannot use it)."""
    return _enc(node)


# Tensor, container and string methods: recording their calls would cost the cache most of
# its size and resolve nothing (the graph follows the receiver's own calls, recorded apart).
_LIBRARY_METHODS = catalog.names("call_facts", "library_methods")
# Container methods that add to the container (the last argument is what it then holds).
_REGISTER_MODULE = catalog.names("modules", "register_module")
_MUTATORS = frozenset({"append", "extend", "insert", "add", "appendleft", "setdefault"})
# Literal node types, by name (libcst loads lazily: nothing here may touch it at import).
_LEAVES = frozenset({"Integer", "Float", "Imaginary", "SimpleString", "ConcatenatedString", "Ellipsis"})


class _FunctionWalker:
    """One pass over a function body: local bindings, calls, returns and `self.x = ...`."""

    def __init__(self, self_name: str | None, record_attr, class_name: str | None = None):
        self.self_name = self_name
        # The owning class by its own name: `KLlamaModel.dynamic_sdpa = Attention(...)` in a
        # method sets an attribute that every instance (and the class) reads.
        self.class_name = class_name
        self.record_attr = record_attr
        self.env: dict[str, list] = {}
        self.calls: list = []
        self._seen_calls: set[str] = set()
        self.returns: list = []
        self.yields: list = []  # what a generator yields (a context manager's `as` value)
        self.once: list = []  # calls in one-time branches
        self.one_time = False
        # What each call passes, None-wise (graphlint.analysis.argument_records), in the order of
        # `calls`, and the None-states of what each local name is bound to.
        self.call_args: list = []
        self.once_args: list = []
        self._call_index: dict[str, tuple[list, int]] = {}
        self.name_states: dict[str, list] = {}

    def note(self, target: cst.BaseExpression, state: Any) -> None:
        """A name bound to a value of this None-state (None: unknown)."""
        if type(target) is cst.Name:
            slot = self.name_states.setdefault(target.value, [])
            if state not in slot:
                slot.append(state)
        elif type(target) in (cst.Tuple, cst.List):
            for element in target.elements:
                self.note(element.value, None)
        elif type(target) is cst.StarredElement:
            self.note(target.value, None)

    def bind(self, target: cst.BaseExpression, value: list | None) -> None:
        if value is None:
            value = ["?"]  # bound to something the graph cannot follow (arithmetic, literals)
        if isinstance(target, cst.Name):
            slot = self.env.setdefault(target.value, [])
            if len(slot) < _MAX_PER_NAME and value not in slot:
                slot.append(value)
        elif isinstance(target, (cst.Tuple, cst.List)):
            for index, element in enumerate(target.elements):
                if isinstance(element, cst.StarredElement):
                    self.bind(element.value, ["i", value])
                else:
                    self.bind(element.value, ["ix", value, index])
        elif (isinstance(target, cst.Attribute) and isinstance(target.value, cst.Name) and value != ["?"]
              and target.value.value in (self.self_name, self.class_name) and target.value.value is not None):
            self.record_attr(target.attr.value, value)
        elif isinstance(target, cst.Subscript) and value != ["?"]:
            # `impls["paged"] = paged_attention`, `self.layers[i] = Layer()`: the container holds
            # the value (as a dict's value or a list's element: indexing and iterating both see it).
            key = _enc(target.slice[0].slice.value) if len(target.slice) == 1 and isinstance(
                target.slice[0].slice, cst.Index) else None
            self._holds(target.value, ["u", [["d", [key], [value]], ["l", [value]]]])

    def _holds(self, container: cst.BaseExpression, value: list) -> None:
        """`container` (a local or `self.attr`) also holds `value` (a container literal)."""
        if isinstance(container, cst.Name):
            self.bind(container, value)
        elif (isinstance(container, cst.Attribute) and isinstance(container.value, cst.Name)
              and container.value.value == self.self_name and self.self_name is not None):
            self.record_attr(container.attr.value, value)

    # The walk names the fields it enters: libcst's generic `.children` rebuilds every node
    # through a visitor, which costs more than everything else here together.
    def block(self, suite: cst.BaseSuite | None) -> None:
        if suite is None:
            return
        rest = rest_zones(suite.body) if type(suite) is cst.IndentedBlock else {}
        for stmt in suite.body:
            if id(stmt) in rest:
                self._branch(stmt, True)
            else:
                self.statement(stmt)

    def _branch(self, node: cst.CSTNode, once: bool) -> None:
        """Walk an `if` branch; in a one-time branch (training-only, lazy initialisation) the
        bindings count but the calls are not per-step, so the graph does not follow them."""
        saved = self.one_time
        self.one_time = saved or once
        if isinstance(node, cst.BaseSuite):
            self.block(node)
        else:
            self.statement(node)
        self.one_time = saved

    def statement(self, node: cst.CSTNode) -> None:
        kind = type(node)
        if kind is cst.SimpleStatementLine:
            for small in node.body:
                self.small(small)
        elif kind is cst.If:
            self.expr(node.test)
            once = {id(block) for block, _ in one_time_blocks(node)}
            self._branch(node.body, id(node.body) in once)
            if type(node.orelse) is cst.If:
                self._branch(node.orelse, id(node.orelse) in once)
            elif node.orelse is not None:
                self._branch(node.orelse.body, id(node.orelse) in once)
        elif kind is cst.For:
            self.expr(node.iter)
            self.note(node.target, None)
            self.bind(node.target, ["it", _enc(node.iter)])
            self.block(node.body)
            if node.orelse is not None:
                self.block(node.orelse.body)
        elif kind is cst.While:
            self.expr(node.test)
            self.block(node.body)
            if node.orelse is not None:
                self.block(node.orelse.body)
        elif kind is cst.With:
            for item in node.items:
                self.expr(item.item)
                if item.asname is not None:
                    self.note(item.asname.name, None)
                    self.bind(item.asname.name, ["enter", _enc(item.item)])
            self.block(node.body)
        elif kind in (cst.Try, cst.TryStar):
            self.block(node.body)
            for handler in node.handlers:
                if handler.name is not None:
                    self.note(handler.name.name, None)
                self.block(handler.body)
            for extra in (node.orelse, node.finalbody):
                if extra is not None:
                    self.block(extra.body)
        elif kind is cst.Match:
            self.expr(node.subject)
            for case in node.cases:
                self.expr(case.guard)
                self.block(case.body)
        elif kind in (cst.FunctionDef, cst.ClassDef):
            return  # nested definitions are functions of their own
        elif isinstance(node, cst.BaseCompoundStatement) or kind is cst.SimpleStatementSuite:
            for child in node.children:  # the rare rest
                if isinstance(child, (cst.BaseStatement, cst.BaseSuite)):
                    self.statement(child)
                elif isinstance(child, cst.BaseExpression):
                    self.expr(child)
        elif isinstance(node, cst.BaseSuite):
            self.block(node)

    def small(self, node: cst.CSTNode) -> None:
        kind = type(node)
        if kind is cst.Assign:
            self.expr(node.value)
            value = _enc(node.value)
            state = value_state(node.value)
            for target in node.targets:
                self.note(target.target, state)
                self.bind(target.target, value)
        elif kind is cst.AnnAssign:
            self.bind(node.target, ["ann", _ann(node.annotation.annotation)])
            if node.value is not None:
                self.expr(node.value)
                self.note(node.target, value_state(node.value))
                self.bind(node.target, _enc(node.value))
        elif kind is cst.Return:
            if node.value is not None:
                self.expr(node.value)
                encoded = _enc(node.value)
                if encoded is not None and len(self.returns) < _MAX_RETURNS:
                    self.returns.append(encoded)
        elif kind in (cst.Expr, cst.AugAssign):
            self.expr(node.value)
            if kind is cst.AugAssign:
                self.note(node.target, SET)
        elif kind is cst.Assert:
            self.expr(node.test)
            self.expr(node.msg)
        elif kind is cst.Raise:
            self.expr(node.exc)

    def expr(self, node: cst.CSTNode | None) -> None:
        """Record the calls (and walrus / comprehension bindings) inside an expression."""
        stack = [node]
        while stack:
            node = stack.pop()
            if node is None:
                continue
            kind = type(node)
            if kind is cst.Call:
                self._call(node)
                stack.append(node.func)
                stack.extend(arg.value for arg in node.args)
            elif kind is cst.Name or kind.__name__ in _LEAVES:
                continue
            elif kind is cst.Attribute:
                stack.append(node.value)
            elif kind is cst.Subscript:
                stack.append(node.value)
                for element in node.slice:
                    part = element.slice
                    stack.extend((part.value,) if type(part) is cst.Index else (part.lower, part.upper, part.step))
            elif kind is cst.BinaryOperation or kind is cst.BooleanOperation:
                stack.extend((node.left, node.right))
            elif kind is cst.UnaryOperation:
                stack.append(node.expression)
            elif kind is cst.Comparison:
                stack.append(node.left)
                stack.extend(c.comparator for c in node.comparisons)
            elif kind is cst.IfExp:
                stack.extend((node.test, node.body, node.orelse))
            elif kind in (cst.Tuple, cst.List, cst.Set):
                stack.extend(e.value for e in node.elements)
            elif kind is cst.Dict:
                for element in node.elements:
                    stack.extend((element.key, element.value) if type(element) is cst.DictElement else (element.value,))
            elif kind in (cst.ListComp, cst.SetComp, cst.GeneratorExp, cst.DictComp):
                stack.extend((node.key, node.value) if kind is cst.DictComp else (node.elt,))
                comp = node.for_in
                while comp is not None:
                    self.bind(comp.target, ["it", _enc(comp.iter)])
                    stack.append(comp.iter)
                    stack.extend(condition.test for condition in comp.ifs)
                    comp = comp.inner_for_in
            elif kind is cst.NamedExpr:
                self.note(node.target, value_state(node.value))
                self.bind(node.target, _enc(node.value))
                stack.append(node.value)
            elif kind is cst.Lambda:
                stack.append(node.body)
            elif kind is cst.Await or kind is cst.StarredElement:
                stack.append(node.expression if kind is cst.Await else node.value)
            elif kind is cst.FormattedString:
                stack.extend(p.expression for p in node.parts if type(p) is cst.FormattedStringExpression)
            elif kind in (cst.Yield,):
                stack.append(node.value if not isinstance(node.value, cst.From) else node.value.item)
                if node.value is not None and not isinstance(node.value, cst.From):
                    encoded = _enc(node.value)
                    if encoded is not None and len(self.yields) < _MAX_RETURNS:
                        self.yields.append(encoded)
            else:
                stack.extend(c for c in node.children if isinstance(c, cst.BaseExpression))

    def _call(self, node: cst.Call) -> None:
        func = node.func
        if type(func) is cst.Attribute and func.attr.value in _MUTATORS and node.args:
            # `layers.append(Layer(i))`, `self.blocks.extend(blocks)`: what the container holds.
            item = node.args[-1].value
            held = _enc(item)
            if held is not None:
                self._holds(func.value, ["l", [["star", held] if func.attr.value == "extend" else held]])
        if (type(func) is cst.Attribute and func.attr.value in _LIBRARY_METHODS
                and not (type(func.value) is cst.Name and func.value.value == self.self_name)):
            return  # x.view(...), d.items(): a tensor's or a container's, never followed
        encoded = _enc(node)
        if encoded is None or encoded[1] is None:
            return
        if len(encoded) == 2:
            # Functions passed by name may be called (callbacks): keep name-like arguments.
            # In their positions (None for any other argument), up to the first keyword or star:
            # a parameter's value is then read at its call sites.
            refs: list = []
            for arg in node.args:
                if arg.keyword is not None or arg.star:
                    break
                refs.append(_ref(arg.value))
            while refs and refs[-1] is None:
                refs.pop()
            if refs:
                encoded.append(refs)
        key = repr(encoded)
        if key not in self._seen_calls:
            self._seen_calls.add(key)
            # A one-time call (lazy set-up, a capture made once per batch size) is not followed
            # for regions, but what it passes still tells what a parameter holds.
            (self.once if self.one_time else self.calls).append(encoded)
            records = self.once_args if self.one_time else self.call_args
            self._call_index[key] = (records, len(records))
            records.append(argument_record(node))
        else:
            records, index = self._call_index[key]
            records[index] = join_records(records[index], argument_record(node))
        # self.add_module("name", m) / setattr(self, "name", m) register an attribute by name.
        func = node.func
        args = [a.value for a in node.args if a.keyword is None]
        if (isinstance(func, cst.Attribute) and func.attr.value in _REGISTER_MODULE
                and isinstance(func.value, cst.Name) and func.value.value == self.self_name
                and len(args) >= 2 and isinstance(args[0], cst.SimpleString)):
            self.record_attr(args[0].evaluated_value, _enc(args[1]))
        elif (isinstance(func, cst.Name) and func.value == "setattr" and len(args) == 3
              and isinstance(args[0], cst.Name) and args[0].value == self.self_name
              and isinstance(args[1], cst.SimpleString)):
            self.record_attr(args[1].evaluated_value, _enc(args[2]))


def _decorators(node: cst.FunctionDef) -> list[str]:
    names = []
    for decorator in node.decorators:
        name = dotted(decorator.decorator)
        if name in ("contextlib.contextmanager", "contextlib.asynccontextmanager"):
            name = "contextmanager"  # `with f(...) as v`: v is what f yields
        if name in ("staticmethod", "classmethod", "property", "functools.cached_property", "cached_property",
                    "contextmanager", "asynccontextmanager"):
            names.append(name.rsplit(".", 1)[-1])
    return names


def _params(node: cst.FunctionDef) -> list[list]:
    params = node.params
    ordered = list(params.posonly_params) + list(params.params)
    out = [[p.name.value, _ann(p.annotation.annotation) if p.annotation else None] for p in ordered]
    if isinstance(params.star_arg, cst.Param):
        out.append(["*" + params.star_arg.name.value, None])
    out.extend([p.name.value, _ann(p.annotation.annotation) if p.annotation else None] for p in params.kwonly_params)
    if params.star_kwarg is not None:
        out.append(["**" + params.star_kwarg.name.value, None])
    return out


def _is_constant(expr: Any) -> bool:
    """A value the graph learns nothing from (flags, strings, lists of names of things)."""
    if expr is None or expr in ("True", "False", "None") or expr == ["?"]:
        return True
    if type(expr) is list and expr[:1] == ["str"]:
        return True
    if type(expr) is list and expr[:1] in (["l"], ["t"]):
        return all(_is_constant(e) for e in expr[1])
    return False


def _add_attr(info: dict[str, Any], attr: str, method: str | None, value: Any) -> None:
    if _is_constant(value):
        return
    slot = info["attrs"].setdefault(attr, [])
    if len(slot) < _MAX_PER_NAME and [method, value] not in slot:
        slot.append([method, value])


def _classes(module: cst.Module) -> dict[str, dict[str, Any]]:
    """Every class (nested ones too) by qualified name: bases, method names, class-level attributes."""
    found: dict[str, dict[str, Any]] = {}

    def walk(body: Sequence[cst.CSTNode], prefix: str) -> None:
        for stmt in body:
            if isinstance(stmt, cst.ClassDef):
                qualname = prefix + stmt.name.value
                info: dict[str, Any] = {"bases": [_enc(b) for b in class_bases(stmt)],
                                        "methods": [], "attrs": {}}
                for item in suite_body(stmt.body):
                    if isinstance(item, cst.FunctionDef):
                        info["methods"].append(item.name.value)
                    elif isinstance(item, cst.SimpleStatementLine):
                        for small in item.body:
                            if isinstance(small, cst.AnnAssign) and isinstance(small.target, cst.Name):
                                _add_attr(info, small.target.value, None, ["ann", _ann(small.annotation.annotation)])
                            elif isinstance(small, cst.Assign):
                                for target in small.targets:
                                    if isinstance(target.target, cst.Name):
                                        _add_attr(info, target.target.value, None, _enc(small.value))
                found[qualname] = info
                walk(suite_body(stmt.body), qualname + ".")
            elif isinstance(stmt, cst.FunctionDef):
                walk(suite_body(stmt.body), prefix + stmt.name.value + ".")
            elif isinstance(stmt, (cst.If, cst.Try, cst.With)):
                for child in compound_bodies(stmt):
                    walk(child, prefix)

    walk(module.body, "")
    return found


def _module_globals(module: cst.Module) -> dict[str, list]:
    """Module-level assignments (`ACT2FN = ...`, `Layer = Block`), unioned per name."""
    walker = _FunctionWalker(None, lambda attr, value: None)
    stack: list[Sequence[cst.CSTNode]] = [module.body]
    while stack:
        for stmt in stack.pop():
            if isinstance(stmt, cst.SimpleStatementLine):
                for small in stmt.body:
                    if isinstance(small, cst.Assign):
                        value = _enc(small.value)
                        for target in small.targets:
                            walker.bind(target.target, value)
                    elif isinstance(small, cst.AnnAssign):
                        walker.bind(small.target, ["ann", _ann(small.annotation.annotation)])
                        if small.value is not None:
                            walker.bind(small.target, _enc(small.value))
                    elif isinstance(small, cst.Expr):
                        walker.expr(small.value)  # `IMPLS.append(f)`, `REGISTRY.setdefault(k, f)`
            elif isinstance(stmt, (cst.If, cst.Try, cst.With)):
                stack.extend(compound_bodies(stmt))
    return walker.env


def callgraph_facts(module: cst.Module, imports: Any, functions: Sequence[Any], facts: Any) -> dict[str, Any]:
    """The call graph's view of one file (see the module docstring for the encoding)."""
    _TYPE_VARIABLES.clear()
    _TYPE_VARIABLES.update(_type_variables(module))
    try:
        return _callgraph_facts(module, imports, functions, facts)
    finally:
        _TYPE_VARIABLES.clear()


def _callgraph_facts(module: cst.Module, imports: Any, functions: Sequence[Any], facts: Any) -> dict[str, Any]:
    classes = _classes(module)
    out_functions: dict[str, dict[str, Any]] = {}
    for info in functions:
        node: cst.FunctionDef = info.node
        qualname: str = info.qualname
        owner = qualname.rsplit(".", 1)[0] if info.class_name is not None and "." in qualname else None
        if owner is not None and owner not in classes:
            owner = None
        decorators = _decorators(node)
        params = _params(node)
        self_name = None
        if owner is not None and "staticmethod" not in decorators and params and not params[0][0].startswith("*"):
            self_name = params[0][0]

        plain = {name for name, ann in params if ann is None}

        def record_attr(attr: str, value: list | None, _owner=owner, _qualname=qualname, _plain=plain) -> None:
            # `self.hidden_size = hidden_size` of an unannotated parameter tells the graph nothing.
            if _owner is not None and not (type(value) is str and value in _plain):
                _add_attr(classes[_owner], attr, _qualname, value)

        walker = _FunctionWalker(self_name, record_attr, owner.rsplit(".", 1)[-1] if owner is not None else None)
        walker.block(node.body)
        entry: dict[str, Any] = {"params": [name if ann is None else [name, ann] for name, ann in params],
                                 "calls": walker.calls}
        _argument_facts(entry, node, params, self_name, walker)
        if owner is not None:
            entry["class"] = owner
        if decorators:
            entry["decorators"] = decorators
        if walker.env:
            entry["env"] = walker.env
        if node.returns is not None:
            entry["returns_ann"] = _ann(node.returns.annotation)
        if walker.returns:
            entry["returns"] = walker.returns
        if walker.yields:
            entry["yields"] = walker.yields
        if walker.once:
            entry["once"] = walker.once
        out_functions[qualname] = entry
    _drop_unused_locals(out_functions, classes)
    return {
        "imports": {**imports.aliases, **imports.relative},
        "classes": classes,
        "functions": out_functions,
        "globals": _module_globals(module),
    }


def _argument_facts(entry: dict[str, Any], node: cst.FunctionDef, params: list[list], self_name: str | None,
                    walker: _FunctionWalker) -> None:
    """What each call passes None-wise ("args" in the order of "calls", "once_args" of "once"),
    the parameters' None-state defaults ("defaults"), those with another default ("optional")
    and the parameters the body binds again ("rebound")."""
    plain = {name for name, _ in params if not name.startswith("*") and name != self_name}
    kwargs_param = next((name[2:] for name, _ in params if name.startswith("**")), None)
    for field, records in (("args", walker.call_args), ("once_args", walker.once_args)):
        if records:
            entry[field] = [resolve_record(record, plain, kwargs_param, walker.name_states) for record in records]
    defaults, optional = default_states(node)
    if defaults:
        entry["defaults"] = defaults
    if optional:
        entry["optional"] = optional
    rebound = sorted(name for name in plain | {kwargs_param} if name in walker.name_states)
    if rebound:
        entry["rebound"] = rebound


def _roots(expr: Any, out: set[str]) -> None:
    """The names an expression looks up."""
    if type(expr) is str:
        out.add(expr)
        return
    if type(expr) is not list or not expr:
        return
    tag = expr[0]
    if tag in ("a", "i", "s", "ix", "it", "enter", "star", "lam"):
        _roots(expr[1], out)
    elif tag == "c":
        _roots(expr[1], out)
        for arg in expr[2] if len(expr) > 2 else ():
            _roots(arg, out)
        for arg in (expr[3] if len(expr) > 3 else {}).values():
            _roots(arg, out)
    elif tag in ("l", "t", "u"):
        for item in expr[1]:
            _roots(item, out)
    elif tag == "d":
        for item in expr[1] + expr[2]:
            _roots(item, out)


def _is_reference(expr: Any) -> bool:
    return type(expr) is str or (type(expr) is list and expr[:1] == ["a"]) or (
        type(expr) is list and expr[:1] == ["c"] and type(expr[1]) in (str, list) and _text_name(expr[1]) == "partial")


def _text_name(expr: Any) -> str:
    return expr if type(expr) is str else expr[2] if type(expr) is list and expr[:1] == ["a"] else ""


def _drop_plain_arguments(function: dict[str, Any]) -> None:
    """A call's name-like arguments stay only when they may hold a function, a module or a
    container: not a local bound only to computed values or constants."""
    env = function.get("env", {})
    for call in function["calls"] + function.get("once", []):
        if len(call) == 3 and call[0] == "c" and not _arg_aware(call[1]):
            # A parameter stays: a step handed on to the function that captures it
            # (`self._capture(decode_func, ...)`) is followed back to what its callers pass.
            kept = [None if type(arg) is str and arg in env and all(_is_constant(e) for e in env[arg])
                    else arg for arg in call[2]]
            while kept and kept[-1] is None:
                kept.pop()
            if kept:
                call[2] = kept
            else:
                call.pop()


def _arg_aware(func: Any) -> bool:
    return _text_name(func) in _ARG_AWARE


def _drop_unused_locals(functions: dict[str, dict[str, Any]], classes: dict[str, dict[str, Any]]) -> None:
    """Keep a local's assignments only when some call, return or attribute of the file can
    look the name up (directly or through another kept local): most locals of a forward are
    tensors nobody calls a method of through the graph."""
    needed: set[str] = set()
    for function in functions.values():
        _drop_plain_arguments(function)
        for expr in function["calls"] + function.get("once", []) + function.get("returns", []) + function.get("yields", []):
            _roots(expr, needed)
    for info in classes.values():
        for values in info["attrs"].values():
            for _, expr in values:
                _roots(expr, needed)
    pending = set(needed)
    while pending:
        name = pending.pop()
        for function in functions.values():
            for expr in function.get("env", {}).get(name, ()):
                found: set[str] = set()
                _roots(expr, found)
                pending |= found - needed
                needed |= found
    for function in functions.values():
        env = function.get("env")
        if env:
            kept = {name: values for name, values in env.items() if name in needed}
            if kept:
                function["env"] = kept
            else:
                del function["env"]
