"""The step returns a boolean-mask selection: its shape depends on the data."""
import torch

from _base import StaticStep


class DynamicOutput(StaticStep):
    def step(self):
        h = self.x @ self.w
        return h[h > 0]  # PLANTED: mask


def make(device, size: int = 8):
    return DynamicOutput(device, size)
