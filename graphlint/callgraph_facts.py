"""Per-file facts for the cross-module call graph, gathered from the parse the rules use.

Nothing is resolved here: each function's calls, the values its local names may hold and the
attributes its class assigns to `self` are recorded as small symbolic expressions (JSON lists),
and graphlint.callgraph evaluates them once every linted file is known. The facts are cached
with the file's analysis, so they must stay JSON-serialisable and small.

Expression encoding (first item is the tag):
  ["n", name]            a name              ["a", E, attr]        an attribute
  ["c", E, [args], {kw}] a call              ["i", E] / ["s", E]   an index / a slice of E
  ["ix", E, k]           E[k], k a literal   ["it", E]             an element of iterating E
  ["l", [E..]]           a list/set (or comprehension) of those elements
  ["t", [E..]]           a tuple literal     ["d", [K..], [V..]]  a dict literal or comprehension
  ["u", [E..]]           one of (if-else, `or`)
  ["str", s]             a short string literal
  ["ann", T]             a value of annotated type T
  ["?"]                  a value the call graph cannot follow (arithmetic, a literal)
Annotations: ["ty", dotted, [T..]] (`dict[str, Rope]`), ["tu", [T..]] (`A | B`).
"""
from __future__ import annotations

from typing import Any, Sequence

import libcst as cst

from graphlint.names import dotted

_MAX_DEPTH = 6  # deeper expressions are never receivers the call graph can follow
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
        return ["tu", [_ann(node.left, depth + 1), _ann(node.right, depth + 1)]]
    if isinstance(node, cst.Subscript):
        outer = dotted(node.value)
        if outer is None:
            return None
        args = [_ann(e.slice.value, depth + 1) if isinstance(e.slice, cst.Index) else None for e in node.slice]
        return ["ty", outer, args]
    if isinstance(node, cst.List):
        return ["ty", "[]", [_ann(e.value, depth + 1) for e in node.elements]]
    if isinstance(node, cst.Ellipsis):
        return ["ty", "...", []]
    name = dotted(node)
    return ["ty", name, []] if name is not None else None


def _enc(node: cst.CSTNode | None, depth: int = 0) -> list | None:
    """An expression in the encoding above; None for what the call graph cannot use."""
    if node is None or depth > _MAX_DEPTH:
        return None
    d = depth + 1
    if isinstance(node, cst.Name):
        return ["n", node.value]
    if isinstance(node, cst.Attribute):
        inner = _enc(node.value, d)
        return ["a", inner, node.attr.value] if inner is not None else None
    if isinstance(node, cst.Call):
        args: list = []
        kwargs: dict[str, Any] = {}
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
        return ["c", _enc(node.func, d), args, kwargs]
    if isinstance(node, cst.Subscript):
        inner = _enc(node.value, d)
        if inner is None:
            return None
        if len(node.slice) == 1:
            part = node.slice[0].slice
            if isinstance(part, cst.Slice):
                return ["s", inner]
            if isinstance(part, cst.Index) and isinstance(part.value, cst.Integer):
                return ["ix", inner, int(part.value.value, 0)]
        return ["i", inner]
    if isinstance(node, (cst.List, cst.Set)):
        return ["l", [_enc(e.value, d) for e in node.elements]]
    if isinstance(node, cst.Tuple):
        return ["t", [_enc(e.value, d) for e in node.elements]]
    if isinstance(node, (cst.ListComp, cst.SetComp, cst.GeneratorExp)):
        return ["l", [_enc(node.elt, d)]]
    if isinstance(node, cst.Dict):
        keys = [_enc(e.key, d) for e in node.elements if isinstance(e, cst.DictElement)]
        values = [_enc(e.value, d) for e in node.elements if isinstance(e, cst.DictElement)]
        return ["d", keys, values]
    if isinstance(node, cst.DictComp):
        return ["d", [_enc(node.key, d)], [_enc(node.value, d)]]
    if isinstance(node, cst.IfExp):
        return ["u", [_enc(node.body, d), _enc(node.orelse, d)]]
    if isinstance(node, cst.BooleanOperation):
        return ["u", [_enc(node.left, d), _enc(node.right, d)]]
    if isinstance(node, cst.SimpleString) and len(node.value) <= 66:
        try:
            return ["str", node.evaluated_value]
        except (ValueError, SyntaxError):
            return None
    if isinstance(node, cst.NamedExpr):
        return _enc(node.value, depth)
    if isinstance(node, cst.Await):
        return _enc(node.expression, depth)
    return None


