"""What a call passes for each argument, as far as None goes: None, certainly not None, or
the caller's own parameter passed on (graphlint.callgraph.arguments.argument_states joins the records of
the calls that reach a captured function).

States: NONE ("N"), SET ("V": an arithmetic result, a container, a tensor method's result), a
literal ("L" + its repr: `True`, `-1`, `'decode'`; never None either), "=name" (the caller's
parameter `name`, passed on; "=**name" its `**` parameter), None (unknown). Nothing is
resolved here: a plain name is looked up among the function's own parameters and local
bindings only.
"""
from __future__ import annotations

import ast
from typing import Any

from graphlint.lazy import cst

from graphlint.analysis import catalog

NONE = "N"
SET = "V"
LITERAL = "L"  # + repr of the value: "LTrue", "L-1", "L'decode'"

# Node types, by name, whose value is never None: literals, containers, arithmetic and
# comparisons (a tensor expression is a tensor), lambdas.
_NEVER_NONE = frozenset({"Integer", "Float", "Imaginary", "SimpleString", "ConcatenatedString", "FormattedString",
                         "List", "Tuple", "Set", "Dict", "ListComp", "SetComp", "DictComp", "GeneratorExp",
                         "Lambda", "BinaryOperation", "UnaryOperation", "Comparison"})
# A tensor's (or a container's) own methods return a value (`x.to(d)`, `x.view(-1)`).
_VALUE_METHODS = catalog.names("call_facts", "library_methods")


def is_literal(state: Any) -> bool:
    return type(state) is str and state.startswith(LITERAL)


def never_none(state: Any) -> bool:
    """SET or a literal: a value that is certainly not None."""
    return state == SET or is_literal(state)


def literal_value(state: str) -> Any:
    return ast.literal_eval(state[len(LITERAL):])


def _literal(node: cst.BaseExpression) -> str | None:
    """The state of a bool, int or string literal (`-1` included); None for anything else."""
    kind = type(node)
    if kind is cst.Name and node.value in ("True", "False"):
        return LITERAL + node.value
    if kind is cst.UnaryOperation and type(node.operator) is cst.Minus and type(node.expression) is cst.Integer:
        inner = _literal(node.expression)
        return LITERAL + repr(-literal_value(inner)) if inner is not None else None
    if kind is cst.Integer or kind is cst.SimpleString:
        try:
            value = ast.literal_eval(node.value)
        except (ValueError, SyntaxError):
            return None
        return LITERAL + repr(value) if type(value) in (int, str) else None
    return None


def value_state(node: cst.BaseExpression | None) -> Any:
    """NONE, SET, a literal, ("ref", name) for a plain name (the caller resolves it), or None."""
    if node is None:
        return None
    literal = _literal(node)
    if literal is not None:
        return literal
    kind = type(node)
    if kind is cst.Name:
        if node.value == "None":
            return NONE
        return ("ref", node.value)
    if kind.__name__ in _NEVER_NONE:
        return SET
    if kind is cst.Call:
        func = node.func
        if type(func) is cst.Attribute and func.attr.value in _VALUE_METHODS:
            return SET
        return None
    if kind is cst.IfExp:
        body, orelse = value_state(node.body), value_state(node.orelse)
        return body if body == orelse else None
    if kind is cst.NamedExpr:
        return value_state(node.value)
    return None


def argument_record(call: cst.Call) -> list:
    """[positional states, {keyword: state}] of a call; a `*args` ends the positional list with
    "*", a `**kwargs` is the keyword "**" (the name's state, a ("ref", name) when plain)."""
    positional: list = []
    keywords: dict[str, Any] = {}
    for arg in call.args:
        if arg.keyword is not None:
            keywords[arg.keyword.value] = value_state(arg.value)
        elif arg.star == "**":
            keywords["**"] = ("ref", arg.value.value) if type(arg.value) is cst.Name else None
        elif arg.star == "*":
            if not positional or positional[-1] != "*":
                positional.append("*")
        elif not positional or positional[-1] != "*":
            positional.append(value_state(arg.value))
    return [positional, keywords]


def join_records(first: list, second: list) -> list:
    """One record for two calls with the same callee encoding: what both agree on."""
    positional = [a if a == b else None for a, b in zip(first[0], second[0])]
    longer = first[0] if len(first[0]) > len(second[0]) else second[0]
    # Passed by one and left to the default by the other: unknown (a "*" stays a "*").
    positional += ["*" if item == "*" else None for item in longer[len(positional):]]
    keys = first[1].keys() | second[1].keys()
    keywords = {key: first[1][key] if first[1].get(key, 0) == second[1].get(key, 1) else None for key in keys}
    return [positional, keywords]


def resolve_record(record: list, params: set[str], kwargs_param: str | None, states: dict[str, list]) -> list:
    """A record with its ("ref", name) states resolved against the function: a parameter it
    never rebinds is "=name" (its `**` parameter "=**name"), a local bound only to None (or
    only to values never None) is that, anything else unknown."""
    return [[_resolve(s, params, kwargs_param, states) for s in record[0]],
            {k: _resolve(v, params, kwargs_param, states) for k, v in record[1].items()}]


def _resolve(state: Any, params: set[str], kwargs_param: str | None, states: dict[str, list], depth: int = 0) -> Any:
    # Module-level: a closure that calls itself is a reference cycle, garbage for the collector.
    if type(state) is not tuple:
        return state
    name = state[1]
    if name in params or name == kwargs_param:
        if name in states:
            return None  # rebound somewhere in the function
        return f"=**{name}" if name == kwargs_param else f"={name}"
    bound = states.get(name)
    if not bound or depth > 4:
        return None  # a global, a closure's, a builtin: not followed
    found = {_resolve(item, params, kwargs_param, states, depth + 1) for item in bound}
    if len(found) != 1:
        return None
    only = found.pop()
    return None if only is None or only.startswith("=**") else only


def default_states(function: cst.FunctionDef) -> tuple[dict[str, str], list[str]]:
    """The parameters whose default is None (NONE), a literal or a value never None (SET), and
    those with a default of any other kind."""
    params = function.params
    found: dict[str, str] = {}
    others: list[str] = []
    for param in [*params.posonly_params, *params.params, *params.kwonly_params]:
        if param.default is not None:
            state = value_state(param.default)
            if state == NONE or never_none(state):
                found[param.name.value] = state
            else:
                others.append(param.name.value)
    return found, others
