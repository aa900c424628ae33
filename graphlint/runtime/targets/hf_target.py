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

from graphlint.runtime.targets import hf_configs
from graphlint.runtime.targets.loader import TargetError

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

PREFILL = 4  # prompt tokens run eagerly before the decode steps (a warm cache, as an engine has)
EXPERTS = ("eager", "grouped_mm", "batched_mm")
WEIGHTS = ("random", "checkpoint")
DTYPES = {"float32": torch.float32, "fp32": torch.float32, "bfloat16": torch.bfloat16, "bf16": torch.bfloat16,
          "float16": torch.float16, "fp16": torch.float16}


class HFDecodeStep:
    """One decode step of a causal LM: token ids and positions in static device buffers, a StaticCache
    of `cache_len` tokens, logits of the last position copied into a static output buffer.

    reset() runs an eager prefill of `prefill` prompt tokens (as an engine does before it captures
    decode steps), so every step, the first included, is a decode step against a warm cache.
    """

    def __init__(self, device: torch.device, model, cache, batch: int, cache_len: int, seed: int,
                 prefill: int = 0, mask: bool = False):
        self.device = device
        self.model = model
        self.cache = cache
        self.prefill = prefill
        self.max_steps = cache_len - prefill  # one slot of the static cache per step
        # transformers 5.24 renamed the forward's `past_key_values` to `cache` (the old name warns).
        self.cache_arg = cache_argument(model)
        vocab = model.config.get_text_config(decoder=True).vocab_size
        generator = torch.Generator().manual_seed(seed)
        # The prompt lives on the device; prepare() copies one row of it into the static input.
        self.tokens = torch.randint(0, vocab, (cache_len, batch, 1), generator=generator).to(device)
        self.input_ids = torch.zeros(batch, 1, dtype=torch.long, device=device)
        self.position_ids = torch.zeros(batch, 1, dtype=torch.long, device=device)
        self.logits = torch.zeros(batch, vocab, dtype=torch.float32, device=device)
        # A 2D mask over the whole static cache, as generate() passes with a StaticCache, for
        # families whose step cannot run without one (bloom's alibi in transformers 5.17).
        self.mask = torch.zeros(batch, cache_len, dtype=torch.long, device=device) if mask else None
        self.features: dict[str, Any] = {}

    def _mask_kwargs(self) -> dict[str, Any]:
        return {} if self.mask is None else {"attention_mask": self.mask}

    @torch.no_grad()
    def reset(self) -> None:  # graphlint: host
        self.cache.reset()  # in place: the cache keeps its addresses (and its device-side length)
        self.logits.zero_()
        if self.mask is not None:
            self.mask.zero_()
            self.mask[:, : self.prefill] = 1
        if self.prefill:
            prompt = self.tokens[: self.prefill, :, 0].transpose(0, 1).contiguous()
            positions = torch.arange(self.prefill, device=self.device).expand(prompt.shape[0], -1)
            self.model(input_ids=prompt, position_ids=positions, **{self.cache_arg: self.cache}, use_cache=True,
                       **self._mask_kwargs())

    def prepare(self, step: int) -> None:  # graphlint: host
        position = self.prefill + step % self.max_steps
        self.input_ids.copy_(self.tokens[position])
        self.position_ids.fill_(position)
        if self.mask is not None:
            self.mask[:, : position + 1] = 1

    @torch.no_grad()
    def step(self) -> torch.Tensor:
        out = self.model(input_ids=self.input_ids, position_ids=self.position_ids,
                         **{self.cache_arg: self.cache}, use_cache=True, **self._mask_kwargs())
        self.logits.copy_(out.logits[:, -1])
        return self.logits


def cache_argument(model) -> str | None:
    """The forward's cache parameter (`cache` from transformers 5.24, `past_key_values` before)."""
    params = inspect.signature(model.forward).parameters
    return next((name for name in ("cache", "past_key_values") if name in params), None)


