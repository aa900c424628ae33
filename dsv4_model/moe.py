"""Mixture of experts of the graph-safe step: sqrt-softplus router (or the token hash table),
the chosen experts gathered from stacked weights and run with bmm, plus a shared expert.

No per-expert loop and no host-side counts: `bincount(...).tolist()` and
`torch.where(indices == e)` read device values on the host; here the k chosen experts of
every row are gathered with one index_select, and the load counts go to a static buffer.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from .config import DSV4Config
from .weights import MoEWeights


def clamped_swiglu(h: torch.Tensor, inter: int, limit: float) -> torch.Tensor:
    """silu(min(w1 x, L)) * clamp(w3 x, -L, L) in fp32; h holds w1 x over w3 x on the last dim."""
    gate, up = h[..., :inter].float(), h[..., inter:].float()
    return F.silu(torch.clamp(gate, max=limit)) * torch.clamp(up, min=-limit, max=limit)


class MoE(nn.Module):
    def __init__(self, w: MoEWeights, cfg: DSV4Config, batch: int, device: torch.device):
        super().__init__()
        self.w = w
        self.k = cfg.n_active
        self.inter = cfg.moe_inter
        self.limit = cfg.swiglu_limit
        self.route_scale = cfg.route_scale
        self.hash_routed = w.hash_routed
        # Tokens routed to each expert this step (a load monitor), written without a sync.
        self.register_buffer("expert_load", torch.zeros(cfg.n_experts, dtype=torch.int64, device=device))
        self.register_buffer("_ones", torch.ones(batch * cfg.n_active, dtype=torch.int64, device=device))

    def route(self, x: torch.Tensor, tok: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Expert indices [B, k] and routing weights [B, k] fp32. The bias steers selection only."""
        scores = F.softplus(F.linear(x.float(), self.w.gate)).sqrt()
        if self.hash_routed:
            idx = self.w.tid2eid.index_select(0, tok)
        else:
            idx = (scores + self.w.bias).topk(self.k, dim=-1).indices
        g = scores.gather(1, idx)
        return idx, g / g.sum(dim=-1, keepdim=True) * self.route_scale

    def forward(self, x: torch.Tensor, tok: torch.Tensor) -> torch.Tensor:
        """x: the normed sublayer input [B, D]; tok: the step's tokens [B] (hash routing)."""
        w = self.w
        B, D = x.shape
        idx, g = self.route(x, tok)
        flat = idx.flatten()
        self.expert_load.zero_()
        self.expert_load.scatter_add_(0, flat, self._ones)

        # The k gathered [2I, D] matrices of a row stack into one [k * 2I, D] operand.
        w13 = w.w13.index_select(0, flat).view(B, -1, D)
        h = torch.bmm(w13, x.unsqueeze(-1)).view(B * self.k, -1)
        act = clamped_swiglu(h, self.inter, self.limit) * g.reshape(-1, 1)
        y = torch.bmm(w.w2.index_select(0, flat), act.to(x.dtype).unsqueeze(-1)).squeeze(-1)
        routed = y.view(B, self.k, D).float().sum(dim=1)

        shared = clamped_swiglu(F.linear(x, w.shared_w13), self.inter, self.limit)
        out = routed + F.linear(shared.to(x.dtype), w.shared_w2)
        return out.to(x.dtype)
