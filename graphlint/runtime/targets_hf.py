"""A ready-made runtime target for transformers causal LMs: one token per step with a StaticCache.

`graphlint runtime hf:llama` (an architecture name, small default size) or `hf:path/to/config.json`
/ `hf:path/to/folder` builds the model from its config with random weights (nothing is downloaded),
or loads a local checkpoint with `--option weights=checkpoint`. transformers is an optional extra.
"""
from __future__ import annotations

import inspect
import json
import os
from typing import Any

import torch

# Spellings users type -> transformers model_type. Any other model_type transformers knows works too.
ALIASES = {
    "qwen3-moe": "qwen3_moe",
    "qwen2-moe": "qwen2_moe",
    "gpt-oss": "gpt_oss",
    "gemma3": "gemma3_text",
    "gemma-3": "gemma3_text",
}
# Architectures checked with this factory (tests/runtime/test_targets_hf.py runs each on the CPU).
CHECKED = ("llama", "mistral", "qwen2", "qwen3", "gemma3_text", "phi3", "mixtral", "qwen3_moe", "olmoe")

# A small default size, applied to the keys an architecture's config has: seconds on a CPU.
SMALL = {
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 16,
    "vocab_size": 512,
    "moe_intermediate_size": 64,
    "shared_expert_intermediate_size": 64,
    "num_local_experts": 4,
    "num_experts": 4,
    "num_experts_per_tok": 2,
}
EXPERTS = ("eager", "grouped_mm", "batched_mm")
WEIGHTS = ("random", "checkpoint")
DTYPES = {"float32": torch.float32, "fp32": torch.float32, "bfloat16": torch.bfloat16, "bf16": torch.bfloat16,
          "float16": torch.float16, "fp16": torch.float16}


class HFDecodeStep:
    """One decode step of a causal LM: token ids and positions in static device buffers, a StaticCache
    of `cache_len` tokens, logits of the last position copied into a static output buffer."""

    def __init__(self, device: torch.device, model, cache, batch: int, cache_len: int, seed: int):
        self.device = device
        self.model = model
        self.cache = cache
        self.max_steps = cache_len  # one slot of the static cache per step
        # transformers 5.24 renamed the forward's `past_key_values` to `cache` (the old name warns).
        params = inspect.signature(model.forward).parameters
        self.cache_arg = "cache" if "cache" in params else "past_key_values"
        vocab = model.config.get_text_config(decoder=True).vocab_size
        generator = torch.Generator().manual_seed(seed)
        # The prompt lives on the device; prepare() copies one row of it into the static input.
        self.tokens = torch.randint(0, vocab, (cache_len, batch, 1), generator=generator).to(device)
        self.input_ids = torch.zeros(batch, 1, dtype=torch.long, device=device)
        self.position_ids = torch.zeros(batch, 1, dtype=torch.long, device=device)
        self.logits = torch.zeros(batch, vocab, dtype=torch.float32, device=device)

    @torch.no_grad()
    def reset(self) -> None:  # graphlint: host
        self.cache.reset()  # in place: the cache keeps its addresses (and its device-side length)
        self.logits.zero_()

    def prepare(self, step: int) -> None:  # graphlint: host
        self.input_ids.copy_(self.tokens[step % self.max_steps])
        self.position_ids.fill_(step)

    @torch.no_grad()
    def step(self) -> torch.Tensor:
        out = self.model(input_ids=self.input_ids, position_ids=self.position_ids,
                         **{self.cache_arg: self.cache}, use_cache=True)
        self.logits.copy_(out.logits[:, -1])
        return self.logits


