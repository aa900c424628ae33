"""Manifold-constrained hyper-connections (mHC): the n residual streams are collapsed before each
sublayer and re-expanded after it, with a Sinkhorn-normalised mixing matrix.

Graph-safe as written: the Sinkhorn loop runs a fixed number of iterations with no convergence
test, and every value stays on the device. All mixing math is fp32, as S1.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F

from .weights import HCWeights


def _mixes(X: torch.Tensor, w: HCWeights, norm_eps: float) -> tuple[torch.Tensor, torch.Tensor]:
    """mu = rms(x) * (fn x) for the flattened streams; also returns the streams in fp32 [B, n, D]."""
    Xf = X.float()
    flat = Xf.flatten(1)
    r = torch.rsqrt(flat.square().mean(-1, keepdim=True) + norm_eps)
    return F.linear(flat, w.fn) * r, Xf


def sinkhorn(logits: torch.Tensor, iters: int, eps: float) -> torch.Tensor:
    """The code's order: row softmax + eps, a column normalisation, then (iters - 1) pairs of
    row and column normalisations. logits: [B, n, n]."""
    C = torch.softmax(logits, dim=-1) + eps
    C = C / (C.sum(dim=-2, keepdim=True) + eps)
    for _ in range(iters - 1):
        C = C / (C.sum(dim=-1, keepdim=True) + eps)
        C = C / (C.sum(dim=-2, keepdim=True) + eps)
    return C


def hc_pre(X: torch.Tensor, w: HCWeights, n: int, iters: int, hc_eps: float, norm_eps: float
           ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Collapse X [B, n, D] to the sublayer input u [B, D]; also return post [B, n] and C [B, n, n]."""
    mu, Xf = _mixes(X, w, norm_eps)
    scale, base = w.scale, w.base
    pre = torch.sigmoid(mu[:, :n] * scale[0] + base[:n]) + hc_eps
    post = 2 * torch.sigmoid(mu[:, n:2 * n] * scale[1] + base[n:2 * n])
    comb = mu[:, 2 * n:].unflatten(-1, (n, n)) * scale[2] + base[2 * n:].view(n, n)
    C = sinkhorn(comb, iters, hc_eps)
    u = (pre.unsqueeze(-1) * Xf).sum(dim=1)
    return u.to(X.dtype), post, C


def hc_post(f: torch.Tensor, X: torch.Tensor, post: torch.Tensor, C: torch.Tensor) -> torch.Tensor:
    """X'_k = post_k * f + sum_j C[j, k] X_j (C transposed: it is not symmetric)."""
    mixed = (C.unsqueeze(-1) * X.unsqueeze(2)).sum(dim=1)
    return (post.unsqueeze(-1) * f.unsqueeze(1) + mixed).to(f.dtype)


def hc_head(X: torch.Tensor, w: HCWeights, n: int, hc_eps: float, norm_eps: float) -> torch.Tensor:
    """Final collapse of the streams: sigmoid weights, no Sinkhorn and no post."""
    mu, Xf = _mixes(X, w, norm_eps)
    pre = torch.sigmoid(mu * w.scale + w.base) + hc_eps
    return (pre.unsqueeze(-1) * Xf).sum(dim=1).to(X.dtype)
