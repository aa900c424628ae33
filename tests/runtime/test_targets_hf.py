"""The bundled transformers targets (`hf:MODEL`) on the CPU emulation: small random-weight configs,
a StaticCache, one token per step; the verdicts each family gets and the lines they point to."""
from __future__ import annotations

import json
import os

import pytest

transformers = pytest.importorskip("transformers")

import torch  # noqa: E402
from click.testing import CliRunner  # noqa: E402

from graphlint.cli import main  # noqa: E402
from graphlint.runtime.targets import hf_target, loader  # noqa: E402
from graphlint.runtime.harness import run_harness  # noqa: E402
from graphlint.runtime.targets.loader import TargetError  # noqa: E402

TF_DIR = os.path.dirname(transformers.__file__)


@pytest.fixture(scope="module")
def runs():
    cache: dict[str, dict] = {}

    def run(model: str, **options) -> dict:
        key = f"{model}{sorted(options.items())}"
        if key not in cache:
            cache[key] = run_harness(f"hf:{model}", "cpu", 4, options=options, bench=False)
        return cache[key]

    return run


def _source_line(path: str, line: int) -> str:
    with open(path, encoding="utf-8") as handle:
        return handle.read().splitlines()[line - 1]


def _sites(runtime: dict) -> list[tuple[str, str, str]]:
    return [(e["kind"], e["op"], os.path.basename(e["path"])) for e in runtime["sync_events"]]


def test_the_spelling_resolves_to_the_bundled_factory():
    assert loader.resolve_spec("hf:llama") == "hf:llama"
    assert loader.default_options("hf:llama") == {"model": "llama"}
    assert loader.default_options("hf") == {}
    assert loader.load_factory("hf:llama") is hf_target.make
    assert loader.load_factory("hf") is hf_target.make


@pytest.mark.parametrize("model", hf_target.CHECKED)
def test_every_checked_family_builds_and_steps(model):
    step = hf_target.make("cpu", model=model, cache_len=8)
    step.reset()
    outs = []
    for i in range(3):
        step.prepare(i)
        outs.append(step.step().clone())
    assert outs[0].shape == (1, 512)
    assert step.step() is step.logits  # a static output buffer
    assert not torch.equal(outs[0], outs[1])  # the cache advanced: each step sees a new position
    step.reset()
    step.prepare(0)
    assert torch.equal(step.step(), outs[0])  # reset() really rewinds the static cache


@pytest.mark.parametrize("model, options", [("llama", {}), ("qwen2", {"window": 0})])
def test_dense_decoders_pass_the_emulation(runs, model, options):
    # qwen2 with its own window settings (off): the full-attention decode step is graph-safe.
    runtime = runs(model, **options)
    assert runtime["verdict"] == "pass"
    assert runtime["sync_events"] == [] and runtime["replay"]["hazards"] == []
    assert runtime["captures"][0]["predicted"] == "ok"
    assert runtime["allocations"]["outputs_static"] is True


# The Mixtral and Qwen3-MoE cases below run window=0 (the family's own window: off in their default
# configs), as on the H200; with a window the sliding cache's own causes come first (see below).
def test_mixtral_eager_experts_sync_in_the_expert_loop(runs):
    runtime = runs("mixtral", experts="eager", window=0)
    assert runtime["verdict"] == "fail" and runtime["captures"][0]["predicted"] == "fail"
    events = runtime["sync_events"]
    assert {os.path.basename(e["path"]) for e in events} == {"modeling_mixtral.py"}
    nonzero = [e for e in events if e["op"] == "aten.nonzero.default"]
    assert len(nonzero) == 2
    for event in nonzero:  # each at a line that reads `.nonzero()` or one-argument torch.where
        text = _source_line(event["path"], event["line"])
        assert "nonzero()" in text or "torch.where(" in text, text
    # one_hot(idx, num_classes=E) syncs only in its CPU kernel (none at that line on the H200).
    assert not [e for e in events if "one_hot(" in _source_line(e["path"], e["line"])]
    bools = [e for e in events if e["op"] == "Tensor.__bool__"]
    assert bools and "if " in _source_line(bools[0]["path"], bools[0]["line"])
    assert all(e["explanation"] and e["fix"] for e in events)


def test_mixtral_grouped_mm_is_reported_from_the_catalogue(runs):
    runtime = runs("mixtral", experts="grouped_mm", window=0)
    assert _sites(runtime) == [("sync", "aten._grouped_mm.default", "moe.py")]
    event = runtime["sync_events"][0]
    assert "grouped_mm(" in _source_line(event["path"], event["line"])
    assert "seen on NVIDIA H200, torch 2.11" in event["explanation"]
    assert "batched_mm" in event["fix"]
    assert event["count"] == 2 * 2 * 4  # two layers, gate_up and down, four traced steps
    assert runtime["phases"]["capture"]["verdict"] == "fail"


@pytest.mark.parametrize("model", ["mixtral", "qwen3-moe"])
def test_grouped_mm_in_bfloat16_passes(runs, model):
    # As on the H200 (torch 2.11): bfloat16 grouped_mm neither synced nor failed capture.
    runtime = runs(model, experts="grouped_mm", dtype="bfloat16", window=0)
    assert runtime["verdict"] == "pass" and runtime["sync_events"] == []


