"""Eager reference port of the DSV4 decode step, written the way the official inference code is.

It exists for two reasons, and both need it to stay as it is:

1. **Correctness oracle.** It computes the same function as `model.GraphSafeDSV4` from the same
   `DSV4Weights` object, but in the official code's eager style: a host `start_pos`, caches
   grown with torch.cat or written at host-computed slots, a compressor that only returns an
   entry on its boundary, a top-k whose k depends on the position, an expert loop. The
   equivalence tests compare the two step by step.
2. **Known-bad target.** On purpose it keeps, in realistic form, every violation class of the
   seeds' sync inventory, so the linter and the runtime harness have something real to find:
   - `.item()` magnitude check in mHC (`RefBlock.hc_post`)
   - `torch.bincount(...).tolist()` expert counts, a Python loop over experts that skips
     empty ones, one-argument `torch.where(indices == e)`, `y[idx] += ...` (`RefMoE.forward`)
   - an `if` on a device value: `if offsets[0] != 0:` (`RefMoE.forward`)
   - per-step `torch.full` / `torch.zeros` / `torch.arange` (`window_topk_idxs`, `RefMoE`,
     `RefAttention.forward`)
   - a Python int written into a device buffer: `tok_buf[b, 0] = token` (`set_tokens`)
   - a compressor that returns None off its boundary (`RefCompressor.forward`)
   - `topk` with k computed from the step: `min(K, (start_pos + 1) // 4)` (`RefIndexer`)
   - `freqs_cis[start_pos:start_pos + 1]` host slicing (`RefAttention.forward`)
   - `cache[:, start_pos % W] = kv` with a host int (`RefAttention.forward`)
   - compressed caches grown with torch.cat (`RefCompressor.forward`)
   - boolean-mask indexing and a host branch on `.all()` (`sparse_attn`)
   - greedy tokens read back with `.tolist()` each step (`ReferenceDSV4.generate`)

The lint config excludes this file. Do not "fix" it: the tests rely on both roles.

Differences from the official code, all shared with the graph-safe step: one token per call
(no batched-prefill path; the prompt is fed one position at a time), no FP8/FP4 simulation or
Hadamard rotation, and exact ties in the indexer's scores broken toward the older slot.
"""
from __future__ import annotations

import math
import warnings
from functools import lru_cache

import torch
import torch.nn.functional as F

from .config import DSV4Config
from .factory import PROMPT_LEN, build_weights, forced_tokens
from .indexer import TIE_BREAK
from .weights import (AttentionWeights, BlockWeights, CompressorWeights, DSV4Weights,
                      IndexerWeights, MoEWeights)


def rms_norm(x, weight, eps):
    dtype = x.dtype
    x = x.float()
    x = x * torch.rsqrt(x.square().mean(-1, keepdim=True) + eps)
    return (weight * x).to(dtype)


