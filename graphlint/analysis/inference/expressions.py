"""What an expression holds, for the walk of a function body (a mixin of
graphlint.analysis.inference.function_walk.Inference): names, attributes, subscripts,
operators, comparisons, comprehensions and the element a loop binds, each recorded by node; and
the places where an unknown value would matter (a test, a bound, a conversion), with the
sources it is computed from."""
from __future__ import annotations

from graphlint.lazy import cst

from graphlint.analysis import catalog
from graphlint.analysis.children import code_children, iter_code
from graphlint.analysis.inference.lattice import (DEVICE, HOST, HOST_TENSOR, MODULE, MODULE_LIST, NONE, SELF, UNKNOWN,
                                                  V_DEVICE, V_DEVICE_BOOL, V_HOST, V_HOST_TENSOR, V_MODULE, V_NONE,
                                                  V_UNKNOWN, Value, binop, join)
from graphlint.analysis.inference.syntax import positional
from graphlint.analysis.names import dotted

_TORCH = catalog.prefix("namespaces", "torch")
_META_ATTRS = catalog.names("metadata", "attributes")
_MAX_SOURCES = 32
_TENSOR_ATTRS = catalog.names("tensor", "attributes")
_PARAMETER_ATTRS = catalog.names("modules", "parameter_attributes")


