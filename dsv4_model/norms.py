"""RMS norms of the DSV4 decoder, computed in fp32 and cast back to the activation dtype (as S1)."""
from __future__ import annotations

import torch


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """weight * x / rms(x) over the last dim; weight is fp32."""
    xf = x.float()
    xf = xf * torch.rsqrt(xf.square().mean(-1, keepdim=True) + eps)
    return (weight * xf).to(x.dtype)


def head_rms(q: torch.Tensor, eps: float) -> torch.Tensor:
    """Divide each query head by its own RMS, without a weight. S1 does this in the activation
    dtype, not fp32; kept so the bf16 numbers match the official code."""
    return q * torch.rsqrt(q.square().mean(-1, keepdim=True) + eps)