def precompute_freqs_cis(dim, seqlen, theta, factor=1.0, original_seq_len=0, beta_fast=32, beta_slow=1):
    """Complex rotations e^{i t f} [seqlen, dim/2], YaRN-blended when original_seq_len > 0."""
    base = 1.0 / (theta ** (torch.arange(0, dim, 2, dtype=torch.float32) / dim))
    if original_seq_len > 0:
        def corr(rot):
            return dim * math.log(original_seq_len / (rot * 2 * math.pi)) / (2 * math.log(theta))
        lo, hi = max(math.floor(corr(beta_fast)), 0), min(math.ceil(corr(beta_slow)), dim - 1)
        if lo == hi:
            hi += 0.001
        smooth = 1 - torch.clamp((torch.arange(dim // 2, dtype=torch.float32) - lo) / (hi - lo), 0, 1)
        base = base / factor * (1 - smooth) + base * smooth
    angles = torch.outer(torch.arange(seqlen, dtype=torch.float32), base)
    return torch.polar(torch.ones_like(angles), angles)


def apply_rotary_emb(x, freqs_cis, inverse=False):
    """Rotate interleaved pairs of x [B, S, ..., rd] in place by freqs_cis [S, rd/2]."""
    xc = torch.view_as_complex(x.float().unflatten(-1, (-1, 2)))
    if inverse:
        freqs_cis = freqs_cis.conj()
    shape = [1, xc.size(1)] + [1] * (xc.ndim - 3) + [xc.size(-1)]
    x.copy_(torch.view_as_real(xc * freqs_cis.view(shape)).flatten(-2))
    return x


@lru_cache(4)
def window_topk_idxs(window, bsz, start_pos, device):
    # Built on the host from start_pos, cached by it: a capture would keep one position's list.
    idxs = torch.full((bsz, 1, window), -1, dtype=torch.long, device=device)
    n = min(start_pos + 1, window)
    idxs[..., :n] = torch.arange(n, device=device)
    return idxs


def sparse_attn(q, kv, attn_sink, topk_idxs, softmax_scale):
    """q [B, S, H, D], kv [B, N, D], topk_idxs [B, S, K] (-1 = none); sink in the denominator."""
    b, s, h, d = q.shape
    valid = topk_idxs >= 0
    if not valid.all():
        # Every row shares start_pos, so every row keeps the same number of indices.
        topk_idxs = topk_idxs[valid].view(b, s, -1)
    k = topk_idxs.size(-1)
    sel = kv.unsqueeze(1).expand(b, s, -1, d).gather(2, topk_idxs.unsqueeze(-1).expand(b, s, k, d))
    qf, kf = q.float(), sel.float()
    scores = torch.einsum("bshd,bskd->bshk", qf, kf) * softmax_scale
    peak = scores.max(dim=-1).values
    e = torch.exp(scores - peak.unsqueeze(-1))
    denom = e.sum(dim=-1) + torch.exp(attn_sink.view(1, 1, h) - peak)
    return torch.einsum("bshk,bskd->bshd", e / denom.unsqueeze(-1), kf).to(q.dtype)


class RefCompressor:
    def __init__(self, w: CompressorWeights, cfg: DSV4Config, batch, dtype, device, freqs_cis):
        self.w, self.cfg, self.batch, self.dtype, self.device = w, cfg, batch, dtype, device
        self.ratio, self.d, self.overlap = w.ratio, w.head_dim, w.overlap
        self.freqs_cis = freqs_cis
        self.reset()

    def reset(self):
        coff = 2 if self.overlap else 1
        shape = (self.batch, coff * self.ratio, coff * self.d)
        self.kv_state = torch.zeros(shape, device=self.device)
        self.score_state = torch.full(shape, float("-inf"), device=self.device)
        self.entries = torch.zeros(self.batch, 0, self.d, dtype=self.dtype, device=self.device)

    def forward(self, x, start_pos):
        """x [B, 1, D]; returns the new compressed entry [B, 1, d] on a boundary, else None."""
        bsz = x.size(0)
        ratio, d, rd = self.ratio, self.d, self.cfg.rope_dim
        xf = x.float()
        kv = F.linear(xf, self.w.wkv)
        score = F.linear(xf, self.w.wgate) + self.w.ape[start_pos % ratio]
        should_compress = (start_pos + 1) % ratio == 0
        if self.overlap:
            self.kv_state[:bsz, ratio + start_pos % ratio] = kv.squeeze(1)
            self.score_state[:bsz, ratio + start_pos % ratio] = score.squeeze(1)
            if should_compress:
                kv_all = torch.cat([self.kv_state[:bsz, :ratio, :d], self.kv_state[:bsz, ratio:, d:]], dim=1)
                score_all = torch.cat([self.score_state[:bsz, :ratio, :d], self.score_state[:bsz, ratio:, d:]], dim=1)
                kv = (kv_all * score_all.softmax(dim=1)).sum(dim=1, keepdim=True)
                self.kv_state[:bsz, :ratio] = self.kv_state[:bsz, ratio:]
                self.score_state[:bsz, :ratio] = self.score_state[:bsz, ratio:]
        else:
            self.kv_state[:bsz, start_pos % ratio] = kv.squeeze(1)
            self.score_state[:bsz, start_pos % ratio] = score.squeeze(1)
            if should_compress:
                kv = (self.kv_state[:bsz] * self.score_state[:bsz].softmax(dim=1)).sum(dim=1, keepdim=True)
        if not should_compress:
            return None
        kv = rms_norm(kv.to(self.dtype), self.w.norm, self.cfg.norm_eps)
        apply_rotary_emb(kv[..., -rd:], self.freqs_cis[start_pos + 1 - ratio].unsqueeze(0))
        self.entries = torch.cat([self.entries, kv], dim=1)
        return kv


class RefIndexer:
    def __init__(self, w: IndexerWeights, cfg: DSV4Config, batch, dtype, device, freqs_cis):
        self.w, self.cfg = w, cfg
        self.freqs_cis = freqs_cis
        self.compressor = RefCompressor(w.compressor, cfg, batch, dtype, device, freqs_cis)

    def forward(self, x, qr, start_pos, offset):
        cfg = self.cfg
        rd = cfg.rope_dim
        q = F.linear(qr, self.w.wq_b).unflatten(-1, (cfg.index_heads, cfg.index_dim))
        apply_rotary_emb(q[..., -rd:], self.freqs_cis[start_pos:start_pos + 1])
        self.compressor.forward(x, start_pos)
        weights = F.linear(x, self.w.weights_proj) * (cfg.index_dim ** -0.5 * cfg.index_heads ** -0.5)
        end_pos = start_pos + 1
        index_score = torch.einsum("bshd,btd->bsht", q, self.compressor.entries)
        index_score = (index_score.relu_() * weights.unsqueeze(-1)).sum(dim=2)
        # Exact ties (all heads' ReLU zero) go to the older slot, as in the graph-safe indexer.
        index_score = index_score + torch.arange(end_pos // 4, device=x.device) * -TIE_BREAK
        topk_idxs = index_score.topk(min(cfg.index_topk, end_pos // 4), dim=-1)[1]
        return topk_idxs + offset


class RefAttention:
    def __init__(self, w: AttentionWeights, cfg: DSV4Config, batch, dtype, device):
        self.w, self.cfg = w, cfg
        self.ratio = w.ratio
        if self.ratio:
            table = dict(theta=cfg.compress_rope_theta, factor=cfg.rope_factor,
                         original_seq_len=cfg.original_seq_len, beta_fast=cfg.beta_fast,
                         beta_slow=cfg.beta_slow)
        else:
            table = dict(theta=cfg.rope_theta)
        self.freqs_cis = precompute_freqs_cis(cfg.rope_dim, cfg.max_seq_len, **table).to(device)
        self.kv_cache = torch.zeros(batch, cfg.window, cfg.head_dim, dtype=dtype, device=device)
        self.compressor = (RefCompressor(w.compressor, cfg, batch, dtype, device, self.freqs_cis)
                           if self.ratio else None)
        self.indexer = (RefIndexer(w.indexer, cfg, batch, dtype, device, self.freqs_cis)
                        if self.ratio == 4 else None)

    def reset(self):
        self.kv_cache.zero_()
        if self.compressor is not None:
            self.compressor.reset()
        if self.indexer is not None:
            self.indexer.compressor.reset()

    def forward(self, x, start_pos):
        cfg, w = self.cfg, self.w
        bsz = x.size(0)
        win, rd, eps = cfg.window, cfg.rope_dim, cfg.norm_eps
        freqs_cis = self.freqs_cis[start_pos:start_pos + 1]
        qr = q = rms_norm(F.linear(x, w.wq_a), w.q_norm, eps)
        q = F.linear(q, w.wq_b).unflatten(-1, (cfg.n_heads, cfg.head_dim))
        q *= torch.rsqrt(q.square().mean(-1, keepdim=True) + eps)
        apply_rotary_emb(q[..., -rd:], freqs_cis)
        kv = rms_norm(F.linear(x, w.wkv), w.kv_norm, eps)
        apply_rotary_emb(kv[..., -rd:], freqs_cis)
        topk_idxs = window_topk_idxs(win, bsz, start_pos, x.device)
        if self.ratio:
            if self.indexer is not None:
                compress_idxs = self.indexer.forward(x, qr, start_pos, win)
            else:
                compress_idxs = torch.arange((start_pos + 1) // self.ratio, device=x.device) + win
                compress_idxs = compress_idxs.view(1, 1, -1).expand(bsz, 1, -1)
            topk_idxs = torch.cat([topk_idxs, compress_idxs], dim=-1)
        self.kv_cache[:bsz, start_pos % win] = kv.squeeze(1)
        kv_all = self.kv_cache[:bsz]
        if self.ratio:
            self.compressor.forward(x, start_pos)
            kv_all = torch.cat([kv_all, self.compressor.entries], dim=1)
        o = sparse_attn(q, kv_all, w.attn_sink, topk_idxs, cfg.head_dim ** -0.5)
        apply_rotary_emb(o[..., -rd:], freqs_cis, inverse=True)
        o = o.view(bsz, 1, cfg.o_groups, -1)
        o = torch.einsum("bsgd,grd->bsgr", o, w.wo_a.view(cfg.o_groups, cfg.o_lora_rank, -1))
        return F.linear(o.flatten(2), w.wo_b)


class RefMoE:
    def __init__(self, w: MoEWeights, cfg: DSV4Config):
        self.w, self.cfg = w, cfg
        self.expert_offsets = None

    def gate(self, x, input_ids):
        scores = F.softplus(F.linear(x.float(), self.w.gate)).sqrt()
        original_scores = scores
        if self.w.bias is not None:
            scores = scores + self.w.bias
        if self.w.hash_routed:
            indices = self.w.tid2eid[input_ids]
        else:
            indices = scores.topk(self.cfg.n_active, dim=-1)[1]
        weights = original_scores.gather(1, indices)
        weights /= weights.sum(dim=-1, keepdim=True)
        return weights * self.cfg.route_scale, indices

    def expert(self, w13, w2, x, weights=None):
        inter, limit = self.cfg.moe_inter, self.cfg.swiglu_limit
        gate = F.linear(x, w13[:inter]).float()
        up = F.linear(x, w13[inter:]).float()
        up = torch.clamp(up, min=-limit, max=limit)
        gate = torch.clamp(gate, max=limit)
        h = F.silu(gate) * up
        if weights is not None:
            h = h * weights
        return F.linear(h.to(x.dtype), w2)

    def forward(self, x, input_ids):
        shape = x.size()
        x = x.view(-1, self.cfg.dim)
        weights, indices = self.gate(x, input_ids.flatten())
        y = torch.zeros(x.shape, dtype=torch.float32, device=x.device)
        counts_t = torch.bincount(indices.flatten(), minlength=self.cfg.n_experts)
        offsets = torch.cumsum(counts_t, 0) - counts_t
        if offsets[0] != 0:
            offsets = offsets - offsets[0]
        self.expert_offsets = offsets
        counts = counts_t.tolist()
        for e in range(self.cfg.n_experts):
            if counts[e] == 0:
                continue
            idx, top = torch.where(indices == e)
            y[idx] += self.expert(self.w.w13[e], self.w.w2[e], x[idx], weights[idx, top, None])
        y += self.expert(self.w.shared_w13, self.w.shared_w2, x)
        return y.type_as(x).view(shape)


class RefBlock:
    def __init__(self, w: BlockWeights, cfg: DSV4Config, batch, dtype, device):
        self.w, self.cfg = w, cfg
        self.attn = RefAttention(w.attn, cfg, batch, dtype, device)
        self.ffn = RefMoE(w.ffn, cfg)

    def hc_pre(self, x, hc):
        cfg = self.cfg
        n, eps = cfg.hc_mult, cfg.hc_eps
        shape, dtype = x.size(), x.dtype
        x = x.flatten(2).float()
        rsqrt = torch.rsqrt(x.square().mean(-1, keepdim=True) + cfg.norm_eps)
        mixes = F.linear(x, hc.fn) * rsqrt
        pre = torch.sigmoid(mixes[..., :n] * hc.scale[0] + hc.base[:n]) + eps
        post = 2 * torch.sigmoid(mixes[..., n:2 * n] * hc.scale[1] + hc.base[n:2 * n])
        comb = mixes[..., 2 * n:].unflatten(-1, (n, n)) * hc.scale[2] + hc.base[2 * n:].view(n, n)
        comb = comb.softmax(dim=-1) + eps
        comb = comb / (comb.sum(dim=-2, keepdim=True) + eps)
        for _ in range(cfg.sinkhorn_iters - 1):
            comb = comb / (comb.sum(dim=-1, keepdim=True) + eps)
            comb = comb / (comb.sum(dim=-2, keepdim=True) + eps)
        y = torch.sum(pre.unsqueeze(-1) * x.view(shape), dim=2)
        return y.to(dtype), post, comb

    def hc_post(self, x, residual, post, comb):
        y = post.unsqueeze(-1) * x.unsqueeze(-2) + torch.sum(comb.unsqueeze(-1) * residual.unsqueeze(-2), dim=2)
        if y.abs().max().item() > 1e4:
            warnings.warn("mHC residual stream magnitude above 1e4", RuntimeWarning)
        return y.type_as(x)

    def forward(self, x, start_pos, input_ids):
        w, eps = self.w, self.cfg.norm_eps
        residual = x
        h, post, comb = self.hc_pre(x, w.hc_attn)
        h = self.attn.forward(rms_norm(h, w.attn_norm, eps), start_pos)
        x = self.hc_post(h, residual, post, comb)
        residual = x
        h, post, comb = self.hc_pre(x, w.hc_ffn)
        h = self.ffn.forward(rms_norm(h, w.ffn_norm, eps), input_ids)
        return self.hc_post(h, residual, post, comb)


class ReferenceDSV4:
    """The eager decoder: `forward(input_ids [B, 1], start_pos)` -> logits [B, V] fp32."""

    def __init__(self, weights: DSV4Weights, batch: int = 1):
        cfg = weights.cfg
        self.weights, self.cfg, self.batch = weights, cfg, batch
        self.device = weights.device
        self.max_steps = cfg.max_seq_len
        self.blocks = [RefBlock(w, cfg, batch, weights.dtype, self.device) for w in weights.layers]
        self.tok_buf = torch.zeros(batch, 1, dtype=torch.long, device=self.device)

    def reset(self):
        for block in self.blocks:
            block.attn.reset()

    def set_tokens(self, tokens):
        for b, token in enumerate(tokens):
            self.tok_buf[b, 0] = token

    @torch.inference_mode()
    def forward(self, input_ids, start_pos):
        cfg, w = self.cfg, self.weights
        assert start_pos < cfg.max_seq_len
        h = F.embedding(input_ids, w.embed)
        h = h.unsqueeze(2).repeat(1, 1, cfg.hc_mult, 1)
        for block in self.blocks:
            h = block.forward(h, start_pos, input_ids)
        shape, dtype = h.size(), h.dtype
        x = h.flatten(2).float()
        rsqrt = torch.rsqrt(x.square().mean(-1, keepdim=True) + cfg.norm_eps)
        mixes = F.linear(x, w.hc_head.fn) * rsqrt
        pre = torch.sigmoid(mixes * w.hc_head.scale + w.hc_head.base) + cfg.hc_eps
        y = torch.sum(pre.unsqueeze(-1) * x.view(shape), dim=2).to(dtype)
        return F.linear(rms_norm(y, w.norm, cfg.norm_eps)[:, -1].float(), w.head)

    def generate(self, prompts, steps):
        """Greedy decoding from prompts (one list per row, same length); returns the argmax of
        every step, one list per row, like GraphSafeDSV4.out_tokens."""
        self.reset()
        out = [[] for _ in prompts]
        self.set_tokens([p[0] for p in prompts])
        for start_pos in range(steps):
            logits = self.forward(self.tok_buf, start_pos)
            nxt = logits.argmax(dim=-1).tolist()
            for b, t in enumerate(nxt):
                out[b].append(t)
            if start_pos + 1 < len(prompts[0]):
                nxt = [p[start_pos + 1] for p in prompts]
            self.set_tokens(nxt)
        return out


class ReferenceTarget:
    """Drives `ReferenceDSV4` with a host start_pos: the known-bad target, not capturable."""

    def __init__(self, device, config: str = "tiny", batch: int = 1, seed: int = 0,
                 dtype: str = "bf16", hca_ratio: int | None = None):
        self.device = torch.device(device)
        self.model = ReferenceDSV4(build_weights(self.device, config, seed, dtype, hca_ratio), batch)
        self.max_steps = self.model.max_steps
        self.forced = forced_tokens(self.model.cfg.vocab_size, self.max_steps, batch, seed)
        self.reset()

    def reset(self) -> None:
        self.model.reset()
        self.start_pos = 0
        self.model.set_tokens(self.forced[0].tolist())

    def prepare(self, step: int) -> None:
        self.start_pos = step
        self.model.set_tokens(self.forced[step].tolist())

    def step(self) -> tuple[torch.Tensor, torch.Tensor]:
        logits = self.model.forward(self.model.tok_buf, self.start_pos)
        nxt = logits.argmax(dim=-1)
        self.start_pos += 1
        # The official loop: read the token back and write it into the input buffer (the
        # prompt's next token while the prompt lasts, as the graph-safe target does).
        if self.start_pos < PROMPT_LEN:
            self.model.set_tokens(self.forced[self.start_pos].tolist())
        else:
            self.model.set_tokens(nxt.tolist())
        return logits, nxt
