"""The cross-check on transformers targets: `graphlint runtime hf:MODEL --lint` per architecture,
with the transformers files the step ran linted, and the static recall against the runtime's
sync and capture sites. Prints the README's table (markdown).

    python bench/hf_crosscheck_matrix.py                 # the CPU emulation, or CUDA where present
    python bench/hf_crosscheck_matrix.py --device cuda:0 --steps 32 --json out.json

Run it from a folder outside any graphlint project (the project half is then empty).
"""
from __future__ import annotations

import argparse
import json
import time

from graphlint.config import load
from graphlint.runtime import lint_target
from graphlint.runtime.harness import run_harness

# (label, model, options): dense, MoE in each experts implementation, sliding window, hybrid layers.
MATRIX = [
    ("llama", "llama", {}),
    ("mistral (sliding window)", "mistral", {}),
    ("qwen2", "qwen2", {}),
    ("qwen3", "qwen3", {}),
    ("phi3", "phi3", {}),
    ("gemma3 (sliding + global layers)", "gemma3_text", {}),
    ("mixtral, experts=eager", "mixtral", {"experts": "eager"}),
    ("mixtral, experts=grouped_mm", "mixtral", {"experts": "grouped_mm"}),
    ("mixtral, experts=batched_mm", "mixtral", {"experts": "batched_mm"}),
    ("qwen3-moe, experts=grouped_mm", "qwen3_moe", {"experts": "grouped_mm"}),
    ("olmoe", "olmoe", {}),
]


def sites(joined: dict) -> tuple[set, set, set]:
    """(confirmed, missed, not linted) runtime sites, each (path, line, kind)."""
    confirmed = {(c["path"], r["line"], r["kind"]) for c in joined["confirmed"] for r in c["runtime"]
                 if r["source"] != "allocation"}
    missed = {(m["path"], m["line"], m["kind"]) for m in joined["missed_by_static"]}
    unseen = {(m["path"], m["line"], m["kind"]) for m in joined["not_linted"]}
    return confirmed, missed - confirmed, unseen - confirmed


def row(label: str, model: str, options: dict, device: str | None, steps: int) -> dict:
    started = time.perf_counter()
    runtime = run_harness(f"hf:{model}", device, steps, options=options, bench=False)
    static, joined = lint_target.lint_and_join(runtime, load(None))
    confirmed, missed, unseen = sites(joined)
    section = static.extra.get("third_party") or {}
    total = len(confirmed) + len(missed) + len(unseen)
    return {"target": label, "verdict": runtime["verdict"], "files": len(section.get("files") or []),
            "findings": len(section.get("findings") or []), "sites": total, "confirmed": len(confirmed),
            "missed": sorted(f"{m[0].rsplit('/', 1)[-1]}:{m[1]} {m[2]}" for m in missed),
            "not_linted": sorted(f"{m[0].rsplit('/', 1)[-1]}:{m[1]} {m[2]}" for m in unseen),
            "recall": None if not total else len(confirmed) / total, "seconds": round(time.perf_counter() - started, 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default=None)
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--json", dest="json_out")
    args = parser.parse_args()
    rows = [row(label, model, options, args.device, args.steps) for label, model, options in MATRIX]
    print("| target | runtime | transformers files linted | findings there | runtime sites | confirmed | missed (rule gap) | not linted |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for r in rows:
        print(f"| `hf:{r['target']}` | {r['verdict']} | {r['files']} | {r['findings']} | {r['sites']} | {r['confirmed']} | "
              f"{', '.join(r['missed']) or '-'} | {', '.join(r['not_linted']) or '-'} |")
    total = sum(r["sites"] for r in rows)
    confirmed = sum(r["confirmed"] for r in rows)
    print(f"\nstatic recall over {total} runtime sites: {confirmed}/{total}"
          + (f" = {confirmed / total:.2f}" if total else ""))
    if args.json_out:
        with open(args.json_out, "w", encoding="utf-8") as handle:
            json.dump(rows, handle, indent=2)


if __name__ == "__main__":
    main()
