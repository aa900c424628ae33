"""The walk of one function body in program order (`Inference`): parameters bound from their
annotations, defaults and call-site facts, statements evaluated with a join at branches, loops
iterated until the facts at their head settle, assignments bound to names, tuples and `self`
attributes. What an expression holds is in `expressions`, what a call gives in `call_values`."""
from __future__ import annotations

from typing import Iterable

from graphlint.lazy import cst

from graphlint.analysis.inference.annotation_kinds import annotation_value
from graphlint.analysis.inference.body_scans import (advanced_names, advanced_object_attrs, steps_loop,
                                                     tensor_evidence)
from graphlint.analysis.inference.call_values import CallValues
from graphlint.analysis.inference.expressions import ExpressionValues
from graphlint.analysis.inference.facts import ExternalFacts, FunctionFacts, ModuleFacts
from graphlint.analysis.inference.lattice import (DEVICE, HOST, HOST_TENSOR, NONE, UNKNOWN, V_DEVICE, V_HOST, V_SELF,
                                                  V_UNKNOWN, Value, binop, decode, join, join_loop)
from graphlint.analysis.inference.syntax import is_literal, is_none

# one name up a lattice of height four, and real loops settle in two or three.
_LOOP_ITERATIONS = 6


class Inference(CallValues, ExpressionValues):
    """Evaluates one function body in program order, recording a Value for each expression."""

    def __init__(self, facts: ModuleFacts, class_name: str | None, env: dict[str, Value] | None = None,
                 external: ExternalFacts | None = None):
        self.facts = facts
        self.imports = facts.imports
        self.class_name = class_name
        self.class_attrs = facts.class_attrs(class_name) if class_name else {}
        self.external = external
        if external is not None and class_name in external.attrs:
            inherited = {attr: decode(code) for attr, code in external.attrs[class_name].items()}
            self.class_attrs = {**inherited, **{a: v for a, v in self.class_attrs.items()
                                                if v.kind not in (UNKNOWN, NONE) or a not in inherited}}
        # For the summary: the arguments of each call to a linted function and the returns.
        self.calls: dict[int, tuple[str, list, dict]] = {}
        self.returns: dict[int, tuple] = {}
        self.param_names: list[str] = []
        self.param_defaults: dict[str, str | None] = {}
        self.local_params: dict[str, Value] = {}
        # Host attributes of self this function advances, and the loop-carried locals the
        # enclosing loops advance (names), with the calls that pass one of them on.
        self.advanced_attrs: set[str] = set()
        self._constructing = False  # in __init__ (or another dunder): sizes set once
        self._advancing: list[frozenset[str]] = []
        self.step_args: dict[int, tuple[str, list[int], list[str]]] = {}
        self._advanced_by_loop: dict[int, frozenset[str]] = {}
        # Attributes of other objects the loops advance, and the attributes read off parameters
        # (`params.seqlen_offset`): joined over the project, the first name the second.
        self.loop_attrs: set[str] = set()
        self.param_attrs: set[str] = set()
        # What other functions could tell: calls and `self` attributes this function leaves unknown.
        self.unknown_calls: set[str] = set()
        self.unknown_attrs: set[str] = set()
        self.unknown_sinks = 0
        self.wanted: set[str] = set()  # the sources of the unknown values at those places
        self.deps: dict[str, set[str]] = {}
        self.env: dict[str, Value] = dict(env or {})
        self.out = FunctionFacts()
        # Assigned attributes of self during this function (they override class facts).
        self.self_attrs: dict[str, Value] = {}
        # Names used as tensors in this function: an unknown value bound to one is a tensor.
        self.evidence: set[str] = set()
        self._device_params: set[str] = set()  # parameters the function alone makes device values
        # Statements evaluated so far: the work done, which stays linear in the code.
        self.visits = 0
        # Per loop and entry state, the state after the loop: a nested loop entered again
        # with the same facts is not walked again (without this, nesting doubles the work).
        self._loop_exits: dict[tuple, tuple[dict[str, Value], dict[str, Value]]] = {}

    # ----- entry points -------------------------------------------------------------
    def run_function(self, node: cst.FunctionDef, is_method: bool, qualname: str | None = None) -> FunctionFacts:
        self._constructing = node.name.value.startswith("__") and node.name.value.endswith("__")
        self.evidence = tensor_evidence(node.body)
        self.bind_params(node.params, is_method)
        self.local_params = {name: self.env[name] for name in self.param_names if name in self.env}
        self._device_params = {name for name, value in self.local_params.items() if value.kind == DEVICE}
        known = self.external.params.get(qualname or "", {}) if self.external is not None else {}
        for name, code in known.items():
            # Call-site evidence fills in only what the function itself leaves unknown, and
            # overrides a tensor annotation that every caller contradicts with a host value
            # (`top_k: torch.Tensor` where each call passes an int).
            own = self.env.get(name, V_UNKNOWN).kind
            if own == UNKNOWN or (own == DEVICE and code == "host"):
                self.env[name] = decode(code)
        if self.external is not None:
            self.out.per_step_params = set(self.external.steps.get(qualname or "", ()))
            # Names the project's loops advance and pass on keep their meaning in the functions
            # that receive them under the same name (`input_pos_maxp1` through forward, block,
            # attention).
            self.out.per_step_names = set(self.external.step_names or ()) & set(self.param_defaults)
            self.out.per_step_param_attrs = set(self.external.step_attrs or ())
        self.block(node.body)
        self.out.per_step_attrs = self.advanced_attrs | (self.facts.class_advanced(self.class_name)
                                                         if self.class_name else set())
        return self.out

    def bind_params(self, params: cst.Parameters, is_method: bool) -> None:
        ordered = list(params.posonly_params) + list(params.params)
        for index, param in enumerate(ordered):
            name = param.name.value
            if index == 0 and is_method and name in ("self", "cls"):
                self.env[name] = V_SELF if name == "self" else V_UNKNOWN
                continue
            self.env[name] = self._param_value(param)
            self.param_names.append(name)
            self.param_defaults[name] = _default_code(param)
        for param in params.kwonly_params:
            self.env[param.name.value] = self._param_value(param)
            self.param_defaults[param.name.value] = _default_code(param)
        for name, value in list(self.env.items()):
            if value.kind == UNKNOWN and name in self.evidence:
                self.env[name] = V_DEVICE
        for star in (params.star_arg, params.star_kwarg):
            if isinstance(star, cst.Param):
                self.env[star.name.value] = V_UNKNOWN

    def _param_value(self, param: cst.Param) -> Value:
        if param.annotation is not None:
            return annotation_value(param.annotation.annotation, self.imports)
        if param.default is not None and is_literal(param.default) and not is_none(param.default):
            return V_HOST
        return V_UNKNOWN

    # ----- statements -----------------------------------------------------------------
    def block(self, block: cst.BaseSuite | Iterable[cst.CSTNode]) -> None:
        if isinstance(block, cst.IndentedBlock):
            body = block.body
        elif isinstance(block, cst.SimpleStatementSuite):
            body = block.body
        else:
            body = block  # type: ignore[assignment]
        for stmt in body:
            self.statement(stmt)

    def statement(self, stmt: cst.CSTNode) -> None:
        self.visits += 1
        if isinstance(stmt, cst.SimpleStatementLine):
            for small in stmt.body:
                self.small(small)
        elif isinstance(stmt, cst.If):
            self._sink_expr(stmt.test)
            before = dict(self.env)
            self.block(stmt.body)
            after_body = self.env
            self.env = dict(before)
            if stmt.orelse is not None:
                if isinstance(stmt.orelse, cst.If):
                    self.statement(stmt.orelse)
                else:
                    self.block(stmt.orelse.body)
            self.env = _join_envs(after_body, self.env)
        elif isinstance(stmt, (cst.For, cst.While)):
            self._loop(stmt)
        elif isinstance(stmt, cst.With):
            for item in stmt.items:
                value = self.expr(item.item)
                if item.asname is not None:
                    self.bind_target(item.asname.name, V_UNKNOWN if not value.is_tensor else value)
            self.block(stmt.body)
        elif isinstance(stmt, cst.Try):
            self.block(stmt.body)
            for handler in stmt.handlers:
                if handler.name is not None:
                    self.bind_target(handler.name.name, V_UNKNOWN)
                self.block(handler.body)
            if stmt.orelse is not None:
                self.block(stmt.orelse.body)
            if stmt.finalbody is not None:
                self.block(stmt.finalbody.body)
        elif isinstance(stmt, cst.FunctionDef):
            self.env[stmt.name.value] = V_UNKNOWN  # analysed on its own
        elif isinstance(stmt, cst.ClassDef):
            self.env[stmt.name.value] = V_UNKNOWN
        elif isinstance(stmt, cst.Match):
            self.expr(stmt.subject)
            for case in stmt.cases:
                self.block(case.body)

    def _loop(self, stmt: cst.For | cst.While) -> None:
        """Iterate the body from the loop head until the head's facts stop changing, so a
        value the body assigns is seen by the next iteration (`done = (delta < tol).all()`
        makes `while not done` a device test from the second iteration on)."""
        iter_value = self.expr(stmt.iter) if isinstance(stmt, cst.For) else None
        key = (id(stmt), iter_value, frozenset(self.env.items()), frozenset(self.self_attrs.items()))
        known = self._loop_exits.get(key)
        if known is not None:
            self.env, self.self_attrs = dict(known[0]), dict(known[1])
            return
        head_env, head_attrs = dict(self.env), dict(self.self_attrs)
        advanced = self._advanced_by_loop.get(id(stmt))
        if advanced is None:
            stepping = steps_loop(stmt)
            advanced = self._advanced_by_loop[id(stmt)] = (frozenset(advanced_names(stmt.body)) if stepping
                                                           else frozenset())
            if stepping:
                self.loop_attrs |= advanced_object_attrs(stmt.body)
        self._advancing.append(frozenset(name for name in advanced if name in self.env))
        self.out.loop_depth += 1
        for _ in range(_LOOP_ITERATIONS):
            self.env, self.self_attrs = dict(head_env), dict(head_attrs)
            if isinstance(stmt, cst.For):
                self.bind_target(stmt.target, self._element_of(stmt.iter, iter_value))
            else:
                self._sink_expr(stmt.test)
            self.block(stmt.body)
            next_env = _join_loop_envs(head_env, self.env)
            next_attrs = _join_loop_envs(head_attrs, self.self_attrs)
            if next_env == head_env and next_attrs == head_attrs:
                break
            head_env, head_attrs = next_env, next_attrs
        self.out.loop_depth -= 1
        self._advancing.pop()
        # The loop may run zero or more times: after it, the names hold the head's facts.
        self.env, self.self_attrs = head_env, head_attrs
        if isinstance(stmt, cst.While):
            self._sink_expr(stmt.test)
        if stmt.orelse is not None:
            self.block(stmt.orelse.body)
        self._loop_exits[key] = (dict(self.env), dict(self.self_attrs))

    def small(self, small: cst.BaseSmallStatement) -> None:
        if isinstance(small, cst.Assign):
            value = self.expr(small.value)
            for target in small.targets:
                self.bind_target(target.target, value, small.value)
        elif isinstance(small, cst.AnnAssign):
            declared = annotation_value(small.annotation.annotation, self.imports)
            value = self.expr(small.value) if small.value is not None else declared
            # `cache: Optional[Tensor] = None` holds a tensor once set.
            if value.kind == UNKNOWN or (value.kind == NONE and declared.kind != UNKNOWN):
                value = declared
            self.bind_target(small.target, value, small.value)
        elif isinstance(small, cst.AugAssign):
            right = self.expr(small.value)
            left = self.expr(small.target)
            if isinstance(small.target, cst.Name):
                self.env[small.target.value] = binop(left, right)
            elif (isinstance(small.target, cst.Attribute) and isinstance(small.target.value, cst.Name)
                  and small.target.value.value == "self" and left.kind not in (DEVICE, HOST_TENSOR)
                  and right.kind in (HOST, NONE) and not self._constructing
                  and isinstance(small.operator, (cst.AddAssign, cst.SubtractAssign))):
                # A counter the class moves (`self.filled += n`), not a size set up once in
                # `__init__` (`self.num_buckets *= 2`).
                self.advanced_attrs.add(small.target.attr.value)
        elif isinstance(small, cst.Expr):
            self.expr(small.value)
        elif isinstance(small, cst.Return) and small.value is not None:
            value = self.expr(small.value)
            self.returns[id(small)] = self._symbolic(small.value, value)
        elif isinstance(small, cst.Assert):
            self._sink_expr(small.test)
            if small.msg is not None:
                self.expr(small.msg)
        elif isinstance(small, cst.Raise) and small.exc is not None:
            self.expr(small.exc)
        elif isinstance(small, cst.Del):
            pass

    def bind_target(self, target: cst.BaseExpression, value: Value, source: cst.BaseExpression | None = None) -> None:
        if isinstance(target, cst.Name):
            if value.kind == UNKNOWN and target.value in self.evidence:
                value = V_DEVICE  # used as a tensor below (x.view(...), x.size()): a step tensor
            self.env[target.value] = value
            if value.kind == UNKNOWN and source is not None:
                self.deps[target.value] = self.deps.get(target.value, set()) | self._sources(source)
        elif isinstance(target, (cst.Tuple, cst.List)):
            elements = [e.value for e in target.elements]
            if isinstance(source, (cst.Tuple, cst.List)) and len(source.elements) == len(elements):
                for sub, src in zip(elements, source.elements):
                    self.bind_target(sub, self.out.of(src.value), src.value)
                return
            if value.kind.startswith("tuple:"):
                kinds = value.kind[len("tuple:"):].split(",")
                if len(kinds) == len(elements):
                    for sub, kind in zip(elements, kinds):
                        self.bind_target(sub, Value(kind))
                    return
            element = value if value.kind in (DEVICE, HOST_TENSOR, HOST) else V_UNKNOWN
            if element.is_bool:
                element = Value(element.kind)
            for sub in elements:
                self.bind_target(sub, element)
        elif isinstance(target, cst.StarredElement):
            self.bind_target(target.value, V_UNKNOWN)
        elif isinstance(target, cst.Attribute):
            self.expr(target.value)
            if isinstance(target.value, cst.Name) and target.value.value == "self":
                self.self_attrs[target.attr.value] = value
        elif isinstance(target, cst.Subscript):
            self.expr(target)


def _default_code(param: cst.Param) -> str | None:
    """A parameter's default for the summary: "none", "host" (a literal) or None (no default,
    or one whose kind is not known)."""
    if param.default is None:
        return None
    if is_none(param.default):
        return "none"
    return "host" if is_literal(param.default) else "other"


def _join_loop_envs(head: dict[str, Value], after: dict[str, Value]) -> dict[str, Value]:
    merged = dict(head)
    for name, value in after.items():
        merged[name] = join_loop(merged[name], value) if name in merged else value
    return merged


def _join_envs(a: dict[str, Value], b: dict[str, Value]) -> dict[str, Value]:
    merged = dict(a)
    for name, value in b.items():
        merged[name] = join(merged[name], value) if name in merged else value
    return merged
