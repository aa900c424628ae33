"""Small configs that keep a transformers architecture's shape: derived from its own config class,
every coupled dimension scaled together, and enough layers that each layer kind the architecture
has (attention, sliding, linear-attention, conv, mamba; dense and MoE MLPs) appears at least once.
"""
from __future__ import annotations

import dataclasses
import inspect
import re
import sys
from typing import Any

HIDDEN = 64
HEADS = 4
HEAD_DIM = 16
FFN = 128
EXPERT_FFN = 64
VOCAB = 512
EXPERTS = 4
TOP_K = 2
WINDOW = 4  # shorter than the steps any run takes (prefill + warm-up + 8 traced steps), so it slides
MAX_LAYERS = 8
LORA_MIN = 16

# Keys by role. Names are transformers' own spellings across families.
EXPERT_COUNTS = ("num_experts", "num_local_experts", "n_routed_experts", "moe_num_experts", "num_routed_experts",
                 "n_experts")
SHARED_COUNTS = ("n_shared_experts", "num_shared_experts", "moe_num_shared_experts")
TOP_KS = ("num_experts_per_tok", "moe_topk", "moe_k", "top_k", "num_experts_per_token", "moe_top_k")
WINDOWS = ("sliding_window", "attention_chunk_size", "sliding_window_size")
# rotary_dim (codegen, gptj) is the rotated part of a head: scaled with the head.
HEAD_DIM_KEY = re.compile(r"(^|_)head_dim$|head_size$|^mamba_d_head$|^attention_head_dim$|^rotary_dim$")
FFN_KEY = re.compile(r"intermediate_size|ffn_hidden_size|^n_inner$|^ffn_dim$")
RANK_KEY = re.compile(r"lora_rank$|^mamba_dt_rank$")
HEAD_COUNT_KEY = re.compile(r"num_.*heads$|^n_head.*|_n_heads$|num_heads$")
# Layer-kind switches that only matter when the layer count is small: capped so that a MoE layer
# exists within MAX_LAYERS (the layer search below then finds the count that shows both kinds).
LAYER_SWITCHES = {"first_k_dense_replace": 1, "moe_layer_freq": 2, "decoder_sparse_step": 2,
                  "moe_layer_interval": 2, "num_dense_layers": 1, "moe_layer_start_index": 1,
                  "full_attention_interval": 2, "attn_layer_period": 2, "expert_layer_period": 2,
                  "sliding_window_pattern": 2, "max_window_layers": 1, "num_kv_shared_layers": 1}
# Switches that turn a family's sliding window on (qwen2 keeps it off by default).
SLIDING_SWITCH = re.compile(r"^use_sliding_window$|^use_sliding_attention$|^use_swa$")
OFFSETS = {"attn_layer_offset": "attn_layer_period", "expert_layer_offset": "expert_layer_period"}
# Mamba mixers need n_heads * d_head == inner size (expand * hidden_size, or d_ssm): the spellings
# of (heads, head dim, expand, inner size) by family.
MAMBA_KEYS = (("mamba_n_heads", "mamba_d_head", "mamba_expand", "mamba_d_ssm"),
              ("num_heads", "head_dim", "expand", None),
              ("mamba_num_heads", "mamba_head_dim", "mamba_expand", None))
# Exceptions to the generic rules, each with its reason.
EXCEPTIONS: dict[str, dict[str, Any]] = {
    # The default config places no attention layer (attn_layer_indices=None) while the family's
    # checkpoints do; one attention layer after one mamba layer keeps both kinds.
    "bamba": {"attn_layer_indices": [1]},
    # The rotary embedding reads one entry per layer type, and its multimodal rope sections
    # default to a 128-wide head; the default config sets neither, so transformers cannot build it.
    "cohere_compass_text": {"rope_parameters": {
        kind: {"rope_type": "default", "rope_theta": 10000.0, "mrope_section": [4, 2, 2]}
        for kind in ("full_attention", "sliding_attention")}},
    # The indexed-attention layers need the QSA indexer's sizes, which the default config leaves
    # unset (None), so transformers cannot build it; one kv head and a budget the ratio divides,
    # as its validator asks.
    "qwen4_exp_text": {"indexer_n_heads": 2, "indexer_kv_heads": 1, "indexer_head_dim": HEAD_DIM,
                       "indexer_budget": 4, "indexer_compress_ratio": 2},
}


def settable(config_cls) -> set[str]:
    """Keys the config class takes as arguments: its dataclass fields and attribute_map aliases
    (a read-only property such as falcon's head_dim is neither)."""
    names = {f.name for f in dataclasses.fields(config_cls)} if dataclasses.is_dataclass(config_cls) else set()
    if not names:
        names = set(inspect.signature(config_cls.__init__).parameters) - {"self", "kwargs"}
    return names | set(getattr(config_cls, "attribute_map", {}) or {})


