"""Small configs that keep each family's shape (`hf_configs.py`), the attention fallback, and the
honest outcomes of `hf:MODEL` targets that cannot be built or run."""
from __future__ import annotations

import pytest

transformers = pytest.importorskip("transformers")

import torch  # noqa: E402
from click.testing import CliRunner  # noqa: E402

from graphlint.cli import main  # noqa: E402
from graphlint.runtime.targets import hf_configs, hf_target, loader  # noqa: E402
from graphlint.runtime.harness import run_harness  # noqa: E402
from graphlint.runtime.targets.loader import TargetError, UnsupportedTarget  # noqa: E402


def _kinds(model_type: str):
    config = hf_configs.small_config(transformers, model_type)
    layers = hf_configs.decoder_layers(hf_configs.meta_model(transformers, config), config.num_hidden_layers)
    moe = [hf_configs.is_moe(layer) for layer in layers]
    return config, set(getattr(config, "layer_types", None) or []), moe


def test_mla_dims_are_scaled_together_and_both_mlp_kinds_appear():
    default = transformers.CONFIG_MAPPING["deepseek_v3"]()
    config, _, moe = _kinds("deepseek_v3")
    scale = config.qk_rope_head_dim / default.qk_rope_head_dim
    for key in ("qk_nope_head_dim", "v_head_dim"):
        assert getattr(config, key) == getattr(default, key) * scale  # one factor for every head dim
    assert config.num_key_value_heads == config.num_attention_heads  # MLA: one kv head per head
    assert config.kv_lora_rank < default.kv_lora_rank and config.q_lora_rank < default.q_lora_rank
    assert True in moe and False in moe  # first_k_dense_replace leaves a dense layer and an MoE one
    step = hf_target.make("cpu", model="deepseek_v3", cache_len=8, experts="batched_mm")
    step.reset()
    step.prepare(0)
    assert step.step().shape == (1, hf_configs.VOCAB)


@pytest.mark.parametrize("model_type, kinds", [
    ("qwen3_next", {"linear_attention", "full_attention"}),
    ("lfm2", {"conv", "full_attention"}),  # its default config has no conv layer: named by its source
    ("jamba", {"linear_attention", "full_attention"}),
    ("bamba", {"linear_attention", "full_attention"}),
    ("gemma3_text", {"sliding_attention", "full_attention"}),
    ("zamba2", {"linear_attention", "hybrid"}),  # its default writes 54 layer types whatever the count
    ("gemma3n_text", {"sliding_attention", "full_attention"}),  # per-layer sizes: 35 entries, cut to depth
])
def test_every_layer_kind_appears(model_type, kinds):
    config, found, _ = _kinds(model_type)
    assert kinds <= found
    assert config.num_hidden_layers <= hf_configs.MAX_LAYERS


def test_jamba_keeps_dense_and_moe_layers():
    _, _, moe = _kinds("jamba")
    assert True in moe and False in moe


def test_a_read_only_head_dim_is_not_set():
    config = hf_configs.small_config(transformers, "falcon")  # FalconConfig.head_dim is a property
    assert "head_dim" not in hf_configs.settable(type(config))
    assert config.head_dim == config.hidden_size // config.num_attention_heads


def test_no_sdpa_falls_back_to_eager_and_says_so():
    step = hf_target.make("cpu", model="gemma2", cache_len=8)
    assert step.features["attn"] == "eager"
    assert "no sdpa support" in step.features["attn_fallback"]
    with pytest.raises(TargetError, match=r"--option attn=eager"):
        hf_target.make("cpu", model="gemma2", cache_len=8, attn="sdpa")


def test_the_report_lists_what_the_config_exercises():
    runtime = run_harness("hf:gpt_oss", "cpu", 2, options={"experts": "batched_mm"}, bench=False, isolate=False)
    features = runtime["target"]["features"]
    assert features["moe_layers"] == 2 and features["window"] == hf_configs.WINDOW
    assert features["layer_kinds"] == {"sliding_attention": 1, "full_attention": 1}
    assert features["prefill"] == hf_target.PREFILL and features["attn"] == "eager"


def test_an_architecture_with_its_own_cache_is_unsupported():
    with pytest.raises(UnsupportedTarget, match=r"^unsupported: MiniMaxForCausalLM refuses a StaticCache"):
        run_harness("hf:minimax", "cpu", 2, bench=False, isolate=False)


def test_experts_on_an_moe_without_switchable_implementations():
    with pytest.raises(ValueError, match=r"JetMoeForCausalLM has no experts implementations \(its MoE layers "
                                         r"run their own expert code"):
        hf_target.make("cpu", model="jetmoe", cache_len=8, experts="eager")


