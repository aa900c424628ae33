"""Run `graphlint runtime --compile` on several targets in one process and print one summary line each.

    python bench/compile_targets.py OUT_DIR TARGET [TARGET ...] [--device cuda:0] [--steps 20]
        [--backend inductor] [--option config=bench]

Each target's report goes to OUT_DIR/<name>.json; each summary line (JSON) gives the CUDA-graph
status, the findings (kind, path:line, category), the eager causes torch.compile did not name,
outputs vs eager and the eager vs compiled time. One process, so torch is
imported once; each target's eager phases still run in their own worker subprocess on CUDA.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
import traceback


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("out")
    parser.add_argument("targets", nargs="+")
    parser.add_argument("--device", default=None)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--backend", default="inductor")
    parser.add_argument("--option", action="append", default=[])
    args = parser.parse_args(argv)
    from graphlint.report import Report, dumps
    from graphlint.runtime.torch_compile.compile_report import run_phase
    from graphlint.runtime.harness import run_harness
    from graphlint.runtime.targets.loader import parse_option

    options = dict(parse_option(o) for o in args.option)
    os.makedirs(args.out, exist_ok=True)
    for target in args.targets:
        name = target.rsplit("/", 1)[-1].replace(".py:", "-").replace(":", "-")
        if options:
            name += "-" + "-".join(f"{k}{v}" for k, v in options.items())
        started = time.perf_counter()
        try:
            runtime = run_harness(target, args.device, args.steps, options=options)
            eager_s = time.perf_counter() - started
            run_phase(runtime, args.backend, args.steps)
        except Exception:
            print(json.dumps({"target": target, "error": traceback.format_exc()[-2000:]}), flush=True)
            continue
        with open(os.path.join(args.out, name + ".json"), "w", encoding="utf-8") as handle:
            handle.write(dumps(Report(tool_version="bench", runtime=runtime, errors=[])))
        part = runtime["compile"]
        print(json.dumps({
            "target": target, "options": options, "device": part.get("device"), "verdict": part.get("verdict"),
            "cudagraphs": part.get("cudagraphs"), "error": part.get("error"),
            "findings": [f"{f['kind']} {f['path']}:{f['line']} {f.get('category') or ''} {f.get('tensor') or ''} "
                         f"{f['message'][:140]}" for f in part.get("findings", [])],
            "eager_causes": [f"{r['kind']} {r['path']}:{r['line']} -> {r['named_by'] or r.get('why_not', '')[:60]}"
                             for r in part.get("cross_check", [])],
            "outputs": {k: (part.get("outputs") or {}).get(k) for k in ("match", "per_output", "first_mismatch")},
            "bench": part.get("bench"), "counters": part.get("counters"),
            "cudagraphs_recorded": part.get("cudagraphs_recorded"), "compile_s": part.get("compile_s"),
            "eager_phases_s": round(eager_s, 1), "total_s": round(time.perf_counter() - started, 1),
            "eager_capture": [c.get("status") for c in runtime.get("captures", [])],
            "eager_bench": runtime.get("bench"),
        }), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
