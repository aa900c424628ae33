"""Per-step position-derived values, computed on the device from the `pos` buffer.

Everything a layer needs to know about "where are we" (rope angles, window slot and mask,
compressor row, slot and boundary) is derived here once per step from device `pos`, so no
layer ever sees a host integer that changes between steps. The aranges are built once.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import torch
from torch import nn

from .config import DSV4Config
from .rope import RopeTable, model_tables


@dataclass
class RatioContext:
    """Compressor bookkeeping for one ratio m at the current positions (all [B] or [B, N])."""

    row: torch.Tensor          # pos % m: the state row written this step
    slot: torch.Tensor         # pos // m: the cache slot written (and final on a boundary)
    n_valid: torch.Tensor      # (pos + 1) // m: the number of finished slots visible now
    valid: torch.Tensor        # [B, N] slot < n_valid
    boundary: torch.Tensor     # (pos + 1) % m == 0, bool
    cos: torch.Tensor          # rope of the entry's first token, pos + 1 - m (clamped at 0)
    sin: torch.Tensor


@dataclass
class StepContext:
    pos: torch.Tensor
    rope: dict[str, tuple[torch.Tensor, torch.Tensor]]  # table name -> (cos, sin) at pos
    win_index: torch.Tensor    # [B] flat row b * W + pos % W of the window cache
    win_valid: torch.Tensor    # [B, W] slot j holds a token of this sequence (j <= pos)
    ratios: dict[int, RatioContext]


class PositionIndex(nn.Module):
    """The constant tables and aranges the per-step context is computed from (module buffers)."""

    def __init__(self, cfg: DSV4Config, batch: int, device: torch.device):
        super().__init__()
        self.window = cfg.window
        self.tables: Mapping[str, RopeTable] = nn.ModuleDict(zip(("main", "compress"), model_tables(cfg, device)))
        self.register_buffer("row_base", torch.arange(batch, device=device) * cfg.window)
        self.register_buffer("win_slots", torch.arange(cfg.window, device=device))
        self.ratios = tuple(m for m in sorted(set(cfg.compress_ratios)) if m)
        for m in self.ratios:
            self.register_buffer(f"ratio_slots_{m}", torch.arange(cfg.max_seq_len // m, device=device))

    def context(self, pos: torch.Tensor) -> StepContext:
        rope = {name: table.at(pos) for name, table in self.tables.items()}
        ratios = {}
        for m in self.ratios:
            slots = getattr(self, f"ratio_slots_{m}")
            n_valid = torch.div(pos + 1, m, rounding_mode="floor")
            cos, sin = self.tables["compress"].at(torch.clamp(pos + (1 - m), min=0))
            ratios[m] = RatioContext(
                row=torch.remainder(pos, m),
                slot=torch.div(pos, m, rounding_mode="floor"),
                n_valid=n_valid,
                valid=slots.unsqueeze(0) < n_valid.unsqueeze(1),
                boundary=torch.remainder(pos + 1, m) == 0,
                cos=cos,
                sin=sin,
            )
        return StepContext(
            pos=pos,
            rope=rope,
            win_index=self.row_base + torch.remainder(pos, self.window),
            win_valid=self.win_slots.unsqueeze(0) <= pos.unsqueeze(1),
            ratios=ratios,
        )
