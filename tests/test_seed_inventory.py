"""The seeds' violation inventory as specifications: each before-fix snippet (rewritten from
000_1d0d9217b4f48af2.txt section B and 001_de2d7dd532d019a0.txt categories 1, 2, 3, 5, 6) is
flagged with the expected family, and its after-fix version is clean. Category 4 (cross-GPU
copies) and the multi-GPU stream bug are capture-hygiene rules, tested with GL5xx."""
from __future__ import annotations

import pytest

from graphlint.testing import lint_snippet

CASES = {
    # 001 cat 1 / 000 B: mhc.py post_block magnitude check (122 syncs per step).
    "mhc_item": (
        """
class MHC(nn.Module):
    def post_block(self, X: torch.Tensor, F_out: torch.Tensor, post: torch.Tensor, comb: torch.Tensor):
        X_next = post.unsqueeze(-1) * F_out.unsqueeze(-2) + torch.einsum("bjk,bjd->bkd", comb, X)
        if X_next.abs().max().item() > 1e4:
            warnings.warn("mHC magnitude")
        return X_next
""",
        """
class MHC(nn.Module):
    def post_block(self, X: torch.Tensor, F_out: torch.Tensor, post: torch.Tensor, comb: torch.Tensor):
        X_next = post.unsqueeze(-1) * F_out.unsqueeze(-2) + torch.einsum("bjk,bjd->bkd", comb, X)
        return X_next
""",
        {"sync"},
    ),
    # 000 B / 001 cat 3: MoE bincount -> scatter_add_ into a preallocated buffer; torch.ones -> _ones_buf.
    "moe_bincount": (
        """
class MoE(nn.Module):
    def route(self, topk_idx: torch.Tensor):
        counts = torch.bincount(topk_idx.flatten(), minlength=self.n_experts)
        ones = torch.ones(topk_idx.numel(), dtype=torch.long, device=topk_idx.device)
        return counts, ones
""",
        """
class MoE(nn.Module):
    def __init__(self, n_experts, max_tokens, device):
        super().__init__()
        self.register_buffer("_tokens_per_expert_buf", torch.zeros(n_experts, dtype=torch.long, device=device))
        self.register_buffer("_ones_buf", torch.ones(max_tokens, dtype=torch.long, device=device))

    def route(self, topk_idx: torch.Tensor):
        self._tokens_per_expert_buf.zero_()
        self._tokens_per_expert_buf.scatter_add_(0, topk_idx.flatten(), self._ones_buf[: topk_idx.numel()])
        return self._tokens_per_expert_buf
""",
        {"dynamic-shape", "allocation"},
    ),
    # 001 cat 3 (S1's MoE): bincount(...).tolist() and a Python loop over experts with torch.where.
    "moe_tolist_loop": (
        """
class MoE(nn.Module):
    def forward(self, x: torch.Tensor, indices: torch.Tensor, weights: torch.Tensor):
        y = torch.zeros_like(x)
        counts = torch.bincount(indices.flatten(), minlength=self.n_routed_experts).tolist()
        for i in range(self.n_routed_experts):
            if counts[i] == 0:
                continue
            idx, top = torch.where(indices == i)
            y[idx] += self.experts[i](x[idx]) * weights[idx, top, None]
        return y
""",
        """
class MoE(nn.Module):
    def forward(self, x: torch.Tensor, indices: torch.Tensor, weights: torch.Tensor):
        w13 = self.w13.index_select(0, indices.flatten())
        w2 = self.w2.index_select(0, indices.flatten())
        h = torch.bmm(w13, x.repeat_interleave(indices.shape[1], dim=0).unsqueeze(-1))
        out = torch.bmm(w2, F.silu(h)).squeeze(-1) * weights.reshape(-1, 1)
        return out.view(x.shape[0], -1, x.shape[-1]).sum(1)
""",
        {"sync", "dynamic-shape"},
    ),
    # 000 B / 001 cat 2: torch.full for l1_gsa -> self._l1_gsa_buf.fill_(l1_gs).
    "moe_full": (
        """
class MoE(nn.Module):
    def gsa(self, x: torch.Tensor, l1_gs: float):
        return torch.full((self.n_experts,), l1_gs, dtype=torch.float32, device=x.device)
""",
        """
class MoE(nn.Module):
    def __init__(self, n_experts, device):
        super().__init__()
        self.register_buffer("_l1_gsa_buf", torch.empty(n_experts, device=device))

    def gsa(self, x: torch.Tensor, l1_gs: float):
        self._l1_gsa_buf.fill_(l1_gs)
        return self._l1_gsa_buf
""",
        {"allocation"},
    ),
    # 000 B / 001 cat 2: torch.zeros in _assemble_scales_single_group -> preallocated _scale_a_buf.
    "linear_scale_zeros": (
        """
class Linear(nn.Module):
    def _assemble_scales_single_group(self, x_sf: torch.Tensor):
        scale_a = torch.zeros(self.padded_rows, self.cols, dtype=x_sf.dtype, device=x_sf.device)
        scale_a[: x_sf.shape[0]] = x_sf
        return scale_a
""",
        """
class Linear(nn.Module):
    def __init__(self, rows, cols, device):
        super().__init__()
        self.register_buffer("_scale_a_buf", torch.zeros(rows, cols, device=device))

    def _assemble_scales_single_group(self, x_sf: torch.Tensor):
        self._scale_a_buf[: x_sf.shape[0]].copy_(x_sf)
        return self._scale_a_buf
""",
        {"allocation"},
    ),
    # 001 cat 2: mHCLayer.init_state .clone() -> out_buf parameter written in place.
    "mhc_init_state_clone": (
        """
class MHCLayer(nn.Module):
    def init_state(self, x: torch.Tensor):
        return x.unsqueeze(1).expand(-1, self.n, -1).clone()
""",
        """
class MHCLayer(nn.Module):
    def init_state(self, x: torch.Tensor, out_buf: torch.Tensor):
        out_buf.copy_(x.unsqueeze(1).expand(-1, self.n, -1))
        return out_buf
""",
        {"allocation"},
    ),
    # 001 cat 2: quantize.py zeros_like inside torch.where -> scalar 0.0.
    "quantize_zeros_like": (
        """
def quantize(x: torch.Tensor, amax: torch.Tensor):
    scale = torch.where(amax > 0, amax / 6.0, torch.zeros_like(amax))
    return x / scale
""",
        """
def quantize(x: torch.Tensor, amax: torch.Tensor):
    scale = torch.where(amax > 0, amax / 6.0, 0.0)
    return x / scale
""",
        {"allocation"},
    ),
    # 000 B / 001 cat 3: dec_tid_buf[0] = python_int -> pinned buffer + copy_.
    "token_python_int": (
        """
class Decoder:
    def __init__(self, device):
        self.dec_tid_buf = torch.zeros(1, dtype=torch.long, device=device)

    def set_token(self, next_token: int):
        self.dec_tid_buf[0] = next_token
""",
        """
class Decoder:
    def __init__(self, device):
        self.dec_tid_buf = torch.zeros(1, dtype=torch.long, device=device)
        self.dec_tid_pinned = torch.zeros(1, dtype=torch.long, pin_memory=True)

    def set_token(self, next_token: int):
        self.dec_tid_pinned[0] = next_token
        self.dec_tid_buf.copy_(self.dec_tid_pinned, non_blocking=True)
""",
        {"allocation"},
    ),
    # 000 B / 001 cat 3: expert_offsets[g] = python_int -> element-wise multiply with a range buffer.
    "expert_offsets_python_int": (
        """
class GroupedLinear(nn.Module):
    def offsets(self, expert_offsets: torch.Tensor, n_groups: int, rows: int):
        for g in range(n_groups):
            expert_offsets[g] = g * rows
        return expert_offsets
""",
        """
class GroupedLinear(nn.Module):
    def __init__(self, n_groups, device):
        super().__init__()
        self.register_buffer("_range_buf", torch.arange(n_groups, device=device))

    def offsets(self, expert_offsets: torch.Tensor, n_groups: int, rows: int):
        torch.mul(self._range_buf, rows, out=expert_offsets)
        return expert_offsets
""",
        {"allocation"},
    ),
    # 000 B / 001 cat 3: if group_offsets[0] != 0 -> unconditional device-side update.
    "group_offsets_if": (
        """
def normalise(group_offsets: torch.Tensor):
    if group_offsets[0] != 0:
        group_offsets = group_offsets - group_offsets[0]
    return group_offsets
""",
        """
def normalise(group_offsets: torch.Tensor):
    return group_offsets - group_offsets[:1]
""",
        {"host-control-flow"},
    ),
    # 001 cat 5: torch.cuda.synchronize() on the hot path (profiling) -> events outside the step.
    "hot_path_synchronize": (
        """
class Runner:
    def forward_layer(self, x: torch.Tensor):
        y = self.layer(x)
        if self._profile_detail:
            torch.cuda.synchronize()
        return y
""",
        """
class Runner:
    def forward_layer(self, x: torch.Tensor):
        return self.layer(x)
""",
        {"sync"},
    ),
    # 001 cat 6: torch.zeros() GEMM output in run_nvfp4_grouped_gemm -> preallocated `out`.
    "gemm_output_zeros": (
        """
def run_nvfp4_grouped_gemm(a: torch.Tensor, b: torch.Tensor, m: int, n: int):
    out = torch.zeros(m, n, dtype=torch.bfloat16, device=a.device)
    torch.mm(a, b, out=out)
    return out
""",
        """
def run_nvfp4_grouped_gemm(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor):
    torch.mm(a, b, out=out)
    return out
""",
        {"allocation"},
    ),
    # 000 C / DSV4 spec: a KV cache grown with cat each step -> static cache + device slot.
    "kv_cache_cat": (
        """
class Attention(nn.Module):
    def forward(self, kv: torch.Tensor):
        self.kv_cache = torch.cat([self.kv_cache, kv], dim=1)
        return self.kv_cache
""",
        """
class Attention(nn.Module):
    def forward(self, kv: torch.Tensor, pos: torch.Tensor):
        self.kv_cache.index_copy_(1, pos, kv)
        return self.kv_cache
""",
        {"allocation"},
    ),
    # 000 C item 3 / spec 4.9: dropping -1 indices with a boolean mask.
    "attention_bool_mask": (
        """
def sparse_attn(scores: torch.Tensor, topk_idxs: torch.Tensor):
    valid = topk_idxs >= 0
    return scores[valid]
""",
        """
def sparse_attn(scores: torch.Tensor, topk_idxs: torch.Tensor):
    valid = topk_idxs >= 0
    return scores.masked_fill(~valid, float("-inf"))
""",
        {"dynamic-shape"},
    ),
}


# Seeds whose allocation is an intermediate (used and dropped inside the step): no capture
# hazard, so GL405 reports it only when selected, as a static-buffer opportunity.
INTERMEDIATE = {"quantize_zeros_like": ("GL405",)}


@pytest.mark.parametrize("name", sorted(CASES))
def test_before_fix_is_flagged_with_the_right_family(name):
    before, _, families = CASES[name]
    select = INTERMEDIATE.get(name, ())
    found = {f.family for f in lint_snippet(before, select=select) if not f.suppressed}
    assert families <= found, f"{name}: expected families {families}, got {found}"


@pytest.mark.parametrize("name", sorted(CASES))
def test_after_fix_is_clean(name):
    _, after, _ = CASES[name]
    found = [f for f in lint_snippet(after, select=INTERMEDIATE.get(name, ()))]
    assert found == [], f"{name}: after-fix version flagged: {found}"


def test_sampling_item_outside_the_graph_is_fine_when_marked_host():
    code = """
def sample(logits: torch.Tensor) -> int:  # graphlint: host
    return torch.argmax(logits).item()
"""
    assert lint_snippet(code) == []
