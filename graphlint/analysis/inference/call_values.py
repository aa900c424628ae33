"""What a call gives, for the walk of a function body (a mixin of
graphlint.analysis.inference.function_walk.Inference): torch and numpy functions, factories
and where they place their tensor, builtins, local classes, tensor and module methods, `.to()`;
and, for the summaries, how a call names a function that may be linted and what it passes."""
from __future__ import annotations

from graphlint.lazy import cst

from graphlint.analysis import catalog
from graphlint.analysis.inference.lattice import (DEVICE, HOST, HOST_TENSOR, MODULE, MODULE_LIST, NONE, SELF, UNKNOWN,
                                                  V_DEVICE, V_HOST, V_HOST_TENSOR, V_MODULE, V_MODULE_LIST, V_UNKNOWN,
                                                  Value, decode, encode, join)
from graphlint.analysis.inference.syntax import is_none, keyword, positional
from graphlint.analysis.names import ImportMap, dotted

_FACTORIES = catalog.names("factories", "names")
_LIKE = catalog.names("factories", "like")
_FROM_HOST = catalog.names("factories", "from_host_data")
_META_METHODS = catalog.names("metadata", "methods")
_BOOL_FUNCS = catalog.names("bool_producing", "functions")
_BOOL_METHODS = catalog.names("bool_producing", "methods")
_HOST_FUNCS = catalog.names("host_tensor", "host_functions")
_DEVICE_CONSTRUCTOR = catalog.names("devices", "constructor")
_TORCH = catalog.prefix("namespaces", "torch")
_NN = catalog.prefix("namespaces", "nn")
_FUNCTIONAL = catalog.prefix("namespaces", "functional")
_NON_TENSOR_PREFIXES = catalog.prefixes("namespaces", "not_tensor_ops")
# Builtins whose arguments rules judge (conversions, bounds, formatting, truth of elements).
_SINK_BUILTINS = frozenset({"range", "int", "float", "bool", "complex", "min", "max", "any", "all", "sorted",
                            "print", "str", "repr", "format"})
# numpy constructors of arrays (not scalars): host memory.
_NUMPY_ARRAYS = ("numpy.array", "numpy.asarray", "numpy.arange", "numpy.zeros", "numpy.ones", "numpy.full",
                 "numpy.empty", "numpy.concatenate", "numpy.stack", "numpy.repeat", "numpy.cumsum",
                 "numpy.where", "numpy.nonzero", "numpy.argsort", "numpy.random.")
_HOST_BUILTINS = frozenset({
    "len", "isinstance", "issubclass", "hasattr", "callable", "range", "str", "repr", "id",
    "type", "getattr", "sorted", "tuple", "list", "dict", "set", "frozenset", "round",
    "divmod", "ord", "chr", "hash", "format", "print", "iter", "next", "enumerate", "zip",
    "all", "any", "int", "float", "bool", "complex",
})
_SUBMODULE_CONTAINERS = catalog.names("modules", "containers")
_MODULE_CONTAINERS = _SUBMODULE_CONTAINERS | catalog.names("modules", "parameter_containers")
_CALLABLE_CONTAINERS = catalog.names("modules", "callable_containers")
_TENSOR_CLASSES = catalog.names("modules", "tensor_classes")
_CALL_METHODS = catalog.names("modules", "call_methods")
_HOST_READ_METHODS = catalog.names("sync", "item") | catalog.names("sync", "tolist")
_HOST_COPY_METHODS = catalog.names("sync", "host_copy")
_MOVE_METHODS = catalog.names("tensor", "move_methods")
_TO_DEVICE_METHODS = catalog.names("tensor", "to_device_methods")
_PINNED_METHODS = catalog.names("tensor", "pinned_methods")
_NEW_METHODS = catalog.names("tensor", "new_methods")
_BOOL_REDUCTIONS = catalog.names("tensor", "bool_reductions")
_CASTS = catalog.names("tensor", "casts")
_KEEP_DTYPE = catalog.names("tensor", "keep_dtype")
_DTYPE_ATTRS = catalog.names("tensor", "dtype_attribute")
# Callees in these libraries are never linted functions: their calls are not summarised.
_LIBRARY_PREFIXES = (_TORCH, "numpy.", "math.", "os.", "sys.", "re.", "typing.", "functools.", "itertools.",
                     "collections.", "dataclasses.", "logging.", "time.", "random.", "json.", "triton.",
                     "contextlib.", "asyncio.", "copy.", "inspect.", "enum.", "abc.", "warnings.", "pathlib.")


def _is_cpu_device(node: cst.BaseExpression, imports: ImportMap) -> bool:
    """device="cpu" / torch.device("cpu") / "cpu" literal: a host placement."""
    if isinstance(node, cst.SimpleString):
        return node.evaluated_value.split(":")[0] == "cpu"
    if isinstance(node, cst.Call) and imports.resolve(node.func) in _DEVICE_CONSTRUCTOR and node.args:
        return _is_cpu_device(node.args[0].value, imports)
    return False


