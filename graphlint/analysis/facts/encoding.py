"""The expression encoding of the per-file call facts: what a call, a name, an attribute or
an annotation is, as small JSON lists the call graph evaluates once every linted file is known
(graphlint.callgraph.values).

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

from typing import Any

from graphlint.lazy import cst

from graphlint.analysis import catalog
from graphlint.analysis.names import dotted

_MAX_DEPTH = 12  # deeper expressions are never receivers the call graph can follow (`M(c).to(d).eval()` is 9)


def annotation(node: cst.BaseExpression | None, depth: int = 0) -> list | None:
    """An annotation as a type expression."""
    if node is None or depth > _MAX_DEPTH:
        return None
    if isinstance(node, cst.SimpleString):
        try:
            return annotation(cst.parse_expression(node.evaluated_value.strip()), depth + 1)
        except (cst.ParserSyntaxError, ValueError):
            return None
    if isinstance(node, cst.BinaryOperation) and isinstance(node.operator, cst.BitOr):
        parts = [p for p in (annotation(node.left, depth + 1), annotation(node.right, depth + 1)) if p not in ("None", None)]
        return parts[0] if len(parts) == 1 else ["tu", parts] if parts else None
    if isinstance(node, cst.Subscript):
        outer = dotted(node.value)
        if outer is None:
            return None
        if outer in ("Optional", "typing.Optional") and len(node.slice) == 1 and isinstance(node.slice[0].slice, cst.Index):
            return annotation(node.slice[0].slice.value, depth + 1)
        args = [annotation(e.slice.value, depth + 1) if isinstance(e.slice, cst.Index) else None for e in node.slice]
        return ["ty", outer, args]
    if isinstance(node, cst.List):
        return ["ty", "[]", [annotation(e.value, depth + 1) for e in node.elements]]
    if isinstance(node, cst.Ellipsis):
        return "..."
    name = dotted(node)  # a plain name: ["ty", name, []] written short
    if name in TYPE_VARIABLES:
        # `ops: List[T]`, `state: StateT | None`: a type variable says what its bound says, or
        # nothing (the values at the call sites decide).
        bound = TYPE_VARIABLES[name]
        return annotation(bound, depth + 1) if bound is not None else None
    return name


# The file's type variables (`T = TypeVar("T", bound=Base)`) while its facts are encoded.
TYPE_VARIABLES: dict[str, cst.BaseExpression | None] = {}


def type_variables(module: cst.Module) -> dict[str, cst.BaseExpression | None]:
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
ARG_AWARE = frozenset({
    "list", "tuple", "sorted", "reversed", "iter", "set", "frozenset", "enumerate", "zip", "next", "dict",
    "getattr", "super", "partial", "wraps", "lru_cache", "cache", "islice", "chain",
}) | catalog.names("call_facts", "arg_aware") | frozenset(
    # What a compiled, scripted or graphed callable runs (graphlint/data/call_graph.toml).
    name.rsplit(".", 1)[-1] for name in catalog.call_graph("wraps_callable", "names"))


def reference(node: cst.BaseExpression) -> list | str | None:
    """`f` or `self.helper` (a possible callback) as an expression; None otherwise."""
    if type(node) is cst.Name:
        return node.value
    if type(node) is cst.Attribute and type(node.value) in (cst.Name, cst.Attribute):
        inner = reference(node.value)
        return ["a", inner, node.attr.value] if inner is not None else None
    return None


def passed_reference(node: cst.BaseExpression) -> list | str | None:
    """What a call site passes that the callee may look up: a reference, a string literal
    spelled as an identifier (`run(layer, "forward")` into `getattr(obj, name)`), or a lambda
    that makes one call (`_capture_cuda_graph(lambda: run_loop(inputs, steps))`: the step)."""
    if type(node) is cst.SimpleString:
        value = _short_text(node)
        return ["str", value] if value is not None and value.isidentifier() else None
    if type(node) is cst.Lambda and type(node.body) is cst.Call:
        return encode(node)
    if type(node) is cst.Call:
        # What a call returns, handed on (`cu_call(cudart.cudaGraphConditionalHandleCreate(g))`):
        # the callee alone, whose result the evaluation knows (a library's object, an instance).
        callee = reference(node.func)
        return ["c", callee] if callee is not None else None
    return reference(node)


def _short_text(node: cst.SimpleString) -> str | None:
    """The text of a short str literal (not bytes, at most 64 characters quoted)."""
    if len(node.value) > 66:
        return None
    try:
        value = node.evaluated_value
    except (ValueError, SyntaxError):
        return None
    # A bytes literal is no module or attribute name, and JSON cannot hold it.
    return value if isinstance(value, str) else None


def arg_aware(func: Any) -> bool:
    """Whether an encoded callee's calls keep every argument (see `_keeps_arguments`)."""
    return _keeps_arguments(func if type(func) is str else func[2] if type(func) is list and func[:1] == ["a"] else "")


