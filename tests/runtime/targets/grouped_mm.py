"""An MoE-style grouped matmul inside the step: `torch._grouped_mm` on float32 syncs on CUDA (torch 2.11,
H200; bfloat16 does not) although its CPU run shows nothing; only the catalogue tells the emulation."""
import torch

from _base import StaticStep


class GroupedMM(StaticStep):
    def __init__(self, device, size: int = 8, experts: int = 2, dtype: str = "float32"):
        super().__init__(device, size)
        g = torch.Generator().manual_seed(1)
        self.dtype = getattr(torch, dtype)
        self.experts = (torch.randn(experts, size, size, generator=g) / size**0.5).to(self.device, self.dtype)
        # Two rows per expert: fixed group boundaries in a static device buffer.
        self.offs = torch.arange(2, 2 * experts + 1, 2, dtype=torch.int32, device=self.device)

    def step(self):
        rows = self.x.reshape(-1, self.size).expand(2 * self.experts.shape[0], self.size).to(self.dtype).contiguous()
        y = torch._grouped_mm(rows, self.experts, offs=self.offs)  # PLANTED: grouped_mm
        self.out.copy_(y.sum(0))
        return self.out


def make(device, size: int = 8, dtype: str = "float32"):
    return GroupedMM(device, size, dtype=dtype)
