"""The graph-safe DSV4 decoder: seeded weights, static buffers, reset and prefill semantics,
and a step made only of ops that neither sync nor allocate through factories."""
import socket

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from dsv4_model import DSV4Weights, GraphSafeDSV4, ReferenceDSV4, make_config
from dsv4_model.factory import build_weights
from dsv4_model.testing import one_torch_thread  # noqa: F401  (autouse fixture)
from dsv4_model.testing import prompts


def _state_dicts_equal(a, b):
    sa, sb = a.state_dict(), b.state_dict()
    return sa.keys() == sb.keys() and all(torch.equal(sa[k], sb[k]) for k in sa)


def _static_tensors(model):
    """Every tensor the step reads or writes in place, by name."""
    found = {n: getattr(model, n) for n in ("tok", "pos", "prompt", "prompt_len", "logits",
                                            "next_tok", "out_tokens")}
    for i, block in enumerate(model.blocks):
        found[f"{i}.window"] = block.attn.window
        found[f"{i}.load"] = block.ffn.expert_load
        comps = [block.attn.compressor] + ([block.attn.indexer.compressor] if block.attn.indexer else [])
        for j, comp in enumerate(c for c in comps if c is not None):
            for name in ("A", "Z", "cache"):
                found[f"{i}.{j}.{name}"] = getattr(comp, name)
    return found


def test_same_seed_same_weights_and_different_seed_different_weights():
    cfg = make_config("tiny")
    assert _state_dicts_equal(DSV4Weights(cfg, seed=11), DSV4Weights(cfg, seed=11))
    assert not _state_dicts_equal(DSV4Weights(cfg, seed=11), DSV4Weights(cfg, seed=12))


