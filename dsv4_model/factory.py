"""Construction helpers shared by the runtime targets, the command and the tests: weights from
a config name and the deterministic stream of forced input tokens."""
from __future__ import annotations

import torch

from .config import make_config
from .weights import DSV4Weights

# Tokens of the prompt each target starts from; after it, prepare() supplies the inputs.
PROMPT_LEN = 8
DTYPES = {"bf16": torch.bfloat16, "bfloat16": torch.bfloat16, "fp32": torch.float32,
          "float32": torch.float32}


def build_weights(device, config: str = "tiny", seed: int = 0, dtype: str | torch.dtype = "bf16",
                  hca_ratio: int | None = None, **overrides) -> DSV4Weights:  # graphlint: host
    """Seeded weights of the named config on `device`; dtype is the activation dtype."""
    cfg = make_config(config, hca_ratio=hca_ratio, **overrides)
    dt = DTYPES[dtype] if isinstance(dtype, str) else dtype
    return DSV4Weights(cfg, seed=seed, dtype=dt, device=torch.device(device))


def forced_tokens(vocab: int, steps: int, batch: int, seed: int) -> torch.Tensor:  # graphlint: host
    """[steps, batch] pseudo-random tokens on the CPU, from a stream separate from the weights."""
    gen = torch.Generator().manual_seed(seed + 7919)
    return torch.randint(0, vocab, (steps, batch), generator=gen)
