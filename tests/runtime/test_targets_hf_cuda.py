"""The bundled transformers targets on a real CUDA device: what the GPU run recorded (torch 2.11,
H200) as tests. Skipped without CUDA or transformers."""
from __future__ import annotations

import os

import pytest
import torch

pytest.importorskip("transformers")

from graphlint.runtime.harness import run_harness  # noqa: E402

pytestmark = [pytest.mark.cuda, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")]


@pytest.fixture(scope="module")
def runs():
    cache: dict[str, dict] = {}

    def run(model: str, **options) -> dict:
        key = f"{model}{sorted(options.items())}"
        if key not in cache:
            cache[key] = run_harness(f"hf:{model}", "cuda:0", 32, options=options)
        return cache[key]

    return run


def _capture(runtime: dict) -> dict:
    return runtime["captures"][0]


def test_llama_captures_and_replays_bit_exact(runs):
    runtime = runs("llama")
    assert runtime["sync_events"] == []
    assert _capture(runtime)["status"] == "captured"
    assert runtime["replay"]["devices"][0]["verdict"] == "pass"
    assert runtime["replay"]["devices"][0]["mismatched_steps"] == 0
    assert runtime["bench"]["devices"][0]["speedup"] > 1


def test_mixtral_eager_experts_fail_capture_at_the_expert_loop(runs):
    runtime = runs("mixtral", experts="eager", window=0)
    assert {os.path.basename(e["path"]) for e in runtime["sync_events"]} == {"modeling_mixtral.py"}
    assert all(e["explanation"] and e["fix"] for e in runtime["sync_events"])
    capture = _capture(runtime)
    assert capture["status"] == "failed"
    assert os.path.basename(capture["cause"]["path"]) == "modeling_mixtral.py"
    assert capture["explanation"] and capture["fix"]


def test_mixtral_grouped_mm_sync_is_named_and_explained(runs):
    runtime = runs("mixtral", experts="grouped_mm", window=0)
    ops = {e["op"] for e in runtime["sync_events"]}
    assert any(op.startswith("aten._grouped_mm") for op in ops), ops
    event = next(e for e in runtime["sync_events"] if e["op"].startswith("aten._grouped_mm"))
    assert os.path.basename(event["path"]) == "moe.py"
    assert "batched_mm" in event["fix"]
    capture = _capture(runtime)
    assert capture["status"] == "failed"
    assert capture["cause"]["op"].startswith("aten._grouped_mm")
    assert "batched_mm" in capture["fix"]


def test_mixtral_batched_mm_captures(runs):
    runtime = runs("mixtral", experts="batched_mm", window=0)
    assert runtime["sync_events"] == []
    assert _capture(runtime)["status"] == "captured"
    assert runtime["replay"]["devices"][0]["verdict"] == "pass"


def test_grouped_mm_in_bfloat16_captures(runs):
    runtime = runs("mixtral", experts="grouped_mm", dtype="bfloat16", window=0)
    assert runtime["sync_events"] == []
    assert _capture(runtime)["status"] == "captured"
    assert runtime["replay"]["devices"][0]["verdict"] == "pass"


def test_gemma3_captures_but_replays_a_stale_mask(runs):
    # The family's own window (longer than the steps): the cache never fills, the mask's offset freezes.
    runtime = runs("gemma3", window=0)
    assert _capture(runtime)["status"] == "captured"
    replay = runtime["replay"]["devices"][0]
    assert replay["verdict"] == "fail" and replay["mismatched_steps"] > 0
    assert [h["hazard"] for h in runtime["replay"]["hazards"]] == ["frozen-scalar"]


def test_a_full_sliding_window_cache_fails_capture_at_its_host_index(runs):
    # The default window (4) is full from the first decode step: the cache's roll index is built
    # with torch.tensor([-1], device=...) each step, a host-to-device copy (the CPU emulation's
    # prediction for every sliding family; this checks it on CUDA).
    runtime = runs("gemma3")
    events = [e for e in runtime["sync_events"] if os.path.basename(e["path"]) == "cache_utils.py"]
    assert events and events[0]["kind"] == "h2d-copy"
    assert _capture(runtime)["status"] == "failed"


def test_a_hybrid_model_captures_a_decode_step_after_the_prefill(runs):
    runtime = runs("falcon_h1")
    assert runtime["replay"]["hazards"] == []
    assert _capture(runtime)["status"] == "captured"


def test_phimoe_host_copy_is_seen_on_cuda_as_in_the_emulation(runs):
    runtime = runs("phimoe", experts="batched_mm", window=0)
    copies = [e for e in runtime["sync_events"] if os.path.basename(e["path"]) == "modeling_phimoe.py"]
    assert copies and copies[0]["kind"] == "h2d-copy"
