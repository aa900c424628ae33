"""bench/hf_runtime_matrix.py: which architectures it runs, and its fast subset of ten on the CPU
emulation, each with a verdict whose causes sit at the lines that explain it."""
from __future__ import annotations

import importlib.util
import time
from pathlib import Path

import pytest

transformers = pytest.importorskip("transformers")

BENCH = Path(__file__).resolve().parents[2] / "bench" / "hf_runtime_matrix.py"


@pytest.fixture(scope="module")
def matrix():
    spec = importlib.util.spec_from_file_location("hf_runtime_matrix", BENCH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_matrix_admits_decoder_only_text_models_that_take_a_cache(matrix):
    found = matrix.architectures()
    assert len(found) >= 40
    assert {"llama", "deepseek_v3", "gpt_oss", "qwen3_next", "falcon_h1"} <= set(found)
    assert not {"bart", "whisper", "gemma3", "llama4", "bert"} & set(found)  # encoder-decoder, multimodal, encoder


def _line(at: str) -> str:
    path, line = at.rsplit(":", 1)
    root = Path(transformers.__file__).parent
    return (root / path).read_text(encoding="utf-8").splitlines()[int(line) - 1]


def test_the_fast_subset(matrix):
    started = time.perf_counter()
    rows = {case: matrix.run_case(case, "cpu", 3, bench=False, isolate=False) for case in matrix.FAST}
    elapsed = time.perf_counter() - started
    verdicts = {case: row["verdict"] for case, row in rows.items()}
    assert verdicts == {
        "llama": "pass", "phi3": "fail", "qwen2": "fail", "gemma3_text": "fail", "gpt_oss:experts=batched_mm": "fail",
        "deepseek_v3": "fail", "mixtral:experts=batched_mm": "fail", "qwen3_next": "fail", "lfm2": "pass",
        "bamba": "pass",
    }, verdicts
    for case in ("phi3", "qwen2", "gemma3_text", "gpt_oss:experts=batched_mm", "mixtral:experts=batched_mm"):
        # The exercised window: the static sliding layer's roll index comes from the host.
        (event,) = [e for e in rows[case]["sync_events"] if e["kind"] == "h2d-copy"]
        assert "torch.tensor([-1]" in _line(event["at"]), case
    for case in ("deepseek_v3", "qwen3_next"):  # the default experts: float32 grouped_mm
        assert [e["op"] for e in rows[case]["sync_events"]] == ["aten._grouped_mm.default"]
        assert "grouped_mm(" in _line(rows[case]["sync_events"][0]["at"])
    assert rows["lfm2"]["features"]["layer_kinds"] == {"conv": 1, "full_attention": 1}
    assert rows["qwen3_next"]["features"]["moe_layers"] >= 1
    assert elapsed < 120, f"the fast subset took {elapsed:.0f} s"