def test_a_model_that_cannot_be_built_is_an_error_with_its_location(tmp_path):
    # A config file is taken as it is: cohere_compass_text's rotary embedding reads one rope entry
    # per layer type, which a config without rope_parameters lacks, so transformers cannot build it.
    if "cohere_compass_text" not in transformers.CONFIG_MAPPING:
        pytest.skip("cohere_compass_text is not in this transformers")
    config = tmp_path / "config.json"
    config.write_text('{"model_type": "cohere_compass_text", "num_hidden_layers": 1, "hidden_size": 64, '
                      '"num_attention_heads": 4, "intermediate_size": 128, "vocab_size": 512}')
    result = CliRunner().invoke(main, ["runtime", f"hf:{config}", "--no-bench"])
    assert result.exit_code == 2, result.output
    assert "(at transformers/models/cohere_compass/modeling_cohere_compass.py:" in result.output
    assert "check --option names" not in result.output and "Traceback" not in result.output


@pytest.mark.parametrize("model_type", ["cohere_compass_text", "qwen4_exp_text", "dots3_note_text"])
def test_a_default_config_transformers_cannot_build_gets_a_small_one_that_runs(model_type):
    # cohere_compass_text and qwen4_exp_text: the default config lacks what the model reads (the
    # EXCEPTIONS entries say what); dots3_note_text: its heads are set per layer, so the whole
    # config's value reads as ambiguous and the class default stands for it.
    if model_type not in transformers.CONFIG_MAPPING:
        pytest.skip(f"{model_type} is not in this transformers")
    step = hf_target.make("cpu", model=model_type, cache_len=16)
    step.reset()
    step.prepare(0)
    assert step.step().shape == (1, hf_configs.VOCAB)


def test_a_window_the_step_cannot_run_falls_back_to_a_longer_one_that_still_slides():
    # dory's looped attention slices `window - 1 + q_len` keys against a window-long mask, so a
    # window no longer than the prompt cannot run; twice the window runs and still slides.
    if "dory" not in transformers.CONFIG_MAPPING:
        pytest.skip("dory is not in this transformers")
    step = hf_target.make("cpu", model="dory", cache_len=32)
    assert step.features["window"] == 2 * hf_configs.WINDOW
    assert step.features["window_fallback"].startswith(f"window {hf_configs.WINDOW} fails (")
    with pytest.raises(TargetError, match="cannot run a decode step"):
        hf_target.make("cpu", model="dory", cache_len=32, window=hf_configs.WINDOW)  # asked for: no fallback
    assert "window_fallback" not in hf_target.make("cpu", model="llama", cache_len=16).features


def test_a_type_error_inside_a_factory_is_not_blamed_on_options(tmp_path):
    source = tmp_path / "broken.py"
    source.write_text("def make(device):\n    return len(3)\n")
    with pytest.raises(TargetError) as raised:
        loader.build(loader.load_factory(f"{source}:make"), torch.device("cpu"), {})
    assert "check --option names" not in str(raised.value) and f"{source}:2" in str(raised.value)
    with pytest.raises(TargetError, match="check --option names"):
        loader.build(loader.load_factory(f"{source}:make"), torch.device("cpu"), {"nope": 1})


def test_the_prefill_makes_the_first_step_a_decode_step():
    # Without a prefill, the hybrid model's first step takes the prefill path of its conv layers:
    # one record at the branch, the rest its symptoms. With the default prefill, steps agree. In
    # transformers 5.25 the branch chooses between two helpers: the record is still at the `if`.
    cold = run_harness("hf:falcon_h1", "cpu", 4, options={"prefill": 0}, bench=False, isolate=False)
    (record,) = cold["replay"]["hazards"]
    assert record["hazard"] == "control-flow" and record["symptoms"] > 0
    assert "seq_len == 1" in open(record["path"], encoding="utf-8").read().splitlines()[record["line"] - 1]
    warm = run_harness("hf:falcon_h1", "cpu", 4, bench=False, isolate=False)
    assert warm["verdict"] == "pass" and warm["replay"]["hazards"] == []


def test_a_step_that_needs_an_attention_mask_runs_with_a_static_one(monkeypatch):
    # As bloom's alibi in transformers 5.17: the step cannot run without the 2D mask that
    # generate() passes with a StaticCache. The harness passes one over the whole cache, says so,
    # and fills it outside the step (prepare), so the captured step reads a static buffer.
    forward = transformers.LlamaForCausalLM.forward

    def needs_mask(self, input_ids=None, past_key_values=None, cache=None, attention_mask=None, **kwargs):
        kwargs.update({name: value for name, value in (("past_key_values", past_key_values), ("cache", cache))
                       if value is not None})
        if attention_mask is None:
            raise RuntimeError("The expanded size of the tensor (16) must match the existing size (4)")
        return forward(self, input_ids=input_ids, attention_mask=attention_mask, **kwargs)

    monkeypatch.setattr(transformers.LlamaForCausalLM, "forward", needs_mask)
    step = hf_target.make("cpu", model="llama", cache_len=16)
    assert "without an attention mask the step fails" in step.features["mask_fallback"]
    step.reset()
    step.prepare(2)
    assert step.mask[0].tolist() == [1] * (hf_target.PREFILL + 3) + [0] * (16 - hf_target.PREFILL - 3)
    assert step.step().shape == (1, hf_configs.VOCAB)