def make(device, model: str | None = None, batch: int = 1, cache_len: int = 128, dtype: str = "float32",
         attn: str | None = None, experts: str | None = None, seed: int = 0, layers: int | None = None,
         weights: str = "random", prefill: int = PREFILL, window: int | None = None) -> HFDecodeStep:
    """Build the decode step of `model` on `device`.

    `model`: an architecture name (`llama`, `mixtral`, `qwen3-moe`, or any transformers model_type;
    a small config of its own shape, `hf_configs.py`), a config.json file, or a folder with one (a
    local checkpoint). `weights`: `random` (default, seeded by `seed`) or `checkpoint` (loads the
    folder's weights, offline). `attn`: the attention implementation (default sdpa, else eager where
    the architecture has no sdpa; the report says which ran). `experts`: the transformers experts
    implementation (eager, grouped_mm, batched_mm) for MoE models. `layers` overrides the number of
    layers; `prefill` is the prompt length run eagerly by reset() before the decode steps;
    `window` the sliding window of an architecture name's small config (0: the family's own; by
    default the smallest of WINDOW_TRIES under which the decode step runs, and the report says
    when it is not the first). Raises ValueError on bad options and TargetError (`unsupported: ...` or with the location of
    the library's exception) when the model cannot be built or run.
    """
    try:
        import transformers
    except ImportError:
        raise ValueError("the hf targets need transformers: pip install 'graphlint-cuda[hf]'") from None
    if not model:
        raise ValueError("hf target: name a model (hf:llama, hf:path/to/config.json, or --option model=...)")
    _check_options(dtype, experts, weights, batch, cache_len, prefill)
    if window is not None and (not isinstance(window, int) or window < 0):
        raise ValueError(f"window {window!r}: expected an integer >= 0 (0: the family's own window)")
    device = torch.device(device)
    # Some families' code breaks on a window no longer than the prompt (dory's looped attention
    # slices `window - 1 + q_len` keys against a window-long mask): a longer window that still
    # slides within the run exercises the same code, where the shortest one cannot run at all.
    windows = [window] if window is not None else list(WINDOW_TRIES)
    failures = []
    for tried in windows:
        config = load_config(transformers, model, layers, tried)
        try:
            step = _make_from_config(transformers, device, model, config, batch, cache_len, dtype, attn,
                                     experts, seed, weights, prefill)
        except TargetError as exc:
            if tried is windows[-1] or not (tried and _slides(config)) or str(exc).startswith("unsupported"):
                raise
            failures.append(f"window {tried} fails ({exc})")
            continue
        if failures:
            step.features["window_fallback"] = "; ".join(failures) + f": ran window {tried}"
        return step
    raise AssertionError("unreachable")


# The default small window, then one twice as long: both shorter than the tokens any run takes
# (prefill + trial + warm-up + traced steps), so the window slides either way.
WINDOW_TRIES = (hf_configs.WINDOW, 2 * hf_configs.WINDOW)


def _slides(config) -> bool:
    """The config sets a window (so another length may run)."""
    return any(hf_configs._int(hf_configs._get(config, key)) for key in hf_configs.WINDOWS)


def _make_from_config(transformers, device, model, config, batch, cache_len, dtype, attn, experts, seed,
                      weights, prefill) -> HFDecodeStep:
    built, attn_used = _build(transformers, model, config, device, dtype, attn, experts, weights, seed)
    if cache_argument(built) is None:
        raise TargetError(f"unsupported: {type(built).__name__}.forward takes no cache argument "
                          "(it keeps its own state), so it cannot run with a StaticCache")
    try:
        cache = transformers.StaticCache(config=built.config, max_cache_len=cache_len)
    except Exception as exc:
        raise TargetError(f"unsupported: a StaticCache cannot be made for {type(built).__name__}: "
                          f"{type(exc).__name__}: {exc}{_where(exc)}") from None
    step = HFDecodeStep(device, built, cache, batch, cache_len, seed, prefill=prefill)
    mask_fallback = None
    try:
        _trial(step, attn_used)
    except TargetError as exc:
        if str(exc).startswith("unsupported"):
            raise
        # The step may need the 2D attention mask that generate() passes with a StaticCache:
        # run it with one, and say so; the first error stands when that fails too.
        step = HFDecodeStep(device, built, cache, batch, cache_len, seed, prefill=prefill, mask=True)
        try:
            _trial(step, attn_used)
        except TargetError:
            raise exc from None
        mask_fallback = f"without an attention mask the step fails ({exc}): ran with a static 2D mask"
    step.features = {**hf_configs.features(built, cache), "attn": attn_used,
                     "experts": getattr(built.config, "_experts_implementation", None) if _is_moe(built) else None,
                     "prefill": prefill, "dtype": dtype}
    if attn is None and attn_used != "sdpa":
        step.features["attn_fallback"] = f"{type(built).__name__} has no sdpa support: ran attn={attn_used}"
    if mask_fallback:
        step.features["mask_fallback"] = mask_fallback
    return step


