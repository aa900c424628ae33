"""Which code of a function runs only under which tests: when a name is None (or is not), and
when a configuration test holds (or does not).

The walk of a function marks each finding with the guards it lies under: `if attention_mask is
not None and 0.0 in attention_mask:` guards the membership test with (`attention_mask`, not
None); `else:` of `if self.model.config.model_type == ModelType.Flamingo:` guards its arm with
that test false. The same walk marks a capture site with the tests it sits under. The call
graph then knows, for a captured function, what every call that reaches it passes
(graphlint.callgraph.arguments.argument_states) and which configuration tests hold wherever the capture
happens; a finding whose guard contradicts either lies in code the capture never runs.

Guards are (key, state) pairs: (a plain name, NONE | SET) for a None test, (a plain name,
TRUTHY | FALSY) for a name read as a flag (`if spec:`), (a plain name, "c" or "n" + operator +
literal) for a name compared with a literal (`if top_k > 0:` holds, or does not), and ("cond:" +
the test, "T" | "F") for a configuration test. A literal a call passes (`top_k=-1`) contradicts
the guards of the arms it never takes (`contradicts`). A configuration test compares an
attribute chain of two segments or more (`config.model_type`, `self.args.compile`) with a
constant, or reads one as a flag; the chain is keyed by its last two segments, so
`self.model.config.model_type` where the capture is made and `model.config.model_type` inside
the captured function are one test.
"""
from __future__ import annotations

import operator

from graphlint.lazy import cst

from graphlint.analysis.argument_records import NONE, SET, is_literal, literal_value, never_none, value_state
from graphlint.analysis.names import dotted

Guards = tuple[tuple[str, str], ...]
_NO_GUARDS: tuple[Guards, Guards] = ((), ())
CONDITION = "cond:"
HOLDS, FAILS = "T", "F"
TRUTHY, FALSY = "t", "f"
# A name compared with a literal: "c" (the comparison holds) or "n" (it does not) + this.
_COMPARED = {"Equal": "==", "NotEqual": "!=", "LessThan": "<", "GreaterThan": ">", "LessThanEqual": "<=",
             "GreaterThanEqual": ">="}
_OPERATORS = {"==": operator.eq, "!=": operator.ne, "<": operator.lt, ">": operator.gt, "<=": operator.le,
              ">=": operator.ge}


def _chain(node: cst.BaseExpression) -> str | None:
    """An attribute chain of two segments or more by its last two (`self` aside)."""
    name = dotted(node) if type(node) is cst.Attribute else None
    if name is None:
        return None
    parts = name.split(".")
    if parts[0] == "self":
        parts = parts[1:]
    return ".".join(parts[-2:]) if len(parts) >= 2 else None


def _constant(node: cst.BaseExpression) -> str | None:
    """A constant a configuration is compared with: a dotted name (an enum member), a string or
    a number literal, True, False or None."""
    if type(node) is cst.Attribute:
        return dotted(node)
    if type(node) is cst.Name:
        return node.value if node.value in ("True", "False", "None") or node.value.isupper() else None
    if type(node) is cst.SimpleString:
        return node.value
    if type(node) in (cst.Integer, cst.Float):
        return node.value
    return None


_POSITIVE = {"Equal": "==", "Is": "==", "In": "in"}
_NEGATIVE = {"NotEqual": "==", "IsNot": "==", "NotIn": "in"}


def condition_guards(test: cst.BaseExpression) -> tuple[Guards, Guards]:
    """The configuration test `test` is, as guards of its true and its false arm."""
    kind = type(test)
    if kind is cst.UnaryOperation and type(test.operator) is cst.Not:
        true, false = condition_guards(test.expression)
        return false, true
    key = None
    negated = False
    if kind is cst.Attribute:
        chain = _chain(test)
        key = chain
    elif kind is cst.Comparison and len(test.comparisons) == 1:
        target = test.comparisons[0]
        operator = type(target.operator).__name__
        chain, constant = _chain(test.left), _constant(target.comparator)
        if chain is not None and constant is not None and (operator in _POSITIVE or operator in _NEGATIVE):
            key = f"{chain} {_POSITIVE.get(operator) or _NEGATIVE[operator]} {constant}"
            negated = operator in _NEGATIVE
    if key is None:
        return _NO_GUARDS
    true, false = ((CONDITION + key, HOLDS),), ((CONDITION + key, FAILS),)
    return (false, true) if negated else (true, false)


def _none_test(test: cst.BaseExpression) -> tuple[str, bool] | None:
    """(name, whether the test holds when the name is None) for `x is None` / `x is not None`."""
    if type(test) is not cst.Comparison or len(test.comparisons) != 1:
        return None
    target = test.comparisons[0]
    if type(target.operator) not in (cst.Is, cst.IsNot):
        return None
    left, right = test.left, target.comparator
    if type(right) is cst.Name and right.value == "None" and type(left) is cst.Name and left.value != "None":
        name = left.value
    elif type(left) is cst.Name and left.value == "None" and type(right) is cst.Name and right.value != "None":
        name = right.value
    else:
        return None
    return name, type(target.operator) is cst.Is


