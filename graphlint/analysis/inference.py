"""Device-value inference: for every expression of a function, is it a device tensor, a host
tensor, a host value (int, shape, dtype, flag) or unknown?

Precision lives here. Rules flag a value only when this module says DEVICE, so host-known
branching (shapes, dtypes, Python ints, flags) is never reported. The analysis is a single
forward pass over the function body in program order, with a join at branches; it never
imports or runs the code it reads.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

from graphlint.lazy import cst

from graphlint.analysis import catalog
from graphlint.analysis.children import code_children, iter_code
from graphlint.analysis.names import ImportMap, class_bases, dotted

DEVICE = "device"  # a tensor on the accelerator (or a tensor of unknown device in step code)
HOST_TENSOR = "host_tensor"  # a CPU tensor (created without device=, pinned, or .cpu())
HOST = "host"  # a Python value: int, float, bool, str, shape, dtype, device, flag
NONE = "none"  # the literal None: joins to whatever else a name may hold
MODULE = "module"  # an nn.Module instance: calling it yields a device tensor
MODULE_LIST = "module_list"  # nn.ModuleList / Sequential / ModuleDict: iterating yields modules
SELF = "self"
UNKNOWN = "unknown"


@dataclass(frozen=True, slots=True)
class Value:
    kind: str
    is_bool: bool = False  # a bool tensor: indexing with it is a boolean mask

    @property
    def is_device(self) -> bool:
        return self.kind == DEVICE

    @property
    def is_tensor(self) -> bool:
        return self.kind in (DEVICE, HOST_TENSOR)

    @property
    def is_host(self) -> bool:
        return self.kind in (HOST, NONE, HOST_TENSOR)


V_DEVICE = Value(DEVICE)
V_DEVICE_BOOL = Value(DEVICE, True)
V_HOST_TENSOR = Value(HOST_TENSOR)
V_HOST = Value(HOST)
V_NONE = Value(NONE)
V_MODULE = Value(MODULE)
V_MODULE_LIST = Value(MODULE_LIST)
V_SELF = Value(SELF)
V_UNKNOWN = Value(UNKNOWN)


def join(a: Value, b: Value) -> Value:
    if a == b:
        return a
    if a.kind == NONE:
        return b
    if b.kind == NONE:
        return a
    if a.kind == b.kind:
        return Value(a.kind, a.is_bool and b.is_bool)
    return V_UNKNOWN


_FACTORIES = catalog.names("factories", "names")
_LIKE = catalog.names("factories", "like")
_FROM_HOST = catalog.names("factories", "from_host_data")
_META_ATTRS = catalog.names("metadata", "attributes")
_META_METHODS = catalog.names("metadata", "methods")
_BOOL_FUNCS = catalog.names("bool_producing", "functions")
_BOOL_METHODS = catalog.names("bool_producing", "methods")
_HOST_FUNCS = catalog.names("host_tensor", "host_functions")
_DEVICE_CONSTRUCTOR = catalog.names("devices", "constructor")
_TORCH = catalog.prefix("namespaces", "torch")
_NN = catalog.prefix("namespaces", "nn")
_FUNCTIONAL = catalog.prefix("namespaces", "functional")
_NON_TENSOR_PREFIXES = catalog.prefixes("namespaces", "not_tensor_ops")
_MAX_SOURCES = 32
_TENSOR_ATTRS = catalog.names("tensor", "attributes")
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
_TENSOR_ANNOTATIONS = catalog.names("annotations", "tensor")
_BOOL_TENSOR_ANNOTATIONS = catalog.names("annotations", "bool_tensor")
_HOST_ANNOTATIONS = catalog.names("annotations", "host")
_MODULE_ANNOTATIONS = catalog.names("annotations", "module")
# Python sequence annotations (`list[int]`, `Sequence[Tensor]`): an element is picked on the host.
SEQUENCE_ANNOTATIONS = frozenset({"list", "List", "tuple", "Tuple", "Sequence"})
# Resolved through the imports, only torch's own spelling names nn.Module.
_MODULE_QUALIFIED = frozenset(name for name in _MODULE_ANNOTATIONS if name.startswith(_TORCH))
# A base class named like nn.Module (`Module`, `nn.Module`, `torch.nn.Module`) makes a module.
_MODULE_BASES = frozenset(name.rsplit(".", 1)[-1] for name in _MODULE_ANNOTATIONS)
_SUBMODULE_CONTAINERS = catalog.names("modules", "containers")
_MODULE_CONTAINERS = _SUBMODULE_CONTAINERS | catalog.names("modules", "parameter_containers")
_CALLABLE_CONTAINERS = catalog.names("modules", "callable_containers")
_TENSOR_CLASSES = catalog.names("modules", "tensor_classes")
_CALL_METHODS = catalog.names("modules", "call_methods")
_PARAMETER_ATTRS = catalog.names("modules", "parameter_attributes")
_REGISTER_TENSOR = catalog.names("modules", "register_tensor")
_REGISTER_MODULE = catalog.names("modules", "register_module")
_REGISTERS = _REGISTER_TENSOR | _REGISTER_MODULE
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
# Annotation wrappers that keep the inner kind (Optional[Tensor] is still a tensor when set).
_TRANSPARENT_WRAPPERS = frozenset({"Optional", "typing.Optional", "Final", "typing.Final", "Annotated"})


def _is_cpu_device(node: cst.BaseExpression, imports: ImportMap) -> bool:
    """device="cpu" / torch.device("cpu") / "cpu" literal: a host placement."""
    if isinstance(node, cst.SimpleString):
        return node.evaluated_value.split(":")[0] == "cpu"
    if isinstance(node, cst.Call) and imports.resolve(node.func) in _DEVICE_CONSTRUCTOR and node.args:
        return _is_cpu_device(node.args[0].value, imports)
    return False


def keyword(call: cst.Call, name: str) -> cst.BaseExpression | None:
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value == name:
            return arg.value
    return None


def positional(call: cst.Call) -> list[cst.BaseExpression]:
    return [a.value for a in call.args if a.keyword is None and not a.star]


def _is_true(node: cst.BaseExpression | None) -> bool:
    return isinstance(node, cst.Name) and node.value == "True"


# Methods only tensors have (graphlint/data/torch_values.toml): a name used as their receiver
# is a tensor even without an annotation.
_TENSOR_ONLY_METHODS = catalog.names("tensor", "only_methods")


def tensor_evidence(body: cst.CSTNode) -> set[str]:
    """Names that the function uses as tensors: receivers of tensor-only methods."""
    names: set[str] = set()
    for node in iter_code(body, skip=(cst.FunctionDef,)):
        if type(node) is cst.Call:  # exact type: isinstance on libcst's ABC-based classes is slow
            func = node.func
            if (isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name)
                    and func.attr.value in _TENSOR_ONLY_METHODS):
                names.add(func.value.value)
    return names


class ClassInfo:
    """What the methods of one class assign to `self.<attr>`, joined over the class."""

    def __init__(self, name: str, bases: list[str]):
        self.name = name
        self.bases = bases
        self.attrs: dict[str, Value] = {}
        self.is_module = False
        # Host attributes a method advances (`self.offset += n`): they change every call.
        self.advanced: set[str] = set()

    def assign(self, attr: str, value: Value) -> None:
        old = self.attrs.get(attr)
        self.attrs[attr] = value if old is None else join(old, value)


class ModuleFacts:
    """Per-file facts the inference needs: imports, classes, module-level host constants."""

    def __init__(self, module: cst.Module, imports: ImportMap):
        self.imports = imports
        self.classes: dict[str, ClassInfo] = {}
        self.constants: dict[str, Value] = {}
        self.functions: set[str] = set()
        for stmt in module.body:
            if isinstance(stmt, cst.SimpleStatementLine):
                for small in stmt.body:
                    if isinstance(small, cst.Assign) and len(small.targets) == 1:
                        target = small.targets[0].target
                        if isinstance(target, cst.Name) and _is_literal(small.value):
                            self.constants[target.value] = V_HOST
            elif isinstance(stmt, cst.FunctionDef):
                self.functions.add(stmt.name.value)

    def class_is_module(self, name: str, seen: frozenset[str] = frozenset()) -> bool:
        info = self.classes.get(name)
        if info is None or name in seen:
            return False
        for base in info.bases:
            short = base.rsplit(".", 1)[-1]
            if short in _MODULE_BASES:
                return True
            if self.class_is_module(short, seen | {name}):
                return True
        return False

    def lineage(self, name: str, seen: frozenset[str] = frozenset()) -> list[str]:
        """The class and its same-file bases, by name (each once, a cycle cut)."""
        info = self.classes.get(name)
        if info is None or name in seen:
            return []
        found = [name]
        for base in info.bases:
            found += [c for c in self.lineage(base.rsplit(".", 1)[-1], seen | {name}) if c not in found]
        return found

    def class_advanced(self, name: str) -> set[str]:
        return set().union(*(self.classes[c].advanced for c in self.lineage(name)))

    def class_attrs(self, name: str, seen: frozenset[str] = frozenset()) -> dict[str, Value]:
        """Attributes of a class and of its same-file bases (a subclass's own assignment wins)."""
        info = self.classes.get(name)
        if info is None or name in seen:
            return {}
        merged: dict[str, Value] = {}
        for base in info.bases:
            merged.update(self.class_attrs(base.rsplit(".", 1)[-1], seen | {name}))
        merged.update(info.attrs)
        return merged


def _is_literal(node: cst.BaseExpression) -> bool:
    if isinstance(node, (cst.Integer, cst.Float, cst.Imaginary, cst.SimpleString, cst.ConcatenatedString)):
        return True
    if isinstance(node, cst.Name) and node.value in ("True", "False", "None"):
        return True
    if isinstance(node, cst.UnaryOperation):
        return _is_literal(node.expression)
    if isinstance(node, cst.BinaryOperation):
        return _is_literal(node.left) and _is_literal(node.right)
    if isinstance(node, (cst.Tuple, cst.List)):
        return all(_is_literal(e.value) for e in node.elements)
    return False


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
        if _is_none(node.right):
            return left
        if _is_none(node.left):
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
                      if isinstance(s.slice, cst.Index) and not _is_none(s.slice.value)]
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


