"""Per-file facts for the cross-module call graph, gathered from the parse the rules use.

Nothing is resolved here: each function's calls, the values its local names may hold and the
attributes its class assigns to `self` are recorded as small symbolic expressions (JSON lists,
graphlint.analysis.facts.encoding), and graphlint.callgraph.graph evaluates them once every
linted file is known. The facts are cached with the file's analysis, so they must stay
JSON-serialisable and small.
"""
from __future__ import annotations

from typing import Any, Sequence

from graphlint.lazy import cst

from graphlint.analysis.argument_records import default_states, resolve_record
from graphlint.analysis.facts.encoding import ARG_AWARE, TYPE_VARIABLES, annotation, encode, passed_reference, type_variables
from graphlint.analysis.children import compound_bodies, suite_body
from graphlint.analysis.facts.function_walker import MAX_PER_NAME, FunctionWalker
from graphlint.analysis.names import class_bases, dotted

# The pseudo-function holding a module's top-level calls (not an identifier: no function has it).
MODULE_SCOPE = "<module>"
STAR_IMPORT = "*"


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
    out = [[p.name.value, annotation(p.annotation.annotation) if p.annotation else None] for p in ordered]
    if isinstance(params.star_arg, cst.Param):
        out.append(["*" + params.star_arg.name.value, None])
    out.extend([p.name.value, annotation(p.annotation.annotation) if p.annotation else None] for p in params.kwonly_params)
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
    if len(slot) < MAX_PER_NAME and [method, value] not in slot:
        slot.append([method, value])


def _classes(module: cst.Module) -> dict[str, dict[str, Any]]:
    """Every class (nested ones too) by qualified name: bases, method names, class-level attributes."""
    found: dict[str, dict[str, Any]] = {}
    _collect_classes(module.body, "", found)
    return found


def _collect_classes(body: Sequence[cst.CSTNode], prefix: str, found: dict[str, dict[str, Any]]) -> None:
    # Not a closure that calls itself: its cell would keep the tree in a reference cycle.
    for stmt in body:
        if isinstance(stmt, cst.ClassDef):
            qualname = prefix + stmt.name.value
            info: dict[str, Any] = {"bases": [encode(b) for b in class_bases(stmt)],
                                    "methods": [], "attrs": {}}
            for item in suite_body(stmt.body):
                if isinstance(item, cst.FunctionDef):
                    info["methods"].append(item.name.value)
                elif isinstance(item, cst.SimpleStatementLine):
                    for small in item.body:
                        if isinstance(small, cst.AnnAssign) and isinstance(small.target, cst.Name):
                            _add_attr(info, small.target.value, None, ["ann", annotation(small.annotation.annotation)])
                        elif isinstance(small, cst.Assign):
                            for target in small.targets:
                                if isinstance(target.target, cst.Name):
                                    _add_attr(info, target.target.value, None, encode(small.value))
            found[qualname] = info
            _collect_classes(suite_body(stmt.body), qualname + ".", found)
        elif isinstance(stmt, cst.FunctionDef):
            _collect_classes(suite_body(stmt.body), prefix + stmt.name.value + ".", found)
        elif isinstance(stmt, (cst.If, cst.Try, cst.With)):
            for child in compound_bodies(stmt):
                _collect_classes(child, prefix, found)


def _module_globals(module: cst.Module) -> dict[str, list]:
    """Module-level assignments (`ACT2FN = ...`, `Layer = Block`), unioned per name."""
    walker = FunctionWalker(None, lambda attr, value: None)
    stack: list[Sequence[cst.CSTNode]] = [module.body]
    while stack:
        for stmt in stack.pop():
            if isinstance(stmt, cst.SimpleStatementLine):
                for small in stmt.body:
                    if isinstance(small, cst.Assign):
                        value = encode(small.value)
                        for target in small.targets:
                            walker.bind(target.target, value)
                    elif isinstance(small, cst.AnnAssign):
                        walker.bind(small.target, ["ann", annotation(small.annotation.annotation)])
                        if small.value is not None:
                            walker.bind(small.target, encode(small.value))
                    elif isinstance(small, cst.Expr):
                        walker.expr(small.value)  # `IMPLS.append(f)`, `REGISTRY.setdefault(k, f)`
            elif isinstance(stmt, (cst.If, cst.Try, cst.With)):
                stack.extend(compound_bodies(stmt))
    return walker.env