def _get(config, key: str):
    try:
        return getattr(config, key)
    except Exception:
        # A value set per layer reads as ambiguous on the whole config (dots3_note_text's heads):
        # the class's own default stands for it. A property that raises on a default config
        # (gemma4_text) has no field default and reads as absent.
        fields = {f.name: f for f in dataclasses.fields(type(config))} if dataclasses.is_dataclass(config) else {}
        default = getattr(fields.get(key), "default", None)
        return None if default is dataclasses.MISSING else default


def _int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


def _even(value: float, minimum: int = 2) -> int:
    return max(minimum, int(round(value / 2)) * 2)


def small_dims(default, window: int = WINDOW) -> dict[str, Any]:
    """Dimension overrides for `default` (an architecture's default config); `window` 0 keeps the
    family's own window settings."""
    keys = settable(type(default))
    heads = _get(default, "num_attention_heads")
    hidden = _get(default, "hidden_size")
    head_dim = _get(default, "head_dim")
    ref_head = head_dim if _int(head_dim) else (hidden // heads if _int(hidden) and _int(heads) else HEAD_DIM)
    head_scale = HEAD_DIM / ref_head
    hidden_scale = HIDDEN / hidden if _int(hidden) else 1.0
    head_count_scale = HEADS / heads if _int(heads) else 1.0
    out: dict[str, Any] = {}
    for key in sorted(keys):
        value = _get(default, key)
        if key == "hidden_size" and _int(value):
            out[key] = HIDDEN
        elif key == "num_attention_heads" and _int(value):
            out[key] = HEADS
        elif key == "num_key_value_heads" and (_int(value) or value is None):
            # MHA and MLA (and None, which means MHA) keep one kv head per head; grouped-query
            # attention keeps 2 groups.
            out[key] = HEADS if value in (heads, None) else min(2, value)
        elif key == "head_dim" and value is None and _int(heads):
            out[key] = HIDDEN // HEADS  # a default the model reads as a number (hunyuan, ministral)
        elif HEAD_COUNT_KEY.search(key) and _int(value) and key not in ("num_hidden_layers",):
            out[key] = max(1, int(round(value * head_count_scale)))
        elif HEAD_DIM_KEY.search(key) and _int(value):
            out[key] = _even(value * head_scale)
        elif RANK_KEY.search(key) and _int(value):
            out[key] = max(LORA_MIN, int(round(value * hidden_scale / 8)) * 8)
        elif FFN_KEY.search(key):
            size = EXPERT_FFN if re.search(r"moe|expert|shared", key) else FFN
            if _int(value) or value is None:  # None: derived, or a default the model cannot build (dots1)
                out[key] = size
            elif isinstance(value, list) and value and all(_int(v) for v in value):
                out[key] = [size] * len(value)
        elif key == "vocab_size" and _int(value):
            out[key] = VOCAB
        elif key in EXPERT_COUNTS and (_int(value) or value is None):
            # Always EXPERTS: fewer (hunyuan's default 1) is no routing at all; None is a default
            # the model cannot build (dots1).
            out[key] = EXPERTS
        elif key in SHARED_COUNTS and (_int(value) or (value is None and out.get("n_routed_experts"))):
            out[key] = 1  # None beside routed experts: a default the model multiplies by (dots1)
        elif key in TOP_KS and (_int(value) or value is None):
            out[key] = min(value or TOP_K, TOP_K)
        elif key == "n_group" and _int(value):
            out[key] = min(value, 2)
        elif key == "topk_group" and _int(value):
            out[key] = 1
        elif key in WINDOWS and window and (_int(value) or (key == "sliding_window" and value is None)):
            out[key] = window  # None: a window the family supports and its checkpoints may set (starcoder2)
        elif key in LAYER_SWITCHES and _int(value):
            out[key] = min(value, LAYER_SWITCHES[key])
        elif key == "mlp_only_layers" and isinstance(value, list) and value:
            out[key] = [0]  # keep a dense-only layer, at the front
    for key, period in OFFSETS.items():
        if key in keys and _int(_get(default, key)) and period in out:
            out[key] = min(_get(default, key), out[period] - 1)
    # Special tokens of the full-size vocabulary would index past the small embedding table.
    # Some configs refuse None, so each gets its own id at the top of the small vocabulary.
    for offset, key in enumerate(("pad_token_id", "bos_token_id", "eos_token_id")):
        value = _get(default, key)
        ids = value if isinstance(value, list) else [value]
        if any(isinstance(v, int) and v >= VOCAB for v in ids):
            out[key] = VOCAB - 1 - offset
    _couple_mamba(default, out, keys)
    out.update({k: v for k, v in EXCEPTIONS.get(getattr(default, "model_type", ""), {}).items() if k in keys})
    return out


def _couple_mamba(default, out: dict[str, Any], keys: set[str]) -> None:
    for heads_key, head_key, expand_key, inner_key in MAMBA_KEYS:
        if not {heads_key, head_key, expand_key} <= keys or not _int(_get(default, expand_key)):
            continue
        inner = _get(default, expand_key) * out.get("hidden_size", HIDDEN)
        if inner_key in keys and _int(_get(default, inner_key)):
            out[inner_key] = inner
        heads = min(out.get(heads_key) or HEADS, inner // 2)
        out[heads_key], out[head_key] = heads, inner // heads
        return


# --------------------------------------------------------------------------- layer kinds
def decoder_layers(model, count: int | None):
    """The model's decoder layers: the largest ModuleList whose length is the layer count."""
    import torch

    best = None
    for _name, module in model.named_modules():
        if isinstance(module, torch.nn.ModuleList) and len(module) and (count is None or len(module) == count):
            if best is None or len(module) > len(best):
                best = module
    return list(best) if best is not None else []


def is_moe(layer) -> bool:
    """A layer holds experts: a submodule named `experts` or whose class names experts."""
    for name, module in layer.named_modules():
        if name.rsplit(".", 1)[-1] == "experts" or type(module).__name__.endswith("Experts"):
            return True
    return False


def layer_kinds(config, model) -> list[tuple]:
    """One (layer type, mixer classes, moe) signature per decoder layer."""
    count = _get(config, "num_hidden_layers")
    types = _layer_types(config)
    kinds = []
    for index, layer in enumerate(decoder_layers(model, count)):
        children = tuple(sorted({type(c).__name__ for c in layer.children()}))
        kind = types[index] if types and index < len(types) else None
        kinds.append((kind, children, is_moe(layer)))
    return kinds


def _layer_types(config) -> list | None:
    types = _get(config, "layer_types")
    return list(types) if isinstance(types, (list, tuple)) else None


def source_layer_types(config_cls) -> set[str]:
    """Layer types (transformers' own vocabulary) that the architecture's modeling or config source
    names: the kinds it can build, including those its default config leaves out (lfm2's conv)."""
    from transformers import configuration_utils

    vocabulary = set(getattr(configuration_utils, "ALLOWED_ATTN_LAYER_TYPES", ()))
    remap = getattr(configuration_utils, "_LEGACY_LAYER_TYPE_REMAP", {})
    module = sys.modules.get(config_cls.__module__)
    texts = []
    if module is not None:
        for name in (config_cls.__module__, config_cls.__module__.replace(".configuration_", ".modeling_")):
            try:
                texts.append(inspect.getsource(sys.modules.get(name) or __import__(name, fromlist=["_"])))
            except (ImportError, OSError, TypeError):
                continue
    found = set()
    for text in texts:
        for literal in re.findall(r"[\"'](\w+)[\"']", text):
            # A name the vocabulary allows is the family's own spelling (lfm2's "conv" in 5.17,
            # though 5.17's legacy map sends "conv" to "linear_attention" for custom code only);
            # a legacy name outside it is what transformers renames it to.
            literal = literal if literal in vocabulary else remap.get(literal, literal)
            if literal in vocabulary:
                found.add(literal)
    return found - {"window_attention", "reference_sliding_attention"}


# --------------------------------------------------------------------------- the search
def meta_model(transformers, config):
    """The model on the meta device: its module structure without memory or init time."""
    import torch

    with torch.device("meta"):
        return transformers.AutoModelForCausalLM.from_config(config)


def small_config(transformers, model_type: str, overrides: dict[str, Any] | None = None, window: int = WINDOW):
    """The small config of `model_type`: small_dims, then the fewest layers (2..MAX_LAYERS) under
    which every layer kind of the architecture appears; `layer_types` is written out only when no
    layer count shows a kind the architecture's source names (lfm2's conv)."""
    config_cls = transformers.CONFIG_MAPPING[model_type]
    default = config_cls()
    dims = {**small_dims(default, window), **(overrides or {})}
    if "num_hidden_layers" in (overrides or {}):
        return config_cls(**dims)
    full_depth = config_cls(**dims)
    try:
        wanted = set(layer_kinds(full_depth, meta_model(transformers, full_depth)))
    except TypeError:
        # A default with layer_types None that the model indexes (lfm2_moe): name the kinds the
        # source names, one layer each.
        kinds = sorted(source_layer_types(config_cls))
        if "layer_types" not in settable(config_cls) or _layer_types(full_depth) is not None or not kinds:
            raise
        return config_cls(**{**dims, "num_hidden_layers": len(kinds), "layer_types": kinds})
    wanted_types = set()
    if "layer_types" in settable(config_cls) and _layer_types(full_depth) is not None:
        wanted_types = source_layer_types(config_cls) - (set() if window else {"sliding_attention"})
    if window and "sliding_attention" in source_layer_types(config_cls):
        _sliding_on(config_cls, dims, window)
    best = None
    per_layer = _per_layer_lists(default, dims)
    cut_counts = set()  # counts the class took only with its per-layer lists cut to them
    for count in range(2, MAX_LAYERS + 1):
        try:
            config, cut = _at_depth(config_cls, dims, per_layer, count)
            if cut:
                cut_counts.add(count)
            kinds = layer_kinds(config, meta_model(transformers, config))
        except Exception:  # a count the config's validators refuse (a period longer than the layers)
            continue
        have_types = {kind[0] for kind in kinds}
        if wanted <= set(kinds):
            best = best or config
            if wanted_types <= have_types:
                return config
    if best is None:
        return full_depth if _get(full_depth, "num_hidden_layers") <= MAX_LAYERS else config_cls(**dims)
    # A layer list the class takes only as written (cut to the depth above) is the family's own:
    # kinds its source names beyond it are not written in (zamba2's attention lives in "hybrid").
    written = None if best.num_hidden_layers in cut_counts else _with_types(best, wanted_types)
    if written is not None:
        try:
            config = config_cls(**{**dims, "num_hidden_layers": len(written), "layer_types": written})
            meta_model(transformers, config)
            return config
        except Exception:  # a named kind the architecture does not build after all
            pass
    return best


def _per_layer_lists(default, dims: dict[str, Any]) -> dict[str, list]:
    """Settable lists with one entry per layer of the default config (gemma3n_text's
    intermediate sizes and activation sparsity, a layer_types list written at full depth)."""
    layers = _get(default, "num_hidden_layers")
    if not _int(layers):
        return {}
    found = {}
    aliases = getattr(type(default), "attribute_map", {}) or {}
    for key in settable(type(default)):
        if key in aliases:
            continue  # zamba2's layer_types names layers_block_type: one list, given once
        value = dims.get(key, _get(default, key))
        if isinstance(value, list) and len(value) == layers:
            found[key] = value
    return found


def _at_depth(config_cls, dims: dict[str, Any], per_layer: dict[str, list], count: int):
    """(the config at `count` layers, whether it needed its per-layer lists cut): where the config
    class refuses that count as given, the lists are cut to their first `count` entries (the
    family's own order kept)."""
    try:
        return config_cls(**{**dims, "num_hidden_layers": count}), False
    except Exception:
        if not per_layer:
            raise
    return config_cls(**{**dims, **{k: v[:count] for k, v in per_layer.items()}, "num_hidden_layers": count}), True


def _sliding_on(config_cls, dims: dict[str, Any], window: int) -> None:
    """The family has sliding layers: turn its switch on and give the window a small size."""
    keys = settable(config_cls)
    for key in keys:
        if SLIDING_SWITCH.match(key):
            dims[key] = True
    if "sliding_window" in keys and not _int(dims.get("sliding_window")):
        dims["sliding_window"] = window


def _with_types(config, wanted_types: set[str]) -> list[str] | None:
    """`config`'s layer_types with each missing wanted kind written over a repeated one (or appended)."""
    types = _layer_types(config)
    if not types:
        return None
    missing = sorted(wanted_types - set(types))
    if not missing:
        return None
    types = list(types)
    for kind in missing:
        for index in range(len(types) - 1, -1, -1):
            if types.count(types[index]) > 1:
                types[index] = kind
                break
        else:
            types.append(kind)
    return types


def features(model, cache) -> dict[str, Any]:
    """What a built model and its cache exercise: layer kinds, MoE and dense layers, the window."""
    config = model.config.get_text_config(decoder=True)
    count = _get(config, "num_hidden_layers")
    layers = decoder_layers(model, count)
    moe = sum(1 for layer in layers if is_moe(layer))
    types = _layer_types(config) or []
    kinds: dict[str, int] = {}
    for kind in types:
        kinds[kind] = kinds.get(kind, 0) + 1
    cache_layers = getattr(cache, "layers", []) or []
    sliding = [layer for layer in cache_layers if "Sliding" in type(layer).__name__]
    window = next((getattr(layer, "sliding_window", None) or getattr(layer, "max_cache_len", None)
                   for layer in sliding), None)
    return {
        "layers": len(layers) or count,
        "layer_kinds": kinds,
        "moe_layers": moe,
        "dense_layers": len(layers) - moe if layers else None,
        "sliding_layers": len(sliding),
        "window": window,
        "cache_layers": sorted({type(layer).__name__ for layer in cache_layers}),
    }