def test_construction_and_steps_need_no_network(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("the model must not reach the network")
    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    model = GraphSafeDSV4(build_weights("cpu", "tiny", seed=0), batch=1)
    model.set_prompt(prompts(1))
    model.reset()
    model.step()


def test_tiny_config_matches_the_spec():
    cfg = make_config("tiny")
    assert (cfg.dim, cfg.n_layers, cfg.compress_ratios, cfg.n_hash_layers) == (256, 4, (0, 0, 4, 128), 2)
    assert (cfg.n_experts, cfg.n_active, cfg.hc_mult, cfg.sinkhorn_iters, cfg.window) == (16, 4, 4, 20, 64)
    assert (cfg.index_topk, cfg.max_seq_len // 4, cfg.max_seq_len // 128) == (16, 256, 8)
    assert make_config("tiny", hca_ratio=16).compress_ratios == (0, 0, 4, 16)
    bench = make_config("bench")
    assert bench.dim == 1024 and 16 <= bench.n_layers <= 24


def test_hash_table_gives_distinct_experts_per_token():
    weights = build_weights("cpu", "tiny", seed=0)
    for layer in weights.layers[:2]:
        table = layer.ffn.tid2eid
        assert table.shape == (1024, 4)
        assert all(len(set(row)) == 4 for row in table.tolist())
    assert weights.layers[2].ffn.tid2eid is None and weights.layers[2].ffn.bias is not None


def test_config_rejects_an_indexer_top_k_larger_than_the_slots():
    with pytest.raises(ValueError):
        make_config("tiny", max_seq_len=32, index_topk=16)


def test_step_writes_static_outputs_and_keeps_every_buffer_address():
    model = GraphSafeDSV4(build_weights("cpu", "tiny", seed=0), batch=2)
    model.set_prompt(prompts(2))
    model.reset()
    before = {k: t.data_ptr() for k, t in _static_tensors(model).items()}
    first = model.step()
    for _ in range(5):
        out = model.step()
        assert out[0] is first[0] and out[1] is first[1]
    model.reset()
    assert {k: t.data_ptr() for k, t in _static_tensors(model).items()} == before
    assert first[0].shape == (2, 1024) and first[0].dtype == torch.float32
    assert first[1].shape == (2,) and first[1].dtype == torch.int64


def test_prefill_is_the_decode_step_replayed_over_the_prompt():
    model = GraphSafeDSV4(build_weights("cpu", "tiny", seed=0, dtype="fp32"), batch=1)
    prompt = prompts(1, length=6)
    model.set_prompt(prompt)
    model.reset()
    assert model.tok.tolist() == [prompt[0, 0].item()] and model.pos.tolist() == [0]
    for i in range(8):
        _, nxt = model.step()
        assert model.pos.tolist() == [i + 1]
        expected = prompt[0, i + 1].item() if i + 1 < 6 else nxt.item()
        assert model.tok.tolist() == [expected]
        assert model.out_tokens[0, i].item() == nxt.item()


def test_reset_restores_the_initial_state_exactly():
    model = GraphSafeDSV4(build_weights("cpu", "tiny", seed=2, hca_ratio=16), batch=2)
    model.set_prompt(prompts(2))

    def run():
        model.reset()
        return torch.stack([model.step()[0].clone() for _ in range(40)])

    assert torch.equal(run(), run())


def test_logits_stay_finite_with_minus_inf_compressor_states():
    model = GraphSafeDSV4(build_weights("cpu", "tiny", seed=0), batch=1)
    model.set_prompt(prompts(1))
    model.reset()
    for _ in range(20):
        assert torch.isfinite(model.step()[0]).all()


class _OpRecorder(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.ops = set()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = str(func.overloadpacket)
        if name == "aten._to_copy":
            # A dtype cast stays on its device; only a copy to another device is a transfer.
            target = kwargs.get("device")
            if target is None or torch.device(target) == args[0].device:
                name = "aten._to_copy(dtype)"
        self.ops.add(name)
        return func(*args, **kwargs)


# Ops that read a device value on the host, have a data-dependent output shape, copy between
# devices, or make a fresh tensor from host data or a factory. (aten.clone is left out: a
# reshape of a non-contiguous result lowers to it, which is ordinary arithmetic.)
_FORBIDDEN = {
    "aten._local_scalar_dense", "aten.item", "aten.is_nonzero", "aten.nonzero", "aten.nonzero_static",
    "aten.bincount", "aten.unique", "aten._unique2", "aten.unique_consecutive", "aten.masked_select",
    "aten.repeat_interleave", "aten.index", "aten.index_put", "aten.index_put_", "aten.cat",
    "aten.zeros", "aten.ones", "aten.full", "aten.empty", "aten.arange", "aten.lift_fresh",
    "aten.zeros_like", "aten.ones_like", "aten.full_like", "aten.empty_like", "aten.new_zeros",
    "aten.new_full", "aten.new_empty", "aten.new_ones", "aten._to_copy",
    "aten.histc", "aten.multinomial",
}


def _ops_of_one_step(step, warmup):
    for _ in range(warmup):
        step()
    with _OpRecorder() as rec:
        step()
    return rec.ops


def test_graph_safe_step_uses_no_syncing_or_allocating_ops():
    model = GraphSafeDSV4(build_weights("cpu", "tiny", seed=0), batch=2)
    model.set_prompt(prompts(2))
    model.reset()
    ops = _ops_of_one_step(model.step, warmup=4)
    assert "aten.index_copy_" in ops and "aten.topk" in ops  # the recorder sees the step
    assert not ops & _FORBIDDEN, sorted(ops & _FORBIDDEN)


def test_reference_step_is_the_known_bad_target():
    ref = ReferenceDSV4(build_weights("cpu", "tiny", seed=0), batch=1)
    ref.reset()
    ref.set_tokens([1])
    pos = iter(range(64))
    ops = _ops_of_one_step(lambda: ref.forward(ref.tok_buf, next(pos)), warmup=10)
    for expected in ("aten.is_nonzero", "aten.bincount", "aten.index", "aten.cat", "aten.zeros"):
        assert expected in ops, expected