def make(device, model: str | None = None, batch: int = 1, cache_len: int = 128, dtype: str = "float32",
         attn: str = "sdpa", experts: str | None = None, seed: int = 0, layers: int | None = None,
         weights: str = "random") -> HFDecodeStep:
    """Build the decode step of `model` on `device`.

    `model`: an architecture name (`llama`, `mixtral`, `qwen3-moe`, or any transformers model_type;
    small default size), a config.json file, or a folder with one (a local checkpoint). `weights`:
    `random` (default, seeded by `seed`) or `checkpoint` (loads the folder's weights, offline).
    `experts`: the transformers experts implementation (eager, grouped_mm, batched_mm) for MoE
    models. `layers` overrides the number of layers. Raises ValueError on bad options.
    """
    try:
        import transformers
    except ImportError:
        raise ValueError("the hf targets need transformers: pip install 'graphlint-cuda[hf]'") from None
    if not model:
        raise ValueError("hf target: name a model (hf:llama, hf:path/to/config.json, or --option model=...)")
    if dtype not in DTYPES:
        raise ValueError(f"dtype {dtype!r}: expected one of {', '.join(DTYPES)}")
    if experts is not None and experts not in EXPERTS:
        raise ValueError(f"experts {experts!r}: expected one of {', '.join(EXPERTS)}")
    if weights not in WEIGHTS:
        raise ValueError(f"weights {weights!r}: expected random or checkpoint")
    if not isinstance(batch, int) or batch < 1 or not isinstance(cache_len, int) or cache_len < 2:
        raise ValueError("batch must be >= 1 and cache_len >= 2 (integers)")
    device = torch.device(device)
    kwargs: dict[str, Any] = {"dtype": DTYPES[dtype], "attn_implementation": attn}
    if experts is not None:
        kwargs["experts_implementation"] = experts
    config = load_config(transformers, model, layers)
    torch.manual_seed(seed)
    auto = transformers.AutoModelForCausalLM
    if weights == "checkpoint":
        if not os.path.isdir(model):
            raise ValueError("weights=checkpoint needs model=FOLDER with the checkpoint's files")
        built = auto.from_pretrained(model, config=config, local_files_only=True, **kwargs)
    else:
        built = auto.from_config(config, **kwargs)
    can_set = getattr(built, "_can_set_experts_implementation", None)
    if experts is not None and callable(can_set) and not can_set():
        raise ValueError(f"experts={experts}: {type(built).__name__} has no experts implementations (not an MoE)")
    built = built.to(device).eval()
    cache = transformers.StaticCache(config=built.config, max_cache_len=cache_len)
    return HFDecodeStep(device, built, cache, batch, cache_len, seed)


def load_config(transformers, model: str, layers: int | None = None):
    """A config from a config.json file, a folder holding one, or an architecture name (made small)."""
    overrides = {"num_hidden_layers": layers} if layers else {}
    if os.path.isfile(model):
        with open(model, encoding="utf-8") as handle:
            data = json.load(handle)
        if "model_type" not in data:
            raise ValueError(f"{model}: a config.json needs a model_type")
        return transformers.AutoConfig.for_model(**{**data, **overrides})
    if os.path.isdir(model):
        if not os.path.isfile(os.path.join(model, "config.json")):
            raise ValueError(f"{model}: the folder has no config.json")
        return transformers.AutoConfig.from_pretrained(model, local_files_only=True, **overrides)
    if os.sep in model or model.endswith(".json"):
        raise ValueError(f"{model}: no such file or folder")
    model_type = ALIASES.get(model.lower(), model.lower().replace("-", "_"))
    mapping = transformers.CONFIG_MAPPING
    if model_type not in mapping:
        raise ValueError(f"unknown architecture {model!r}: give a config file or folder, or one of "
                         f"{', '.join(CHECKED)} (any transformers model_type works)")
    default = mapping[model_type]()
    small = {key: value for key, value in SMALL.items() if _has(default, key)}
    # Special tokens of the full-size vocabulary would index past the small embedding table.
    for key in ("pad_token_id", "bos_token_id", "eos_token_id"):
        value = getattr(default, key, None)
        if isinstance(value, int) and value >= SMALL["vocab_size"]:
            small[key] = None
    return mapping[model_type](**{**small, **overrides})


def _has(config, key: str) -> bool:
    try:
        return getattr(config, key) is not None
    except AttributeError:
        return False
