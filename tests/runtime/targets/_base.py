"""Shared static buffers for the planted targets: an input, a weight, a running state, an output."""
import torch


class StaticStep:
    """A tiny recurrent step over static buffers; subclasses plant one hazard each."""

    max_steps = 64

    def __init__(self, device, size: int = 8):
        self.device = torch.device(device)
        g = torch.Generator().manual_seed(0)
        self.size = size
        self.w = (torch.randn(size, size, generator=g) / size**0.5).to(self.device)
        self.x = torch.zeros(size, device=self.device)  # static input buffer
        self.state = torch.zeros(size, device=self.device)
        self.out = torch.zeros(size, device=self.device)  # static output buffer

    def reset(self):
        self.state.zero_()
        self.out.zero_()

    def fresh_input(self, step: int) -> torch.Tensor:
        # Host-side, outside the graph: different data at every step, some of it negative.
        return torch.linspace(-1.0, 1.0, self.size, device=self.device) * (step + 1) + 0.25 * (step % 3)

    def prepare(self, step: int):
        self.x.copy_(self.fresh_input(step))
