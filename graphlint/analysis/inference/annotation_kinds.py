"""The kind a value annotated one way holds: `torch.Tensor`, `Optional[Tensor]`, `Tensor | None`,
`list[int]`, `nn.Module`, string annotations, through the file's imports."""
from __future__ import annotations

from graphlint.lazy import cst

from graphlint.analysis import catalog
from graphlint.analysis.inference.lattice import (HOST, V_DEVICE, V_DEVICE_BOOL, V_HOST, V_MODULE, V_UNKNOWN, Value,
                                                  join)
from graphlint.analysis.inference.syntax import is_none
from graphlint.analysis.names import ImportMap, dotted

_TORCH = catalog.prefix("namespaces", "torch")
_TENSOR_ANNOTATIONS = catalog.names("annotations", "tensor")
_BOOL_TENSOR_ANNOTATIONS = catalog.names("annotations", "bool_tensor")
_HOST_ANNOTATIONS = catalog.names("annotations", "host")
_MODULE_ANNOTATIONS = catalog.names("annotations", "module")
# Python sequence annotations (`list[int]`, `Sequence[Tensor]`): an element is picked on the host.
SEQUENCE_ANNOTATIONS = frozenset({"list", "List", "tuple", "Tuple", "Sequence"})
# Resolved through the imports, only torch's own spelling names nn.Module.
_MODULE_QUALIFIED = frozenset(name for name in _MODULE_ANNOTATIONS if name.startswith(_TORCH))
# A base class named like nn.Module (`Module`, `nn.Module`, `torch.nn.Module`) makes a module.
MODULE_BASES = frozenset(name.rsplit(".", 1)[-1] for name in _MODULE_ANNOTATIONS)
# Annotation wrappers that keep the inner kind (Optional[Tensor] is still a tensor when set).
_TRANSPARENT_WRAPPERS = frozenset({"Optional", "typing.Optional", "Final", "typing.Final", "Annotated"})


def annotation_value(annotation: cst.BaseExpression, imports: ImportMap) -> Value:
    """The kind a parameter annotated this way holds."""
    node = annotation
    if isinstance(node, cst.SimpleString):
        text = node.evaluated_value.strip()
        if text in _TENSOR_ANNOTATIONS or text.replace("Optional[", "").rstrip("]") in _TENSOR_ANNOTATIONS:
            return V_DEVICE
        if text in _HOST_ANNOTATIONS:
            return V_HOST
        return V_UNKNOWN
    if isinstance(node, cst.BinaryOperation) and isinstance(node.operator, cst.BitOr):
        # `Tensor | None`
        left = annotation_value(node.left, imports)
        right = annotation_value(node.right, imports)
        if is_none(node.right):
            return left
        if is_none(node.left):
            return right
        return join(left, right)
    if isinstance(node, cst.Subscript):
        outer = dotted(node.value) or ""
        if outer.rsplit(".", 1)[-1] in SEQUENCE_ANNOTATIONS and node.slice and all(
                isinstance(e.slice, cst.Index) and (annotation_value(e.slice.value, imports).kind == HOST
                                                    or isinstance(e.slice.value, cst.Ellipsis))
                for e in node.slice):
            return V_HOST  # `list[int]`, `tuple[int, ...]`: host numbers, and so is each element
        if outer in _TRANSPARENT_WRAPPERS and node.slice:
            inner = node.slice[0].slice
            if isinstance(inner, cst.Index):
                return annotation_value(inner.value, imports)
        if outer.endswith("Union") and node.slice:
            values = [annotation_value(s.slice.value, imports) for s in node.slice
                      if isinstance(s.slice, cst.Index) and not is_none(s.slice.value)]
            result = values[0] if values else V_UNKNOWN
            for value in values[1:]:
                result = join(result, value)
            return result
        return V_UNKNOWN
    name = dotted(node)
    if name is None:
        return V_UNKNOWN
    resolved = imports.resolve(node) or name
    if name in _BOOL_TENSOR_ANNOTATIONS or resolved in _BOOL_TENSOR_ANNOTATIONS:
        return V_DEVICE_BOOL
    if name in _TENSOR_ANNOTATIONS or resolved in _TENSOR_ANNOTATIONS:
        return V_DEVICE
    if name in _HOST_ANNOTATIONS or resolved in _HOST_ANNOTATIONS:
        return V_HOST
    if name in _MODULE_ANNOTATIONS or resolved in _MODULE_QUALIFIED:
        return V_MODULE
    return V_UNKNOWN