def _advanced_names(body: cst.BaseSuite) -> set[str]:
    """Locals a loop body advances: `n += k` or `n = n + k` (the name on both sides)."""
    names: set[str] = set()
    for node in iter_code(body, skip=(cst.FunctionDef, cst.ClassDef, cst.Lambda)):
        if type(node) is cst.AugAssign and isinstance(node.target, cst.Name):
            names.add(node.target.value)
        elif type(node) is cst.Assign and isinstance(node.value, cst.BinaryOperation):
            for target in node.targets:
                if isinstance(target.target, cst.Name) and any(
                        isinstance(n, cst.Name) and n.value == target.target.value
                        for n in (node.value.left, node.value.right)):
                    names.add(target.target.value)
    return names


def _steps_loop(stmt: cst.For | cst.While) -> bool:
    """Whether a loop may drive decode steps: `while not done:`, `for _ in range(n)` (also
    through `tqdm(...)`, `itertools.count()`). A loop over the items of a collection (`for
    group in groups:`, `range(len(items))`) walks data inside one step: if the step is captured,
    its counters replay the same values, which the capture may freeze."""
    if isinstance(stmt, cst.While):
        return True
    iterable = stmt.iter
    while isinstance(iterable, cst.Call) and iterable.args and (dotted(iterable.func) or "").rsplit(".", 1)[-1] in (
            "tqdm", "trange", "track"):
        iterable = iterable.args[0].value
    if not isinstance(iterable, cst.Call):
        return False
    name = (dotted(iterable.func) or "").rsplit(".", 1)[-1]
    if name in ("count", "trange"):
        return True
    if name != "range":
        return False
    # `range(len(items))` walks items; `range(max_new_tokens)` steps.
    return not any(isinstance(a.value, cst.Call) and dotted(a.value.func) == "len" for a in iterable.args)


