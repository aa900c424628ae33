"""The runner behind the adapter target (adapter.py): the hazards live here, one call away from step()."""
import torch


class Runner:
    def __init__(self, device, size: int):
        g = torch.Generator().manual_seed(1)
        self.w = (torch.randn(size, size, generator=g) / size**0.5).to(device)
        self.scale = torch.ones(1, device=device)

    def run(self, x, out):
        h = torch.tanh(self.w @ self.w.t() @ self.w)
        peak = h.abs().max().item()  # PLANTED: item
        kept = torch.nonzero(h > 0)  # PLANTED: nonzero
        out.copy_(self.mix(h)[0] * self.scale + kept.shape[0] * 0)
        return out

    def mix(self, h):
        if h.sum() > 0:  # PLANTED: branch
            return h * 2
        return h
