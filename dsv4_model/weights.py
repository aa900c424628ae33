"""Seeded random parameters of the DSV4 decoder, shared by the graph-safe step and the reference.

Both decoders take the same `DSV4Weights` object, so they compute the same function. Every
tensor is drawn on the CPU from one seeded generator in a fixed order, then moved to the
device: the weights do not depend on the device, and nothing is downloaded.

Initialisation follows S3 (linears and hc projections N(0, 0.02), norms 1, hc base 0 and
scale 1), except that ape, the gate bias and attn_sink are N(0, cfg.aux_init_std) instead of
zero: with zeros, a wrong ape row, a bias leaking into the routing weights or a dropped sink
would leave the outputs unchanged and the oracle could not see it.
"""
from __future__ import annotations

import torch
from torch import nn

from .config import DSV4Config


class _Init:
    """The seeded generator and dtypes every parameter is drawn with."""

    def __init__(self, cfg: DSV4Config, seed: int, dtype: torch.dtype):
        self.cfg = cfg
        self.gen = torch.Generator().manual_seed(seed)
        self.dtype = dtype

    def normal(self, *shape: int, std: float, dtype: torch.dtype | None = None) -> nn.Parameter:  # graphlint: host
        t = torch.randn(*shape, generator=self.gen) * std
        return nn.Parameter(t.to(dtype or self.dtype), requires_grad=False)

    def linear(self, out_f: int, in_f: int, dtype: torch.dtype | None = None) -> nn.Parameter:  # graphlint: host
        return self.normal(out_f, in_f, std=self.cfg.init_std, dtype=dtype)

    def aux(self, *shape: int) -> nn.Parameter:  # graphlint: host
        return self.normal(*shape, std=self.cfg.aux_init_std, dtype=torch.float32)

    def ones(self, n: int) -> nn.Parameter:  # graphlint: host
        return nn.Parameter(torch.ones(n, dtype=torch.float32), requires_grad=False)


class CompressorWeights(nn.Module):
    """Gated pooling of `ratio` tokens into one entry (fp32, as S1); overlapping when ratio is 4."""

    def __init__(self, init: _Init, ratio: int, head_dim: int):
        super().__init__()
        self.ratio = ratio
        self.head_dim = head_dim
        self.overlap = ratio == 4
        width = (2 if self.overlap else 1) * head_dim
        self.wkv = init.linear(width, init.cfg.dim, dtype=torch.float32)
        self.wgate = init.linear(width, init.cfg.dim, dtype=torch.float32)
        self.ape = init.aux(ratio, width)
        self.norm = init.ones(head_dim)


class IndexerWeights(nn.Module):
    """Lightning indexer of a CSA layer: its query projection, head weights and own compressor."""

    def __init__(self, init: _Init):
        super().__init__()
        cfg = init.cfg
        self.wq_b = init.linear(cfg.index_heads * cfg.index_dim, cfg.q_lora_rank)
        self.weights_proj = init.linear(cfg.index_heads, cfg.dim)
        self.compressor = CompressorWeights(init, 4, cfg.index_dim)


class AttentionWeights(nn.Module):
    def __init__(self, init: _Init, layer_id: int):
        super().__init__()
        cfg = init.cfg
        hd = cfg.n_heads * cfg.head_dim
        self.ratio = cfg.layer_ratio(layer_id)
        self.wq_a = init.linear(cfg.q_lora_rank, cfg.dim)
        self.q_norm = init.ones(cfg.q_lora_rank)
        self.wq_b = init.linear(hd, cfg.q_lora_rank)
        self.wkv = init.linear(cfg.head_dim, cfg.dim)
        self.kv_norm = init.ones(cfg.head_dim)
        self.attn_sink = init.aux(cfg.n_heads)
        self.wo_a = init.linear(cfg.o_groups * cfg.o_lora_rank, hd // cfg.o_groups)
        self.wo_b = init.linear(cfg.dim, cfg.o_groups * cfg.o_lora_rank)
        self.compressor = CompressorWeights(init, self.ratio, cfg.head_dim) if self.ratio else None
        self.indexer = IndexerWeights(init) if self.ratio == 4 else None


class MoEWeights(nn.Module):
    """Router and experts. Expert weights are stacked ([E, 2I, D] with w1 over w3, and [E, D, I])
    so the graph-safe step can gather the chosen experts with one index_select."""

    def __init__(self, init: _Init, layer_id: int):
        super().__init__()
        cfg = init.cfg
        E, D, I = cfg.n_experts, cfg.dim, cfg.moe_inter
        self.hash_routed = cfg.is_hash_layer(layer_id)
        self.gate = init.linear(E, D, dtype=torch.float32)
        if self.hash_routed:
            # A frozen token -> experts table with n_active distinct experts per token.
            order = torch.rand(cfg.vocab_size, E, generator=init.gen).argsort(dim=1)
            self.register_buffer("tid2eid", order[:, : cfg.n_active].contiguous())
            self.bias = None
        else:
            self.tid2eid = None
            self.bias = init.aux(E)
        self.w13 = init.normal(E, 2 * I, D, std=cfg.init_std)
        self.w2 = init.normal(E, D, I, std=cfg.init_std)
        self.shared_w13 = init.linear(2 * I, D)
        self.shared_w2 = init.linear(D, I)


class HCWeights(nn.Module):
    """One mHC site: the mixing projection, its bias and the three scales (fp32)."""

    def __init__(self, init: _Init, n_out: int, n_scales: int):
        super().__init__()
        cfg = init.cfg
        self.fn = init.normal(n_out, cfg.hc_mult * cfg.dim, std=cfg.init_std, dtype=torch.float32)
        self.base = nn.Parameter(torch.zeros(n_out), requires_grad=False)
        self.scale = nn.Parameter(torch.ones(n_scales), requires_grad=False)


class BlockWeights(nn.Module):
    def __init__(self, init: _Init, layer_id: int):
        super().__init__()
        cfg = init.cfg
        self.layer_id = layer_id
        self.hc_attn = HCWeights(init, cfg.mix_hc, 3)
        self.attn_norm = init.ones(cfg.dim)
        self.attn = AttentionWeights(init, layer_id)
        self.hc_ffn = HCWeights(init, cfg.mix_hc, 3)
        self.ffn_norm = init.ones(cfg.dim)
        self.ffn = MoEWeights(init, layer_id)


class DSV4Weights(nn.Module):
    """All parameters of the decoder. `dtype` is the activation dtype: bf16 by default (as the
    spec), fp32 for the equivalence tests. Norms, mHC, gate, compressor and head stay fp32."""

    def __init__(self, cfg: DSV4Config, seed: int = 0, dtype: torch.dtype = torch.bfloat16,
                 device: torch.device | str = "cpu"):
        super().__init__()
        init = _Init(cfg, seed, dtype)
        self.cfg = cfg
        self.seed = seed
        self.dtype = dtype
        self.embed = init.normal(cfg.vocab_size, cfg.dim, std=cfg.init_std)
        self.layers = nn.ModuleList(BlockWeights(init, i) for i in range(cfg.n_layers))
        self.hc_head = HCWeights(init, cfg.hc_mult, 1)
        self.norm = init.ones(cfg.dim)
        self.head = init.linear(cfg.vocab_size, cfg.dim, dtype=torch.float32)
        self.to(torch.device(device))

    @property
    def device(self) -> torch.device:  # graphlint: host
        return self.embed.device