def _advanced_object_attrs(body: cst.BaseSuite) -> set[str]:
    """Attributes of objects other than `self` that a loop body advances (`params.seqlen_offset
    += n`): the object is passed to the step, and the attribute changes between calls."""
    attrs: set[str] = set()
    for node in iter_code(body, skip=(cst.FunctionDef, cst.ClassDef, cst.Lambda)):
        if (type(node) is cst.AugAssign and isinstance(node.target, cst.Attribute)
                and isinstance(node.target.value, cst.Name) and node.target.value.value != "self"
                and isinstance(node.operator, (cst.AddAssign, cst.SubtractAssign))):
            attrs.add(node.target.attr.value)
    return attrs


def _default_code(param: cst.Param) -> str | None:
    """A parameter's default for the summary: "none", "host" (a literal) or None (no default,
    or one whose kind is not known)."""
    if param.default is None:
        return None
    if _is_none(param.default):
        return "none"
    return "host" if _is_literal(param.default) else "other"


def _is_none(node: cst.BaseExpression) -> bool:
    return isinstance(node, cst.Name) and node.value == "None"


class FunctionFacts:
    """The inferred Value of every expression node of one function body, by node identity."""

    def __init__(self) -> None:
        self.values: dict[int, Value] = {}
        # Names assigned before entering each loop, to spot loop-carried cache growth.
        self.loop_depth = 0
        # Per-step Python values by dataflow: parameters that a caller's loop advances between
        # calls, and `self` attributes the class advances with an augmented assignment.
        self.per_step_params: set[str] = set()
        self.per_step_attrs: set[str] = set()
        self.per_step_param_attrs: set[str] = set()  # `param.<attr>` a caller's loop advances
        self.per_step_names: set[str] = set()  # parameters named as a per-step value elsewhere

    def of(self, node: cst.CSTNode) -> Value:
        return self.values.get(id(node), V_UNKNOWN)


