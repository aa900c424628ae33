"""Model sizes for the bundled DSV4 decoder: the spec's tiny config and a larger bench config.

A config is a frozen dataclass; `make_config(name, **overrides)` is the one way to get one, so
tests and the command line build exactly the same shapes.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass


@dataclass(frozen=True)
class DSV4Config:
    vocab_size: int = 1024
    dim: int = 256
    n_layers: int = 4
    # One entry per layer: 0 = sliding window only, 4 = CSA (overlapping, indexer), else HCA.
    compress_ratios: tuple[int, ...] = (0, 0, 4, 128)
    n_hash_layers: int = 2
    # Attention: one shared K=V head, low-rank query, grouped low-rank output.
    n_heads: int = 8
    head_dim: int = 128
    rope_dim: int = 16
    q_lora_rank: int = 128
    o_groups: int = 2
    o_lora_rank: int = 64
    window: int = 64
    max_seq_len: int = 1024
    # Lightning indexer of the CSA layers.
    index_heads: int = 4
    index_dim: int = 32
    index_topk: int = 16
    # MoE.
    n_experts: int = 16
    n_active: int = 4
    moe_inter: int = 128
    route_scale: float = 1.5
    swiglu_limit: float = 10.0
    # mHC.
    hc_mult: int = 4
    sinkhorn_iters: int = 20
    hc_eps: float = 1e-6
    norm_eps: float = 1e-6
    # RoPE: plain theta on window-only layers, YaRN-scaled theta on layers with a compressor.
    rope_theta: float = 1e4
    compress_rope_theta: float = 1.6e5
    rope_factor: float = 16.0
    original_seq_len: int = 65536
    beta_fast: int = 32
    beta_slow: int = 1
    # Initialisation: linears and hc projections N(0, init_std). ape, gate bias and attn_sink
    # get N(0, aux_init_std) rather than S3's zeros, so that the oracle checks their indexing;
    # aux_init_std=0 restores S3's initialisation exactly.
    init_std: float = 0.02
    aux_init_std: float = 0.2

    def __post_init__(self) -> None:  # graphlint: host
        if len(self.compress_ratios) != self.n_layers:
            raise ValueError("compress_ratios needs one entry per layer")
        if self.head_dim % 2 or self.rope_dim % 2 or self.rope_dim > self.head_dim:
            raise ValueError("rope_dim must be even and fit in head_dim")
        if self.index_dim < self.rope_dim:
            raise ValueError("index_dim must hold the rope channels")
        if (self.n_heads * self.head_dim) % self.o_groups:
            raise ValueError("heads must split evenly into o_groups")
        for ratio in self.compress_ratios:
            if ratio and self.max_seq_len % ratio:
                raise ValueError(f"max_seq_len must be a multiple of compress ratio {ratio}")
            if ratio == 4 and self.max_seq_len // 4 < self.index_topk:
                # The graph-safe indexer always takes a fixed top-k over every slot.
                raise ValueError("max_seq_len // 4 must be at least index_topk")
        if self.n_active > self.n_experts:
            raise ValueError("n_active must not exceed n_experts")

    @property
    def mix_hc(self) -> int:  # graphlint: host
        return (2 + self.hc_mult) * self.hc_mult

    def layer_ratio(self, layer_id: int) -> int:  # graphlint: host
        return self.compress_ratios[layer_id]

    def is_hash_layer(self, layer_id: int) -> bool:  # graphlint: host
        return layer_id < self.n_hash_layers


def _bench() -> DSV4Config:  # graphlint: host
    # Same architecture, wider and deeper: 16 layers (2 window-only, then CSA/HCA alternating
    # as in Flash), hidden 1024. One decode step launches several thousand small kernels,
    # which is what makes the CUDA graph worth having.
    n_layers = 16
    return DSV4Config(
        vocab_size=16384,
        dim=1024,
        n_layers=n_layers,
        compress_ratios=(0, 0) + (4, 128) * ((n_layers - 2) // 2),
        n_hash_layers=2,
        n_heads=16,
        head_dim=128,
        rope_dim=16,
        q_lora_rank=512,
        o_groups=4,
        o_lora_rank=256,
        window=128,
        max_seq_len=2048,
        index_heads=8,
        index_dim=64,
        index_topk=64,
        n_experts=32,
        n_active=6,
        moe_inter=512,
    )


CONFIGS = {"tiny": DSV4Config, "bench": _bench}


def make_config(name: str = "tiny", hca_ratio: int | None = None, **overrides) -> DSV4Config:  # graphlint: host
    """Return the named config; `hca_ratio` replaces every HCA ratio (e.g. 16 for short tests)."""
    if name not in CONFIGS:
        raise ValueError(f"unknown config {name!r}; choose from {sorted(CONFIGS)}")
    cfg = CONFIGS[name]()
    if hca_ratio is not None:
        ratios = tuple(hca_ratio if r not in (0, 4) else r for r in cfg.compress_ratios)
        overrides = {"compress_ratios": ratios, **overrides}
    if overrides:
        cfg = dataclasses.replace(cfg, **overrides)
    return cfg
