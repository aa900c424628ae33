"""Synchronisations that CUDA's sync debug mode does not report (RUNTIME_NOTES, H200 table):
`torch.cuda.synchronize()`, `Event.synchronize()` and a pageable `non_blocking=True` copy.
The harness reports them by patching the calls and watching the copies."""
import torch

from _base import StaticStep


class MissedSyncs(StaticStep):
    def __init__(self, device, size: int = 8):
        super().__init__(device, size)
        self.host = torch.ones(size)  # pageable host memory
        self.on_cuda = self.device.type == "cuda"
        self.event = torch.cuda.Event() if self.on_cuda else None

    def step(self):
        self.out.copy_(self.x @ self.w)
        torch.cuda.synchronize()  # PLANTED: device-sync
        if self.on_cuda:
            self.event.record()
            self.event.synchronize()  # PLANTED: event-sync
            self.x.copy_(self.host, non_blocking=True)  # PLANTED: pageable
        return self.out


def make(device, size: int = 8):
    return MissedSyncs(device, size)
