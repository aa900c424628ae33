"""Where each tensor of a step would live on CUDA, in the CPU emulation (where every tensor is a CPU one).

Host tensors are those the step makes with a factory given no device (`torch.arange(n)`) and the
outputs of ops whose tensor inputs are all host tensors; every other tensor (parameters, buffers, the
target's own tensors, tensors made with a device, outputs of ops on them) would be on the device.
A host tensor moved onto the device inside the step (`inv_freq.to(x.device)`) is the host-to-device
copy that the CUDA run reports (sync debug mode) and that fails capture.
"""
from __future__ import annotations

from typing import Any, Callable

import torch

# Factories that make a tensor on the default device (the host) unless given a device.
FACTORIES = frozenset({torch.arange, torch.zeros, torch.ones, torch.empty, torch.full, torch.rand, torch.randn,
                       torch.randint, torch.linspace, torch.logspace, torch.eye, torch.range})
MOVES = frozenset({torch.Tensor.to, torch.Tensor.cuda})
WATCHED = FACTORIES | MOVES
REASON = ("a host tensor (made in the step without a device) is copied to the device inside the step: a "
          "blocking host-to-device copy each step, which fails capture (make it once on the device at build "
          "time, or create it with device=)")


def storage_key(t: torch.Tensor) -> int:
    try:
        return t.untyped_storage().data_ptr()
    except Exception:  # sparse, nested or otherwise storage-less tensors
        return 0


def _moves_to_device(func, args, kwargs) -> bool:
    """The call names a device other than the host (`.to(x.device)` on the emulation's CPU counts:
    on CUDA x.device is the GPU), or is `.cuda()`."""
    if func is torch.Tensor.cuda:
        return True
    candidates = list(args[1:]) + [kwargs.get("device")]
    for value in candidates:
        if isinstance(value, torch.device):
            return True  # a device object: the target's (emulated) device, not a literal "cpu"
        if isinstance(value, str) and not value.startswith("cpu"):
            return True
        if isinstance(value, torch.Tensor):
            return storage_key(value) != 0  # `.to(other)`: other's device
    return False


class Residence:
    """Host tensors of the step in progress, by storage."""

    def __init__(self) -> None:
        self.host: set[int] = set()

    def clear(self) -> None:
        self.host.clear()

    def is_host(self, t: Any) -> bool:
        return isinstance(t, torch.Tensor) and storage_key(t) in self.host

    def propagate(self, ins: list, outs: list) -> None:
        """Outputs of an op whose tensor inputs are all host tensors are host tensors."""
        if ins and all(storage_key(t) in self.host for t in ins):
            self.host.update(k for k in map(storage_key, outs) if k)

    def call(self, func, args, kwargs, proceed: Callable[[], Any], emit: Callable[[str, str, str], Any]):
        """A watched call: a factory without a device makes host tensors; a move of a host tensor
        to the device is reported as an h2d-copy (as the CUDA run reports it)."""
        if func in FACTORIES:
            out = proceed()
            if kwargs.get("device") is None and isinstance(out, torch.Tensor):
                self.host.add(storage_key(out))
            return out
        source = args[0] if args else None
        if self.is_host(source) and _moves_to_device(func, args, kwargs):
            emit("h2d-copy", "Tensor.to" if func is torch.Tensor.to else "Tensor.cuda", REASON)
            out = proceed()
            if isinstance(out, torch.Tensor):
                self.host.discard(storage_key(out))  # the copy lives on the device
            return out
        return proceed()