_KIND_CODES = {DEVICE: "device", HOST_TENSOR: "host_tensor", HOST: "host", NONE: "none", MODULE: "module",
               MODULE_LIST: "module_list"}


def encode(value: Value) -> str | None:
    """A Value as the string kept in summaries; None for what is not known."""
    if value.kind.startswith("tuple:"):
        return value.kind
    code = _KIND_CODES.get(value.kind)
    if code == "device" and value.is_bool:
        return "device_bool"
    return code


def decode(code: str) -> Value:
    if code == "device_bool":
        return V_DEVICE_BOOL
    return Value(code)


@dataclass
class ExternalFacts:
    """What other functions of the linted code say about this file (graphlint.callgraph.
    summaries joins them): parameter kinds from every call site, return kinds of callees by
    callee key, attribute kinds inherited from classes in other files."""

    params: dict[str, dict[str, str]]  # function qualname -> parameter -> kind code
    returns: dict[str, str]  # callee key (see Inference.callee_key) -> kind code
    attrs: dict[str, dict[str, str]]  # class name -> attribute -> kind code
    steps: dict[str, list[str]] = None  # function qualname -> parameters a caller's loop advances
    step_names: list[str] = None  # parameter names some caller's loop advances, project-wide
    step_attrs: list[str] = None  # attributes of passed objects some loop advances, project-wide

    @classmethod
    def from_dict(cls, data: dict | None) -> "ExternalFacts | None":
        if not data:
            return None
        return cls(data.get("params", {}), data.get("returns", {}), data.get("attrs", {}), data.get("steps", {}),
                   data.get("step_names", []), data.get("step_attrs", []))


