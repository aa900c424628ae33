"""Run every decoder-only transformers causal LM that can take a static cache (`hf:MODEL`) through
the runtime harness and tabulate the verdicts, the causes at their lines and what each config exercises.

    python bench/hf_runtime_matrix.py --out results/                 # every architecture (CUDA: cuda:0)
    python bench/hf_runtime_matrix.py --out results/ --case llama --case mixtral:experts=eager
    python bench/hf_runtime_matrix.py --out results/ --fast --markdown  # the ten of FAST, a README table
    python bench/hf_runtime_matrix.py --out results/ --device cuda:0 --shard 0/4 & ...  # 4 at once

Each case is `MODEL[:key=value,...]` (options as `--option` takes them). Writes one runtime JSON per
case and summary.json, prints one JSON line per case, and with --markdown a table at the end.
The architectures: transformers' causal-LM mapping, text-only and decoder-only, whose model class
transformers marks as working with a static cache (`_can_compile_fullgraph`) or as a stateful
hybrid that takes a cache argument (falcon_h1, zamba: `_is_stateful` up to transformers 5.24, a
recurrent layer kind in the family's source from 5.25).
"""
from __future__ import annotations

import argparse
import inspect
import json
import os
import sys
import time

# Ten families of distinct shape, seconds each on a CPU: dense GQA, sliding window, MLA + MoE,
# MoE with grouped_mm, hybrid linear attention, conv layers, mamba + attention, no-sdpa fallback.
FAST = ["llama", "qwen2", "gemma3_text", "deepseek_v3", "mixtral:experts=batched_mm", "qwen3_next",
        "lfm2", "bamba", "gpt_oss:experts=batched_mm", "phi3"]


RECURRENT_KINDS = {"hybrid", "linear_attention", "mamba", "conv"}  # transformers' layer-type names


def architectures() -> list[str]:
    """Every model_type the rule in the module docstring admits, in transformers' order."""
    import transformers
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

    found = []
    for model_type, class_name in MODEL_FOR_CAUSAL_LM_MAPPING_NAMES.items():
        try:
            config_cls = transformers.CONFIG_MAPPING[model_type]
            model_cls = getattr(transformers, class_name)
        except (KeyError, AttributeError, ImportError):
            continue
        if getattr(config_cls, "sub_configs", None) or getattr(config_cls, "is_encoder_decoder", False):
            continue
        params = inspect.signature(model_cls.forward).parameters
        takes_cache = "cache" in params or "past_key_values" in params
        if takes_cache and (getattr(model_cls, "_can_compile_fullgraph", False) or _stateful(config_cls, model_cls)):
            found.append(model_type)
    return found


def _stateful(config_cls, model_cls) -> bool:
    """transformers' own mark of a stateful hybrid (`_is_stateful`, up to 5.24); from 5.25, which
    dropped the flag, a recurrent layer kind that the family's source names."""
    from graphlint.runtime.targets.hf_configs import source_layer_types

    flag = getattr(model_cls, "_is_stateful", None)
    if flag is not None:
        return bool(flag)
    return bool(source_layer_types(config_cls) & RECURRENT_KINDS)


def parse_case(case: str) -> tuple[str, dict]:
    from graphlint.runtime.targets.loader import parse_option

    model, _, rest = case.partition(":")
    options = dict(parse_option(item) for item in rest.split(",") if item)
    return model, options


def _at(record: dict) -> str:
    path = record["path"].rsplit("site-packages/", 1)[-1].removeprefix("transformers/")
    return f"{path}:{record['line']}"


def summarise(case: str, runtime: dict) -> dict:
    phases = runtime.get("phases", {})
    bench = (runtime.get("bench", {}).get("devices") or [{}])[0]
    capture = (runtime.get("captures") or [{}])[0]
    replay = (runtime.get("replay", {}).get("devices") or [{}])[0]
    return {
        "case": case,
        "verdict": runtime.get("verdict"),
        "phases": {name: phase.get("verdict") for name, phase in phases.items()},
        "features": (runtime.get("target") or {}).get("features"),
        "sync_events": [{"kind": e["kind"], "op": e["op"], "at": _at(e), "count": e.get("count"), "fix": e.get("fix")}
                        for e in runtime.get("sync_events", [])],
        "hazards": [{"hazard": h["hazard"], "op": h["op"], "at": _at(h), "detail": h.get("detail"),
                     "symptoms": h.get("symptoms")}
                    for h in runtime.get("replay", {}).get("hazards", [])],
        "capture": {k: capture.get(k) for k in ("status", "predicted", "error", "cause", "explanation", "fix")},
        "replay": {k: replay.get(k) for k in ("verdict", "mismatched_steps", "max_abs_diff", "reason")},
        "eager_ms": bench.get("eager_ms"),
        "replay_ms": bench.get("replay_ms"),
        "speedup": bench.get("speedup"),
        "duration_s": runtime.get("duration_s"),
        "errors": runtime.get("errors"),
    }