def _check_options(dtype, experts, weights, batch, cache_len, prefill) -> None:
    if dtype not in DTYPES:
        raise ValueError(f"dtype {dtype!r}: expected one of {', '.join(DTYPES)}")
    if experts is not None and experts not in EXPERTS:
        raise ValueError(f"experts {experts!r}: expected one of {', '.join(EXPERTS)}")
    if weights not in WEIGHTS:
        raise ValueError(f"weights {weights!r}: expected random or checkpoint")
    if not isinstance(batch, int) or batch < 1 or not isinstance(cache_len, int) or cache_len < 2:
        raise ValueError("batch must be >= 1 and cache_len >= 2 (integers)")
    if not isinstance(prefill, int) or not 0 <= prefill < cache_len - 1:
        raise ValueError(f"prefill {prefill!r}: expected an integer from 0 to cache_len - 2")


def _build(transformers, model: str, config, device, dtype: str, attn: str | None, experts: str | None,
           weights: str, seed: int):
    """The model with the requested attention (sdpa, falling back to eager when the architecture
    has none and attn was not given) and experts implementation; returns (model, attn used)."""
    auto = transformers.AutoModelForCausalLM
    model_cls = _model_class(transformers, config)
    if experts is not None and model_cls is not None and not model_cls._can_set_experts_implementation():
        what = ("its MoE layers run their own expert code, with no switchable implementation"
                if _is_moe(hf_configs.meta_model(transformers, config)) else "it is not an MoE")
        raise ValueError(f"experts={experts}: {model_cls.__name__} has no experts implementations ({what})")
    tried = [attn] if attn else ["sdpa", "eager"]
    for index, implementation in enumerate(tried):
        kwargs: dict[str, Any] = {"dtype": DTYPES[dtype], "attn_implementation": implementation}
        if experts is not None:
            kwargs["experts_implementation"] = experts
        torch.manual_seed(seed)
        try:
            if weights == "checkpoint":
                if not os.path.isdir(model):
                    raise ValueError("weights=checkpoint needs model=FOLDER with the checkpoint's files")
                built = auto.from_pretrained(model, config=config, local_files_only=True, **kwargs)
            else:
                built = auto.from_config(config, **kwargs)
        except ValueError as exc:
            unsupported_attn = implementation in str(exc) or "attention implementation" in str(exc)
            if unsupported_attn and index + 1 < len(tried):
                continue  # the next implementation in `tried`
            hint = "; try --option attn=eager" if unsupported_attn and implementation != "eager" else ""
            raise TargetError(f"{_name(config)} cannot be built with attn={implementation}: {exc}{_where(exc)}{hint}") from None
        except Exception as exc:
            raise TargetError(f"{_name(config)} cannot be built: {type(exc).__name__}: {exc}{_where(exc)}") from None
        return built.to(device).eval(), implementation
    raise AssertionError("unreachable")


def _trial(step: HFDecodeStep, attn: str) -> None:
    """One eager prefill and decode step at build time: a model that cannot run is an error here,
    with its location, and one that refuses the StaticCache is unsupported."""
    try:
        step.reset()
        step.prepare(0)
        step.step()
    except Exception as exc:
        name = type(step.model).__name__
        if type(step.cache).__name__ in str(exc):
            raise TargetError(f"unsupported: {name} refuses a StaticCache: {exc}{_where(exc)}") from None
        hint = "; try --option attn=eager" if attn != "eager" and "attention" in str(exc).lower() else ""
        raise TargetError(f"{name} cannot run a decode step: {type(exc).__name__}: {exc}{_where(exc)}{hint}") from None


def _model_class(transformers, config):
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING

    try:
        return MODEL_FOR_CAUSAL_LM_MAPPING[type(config)]
    except KeyError:
        return None


def _is_moe(model) -> bool:
    return any(hf_configs.is_moe(layer) for layer in hf_configs.decoder_layers(model, None))


def _name(config) -> str:
    return getattr(config, "model_type", None) or type(config).__name__


def _where(exc: BaseException) -> str:
    """` (at file:line)` of the innermost frame that raised, library frames included."""
    tb = exc.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    if tb is None:
        return ""
    path = tb.tb_frame.f_code.co_filename.rsplit("site-packages" + os.sep, 1)[-1]
    return f" (at {path}:{tb.tb_lineno})"


def load_config(transformers, model: str, layers: int | None = None, window: int = hf_configs.WINDOW):
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
    if model_type not in transformers.CONFIG_MAPPING:
        model_type = model.lower()  # spellings with a hyphen of their own (gpt-sw3, modernbert-decoder)
    if model_type not in transformers.CONFIG_MAPPING:
        raise ValueError(f"unknown architecture {model!r}: give a config file or folder, or one of "
                         f"{', '.join(CHECKED)} (any transformers model_type works)")
    try:
        return hf_configs.small_config(transformers, model_type, overrides, window)
    except Exception as exc:
        raise TargetError(f"{model_type}: no small config could be made from its config class: "
                          f"{type(exc).__name__}: {exc}{_where(exc)}") from None
