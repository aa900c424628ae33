"""Interleaved partial RoPE for the graph-safe step: cos/sin tables built once, gathered by a
device position each step.

Slicing a table with a host position (`freqs[start_pos:start_pos+1]`) would freeze the
capture-time position into the graph; `index_select(pos)` reads it on the device instead.
"""
from __future__ import annotations

import math

import torch
from torch import nn

from .config import DSV4Config


def rope_frequencies(rope_dim: int, theta: float, factor: float = 1.0, original_seq_len: int = 0,
                     beta_fast: int = 32, beta_slow: int = 1) -> torch.Tensor:  # graphlint: host
    """The rope_dim/2 angular frequencies; YaRN-blended when original_seq_len > 0 (no mscale)."""
    freqs = 1.0 / (theta ** (torch.arange(0, rope_dim, 2, dtype=torch.float32) / rope_dim))
    if original_seq_len <= 0:
        return freqs

    def correction_dim(n_rotations: float) -> float:
        return rope_dim * math.log(original_seq_len / (n_rotations * 2 * math.pi)) / (2 * math.log(theta))

    low = max(math.floor(correction_dim(beta_fast)), 0)
    high = min(math.ceil(correction_dim(beta_slow)), rope_dim - 1)
    if low == high:
        high += 0.001
    ramp = ((torch.arange(rope_dim // 2, dtype=torch.float32) - low) / (high - low)).clamp(0, 1)
    keep = 1 - ramp  # 1 on the fast (high-frequency) pairs, which YaRN leaves alone
    return freqs / factor * (1 - keep) + freqs * keep


class RopeTable(nn.Module):
    """cos and sin of position * frequency, [max_seq_len, rope_dim/2] fp32, on the device."""

    def __init__(self, freqs: torch.Tensor, max_seq_len: int, device: torch.device):
        super().__init__()
        angles = torch.outer(torch.arange(max_seq_len, dtype=torch.float32), freqs)
        self.register_buffer("cos", angles.cos().to(device))
        self.register_buffer("sin", angles.sin().to(device))

    def at(self, pos: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """cos, sin at each row's position: [B, rope_dim/2]."""
        return self.cos.index_select(0, pos), self.sin.index_select(0, pos)


def model_tables(cfg: DSV4Config, device: torch.device) -> tuple[RopeTable, RopeTable]:  # graphlint: host
    """The "main" table (plain theta, window-only layers) and the "compress" table (YaRN)."""
    main = RopeTable(rope_frequencies(cfg.rope_dim, cfg.rope_theta), cfg.max_seq_len, device)
    compress = RopeTable(
        rope_frequencies(cfg.rope_dim, cfg.compress_rope_theta, cfg.rope_factor,
                         cfg.original_seq_len, cfg.beta_fast, cfg.beta_slow),
        cfg.max_seq_len, device)
    return main, compress


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, rope_dim: int,
               inverse: bool = False) -> torch.Tensor:
    """Rotate the last rope_dim channels of x in place, as interleaved pairs (GPT-J style).

    cos/sin must broadcast against x[..., :rope_dim/2]. The math is fp32 and the result is
    cast back to x's dtype, as S1 does. `inverse` rotates by the negative angle.
    """
    tail = x[..., x.shape[-1] - rope_dim:]
    pairs = tail.float().unflatten(-1, (rope_dim // 2, 2))
    even, odd = pairs[..., 0], pairs[..., 1]
    if inverse:
        sin = -sin
    rotated = torch.stack((even * cos - odd * sin, even * sin + odd * cos), dim=-1)
    tail.copy_(rotated.flatten(-2))
    return x
