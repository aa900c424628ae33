"""Run the bundled transformers targets (`hf:MODEL`) through every runtime phase and tabulate them.

    python bench/hf_runtime_matrix.py --out results/          # CUDA: cuda:0; else the CPU emulation
    python bench/hf_runtime_matrix.py --out results/ --case llama --case mixtral:experts=eager

Each case is `MODEL[:key=value,...]` (options as `--option` takes them). Writes one runtime JSON per
case and summary.json (verdict, phase verdicts, sync causes at their lines, capture error and cause,
replay diff, eager vs replay ms per step), and prints the summary as one line per case.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time

DEFAULT_CASES = [
    "llama",
    "mixtral:experts=eager",
    "mixtral:experts=grouped_mm",
    "mixtral:experts=batched_mm",
    "qwen3-moe:experts=grouped_mm",
    "qwen3-moe:experts=batched_mm",
    "gemma3",
    "qwen2",
]


def parse_case(case: str) -> tuple[str, dict]:
    from graphlint.runtime.targets import parse_option

    model, _, rest = case.partition(":")
    options = dict(parse_option(item) for item in rest.split(",") if item)
    return model, options


def summarise(case: str, runtime: dict) -> dict:
    phases = runtime.get("phases", {})
    bench = (runtime.get("bench", {}).get("devices") or [{}])[0]
    capture = (runtime.get("captures") or [{}])[0]
    replay = (runtime.get("replay", {}).get("devices") or [{}])[0]
    return {
        "case": case,
        "verdict": runtime.get("verdict"),
        "phases": {name: phase.get("verdict") for name, phase in phases.items()},
        "sync_events": [
            {"kind": e["kind"], "op": e["op"], "at": f"{e['path'].rsplit('site-packages/', 1)[-1]}:{e['line']}",
             "count": e.get("count"), "fix": e.get("fix")}
            for e in runtime.get("sync_events", [])
        ],
        "hazards": [
            {"hazard": h["hazard"], "op": h["op"], "at": f"{h['path'].rsplit('site-packages/', 1)[-1]}:{h['line']}",
             "detail": h.get("detail")}
            for h in runtime.get("replay", {}).get("hazards", [])
        ],
        "capture": {k: capture.get(k) for k in ("status", "error", "cause", "explanation", "fix")},
        "replay": {k: replay.get(k) for k in ("verdict", "mismatched_steps", "max_abs_diff", "reason")},
        "eager_ms": bench.get("eager_ms"),
        "replay_ms": bench.get("replay_ms"),
        "speedup": bench.get("speedup"),
        "duration_s": runtime.get("duration_s"),
        "errors": runtime.get("errors"),
    }


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--case", action="append", help="MODEL[:key=value,...]; default: the matrix above")
    parser.add_argument("--device", default=None)
    parser.add_argument("--steps", type=int, default=None)
    args = parser.parse_args(argv)
    from graphlint.runtime.harness import run_harness

    os.makedirs(args.out, exist_ok=True)
    summary = []
    for case in args.case or DEFAULT_CASES:
        model, options = parse_case(case)
        started = time.perf_counter()
        try:
            runtime = run_harness(f"hf:{model}", args.device, args.steps, options=options)
        except Exception as exc:  # a usage error of one case must not lose the others
            runtime = {"verdict": "error", "error": f"{type(exc).__name__}: {exc}"}
        name = case.replace(":", "_").replace("=", "-").replace(",", "_")
        with open(os.path.join(args.out, f"{name}.json"), "w", encoding="utf-8") as handle:
            json.dump(runtime, handle, indent=1, default=str)
        row = summarise(case, runtime) if runtime.get("verdict") != "error" else {"case": case, **runtime}
        row["wall_s"] = round(time.perf_counter() - started, 1)
        summary.append(row)
        print(json.dumps(row, default=str), flush=True)
    with open(os.path.join(args.out, "summary.json"), "w", encoding="utf-8") as handle:
        json.dump(summary, handle, indent=1, default=str)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