class _FunctionWalker:
    """One pass over a function body: local bindings, calls, returns and `self.x = ...`."""

    def __init__(self, self_name: str | None, record_attr):
        self.self_name = self_name
        self.record_attr = record_attr
        self.env: dict[str, list] = {}
        self.calls: list = []
        self._seen_calls: set[str] = set()
        self.returns: list = []

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
        elif (isinstance(target, cst.Attribute) and isinstance(target.value, cst.Name)
              and target.value.value == self.self_name and self.self_name is not None and value != ["?"]):
            self.record_attr(target.attr.value, value)

    def walk(self, node: cst.CSTNode) -> None:
        if isinstance(node, (cst.FunctionDef, cst.ClassDef)):
            return  # nested definitions are functions of their own
        if isinstance(node, cst.Assign):
            value = _enc(node.value)
            for target in node.targets:
                self.bind(target.target, value)
        elif isinstance(node, cst.AnnAssign):
            value = ["ann", _ann(node.annotation.annotation)]
            self.bind(node.target, value)
            if node.value is not None:
                self.bind(node.target, _enc(node.value))
        elif isinstance(node, (cst.For, cst.CompFor)):
            self.bind(node.target, ["it", _enc(node.iter)])
        elif isinstance(node, cst.NamedExpr):
            self.bind(node.target, _enc(node.value))
        elif isinstance(node, cst.WithItem) and node.asname is not None:
            self.bind(node.asname.name, ["enter", _enc(node.item)])
        elif isinstance(node, cst.Return) and node.value is not None and len(self.returns) < _MAX_RETURNS:
            encoded = _enc(node.value)
            if encoded is not None:
                self.returns.append(encoded)
        elif isinstance(node, cst.Call):
            self._call(node)
        for child in node.children:
            self.walk(child)

    def _call(self, node: cst.Call) -> None:
        encoded = _enc(node)
        if encoded is None or encoded[1] is None:
            return
        key = repr(encoded)
        if key not in self._seen_calls:
            self._seen_calls.add(key)
            self.calls.append(encoded)
        # self.add_module("name", m) / setattr(self, "name", m) register an attribute by name.
        func = node.func
        args = [a.value for a in node.args if a.keyword is None]
        if (isinstance(func, cst.Attribute) and func.attr.value in ("add_module", "register_module")
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
        if name in ("staticmethod", "classmethod", "property", "functools.cached_property", "cached_property"):
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


def _suite(suite: cst.BaseSuite) -> Sequence[cst.CSTNode]:
    return suite.body if isinstance(suite, cst.IndentedBlock) else ()


def _classes(module: cst.Module) -> dict[str, dict[str, Any]]:
    """Every class (nested ones too) by qualified name: bases, methods, class-level attributes."""
    found: dict[str, dict[str, Any]] = {}

    def walk(body: Sequence[cst.CSTNode], prefix: str) -> None:
        for stmt in body:
            if isinstance(stmt, cst.ClassDef):
                qualname = prefix + stmt.name.value
                info: dict[str, Any] = {"bases": [_enc(b.value) for b in stmt.bases if b.keyword is None],
                                        "methods": {}, "attrs": {}}
                for item in _suite(stmt.body):
                    if isinstance(item, cst.FunctionDef):
                        info["methods"][item.name.value] = _decorators(item)
                    elif isinstance(item, cst.SimpleStatementLine):
                        for small in item.body:
                            if isinstance(small, cst.AnnAssign) and isinstance(small.target, cst.Name):
                                info["attrs"].setdefault(small.target.value, []).append(
                                    [None, ["ann", _ann(small.annotation.annotation)]])
                            elif isinstance(small, cst.Assign):
                                for target in small.targets:
                                    if isinstance(target.target, cst.Name):
                                        info["attrs"].setdefault(target.target.value, []).append(
                                            [None, _enc(small.value)])
                found[qualname] = info
                walk(_suite(stmt.body), qualname + ".")
            elif isinstance(stmt, cst.FunctionDef):
                walk(_suite(stmt.body), prefix + stmt.name.value + ".")
            elif isinstance(stmt, (cst.If, cst.Try, cst.With)):
                for child in _compound_bodies(stmt):
                    walk(child, prefix)

    walk(module.body, "")
    return found


def _compound_bodies(stmt: cst.CSTNode) -> list[Sequence[cst.CSTNode]]:
    bodies: list[Sequence[cst.CSTNode]] = []
    if isinstance(stmt, (cst.If, cst.With)):
        bodies.append(_suite(stmt.body))
        orelse = getattr(stmt, "orelse", None)
        if isinstance(orelse, cst.If):
            bodies.extend(_compound_bodies(orelse))
        elif isinstance(orelse, cst.Else):
            bodies.append(_suite(orelse.body))
    elif isinstance(stmt, cst.Try):
        bodies.append(_suite(stmt.body))
        bodies.extend(_suite(h.body) for h in stmt.handlers)
    return bodies


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
            elif isinstance(stmt, (cst.If, cst.Try, cst.With)):
                stack.extend(_compound_bodies(stmt))
    return walker.env


def callgraph_facts(module: cst.Module, imports: Any, functions: Sequence[Any], facts: Any) -> dict[str, Any]:
    """The call graph's view of one file (see the module docstring for the encoding)."""
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

        def record_attr(attr: str, value: list | None, _owner=owner, _qualname=qualname) -> None:
            if _owner is not None and value is not None:
                slot = classes[_owner]["attrs"].setdefault(attr, [])
                if len(slot) < _MAX_PER_NAME:
                    slot.append([_qualname, value])

        walker = _FunctionWalker(self_name, record_attr)
        for stmt in _suite(node.body) or getattr(node.body, "body", ()):
            walker.walk(stmt)
        entry: dict[str, Any] = {"params": params, "calls": walker.calls}
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
        out_functions[qualname] = entry
    return {
        "imports": {**imports.aliases, **imports.relative},
        "classes": classes,
        "functions": out_functions,
        "globals": _module_globals(module),
    }