# Callees in these libraries are never linted functions: their calls are not summarised.
_LIBRARY_PREFIXES = (_TORCH, "numpy.", "math.", "os.", "sys.", "re.", "typing.", "functools.", "itertools.",
                     "collections.", "dataclasses.", "logging.", "time.", "random.", "json.", "triton.",
                     "contextlib.", "asyncio.", "copy.", "inspect.", "enum.", "abc.", "warnings.", "pathlib.")


class Inference:
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
        if param.default is not None and _is_literal(param.default) and not _is_none(param.default):
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
            stepping = _steps_loop(stmt)
            advanced = self._advanced_by_loop[id(stmt)] = (frozenset(_advanced_names(stmt.body)) if stepping
                                                           else frozenset())
            if stepping:
                self.loop_attrs |= _advanced_object_attrs(stmt.body)
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
                self.env[small.target.value] = _binop(left, right)
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

    # ----- expressions ----------------------------------------------------------------
    def expr(self, node: cst.BaseExpression) -> Value:
        value = self._expr(node)
        self.out.values[id(node)] = value
        return value

    def _expr(self, node: cst.BaseExpression) -> Value:  # noqa: C901 - one dispatch table
        if isinstance(node, cst.Name):
            return self._name(node)
        if isinstance(node, (cst.Integer, cst.Float, cst.Imaginary, cst.SimpleString)):
            return V_HOST
        if isinstance(node, cst.FormattedString):
            for part in node.parts:
                if isinstance(part, cst.FormattedStringExpression):
                    self._sink_expr(part.expression)
            return V_HOST
        if isinstance(node, cst.ConcatenatedString):
            self._children(node)
            return V_HOST
        if isinstance(node, cst.Attribute):
            return self._attribute(node)
        if isinstance(node, cst.Call):
            return self._call(node)
        if isinstance(node, cst.Subscript):
            return self._subscript(node)
        if isinstance(node, cst.BinaryOperation):
            left = self.expr(node.left)
            right = self.expr(node.right)
            result = _binop(left, right)
            if isinstance(node.operator, (cst.BitAnd, cst.BitOr, cst.BitXor)) and left.is_bool and right.is_bool:
                result = Value(result.kind, True)
            return result
        if isinstance(node, cst.UnaryOperation):
            inner = self.expr(node.expression)
            if isinstance(node.operator, cst.Not):
                return V_HOST
            return inner
        if isinstance(node, cst.BooleanOperation):
            return join(self.expr(node.left), self.expr(node.right))
        if isinstance(node, cst.Comparison):
            return self._comparison(node)
        if isinstance(node, cst.IfExp):
            self._sink_expr(node.test)
            return join(self.expr(node.body), self.expr(node.orelse))
        if isinstance(node, (cst.Tuple, cst.List, cst.Set)):
            values = [self.expr(e.value) for e in node.elements]
            # An empty literal is usually a list that tensors get appended to: unknown.
            if values and all(v.kind in (HOST, NONE) for v in values):
                return V_HOST
            # A sequence of CPU tensors keeps torch.cat/stack of it on the host. A sequence of
            # device tensors stays unknown: its own truth value is a host question.
            if values and all(v.kind == HOST_TENSOR for v in values):
                return V_HOST_TENSOR
            return V_UNKNOWN
        if isinstance(node, cst.Dict):
            for element in node.elements:
                if isinstance(element, cst.DictElement):
                    self.expr(element.key)
                    self.expr(element.value)
                else:
                    self.expr(element.value)
            return V_UNKNOWN
        if isinstance(node, (cst.ListComp, cst.SetComp, cst.GeneratorExp, cst.DictComp)):
            return self._comprehension(node)
        if isinstance(node, cst.Lambda):
            saved = dict(self.env)
            for param in node.params.params:
                self.env[param.name.value] = V_UNKNOWN
            self.expr(node.body)
            self.env = saved
            return V_UNKNOWN
        if isinstance(node, cst.NamedExpr):
            value = self.expr(node.value)
            self.bind_target(node.target, value)
            return value
        if isinstance(node, cst.Await):
            self.expr(node.expression)
            return V_UNKNOWN
        if isinstance(node, cst.Ellipsis):
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
            sources = {s for s in self._sources(node) if s[2:] in self._device_params and s.startswith("p:")}
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
        if _is_none(device):
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