def _keeps_arguments(name: str) -> bool:
    """A call of this name keeps every argument: a class, a builtin that reads its arguments,
    `cls` in a classmethod."""
    return name in ARG_AWARE or name[:1].isupper() or name == "cls"


def _constructs(node: cst.BaseExpression) -> bool:
    """A call of a class by its name (`nn.Linear(...)`, `Block(cfg)`)."""
    if type(node) is not cst.Call:
        return False
    func = node.func
    name = func.attr.value if type(func) is cst.Attribute else func.value if type(func) is cst.Name else ""
    return name[:1].isupper()


def encode(node: cst.CSTNode | None, depth: int = 0) -> list | str | None:
    """An expression in the encoding above; None for what the call graph cannot use."""
    if node is None or depth > _MAX_DEPTH:
        return None
    d = depth + 1
    if type(node) is cst.Name:
        return node.value
    if type(node) is cst.Attribute:
        inner = encode(node.value, d)
        return ["a", inner, node.attr.value] if inner is not None else None
    if type(node) is cst.Call:
        func = encode(node.func, d)
        name = node.func.attr.value if type(node.func) is cst.Attribute else (
            node.func.value if type(node.func) is cst.Name else "")
        args: list = []
        kwargs: dict[str, Any] = {}
        # A class's constructor arguments too (`LayerStack(layers)`, `Engine(model)`, `cls(config)`
        # in a classmethod): what an instance holds often comes from them.
        if _keeps_arguments(name):
            for arg in node.args:
                if arg.keyword is not None:
                    kwargs[arg.keyword.value] = encode(arg.value, d)
                elif arg.star:
                    args.append(["star", encode(arg.value, d)])
                else:
                    args.append(encode(arg.value, d))
            # Trailing unknown arguments carry nothing; dropping them keeps the cache small.
            while args and args[-1] is None:
                args.pop()
            kwargs = {k: v for k, v in kwargs.items() if v is not None}
        else:
            # A module handed to a helper that returns it (`layer_init(nn.Linear(...), std=0.01)`):
            # the constructor, in its position, is what the helper's parameter holds.
            for arg in node.args:
                if arg.keyword is not None or arg.star:
                    break
                args.append(encode(arg.value, d) if _constructs(arg.value) else None)
            while args and args[-1] is None:
                args.pop()
        # Other calls' arguments do not shape their result; the call records add the
        # name-like ones (possible callbacks) themselves.
        return ["c", func] + ([args, kwargs] if kwargs else [args] if args else [])
    if type(node) is cst.Subscript:
        inner = encode(node.value, d)
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
        return ["l", [encode(e.value, d) for e in node.elements]]
    if type(node) is cst.Tuple:
        return ["t", [encode(e.value, d) for e in node.elements]]
    if type(node) in (cst.ListComp, cst.SetComp, cst.GeneratorExp):
        return ["l", [encode(node.elt, d)]]
    if type(node) is cst.Dict:
        keys = [encode(e.key, d) for e in node.elements if type(e) is cst.DictElement]
        values = [encode(e.value, d) for e in node.elements if type(e) is cst.DictElement]
        return ["d", keys, values]
    if type(node) is cst.DictComp:
        return ["d", [encode(node.key, d)], [encode(node.value, d)]]
    if type(node) is cst.IfExp:
        return ["u", [encode(node.body, d), encode(node.orelse, d)]]
    if type(node) is cst.BooleanOperation:
        return ["u", [encode(node.left, d), encode(node.right, d)]]
    if type(node) is cst.SimpleString:
        value = _short_text(node)
        return ["str", value] if value is not None else None
    if type(node) is cst.Lambda:
        body = encode(node.body, d)
        params = [p.name.value for p in (*node.params.posonly_params, *node.params.params, *node.params.kwonly_params)]
        return ["lam", body, params] if body is not None else None
    if type(node) is cst.NamedExpr:
        return encode(node.value, depth)
    if type(node) is cst.Await:
        return encode(node.expression, depth)
    return None


def is_library_method(func: cst.BaseExpression) -> bool:
    """`x.view`, `out.copy_`: a tensor's or a container's method, never a linted function."""
    return type(func) is cst.Attribute and (func.attr.value in LIBRARY_METHODS or func.attr.value.endswith("_"))




# Tensor, container and string methods: recording their calls would cost the cache most of
# Tensor, container and string methods: recording their calls would cost the cache most of
# its size and resolve nothing (the graph follows the receiver's own calls, recorded apart).
LIBRARY_METHODS = catalog.names("call_facts", "library_methods")
