"""Where each tensor of a step would live on CUDA, in the CPU emulation (where every tensor is a CPU one).

Host tensors are those the step makes with a factory given no device (`torch.arange(n)`) and the
outputs of ops whose tensor inputs are all host tensors; every other tensor (parameters, buffers, the
target's own tensors, tensors made with a device, outputs of ops on them) would be on the device.
A host tensor moved onto the device inside the step (`inv_freq.to(x.device)`) is the host-to-device
copy that the CUDA run reports (sync debug mode) and that fails capture; reading a host tensor's
value (`bool(t)`, `.item()`) is no device read.
"""
from __future__ import annotations

import weakref
from typing import Any, Callable

import torch

# Factories that make a tensor on the default device (the host) unless given a device
# (torch.tensor of Python data: torch.distributions' parameters, for one).
FACTORIES = frozenset({torch.arange, torch.zeros, torch.ones, torch.empty, torch.full, torch.rand, torch.randn,
                       torch.randint, torch.linspace, torch.logspace, torch.eye, torch.range, torch.tensor,
                       torch.as_tensor, torch.scalar_tensor})
# Event kinds that are a device-to-host read: none when the tensor read is a host tensor.
HOST_READS = frozenset({"host-read", "d2h-copy"})
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
    """Host tensors of the step in progress, by storage address, each held by a weak reference: on
    the CPU a freed host tensor's address is soon a device tensor's, so a dead entry says nothing."""

    def __init__(self) -> None:
        self.host: dict[int, weakref.ref] = {}

    def clear(self) -> None:
        self.host.clear()

    def _mark(self, t: torch.Tensor) -> None:
        key = storage_key(t)
        if key:
            self.host[key] = weakref.ref(t)

    def is_host(self, t: Any) -> bool:
        if not isinstance(t, torch.Tensor):
            return False
        ref = self.host.get(storage_key(t))
        return ref is not None and ref() is not None

    def reads_host(self, kind: str, args) -> bool:
        """A read of a host tensor's value (`bool(host_t)`): no device sync on CUDA."""
        return kind in HOST_READS and bool(self.host) and bool(args) and self.is_host(args[0])

    def propagate(self, ins: list, outs: list) -> None:
        """Outputs of an op whose tensor inputs are all host tensors are host tensors."""
        if ins and all(self.is_host(t) for t in ins):
            for t in outs:
                self._mark(t)

    def call(self, func, args, kwargs, proceed: Callable[[], Any], emit: Callable[[str, str, str], Any]):
        """A watched call: a factory without a device makes host tensors; a move of a host tensor
        to the device is reported as an h2d-copy (as the CUDA run reports it)."""
        if func in FACTORIES:
            out = proceed()
            if kwargs.get("device") is None and isinstance(out, torch.Tensor):
                self._mark(out)
            return out
        source = args[0] if args else None
        if self.is_host(source) and _moves_to_device(func, args, kwargs):
            emit("h2d-copy", "Tensor.to" if func is torch.Tensor.to else "Tensor.cuda", REASON)
            out = proceed()
            if isinstance(out, torch.Tensor):
                if storage_key(out) == storage_key(source):
                    # On the CPU the move is a no-op that returns the host tensor itself; on CUDA
                    # it is a new device tensor and the source stays on the host (moved again
                    # later in the step, it is copied again: gemma3n's `eps.to(x.device)` twice).
                    out = out.clone()
                self.host.pop(storage_key(out), None)  # the copy lives on the device
            return out
        return proceed()