class ExpressionValues:
    """The expression half of `Inference`: `expr` records and returns the Value of a node."""

    def expr(self, node: cst.BaseExpression) -> Value:
        value = self._expr(node)
        self.out.values[id(node)] = value
        return value

    def _expr(self, node: cst.BaseExpression) -> Value:  # noqa: C901 - one dispatch table
        # Type identity, not isinstance: libcst's node classes are never subclassed, and
        # isinstance against them goes through ABCMeta; this runs on every expression.
        kind = type(node)
        if kind is cst.Name:
            return self._name(node)
        if kind in (cst.Integer, cst.Float, cst.Imaginary, cst.SimpleString):
            return V_HOST
        if kind is cst.FormattedString:
            for part in node.parts:
                if isinstance(part, cst.FormattedStringExpression):
                    self._sink_expr(part.expression)
            return V_HOST
        if kind is cst.ConcatenatedString:
            self._children(node)
            return V_HOST
        if kind is cst.Attribute:
            return self._attribute(node)
        if kind is cst.Call:
            return self._call(node)
        if kind is cst.Subscript:
            return self._subscript(node)
        if kind is cst.BinaryOperation:
            left = self.expr(node.left)
            right = self.expr(node.right)
            result = binop(left, right)
            if isinstance(node.operator, (cst.BitAnd, cst.BitOr, cst.BitXor)) and left.is_bool and right.is_bool:
                result = Value(result.kind, True)
            return result
        if kind is cst.UnaryOperation:
            inner = self.expr(node.expression)
            if isinstance(node.operator, cst.Not):
                return V_HOST
            return inner
        if kind is cst.BooleanOperation:
            return join(self.expr(node.left), self.expr(node.right))
        if kind is cst.Comparison:
            return self._comparison(node)
        if kind is cst.IfExp:
            self._sink_expr(node.test)
            return join(self.expr(node.body), self.expr(node.orelse))
        if kind in (cst.Tuple, cst.List, cst.Set):
            values = [self.expr(e.value) for e in node.elements]
            # An empty literal is usually a list that tensors get appended to: unknown.
            if values and all(v.kind in (HOST, NONE) for v in values):
                return V_HOST
            # A sequence of CPU tensors keeps torch.cat/stack of it on the host. A sequence of
            # device tensors stays unknown: its own truth value is a host question.
            if values and all(v.kind == HOST_TENSOR for v in values):
                return V_HOST_TENSOR
            return V_UNKNOWN
        if kind is cst.Dict:
            for element in node.elements:
                if isinstance(element, cst.DictElement):
                    self.expr(element.key)
                    self.expr(element.value)
                else:
                    self.expr(element.value)
            return V_UNKNOWN
        if kind in (cst.ListComp, cst.SetComp, cst.GeneratorExp, cst.DictComp):
            return self._comprehension(node)
        if kind is cst.Lambda:
            saved = dict(self.env)
            for param in node.params.params:
                self.env[param.name.value] = V_UNKNOWN
            self.expr(node.body)
            self.env = saved
            return V_UNKNOWN
        if kind is cst.NamedExpr:
            value = self.expr(node.value)
            self.bind_target(node.target, value)
            return value
        if kind is cst.Await:
            self.expr(node.expression)
            return V_UNKNOWN
        if kind is cst.Ellipsis:
            return V_HOST
        self._children(node)
        return V_UNKNOWN

    def _children(self, node: cst.CSTNode) -> None:
        for child in code_children(node):
            if isinstance(child, cst.BaseExpression):
                self.expr(child)
            else:
                self._children(child)

    def _name(self, node: cst.Name) -> Value:
        name = node.value
        if name in self.env:
            return self.env[name]
        if name in ("True", "False"):
            return V_HOST
        if name == "None":
            return V_NONE
        if name in self.facts.constants:
            return self.facts.constants[name]
        return V_UNKNOWN

    def _attribute(self, node: cst.Attribute) -> Value:
        attr = node.attr.value
        qualified = self.imports.resolve(node)
        if qualified is not None and qualified.startswith(_TORCH):
            return V_HOST  # dtypes, device types, submodules: host objects
        base = self.expr(node.value)
        if attr in _META_ATTRS:
            return V_HOST
        if type(node.value) is cst.Name and node.value.value in self.param_defaults and base.kind != SELF:
            self.param_attrs.add(attr)
        if base.kind == SELF:
            if attr in self.self_attrs:
                return self.self_attrs[attr]
            known = self.class_attrs.get(attr, V_UNKNOWN)
            if known.kind in (UNKNOWN, NONE):
                self.unknown_attrs.add(attr)
            return known
        if base.kind == MODULE:
            # Parameters and buffers of a submodule live on the device.
            return V_DEVICE if attr in _PARAMETER_ATTRS else V_UNKNOWN
        if base.kind in (DEVICE, HOST_TENSOR):
            # .T, .real, .grad, .data are tensors; a custom attribute set on a parameter
            # (`param._weight_type`) is whatever was stored there.
            return Value(base.kind) if attr in _TENSOR_ATTRS or not attr.startswith("_") else V_UNKNOWN
        if base.kind == HOST:
            return V_HOST
        return V_UNKNOWN

    def _subscript(self, node: cst.Subscript) -> Value:
        base = self.expr(node.value)
        index_values = []
        for element in node.slice:
            inner = element.slice
            if isinstance(inner, cst.Index):
                index_values.append(self.expr(inner.value))
            elif isinstance(inner, cst.Slice):
                for part in (inner.lower, inner.upper, inner.step):
                    if part is not None:
                        self._sink_expr(part)
        if base.kind in (DEVICE, HOST_TENSOR):
            return Value(base.kind)
        if base.kind == MODULE_LIST:
            return V_MODULE
        if base.kind == HOST:
            return V_HOST
        if base.kind.startswith("tuple:"):
            kinds = base.kind[len("tuple:"):].split(",")
            if len(node.slice) == 1 and isinstance(node.slice[0].slice, cst.Index):
                index = node.slice[0].slice.value
                if isinstance(index, cst.Integer) and int(index.value) < len(kinds):
                    return Value(kinds[int(index.value)])
        return V_UNKNOWN

    def _comparison(self, node: cst.Comparison) -> Value:
        left = self.expr(node.left)
        values = [left]
        identity_only = True
        for target in node.comparisons:
            values.append(self.expr(target.comparator))
            if not isinstance(target.operator, (cst.Is, cst.IsNot, cst.In, cst.NotIn)):
                identity_only = False
        if identity_only:
            return V_HOST
        if any(v.kind == DEVICE for v in values):
            return V_DEVICE_BOOL
        if any(v.kind == HOST_TENSOR for v in values):
            return Value(HOST_TENSOR, True)
        if all(v.kind in (HOST, NONE) for v in values):
            return V_HOST
        return V_UNKNOWN

    def _comprehension(self, node: cst.BaseComp) -> Value:
        saved = dict(self.env)
        comp: cst.CompFor | None = node.for_in
        while comp is not None:
            iter_value = self.expr(comp.iter)
            self.bind_target(comp.target, self._element_of(comp.iter, iter_value))
            for condition in comp.ifs:
                self._sink_expr(condition.test)
            comp = comp.inner_for_in
        if isinstance(node, cst.DictComp):
            self.expr(node.key)
            self.expr(node.value)
        else:
            self.expr(node.elt)
        self.env = saved
        return V_UNKNOWN

    def _sink_expr(self, node: cst.BaseExpression) -> Value:
        value = self.expr(node)
        self._sink(node, value)
        return value

    def _sink(self, node: cst.BaseExpression, value: Value) -> None:
        """A place where a device value would be a finding (a test, a bound, a conversion):
        with an unknown value there, facts about what it comes from could add one."""
        if value.kind == UNKNOWN:
            self.unknown_sinks += 1
            self.wanted |= self._sources(node)
        elif value.kind == DEVICE and self._device_params:
            # A device value from a parameter the function alone calls a tensor: callers that
            # all pass a host value there would take the finding away.
            sources = {s for s in self._sources(node) if s.startswith("p:") and s[2:] in self._device_params}
            if sources:
                self.unknown_sinks += 1
                self.wanted |= sources

    def _sources(self, node: cst.BaseExpression) -> set[str]:
        """What an unknown value is computed from, as far as other functions could tell:
        parameters (`p:`), calls of possibly linted functions (`c:`), `self` attributes (`a:`),
        through the local assignments before it."""
        found: set[str] = set()
        nodes = [node, *iter_code(node)]
        for sub in nodes:
            kind = type(sub)
            if kind is cst.Name:
                name = sub.value
                if name in self.deps:
                    found |= self.deps[name]
                elif name in self.param_defaults:
                    found.add("p:" + name)
            elif kind is cst.Call:
                key = self.callee_key(sub.func)
                if key is not None:
                    found.add("c:" + key)
            elif kind is cst.Attribute and isinstance(sub.value, cst.Name) and sub.value.value == "self":
                found.add("a:" + sub.attr.value)
            if len(found) > _MAX_SOURCES:
                break
        return found

    def _element_of(self, iter_node: cst.BaseExpression, iter_value: Value) -> Value:
        """The value bound by `for x in <iter>`."""
        if isinstance(iter_node, cst.Call):
            func = dotted(iter_node.func)
            args = positional(iter_node)
            if func == "range":
                return V_HOST
            if func == "enumerate" and args:
                return Value("tuple:" + HOST + "," + self._element_of(args[0], self.out.of(args[0])).kind)
            if func == "zip":
                kinds = [self._element_of(a, self.out.of(a)).kind for a in args]
                return Value("tuple:" + ",".join(kinds))
            if func == "reversed" and args:
                return self._element_of(args[0], self.out.of(args[0]))
        if iter_value.kind == MODULE_LIST:
            return V_MODULE
        if iter_value.kind in (DEVICE, HOST_TENSOR):
            return Value(iter_value.kind)
        return V_UNKNOWN