def _is_true(node: cst.BaseExpression | None) -> bool:
    return isinstance(node, cst.Name) and node.value == "True"


def _tensor_result(args: list[Value]) -> Value:
    """A torch op's result lives where its tensor inputs live; unknown inputs mean device."""
    tensors = [a for a in args if a.kind in (DEVICE, HOST_TENSOR, UNKNOWN)]
    if tensors and all(a.kind == HOST_TENSOR for a in tensors):
        return V_HOST_TENSOR
    if not tensors and args and all(a.kind in (HOST, NONE) for a in args):
        return V_HOST_TENSOR
    return V_DEVICE


class CallValues:
    """The call half of `Inference`: `_call` gives the Value of a call and records, for the
    summaries, the arguments of each call to a function that may be linted."""

    def callee_key(self, func: cst.BaseExpression) -> str | None:
        """How a call names a function that may be linted: `loc:name` (a function of this
        file), `imp:pkg.mod.name` (imported), `self:Class.method`."""
        qualified = self.imports.resolve(func)
        if qualified is not None:
            return None if qualified.startswith(_LIBRARY_PREFIXES) or "." not in qualified else "imp:" + qualified
        root = dotted(func)
        relative = self.imports.relative.get(root.partition(".")[0]) if root else None
        if relative is not None:
            rest = root.partition(".")[2]
            return "imp:" + (f"{relative}.{rest}" if rest else relative)
        if isinstance(func, cst.Name):
            return "loc:" + func.value if func.value in self.facts.functions and func.value not in self.env else None
        if (isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) and func.value.value == "self"
                and self.class_name is not None):
            return f"self:{self.class_name}.{func.attr.value}"
        return None

    def _symbolic(self, node: cst.BaseExpression, value: Value) -> tuple:
        """A value for a summary: its kind, or what it forwards when not known here (a
        parameter passed on, the result of another linted call)."""
        code = encode(value)
        if code is not None:
            return ("kind", code)
        if isinstance(node, cst.Name) and node.value in self.param_defaults:
            return ("param", node.value)
        if isinstance(node, cst.Tuple) and node.elements and not any(isinstance(e, cst.StarredElement) for e in node.elements):
            return ("tuple", tuple(self._symbolic(e.value, self.out.of(e.value)) for e in node.elements))
        if isinstance(node, cst.Call):
            key = self.callee_key(node.func)
            if key is not None:
                return ("call", key)
        return ("unknown",)

    def _call(self, node: cst.Call) -> Value:
        value = self._call_value(node)
        key = self.callee_key(node.func)
        if key is None:
            return value
        positional_args: list = []
        keyword_args: dict = {}
        for arg in node.args:
            if arg.star == "*":
                keyword_args["*"] = ("unknown",)  # positions after it are not known
                break
            if arg.star == "**":
                keyword_args["**"] = ("unknown",)  # any parameter not named may come from it
            elif arg.keyword is None:
                positional_args.append(self._symbolic(arg.value, self.out.of(arg.value)))
            else:
                keyword_args[arg.keyword.value] = self._symbolic(arg.value, self.out.of(arg.value))
        self.calls[id(node)] = (key, positional_args, keyword_args)
        advancing = self._advancing[-1] if self._advancing else frozenset()
        if advancing:
            def stepped(arg: cst.Arg) -> bool:
                return (isinstance(arg.value, cst.Name) and arg.value.value in advancing
                        and self.out.of(arg.value).kind not in (DEVICE, HOST_TENSOR))
            plain = [a for a in node.args if not a.star]
            positions = [i for i, a in enumerate(plain) if a.keyword is None and stepped(a)]
            names = [a.keyword.value for a in plain if a.keyword is not None and stepped(a)]
            if positions or names:
                self.step_args[id(node)] = (key, positions, names)
        if value.kind == UNKNOWN:
            self.unknown_calls.add(key)
            if self.external is not None and key in self.external.returns:
                return decode(self.external.returns[key])
        return value

    def _call_value(self, node: cst.Call) -> Value:
        args = [self.expr(a.value) for a in node.args]
        func = node.func
        qualified = self.imports.resolve(func)
        if qualified is not None:
            return self._qualified_call(node, qualified, args)
        if isinstance(func, cst.Name):
            return self._builtin_or_local_call(node, func.value, args)
        if isinstance(func, cst.Attribute):
            receiver = self.expr(func.value)
            if receiver.kind == SELF:
                attr = self.self_attrs.get(func.attr.value) or self.class_attrs.get(func.attr.value)
                if attr is not None and attr.kind in (MODULE, MODULE_LIST):
                    return V_DEVICE  # self.attn(x): a submodule's forward
            return self._method_call(node, func.attr.value, receiver, args)
        callee = self.expr(func)
        if callee.kind == MODULE:
            return V_DEVICE
        return V_UNKNOWN

    def _qualified_call(self, node: cst.Call, qualified: str, args: list[Value]) -> Value:
        if not qualified.startswith(_TORCH):
            short = qualified.rsplit(".", 1)[-1]
            if short in _SUBMODULE_CONTAINERS:
                return V_MODULE_LIST
            if qualified.startswith(_NUMPY_ARRAYS):
                return V_HOST_TENSOR  # host memory, like a CPU tensor: indexing a device tensor copies it
            return V_UNKNOWN
        if qualified in _HOST_FUNCS:
            return V_HOST
        short = qualified.rsplit(".", 1)[-1]
        if qualified.startswith(_NN) and not qualified.startswith(_FUNCTIONAL):
            if short in _MODULE_CONTAINERS:
                return V_MODULE_LIST if short not in _CALLABLE_CONTAINERS else V_MODULE
            if short in _TENSOR_CLASSES:
                return V_DEVICE
            if short[:1].isupper():
                return V_MODULE
            return V_UNKNOWN
        if qualified.startswith(_NON_TENSOR_PREFIXES):
            return V_UNKNOWN
        if qualified in _FACTORIES or qualified in _FROM_HOST:
            return self._placement(node, default=V_HOST_TENSOR)
        if qualified in _LIKE:
            base = args[0] if args else V_UNKNOWN
            placed = self._placement(node, default=None)
            return placed if placed is not None else (Value(base.kind) if base.is_tensor else V_DEVICE)
        result = _tensor_result(args)
        if qualified in _BOOL_FUNCS:
            return Value(result.kind, True)
        return result

    def _placement(self, node: cst.Call, default: Value | None) -> Value | None:
        """Where a factory puts its tensor: device=, pin_memory=True, or the CPU default."""
        if _is_true(keyword(node, "pin_memory")):
            return V_HOST_TENSOR
        device = keyword(node, "device")
        if device is None:
            return default
        if _is_cpu_device(device, self.imports):
            return V_HOST_TENSOR
        if is_none(device):
            return default
        return V_DEVICE

    def _builtin_or_local_call(self, node: cst.Call, name: str, args: list[Value]) -> Value:
        if name in _SINK_BUILTINS:
            for arg, value in zip(node.args, args):
                self._sink(arg.value, value)
        if name in self.env:
            callee = self.env[name]
            if callee.kind in (MODULE, MODULE_LIST):
                return V_DEVICE
            return V_UNKNOWN
        if name in ("min", "max", "abs"):
            result = args[0] if args else V_UNKNOWN
            for value in args[1:]:
                result = join(result, value)
            return result if result.kind in (HOST, DEVICE, HOST_TENSOR) else V_UNKNOWN
        if name in _HOST_BUILTINS:
            return V_HOST
        if name in self.facts.classes and self.facts.class_is_module(name):
            return V_MODULE
        return V_UNKNOWN

    def _method_call(self, node: cst.Call, method: str, receiver: Value, args: list[Value]) -> Value:
        if method in _HOST_READ_METHODS or method in _META_METHODS:
            return V_HOST
        if receiver.kind == SELF:
            return V_UNKNOWN
        if receiver.kind in (MODULE, MODULE_LIST):
            # A forward's result is a device tensor; parameters(), children() and the rest
            # are not known here.
            return V_DEVICE if method in _CALL_METHODS else V_UNKNOWN
        if receiver.kind not in (DEVICE, HOST_TENSOR):
            return V_HOST if receiver.kind == HOST else V_UNKNOWN
        if method in _HOST_COPY_METHODS:
            return V_HOST_TENSOR
        if method in _TO_DEVICE_METHODS:
            return V_DEVICE
        if method in _PINNED_METHODS:
            return V_HOST_TENSOR
        if method in _MOVE_METHODS:
            return self._to_target(node, receiver)
        if method in _BOOL_METHODS or method in _BOOL_REDUCTIONS:
            return Value(receiver.kind, True)
        if method in _NEW_METHODS:
            placed = self._placement(node, default=None)
            return placed if placed is not None else Value(receiver.kind)
        if method in _CASTS:
            return Value(receiver.kind)
        return Value(receiver.kind, receiver.is_bool and method in _KEEP_DTYPE)

    def _to_target(self, node: cst.Call, receiver: Value) -> Value:
        """`.to(...)`: a CPU target makes a host tensor, a dtype keeps the placement."""
        device = keyword(node, "device")
        if device is not None:
            return V_HOST_TENSOR if _is_cpu_device(device, self.imports) else V_DEVICE
        args = positional(node)
        if not args:
            return Value(receiver.kind)
        first = args[0]
        if _is_cpu_device(first, self.imports):
            return V_HOST_TENSOR
        if isinstance(first, cst.SimpleString):
            return V_DEVICE
        qualified = self.imports.resolve(first) or ""
        if qualified.startswith(_TORCH) and qualified not in _DEVICE_CONSTRUCTOR:
            return Value(receiver.kind)  # a dtype such as torch.float32
        if isinstance(first, cst.Attribute) and first.attr.value in _DTYPE_ATTRS:
            return Value(receiver.kind)
        first_value = self.out.of(first)
        if first_value.is_tensor:
            return Value(first_value.kind)  # .to(other): other's placement
        return V_DEVICE