def test_mixtral_batched_mm_passes(runs):
    runtime = runs("mixtral", experts="batched_mm", window=0)
    assert runtime["verdict"] == "pass" and runtime["sync_events"] == []


def test_qwen3_moe_default_experts_hit_grouped_mm(runs):
    runtime = runs("qwen3-moe", window=0)
    assert _sites(runtime) == [("sync", "aten._grouped_mm.default", "moe.py")]
    assert runs("qwen3-moe", experts="batched_mm", window=0)["verdict"] == "pass"


def test_gemma3_sliding_window_cache_is_not_graph_safe(runs):
    # The window (4) is shorter than the prefill and steps, so the static sliding layers are full
    # from the first decode step: each step builds its roll index with torch.tensor([-1], device=...)
    # (a host-to-device copy) and hands the mask Python int offsets that grow every step (on the
    # H200, replay differed from eager at 127 of 128 steps).
    runtime = runs("gemma3")
    features = runtime["target"]["features"]
    assert features["sliding_layers"] >= 1 and features["window"] == 4
    assert set(features["layer_kinds"]) == {"sliding_attention", "full_attention"}
    (event,) = runtime["sync_events"]
    assert (event["kind"], os.path.basename(event["path"])) == ("h2d-copy", "cache_utils.py")
    assert "torch.tensor([-1]" in _source_line(event["path"], event["line"])
    found = runtime["replay"]["hazards"]
    frozen = [h for h in found if h["hazard"] == "frozen-scalar"]
    assert {os.path.basename(h["path"]) for h in frozen} == {"masking_utils.py"}
    assert any("+ q_offset" in _source_line(h["path"], h["line"]) for h in frozen)
    # The roll index is the same value every step: never a stale input.
    assert not [h for h in found if h["hazard"] == "stale-input"]
    assert runtime["phases"]["replay"]["verdict"] == "fail"


def test_a_config_file_and_a_checkpoint_folder(tmp_path):
    config = hf_target.load_config(transformers, "llama")
    config_file = tmp_path / "config.json"
    config_file.write_text(json.dumps(config.to_dict()))
    from_file = hf_target.make("cpu", model=str(config_file), cache_len=8)
    assert type(from_file.model).__name__ == "LlamaForCausalLM"

    torch.manual_seed(3)
    saved = transformers.AutoModelForCausalLM.from_config(config).eval()
    saved.save_pretrained(tmp_path / "ckpt")
    random_weights = hf_target.make("cpu", model=str(tmp_path / "ckpt"), cache_len=8)
    loaded = hf_target.make("cpu", model=str(tmp_path / "ckpt"), cache_len=8, weights="checkpoint")
    name = "model.embed_tokens.weight"
    assert torch.equal(loaded.model.state_dict()[name], saved.state_dict()[name])
    assert not torch.equal(random_weights.model.state_dict()[name], saved.state_dict()[name])


@pytest.mark.parametrize("argv, message", [
    (["hf:no-such-arch"], "unknown architecture 'no-such-arch'"),
    (["hf:mixtral", "--option", "experts=fast"], "experts 'fast': expected one of eager, grouped_mm, batched_mm"),
    (["hf"], "name a model"),
    (["hf:llama", "--option", "experts=eager"], "LlamaForCausalLM has no experts implementations"),
    (["hf:llama", "--option", "dtype=int7"], "dtype 'int7'"),
    (["hf:./missing/config.json"], "no such file or folder"),
])
def test_bad_input_is_a_usage_error(argv, message):
    result = CliRunner().invoke(main, ["runtime", *argv, "--no-bench"])
    assert result.exit_code == 2, result.output
    assert message in result.output
    assert "Traceback" not in result.output


def test_without_transformers_the_message_says_what_to_install(monkeypatch):
    real = loader.importlib.util.find_spec
    monkeypatch.setattr(loader.importlib.util, "find_spec",
                        lambda name, *a: None if name == "transformers" else real(name, *a))
    with pytest.raises(TargetError, match=r"pip install 'graphlint-cuda\[hf\]'"):
        loader.load_factory("hf:llama")


def test_one_command_json_report(tmp_path):
    out = tmp_path / "runtime.json"
    result = CliRunner().invoke(main, ["runtime", "hf:mixtral", "--option", "experts=grouped_mm", "--option", "window=0",
                                       "--steps", "2",
                                       "--no-bench", "--format", "json", "--output", str(out)])
    assert result.exit_code == 1, result.output
    runtime = json.loads(out.read_text())["runtime"]
    target = runtime["target"]
    assert (target["spec"], target["options"]) == ("hf:mixtral", {"model": "mixtral", "experts": "grouped_mm",
                                                                  "window": 0})
    assert target["entry"]["qualname"] == "HFDecodeStep.step"  # what `runtime --lint` would lint from
    assert [e["op"] for e in runtime["sync_events"]] == ["aten._grouped_mm.default"]
