"""one_hot in the step, as MoE routers write it. With num_classes given, the CUDA kernel leaves the
range check to a device assert (no sync); without it, the host reads max() to size the output."""
import torch
import torch.nn.functional as F

from _base import StaticStep


class OneHot(StaticStep):
    def __init__(self, device, size: int = 8, given: bool = True):
        super().__init__(device, size)
        self.given = given
        self.idx = torch.zeros(size, dtype=torch.long, device=self.device)

    def prepare(self, step):
        super().prepare(step)
        self.idx.copy_(torch.arange(self.size, device=self.device) % self.size)

    def step(self):
        if self.given:
            mask = F.one_hot(self.idx, num_classes=self.size)  # PLANTED: given
        else:
            mask = F.one_hot(self.idx)  # PLANTED: inferred
        self.out.copy_(mask.float() @ torch.tanh(self.x))
        return self.out


def make(device, size: int = 8, given: bool = True):
    return OneHot(device, size, given)
