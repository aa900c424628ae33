"""The clean step with its static buffers registered on an nn.Module (the layout Inductor's CUDA
graphs accept for in-place writes): the same math as clean.py."""
import torch


class CleanModule(torch.nn.Module):
    max_steps = 64

    def __init__(self, device, size: int = 8):
        super().__init__()
        self.device = torch.device(device)
        g = torch.Generator().manual_seed(0)
        self.size = size
        self.register_buffer("w", (torch.randn(size, size, generator=g) / size**0.5).to(self.device))
        self.register_buffer("x", torch.zeros(size, device=self.device))
        self.register_buffer("state", torch.zeros(size, device=self.device))
        self.register_buffer("out", torch.zeros(size, device=self.device))

    def reset(self):
        self.state.zero_()
        self.out.zero_()

    def prepare(self, step: int):
        fresh = torch.linspace(-1.0, 1.0, self.size, device=self.device) * (step + 1) + 0.25 * (step % 3)
        self.x.copy_(fresh)

    def forward(self):
        h = torch.tanh(self.x @ self.w)
        self.state.mul_(0.5).add_(h)
        self.out.copy_(torch.where(self.state > 0, self.state, 0.0))
        return self.out, self.state

    def step(self):
        return self()


def make(device, size: int = 8):
    return CleanModule(device, size)