def _literal_test(test: cst.Comparison) -> tuple[str, str] | None:
    """(name, operator + " " + literal state) for `name <op> literal` (`top_k > 0`, `mode == "decode"`)."""
    if len(test.comparisons) != 1 or type(test.left) is not cst.Name or test.left.value in ("None", "True", "False"):
        return None
    target = test.comparisons[0]
    symbol = _COMPARED.get(type(target.operator).__name__)
    literal = value_state(target.comparator) if symbol is not None else None
    if not is_literal(literal):
        return None
    return test.left.value, f"{symbol} {literal}"


def arm_guards(test: cst.BaseExpression) -> tuple[Guards, Guards]:
    """(what holds where the test is true, what holds where it is false), as (name, state) pairs."""
    kind = type(test)
    if kind is cst.Name:
        if test.value in ("None", "True", "False"):
            return _NO_GUARDS
        return ((test.value, TRUTHY),), ((test.value, FALSY),)
    if kind is cst.Comparison:
        found = _none_test(test)
        if found is None:
            compared = _literal_test(test)
            if compared is None:
                return _NO_GUARDS
            name, comparison = compared
            return ((name, "c" + comparison),), ((name, "n" + comparison),)
        name, when_none = found
        return (((name, NONE),), ((name, SET),)) if when_none else (((name, SET),), ((name, NONE),))
    if kind is cst.UnaryOperation and type(test.operator) is cst.Not:
        true, false = arm_guards(test.expression)
        return false, true
    if kind is cst.BooleanOperation:
        left_true, left_false = arm_guards(test.left)
        right_true, right_false = arm_guards(test.right)
        if type(test.operator) is cst.And:
            return left_true + right_true, ()
        return (), left_false + right_false
    return _NO_GUARDS


def contradicts(guard: str, passed: str) -> bool:
    """Whether a parameter passed `passed` (NONE, SET or a literal, at every call) never meets
    the guard state `guard` of a plain-name test: the arm under it does not run."""
    if guard == NONE:
        return never_none(passed)
    if guard == SET:
        return passed == NONE
    if not (passed == NONE or is_literal(passed)):
        return False  # never None, but which value is not known
    value = None if passed == NONE else literal_value(passed)
    if guard == TRUTHY:
        return not value
    if guard == FALSY:
        return bool(value)
    if guard[:1] in ("c", "n") and " " in guard:
        symbol, literal = guard[1:].split(" ", 1)
        compare = _OPERATORS.get(symbol)
        if compare is None or not is_literal(literal):
            return False
        try:
            holds = bool(compare(value, literal_value(literal)))
        except TypeError:  # `None > 0`: not a comparison Python makes
            return False
        return holds != (guard[0] == "c")
    return False


def exits(block: cst.BaseSuite) -> bool:
    """Whether a block always leaves its enclosing block (it ends in return, raise or continue)."""
    if type(block) is cst.SimpleStatementSuite:
        smalls = block.body
    else:
        last = block.body[-1] if block.body else None
        smalls = last.body if type(last) is cst.SimpleStatementLine else ()
    return bool(smalls) and type(smalls[-1]) in (cst.Return, cst.Raise, cst.Continue)


def child_guards(node: cst.CSTNode) -> dict[int, Guards] | None:
    """Children of `node` (by id) that run only under a None test, with what holds there:
    an `if`'s or a conditional expression's arms, the right operand of `and` / `or`, and the
    statements of a block after `if x is None: return` or `assert x is not None`."""
    kind = type(node)
    if kind is cst.If or kind is cst.IfExp:
        true, false = arm_guards(node.test)
        on_true, on_false = condition_guards(node.test)
        true, false = true + on_true, false + on_false
        found = {}
        if true:
            found[id(node.body)] = true
        if false and node.orelse is not None:
            found[id(node.orelse)] = false
        return found or None
    if kind is cst.BooleanOperation:
        true, false = arm_guards(node.left)
        held = true if type(node.operator) is cst.And else false
        return {id(node.right): held} if held else None
    if kind is cst.IndentedBlock:
        found: dict[int, Guards] = {}
        held: Guards = ()
        for stmt in node.body:
            if held:
                found[id(stmt)] = held
            if type(stmt) is cst.If and stmt.orelse is None and exits(stmt.body):
                held = held + arm_guards(stmt.test)[1]
            elif type(stmt) is cst.SimpleStatementLine:
                for small in stmt.body:
                    if type(small) is cst.Assert:
                        held = held + arm_guards(small.test)[0]
        return found or None
    return None


