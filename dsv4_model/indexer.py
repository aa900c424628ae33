"""Lightning indexer of the graph-safe CSA layers: picks a fixed top-k of compressed slots.

It scores every slot of the static cache and masks unfinished ones with -inf, so `topk` always
has the same k and shape; a k computed from the position (`min(K, (t+1)//4)`) would be frozen
at capture. Selected indices that point at masked slots are flagged invalid, not removed.

Departure from S1 (shared with the reference port): a slot where every head's ReLU is zero
scores exactly 0, so exact ties are common in a random model and `topk` may break them either
way. Both decoders add -slot * 1e-30 to the scores, which orders exact ties toward the older
slot and is far below the resolution of any non-zero score.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from .compressor import Compressor
from .config import DSV4Config
from .context import StepContext
from .rope import apply_rope
from .weights import IndexerWeights

TIE_BREAK = 1e-30


class Indexer(nn.Module):
    def __init__(self, w: IndexerWeights, cfg: DSV4Config, batch: int, dtype: torch.dtype,
                 device: torch.device):
        super().__init__()
        self.w = w
        self.heads = cfg.index_heads
        self.dim = cfg.index_dim
        self.topk = cfg.index_topk
        self.rope_dim = cfg.rope_dim
        self.weight_scale = cfg.index_dim ** -0.5 * cfg.index_heads ** -0.5
        self.compressor = Compressor(w.compressor, cfg, batch, dtype, device)
        n_slots = self.compressor.cache.shape[1]
        self.register_buffer("tie_break", torch.arange(n_slots, dtype=torch.float32, device=device) * -TIE_BREAK)

    def reset(self) -> None:  # graphlint: host
        self.compressor.reset()

    def reset_row(self, row: int) -> None:  # graphlint: host
        self.compressor.reset_row(row)

    def forward(self, u: torch.Tensor, c_q: torch.Tensor, ctx: StepContext
                ) -> tuple[torch.Tensor, torch.Tensor]:
        """Return the selected slots [B, K] (long) and whether each is a finished slot [B, K]."""
        q = F.linear(c_q, self.w.wq_b).unflatten(-1, (self.heads, self.dim))
        cos, sin = ctx.rope["compress"]
        apply_rope(q, cos.unsqueeze(1), sin.unsqueeze(1), self.rope_dim)
        rc = ctx.ratios[4]
        self.compressor.forward(u, rc)
        weights = F.linear(u, self.w.weights_proj) * self.weight_scale
        # I_s = sum_h w_h * relu(q_h . k_s), over every slot of the static cache.
        scores = torch.einsum("bhd,bnd->bhn", q, self.compressor.cache).relu()
        scores = (scores * weights.unsqueeze(-1)).sum(dim=1) + self.tie_break
        scores = scores.masked_fill(~rc.valid, float("-inf"))
        idx = scores.topk(self.topk, dim=-1).indices
        return idx, idx < rc.n_valid.unsqueeze(1)