def callgraph_facts(module: cst.Module, imports: Any, functions: Sequence[Any], facts: Any) -> dict[str, Any]:
    """The call graph's view of one file (see the module docstring for the encoding)."""
    TYPE_VARIABLES.clear()
    TYPE_VARIABLES.update(type_variables(module))
    try:
        return _callgraph_facts(module, imports, functions, facts)
    finally:
        TYPE_VARIABLES.clear()


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

        def record_attr(attr: str, value: list | None, _owner=owner, _qualname=qualname) -> None:
            # `self.model = model` of an unannotated parameter holds what the constructor's
            # callers pass (`Runner(model)`): the graph reads it at their call sites.
            if _owner is not None:
                _add_attr(classes[_owner], attr, _qualname, value)

        walker = FunctionWalker(self_name, record_attr, owner.rsplit(".", 1)[-1] if owner is not None else None)
        walker.block(node.body)
        entry: dict[str, Any] = {"params": [name if ann is None else [name, ann] for name, ann in params],
                                 "calls": walker.calls}
        _argument_facts(entry, node, params, self_name, walker)
        defaults = _default_values(node)
        if defaults:
            entry["default_values"] = defaults
        if owner is not None:
            entry["class"] = owner
        if decorators:
            entry["decorators"] = decorators
        if walker.env:
            entry["env"] = walker.env
        if node.returns is not None:
            entry["returns_ann"] = annotation(node.returns.annotation)
        if walker.returns:
            entry["returns"] = walker.returns
        if walker.yields:
            entry["yields"] = walker.yields
        if walker.once:
            entry["once"] = walker.once
        out_functions[qualname] = entry
    module_calls = _module_calls(module)
    if module_calls is not None:
        out_functions[MODULE_SCOPE] = module_calls
    _drop_unused_locals(out_functions, classes)
    return {
        # A star import under a key no name can have ("*0"): the import closure follows it.
        "imports": {**imports.aliases, **imports.relative,
                    **{f"{STAR_IMPORT}{index}": target for index, target in enumerate(imports.stars)}},
        "classes": classes,
        "functions": out_functions,
        "globals": _module_globals(module),
    }


def _module_calls(module: cst.Module) -> dict[str, Any] | None:
    """The calls of the module's own statements, as a function of no parameters named
    MODULE_SCOPE: a script builds its engine there (`model = Model.from_pretrained(...)` under
    `if __name__ == "__main__":`, then `Engine(model, cache)`), so they are call sites whose
    arguments the called functions' parameters hold. Nothing calls it, so it is in no region;
    its names are the module's globals, so it keeps no locals of its own."""
    walker = FunctionWalker(None, lambda attr, value: None)
    for stmt in module.body:
        walker.statement(stmt)
    if not any(len(call) > 2 for call in walker.calls):
        return None
    entry: dict[str, Any] = {"params": [], "calls": walker.calls}
    if walker.call_args:
        entry["args"] = [resolve_record(record, set(), None, walker.name_states) for record in walker.call_args]
    return entry


def _default_values(node: cst.FunctionDef) -> dict[str, Any]:
    """Unannotated parameters whose default names something (`backbone_cls=DEFAULT_BACKBONE_CLS`):
    the value a call that leaves them out runs. A name-like string default (`name: str =
    "forward"`) too: the attribute a `getattr(obj, name)` looks up."""
    params = node.params
    found: dict[str, Any] = {}
    for param in [*params.posonly_params, *params.params, *params.kwonly_params]:
        default = param.default
        if type(default) is cst.SimpleString:
            literal = passed_reference(default)
            if literal is not None:
                found[param.name.value] = literal
            continue
        if param.annotation is not None or default is None:
            continue
        if (type(default) is cst.Name and default.value not in ("None", "True", "False")) or type(default) is cst.Attribute:
            found[param.name.value] = encode(default)
    return found


def _argument_facts(entry: dict[str, Any], node: cst.FunctionDef, params: list[list], self_name: str | None,
                    walker: FunctionWalker) -> None:
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
    # Tests of parameters the body never binds again: what a caller passes decides them.
    guards = {str(index): [list(guard) for guard in held if guard[0] in plain and guard[0] not in walker.name_states]
              for index, held in walker.call_guards.items()}
    guards = {index: held for index, held in guards.items() if held}
    if guards:
        entry["call_guards"] = guards


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
    def plain(arg: Any) -> bool:
        return type(arg) is str and arg in env and all(_is_constant(e) for e in env[arg])

    for call in function["calls"] + function.get("once", []):
        if len(call) in (3, 4) and call[0] == "c" and not _arg_aware(call[1]):
            # A parameter stays: a step handed on to the function that captures it
            # (`self._capture(decode_func, ...)`) is followed back to what its callers pass.
            kept = [None if plain(arg) else arg for arg in call[2]]
            while kept and kept[-1] is None:
                kept.pop()
            keywords = {name: arg for name, arg in (call[3] if len(call) == 4 else {}).items() if not plain(arg)}
            del call[2:]
            if kept or keywords:
                call.append(kept)
            if keywords:
                call.append(keywords)


def _arg_aware(func: Any) -> bool:
    return _text_name(func) in ARG_AWARE


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
