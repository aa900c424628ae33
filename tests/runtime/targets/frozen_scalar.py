"""A Python int set by prepare() is used inside the step: a graph freezes the captured value."""
import torch

from _base import StaticStep


class FrozenScalar(StaticStep):
    def __init__(self, device, size: int = 8):
        super().__init__(device, size)
        self.pos = 0
        self.buf = torch.zeros(1, device=self.device)
        self.cache = torch.arange(8.0, device=self.device)

    def prepare(self, step: int):
        super().prepare(step)
        self.pos = step  # host-side position: fine outside the graph, frozen inside it

    def step(self):
        self.buf.fill_(self.pos)  # PLANTED: fill
        window = self.cache[self.pos % 8 : self.pos % 8 + 1]  # PLANTED: slice
        self.out.copy_(self.x * self.buf + window)
        return self.out


def make(device, size: int = 8):
    return FrozenScalar(device, size)
