"""Attention of the graph-safe step: one shared K=V head over a sliding window plus compressed
entries (CSA: the indexer's top-k; HCA: every slot), with a per-head sink.

The window cache is written at slot pos % W through a device index, and every candidate set
has a fixed shape with invalid rows masked by -inf. The sink is finite, so a softmax row is
never all -inf and never NaN.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from .compressor import Compressor
from .config import DSV4Config
from .context import StepContext
from .indexer import Indexer
from .norms import head_rms, rms_norm
from .rope import apply_rope
from .weights import AttentionWeights


def sink_attention(q: torch.Tensor, parts: list[tuple[torch.Tensor, torch.Tensor]],
                   sink: torch.Tensor, scale: float) -> torch.Tensor:
    """o_h = sum_s e^{z_s} k_s / (sum_s e^{z_s} + e^{sink_h}) over every part's valid rows.

    q: [B, H, Dh]; each part is (keys [B, S, Dh], valid [B, S]); sink: [H] fp32. The parts are
    combined with one shared maximum instead of concatenated. fp32 math, as S1's kernel.
    """
    qf = q.float()
    logits = []
    for keys, valid in parts:
        z = torch.einsum("bhd,bsd->bhs", qf, keys.float()) * scale
        logits.append(z.masked_fill(~valid.unsqueeze(1), float("-inf")))
    # The sink joins the maximum, so it is finite even if a part is fully masked.
    peak = sink.unsqueeze(0)
    for z in logits:
        peak = torch.maximum(peak, z.amax(dim=-1))
    denom = torch.exp(sink.unsqueeze(0) - peak)
    out = None
    for z, (keys, _) in zip(logits, parts):
        e = torch.exp(z - peak.unsqueeze(-1))
        denom = denom + e.sum(dim=-1)
        contrib = torch.einsum("bhs,bsd->bhd", e, keys.float())
        out = contrib if out is None else out + contrib
    return (out / denom.unsqueeze(-1)).to(q.dtype)


class Attention(nn.Module):
    def __init__(self, w: AttentionWeights, cfg: DSV4Config, batch: int, dtype: torch.dtype,
                 device: torch.device):
        super().__init__()
        self.w = w
        self.ratio = w.ratio
        self.n_heads, self.head_dim, self.rope_dim = cfg.n_heads, cfg.head_dim, cfg.rope_dim
        self.groups, self.o_rank = cfg.o_groups, cfg.o_lora_rank
        self.eps = cfg.norm_eps
        self.scale = cfg.head_dim ** -0.5
        # Layers with a compressor use the YaRN table for everything (q, kv, compressed kv).
        self.table = "compress" if self.ratio else "main"
        self.register_buffer("window", torch.zeros(batch, cfg.window, cfg.head_dim, dtype=dtype, device=device))
        self.compressor = Compressor(w.compressor, cfg, batch, dtype, device) if self.ratio else None
        self.indexer = Indexer(w.indexer, cfg, batch, dtype, device) if self.ratio == 4 else None

    def reset(self) -> None:  # graphlint: host
        self.window.zero_()
        for part in (self.compressor, self.indexer):
            if part is not None:
                part.reset()

    def reset_row(self, row: int) -> None:  # graphlint: host
        self.window[row].zero_()
        for part in (self.compressor, self.indexer):
            if part is not None:
                part.reset_row(row)

    def forward(self, u: torch.Tensor, ctx: StepContext) -> torch.Tensor:
        """u: the normed sublayer input [B, D]; returns the attention output [B, D]."""
        w = self.w
        B = u.shape[0]
        cos, sin = ctx.rope[self.table]
        c_q = rms_norm(F.linear(u, w.wq_a), w.q_norm, self.eps)
        q = head_rms(F.linear(c_q, w.wq_b).unflatten(-1, (self.n_heads, self.head_dim)), self.eps)
        apply_rope(q, cos.unsqueeze(1), sin.unsqueeze(1), self.rope_dim)
        kv = rms_norm(F.linear(u, w.wkv), w.kv_norm, self.eps)
        apply_rope(kv, cos, sin, self.rope_dim)
        # Written before attending, so the token sees itself.
        self.window.view(-1, self.head_dim).index_copy_(0, ctx.win_index, kv)
        parts = [(self.window, ctx.win_valid)]

        if self.indexer is not None:
            idx, sel_valid = self.indexer.forward(u, c_q, ctx)
            self.compressor.forward(u, ctx.ratios[4])
            picked = self.compressor.cache.gather(1, idx.unsqueeze(-1).expand(-1, -1, self.head_dim))
            parts.append((picked, sel_valid))
        elif self.compressor is not None:
            self.compressor.forward(u, ctx.ratios[self.ratio])
            parts.append((self.compressor.cache, ctx.ratios[self.ratio].valid))

        o = sink_attention(q, parts, w.attn_sink, self.scale)
        apply_rope(o, cos.unsqueeze(1), sin.unsqueeze(1), self.rope_dim, inverse=True)
        # Grouped low-rank output: each group of heads has its own [R, H*Dh/G] projection.
        o = o.view(B, self.groups, -1)
        z = torch.einsum("bgd,grd->bgr", o, w.wo_a.view(self.groups, self.o_rank, -1))
        return F.linear(z.flatten(1), w.wo_b)
