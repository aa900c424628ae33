"""KV compressor of the graph-safe step: gated pooling of m tokens into one cache entry.

It runs on every step and writes its candidate entry unconditionally into slot pos // m. Until
the window's last token that slot is masked out of attention (slot >= (pos+1) // m), and the
boundary step overwrites it with the final value. A compressor that returned None off its
boundary would bake whichever branch ran at capture into the graph.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from .config import DSV4Config
from .context import RatioContext
from .norms import rms_norm
from .rope import apply_rope
from .weights import CompressorWeights


class Compressor(nn.Module):
    """State A (values) and Z (gate logits) [B, c*m, c*d] fp32, and the cache [B, N, d].

    CSA (m = 4, c = 2) keeps the previous window in rows [0, m) and the current one in rows
    [m, 2m); each entry pools the previous window's first d channels with the current window's
    last d channels. HCA (c = 1) pools the current window only.
    """

    def __init__(self, w: CompressorWeights, cfg: DSV4Config, batch: int, dtype: torch.dtype,
                 device: torch.device):
        super().__init__()
        self.w = w
        self.m = m = w.ratio
        self.d = d = w.head_dim
        self.overlap = w.overlap
        c = 2 if self.overlap else 1
        self.rope_dim = cfg.rope_dim
        self.norm_eps = cfg.norm_eps
        self.register_buffer("A", torch.zeros(batch, c * m, c * d, dtype=torch.float32, device=device))
        self.register_buffer("Z", torch.full_like(self.A, float("-inf")))
        self.register_buffer("cache", torch.zeros(batch, cfg.max_seq_len // m, d, dtype=dtype, device=device))
        # Flat row of state row (offset + pos % m) for each batch row: the current window
        # starts at row m when the previous window is kept.
        self.register_buffer("state_base", torch.arange(batch, device=device) * (c * m) + (m if self.overlap else 0))
        self.register_buffer("cache_base", torch.arange(batch, device=device) * self.cache.shape[1])
        if self.overlap:
            # Flat indices into one row of A viewed as [2m * 2d] that pick the pooled operand:
            # rows < m take channels [0, d), rows >= m take channels [d, 2d).
            r = torch.arange(2 * m, device=device).unsqueeze(1)
            ch = torch.arange(d, device=device).unsqueeze(0)
            self.register_buffer("pool_index", (r * (2 * d) + ch + d * (r >= m)).flatten())

    def reset(self) -> None:  # graphlint: host
        self.A.zero_()
        self.Z.fill_(float("-inf"))
        self.cache.zero_()

    def reset_row(self, row: int) -> None:  # graphlint: host
        self.A[row].zero_()
        self.Z[row].fill_(float("-inf"))
        self.cache[row].zero_()

    def _pooled_operands(self) -> tuple[torch.Tensor, torch.Tensor]:
        if not self.overlap:
            return self.A, self.Z
        B = self.A.shape[0]
        shape = (B, 2 * self.m, self.d)
        A = self.A.view(B, -1).index_select(1, self.pool_index).view(shape)
        Z = self.Z.view(B, -1).index_select(1, self.pool_index).view(shape)
        return A, Z

    def forward(self, u: torch.Tensor, rc: RatioContext) -> None:
        """Fold token u [B, D] into the state and write the (possibly provisional) entry."""
        x = u.float()
        a = F.linear(x, self.w.wkv)
        z = F.linear(x, self.w.wgate) + self.w.ape.index_select(0, rc.row)
        flat_rows = self.state_base + rc.row
        self.A.view(-1, self.A.shape[-1]).index_copy_(0, flat_rows, a)
        self.Z.view(-1, self.Z.shape[-1]).index_copy_(0, flat_rows, z)

        A, Z = self._pooled_operands()
        # Softmax over the window's rows, separately per channel. The row written just now is
        # finite, so no channel is all -inf and the pool is never NaN, boundary or not.
        entry = (A * torch.softmax(Z, dim=1)).sum(dim=1)

        if self.overlap:
            # On a boundary the current window becomes the previous one.
            m = self.m
            keep = rc.boundary.view(-1, 1, 1)
            for state in (self.A, self.Z):
                state[:, :m].copy_(torch.where(keep, state[:, m:], state[:, :m]))

        kv = rms_norm(entry.to(self.cache.dtype), self.w.norm, self.norm_eps)
        apply_rope(kv, rc.cos, rc.sin, self.rope_dim)
        self.cache.view(-1, self.d).index_copy_(0, self.cache_base + rc.slot, kv)
