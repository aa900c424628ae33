"""The step's work runs outside the capturing device or stream: the graph is empty, replay is stale.

`make`: on the CPU emulation the work runs on the `meta` device; on CUDA it runs on host tensors,
so nothing reaches the capturing stream. `make_side_stream` (CUDA only): the work is launched on a
second stream of the same device that is not joined to the capturing one.
"""
import torch

from _base import StaticStep


class OtherDevice(StaticStep):
    def __init__(self, device, size: int = 8):
        super().__init__(device, size)
        other = "meta" if self.device.type == "cpu" else "cpu"
        self.work_w = self.w.to(other)
        self.work_x = torch.zeros(size, device=other)
        self.work_out = torch.zeros(size, device=other)

    def prepare(self, step: int):
        super().prepare(step)
        self.work_x.copy_(self.fresh_input(step).to(self.work_x.device))

    def step(self):
        self.work_out.copy_(self.work_x @ self.work_w)  # PLANTED: other-device
        return self.work_out


class SideStream(StaticStep):
    def __init__(self, device, size: int = 8):
        super().__init__(device, size)
        self.side = torch.cuda.Stream(device=self.device)

    def step(self):
        with torch.cuda.stream(self.side):
            self.out.copy_(self.x @ self.w)  # PLANTED: side-stream
        return self.out


def make(device, size: int = 8):
    return OtherDevice(device, size)


def make_side_stream(device, size: int = 8):
    return SideStream(device, size)
