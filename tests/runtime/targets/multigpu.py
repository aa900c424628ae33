"""The seeds' multi-GPU bug, planted in the step: on cuda:N (N >= 1) the work goes to the device's
default stream, as it did when `torch.cuda.graph(g)` was used without `stream=` after
`torch.cuda.set_device(N)`. On cuda:0 (and the CPU) the step is clean.

Expected: cuda:0 captures and replays correctly; cuda:1 gives "The CUDA Graph is empty" and a
stale replay, reported without stopping the run on cuda:0.
"""
import contextlib

import torch

from _base import StaticStep


class DefaultStreamOnSecondGpu(StaticStep):
    def step(self):
        wrong = self.device.type == "cuda" and (self.device.index or 0) >= 1
        stream = torch.cuda.default_stream(self.device) if wrong else None
        with torch.cuda.stream(stream) if stream is not None else contextlib.nullcontext():  # PLANTED: default-stream
            self.out.copy_(self.x @ self.w)
        return self.out


def make(device, size: int = 8):
    return DefaultStreamOnSecondGpu(device, size)
