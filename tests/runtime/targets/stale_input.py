"""prepare() rebinds the input attribute to a new tensor instead of copying into the static buffer."""
import torch

from _base import StaticStep


class StaleInput(StaticStep):
    def prepare(self, step: int):
        self.x = self.fresh_input(step)  # PLANTED: rebind

    def step(self):
        h = torch.tanh(self.x @ self.w)  # PLANTED: read
        self.out.copy_(h)
        return self.out


def make(device, size: int = 8):
    return StaleInput(device, size)
