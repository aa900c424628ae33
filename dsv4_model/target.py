"""Runtime targets for graphlint's harness: the graph-safe DSV4 step and the known-bad reference.

A target is `module:callable`; the harness calls `factory(device, **options)` and gets an object
with `device`, `reset()`, `prepare(step)`, `step()` and `max_steps`. `prepare(step)` forces a
deterministic pseudo-random input token per row (drawn from the seed at construction), so the
harness can check that a replayed graph follows inputs that change every step.
"""
from __future__ import annotations

import torch
from torch import nn

from .factory import PROMPT_LEN, build_weights, forced_tokens
from .model import GraphSafeDSV4
from .reference import ReferenceTarget


class GraphSafeTarget(nn.Module):
    """Drives `GraphSafeDSV4`. `step()` returns the same (logits, next_tok) tensors every call.

    An nn.Module whose buffers (and the model's) are static inputs when `torch.compile(step)`
    traces it, so Inductor records CUDA graphs over the step's in-place writes.

    The step advances `pos` on the device; `prepare(i)` only overwrites `tok`, so it assumes
    i steps have run since `reset()` (the harness's order: reset, then prepare(i); step()).
    Without prepare() the model feeds itself the prompt, then its own greedy tokens.
    """

    def __init__(self, device, config: str = "tiny", batch: int = 1, seed: int = 0,
                 dtype: str = "bf16", hca_ratio: int | None = None):
        super().__init__()
        self.device = torch.device(device)
        self.model = GraphSafeDSV4(build_weights(self.device, config, seed, dtype, hca_ratio), batch)
        self.max_steps = self.model.max_steps
        forced = forced_tokens(self.model.cfg.vocab_size, self.max_steps, batch, seed)
        self.register_buffer("forced", forced.to(self.device))
        self.model.set_prompt(forced[:PROMPT_LEN].T.contiguous())
        self.model.reset()

    def reset(self) -> None:  # graphlint: host
        self.model.reset()

    def prepare(self, step: int) -> None:  # graphlint: host
        # A device-to-device copy of a precomputed row: no host value reaches the device.
        self.model.tok.copy_(self.forced[step])

    def step(self) -> tuple[torch.Tensor, torch.Tensor]:
        return self.model.step()


def graph_safe(device, config: str = "tiny", batch: int = 1, seed: int = 0, **options) -> GraphSafeTarget:  # graphlint: host
    """The default runtime target: the graph-safe DSV4 decode step."""
    return GraphSafeTarget(device, config=config, batch=batch, seed=seed, **options)


def reference(device, config: str = "tiny", batch: int = 1, seed: int = 0, **options) -> ReferenceTarget:  # graphlint: host
    """The known-bad target: the eager reference port driven with a host start_pos."""
    return ReferenceTarget(device, config=config, batch=batch, seed=seed, **options)