def run_case(case: str, device: str | None, steps: int | None, bench: bool, isolate: bool = True) -> dict:
    """One case through the harness: its summary row (verdict error / unsupported with the message
    when the harness cannot build or run it)."""
    from graphlint.runtime.harness import run_harness
    from graphlint.runtime.targets.loader import UsageError

    model, options = parse_case(case)
    started = time.perf_counter()
    try:
        runtime = run_harness(f"hf:{model}", device, steps, options=options, bench=bench, isolate=isolate)
        row = summarise(case, runtime)
    except UsageError as exc:  # a build or usage error of one case must not lose the others
        runtime = {"verdict": getattr(exc, "verdict", "error"), "error": str(exc)}
        row = {"case": case, **runtime}
    row["wall_s"] = round(time.perf_counter() - started, 1)
    row["runtime"] = runtime
    return row


def causes(row: dict, limit: int = 3) -> str:
    """The distinct causes of a row, `kind op at file:line`, the first `limit` of them."""
    if row["verdict"] in ("error", "unsupported"):
        return row.get("error", "")
    seen = [f"{e['kind']} {e['op'].removeprefix('aten.')} at {e['at']}" for e in row.get("sync_events", [])]
    for hazard in row.get("hazards", []):
        extra = f" (+{hazard['symptoms']} symptoms)" if hazard.get("symptoms") else ""
        seen.append(f"{hazard['hazard']} {hazard['op'].removeprefix('aten.')} at {hazard['at']}{extra}")
    shown = "; ".join(seen[:limit])
    return shown + (f"; +{len(seen) - limit} more" if len(seen) > limit else "")


def markdown(rows: list[dict], device: str = "CPU emulation") -> str:
    """The rows as a markdown table; what every row shares (the prefill, sdpa) is left out."""
    from graphlint.views.sections.runtime_text import describe_features

    lines = [f"| architecture | verdict ({device}) | causes at their lines | exercises |", "|---|---|---|---|"]
    for row in rows:
        features = dict(row.get("features") or {})
        features.pop("prefill", None)
        if features.get("attn") == "sdpa":
            features.pop("attn")
        features.pop("attn_fallback", None)  # attn=eager says it
        text = causes(row)
        text = text if len(text) <= 220 else text[:217] + "..."
        lines.append(f"| {row['case']} | {row['verdict']} | {text.replace('|', '/')} | "
                     f"{describe_features(features).replace('|', '/')} |")
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--case", action="append", help="MODEL[:key=value,...]; default: every architecture")
    parser.add_argument("--fast", action="store_true", help="only the ten cases of FAST")
    parser.add_argument("--device", default=None)
    parser.add_argument("--steps", type=int, default=None)
    parser.add_argument("--no-bench", action="store_true")
    parser.add_argument("--markdown", action="store_true", help="print a markdown table at the end")
    parser.add_argument("--table-from", metavar="SUMMARY_JSON", help="only print the table of a summary.json")
    parser.add_argument("--shard", metavar="K/N", default=None,
                        help="only every N-th case from the K-th (0-based): N processes share one machine")
    parser.add_argument("--in-process", action="store_true",
                        help="CPU emulation in this process (no worker per case: faster, a crash ends the run)")
    args = parser.parse_args(argv)
    if args.table_from:
        with open(args.table_from, encoding="utf-8") as handle:
            print(markdown(json.load(handle), args.device or "CPU emulation"))
        return 0
    os.makedirs(args.out, exist_ok=True)
    cases = args.case or (FAST if args.fast else architectures())
    if args.shard:
        k, n = (int(part) for part in args.shard.split("/"))
        cases = cases[k::n]
    summary = []
    for case in cases:
        row = run_case(case, args.device, args.steps, bench=not args.no_bench, isolate=not args.in_process)
        name = case.replace(":", "_").replace("=", "-").replace(",", "_")
        with open(os.path.join(args.out, f"{name}.json"), "w", encoding="utf-8") as handle:
            json.dump(row.pop("runtime"), handle, indent=1, default=str)
        summary.append(row)
        print(json.dumps(row, default=str), flush=True)
    summary_name = "summary.json" if not args.shard else f"summary_{args.shard.replace('/', 'of')}.json"
    with open(os.path.join(args.out, summary_name), "w", encoding="utf-8") as handle:
        json.dump(summary, handle, indent=1, default=str)
    if args.markdown:
        print(markdown(summary, "CPU emulation" if (args.device or "cpu") == "cpu" else args.device))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
