"""The kinds of value the inference gives (device tensor, host tensor, host value, None, module,
module list, self, unknown), how two of them join at a branch and at a loop head, what an
operator gives on two of them, and the codes the summaries keep them as."""
from __future__ import annotations

from dataclasses import dataclass

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


def binop(left: Value, right: Value) -> Value:
    if left.kind == DEVICE or right.kind == DEVICE:
        return V_DEVICE
    if HOST_TENSOR in (left.kind, right.kind) and {left.kind, right.kind} <= {HOST_TENSOR, HOST}:
        return V_HOST_TENSOR
    if left.kind == HOST and right.kind == HOST:
        return V_HOST
    return V_UNKNOWN


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