def _binop(left: Value, right: Value) -> Value:
    if left.kind == DEVICE or right.kind == DEVICE:
        return V_DEVICE
    if HOST_TENSOR in (left.kind, right.kind) and {left.kind, right.kind} <= {HOST_TENSOR, HOST}:
        return V_HOST_TENSOR
    if left.kind == HOST and right.kind == HOST:
        return V_HOST
    return V_UNKNOWN


def _tensor_result(args: list[Value]) -> Value:
    """A torch op's result lives where its tensor inputs live; unknown inputs mean device."""
    tensors = [a for a in args if a.kind in (DEVICE, HOST_TENSOR, UNKNOWN)]
    if tensors and all(a.kind == HOST_TENSOR for a in tensors):
        return V_HOST_TENSOR
    if not tensors and args and all(a.kind in (HOST, NONE) for a in args):
        return V_HOST_TENSOR
    return V_DEVICE


# Iterations of a loop body before the head is taken as it stands: each iteration moves at least
# one name up a lattice of height four, and real loops settle in two or three.
_LOOP_ITERATIONS = 6


def join_loop(a: Value, b: Value) -> Value:
    """The join at a loop head: a name that holds a device tensor on entry or after some
    iteration holds one in some iteration of every run, so DEVICE wins over other kinds."""
    if a == b:
        return a
    if a.kind == DEVICE and b.kind == DEVICE:
        return Value(DEVICE, a.is_bool and b.is_bool)
    if a.kind == DEVICE and b.kind != NONE:
        return a
    if b.kind == DEVICE and a.kind != NONE:
        return b
    return join(a, b)


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


def collect_class(node: cst.ClassDef, facts: ModuleFacts) -> ClassInfo:
    """Attribute kinds assigned anywhere in the class: `self.x = ...`, `register_buffer`,
    `nn.Parameter`, submodules, and class-level annotations."""
    bases = [dotted(b) or "" for b in class_bases(node)]
    info = ClassInfo(node.name.value, bases)
    facts.classes[info.name] = info
    body = node.body.body if isinstance(node.body, cst.IndentedBlock) else node.body.body
    for stmt in body:
        if isinstance(stmt, cst.SimpleStatementLine):
            for small in stmt.body:
                if isinstance(small, cst.AnnAssign) and isinstance(small.target, cst.Name):
                    info.assign(small.target.value, annotation_value(small.annotation.annotation, facts.imports))
        if not isinstance(stmt, cst.FunctionDef):
            continue
        inference = Inference(facts, None)
        inference.class_attrs = info.attrs
        inference.bind_params(stmt.params, is_method=True)
        inference.block(stmt.body)
        for attr, value in inference.self_attrs.items():
            info.assign(attr, value)
        info.advanced |= inference.advanced_attrs
        for call, name in _register_calls(stmt):
            method = call.func.attr.value if isinstance(call.func, cst.Attribute) else ""
            if method in _REGISTER_TENSOR:
                info.assign(name, V_DEVICE)
            elif method in _REGISTER_MODULE:
                info.assign(name, V_MODULE)
    return info


def _register_calls(func: cst.FunctionDef) -> list[tuple[cst.Call, str]]:
    found: list[tuple[cst.Call, str]] = []
    for node in iter_code(func.body):
        if (type(node) is cst.Call and isinstance(node.func, cst.Attribute)
                and isinstance(node.func.value, cst.Name)
                and node.func.value.value == "self"
                and node.func.attr.value in _REGISTERS
                and node.args and isinstance(node.args[0].value, cst.SimpleString)):
            found.append((node, node.args[0].value.evaluated_value))
    return found
