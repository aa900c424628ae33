"""What the call-graph facts cost the per-file analysis: time and cached JSON size, on a corpus.

    python bench/callgraph_facts_cost.py /tmp/tf/transformers/models   # any folder of .py files
    python bench/callgraph_facts_cost.py dsv4_model --limit 50

Analyses every file twice in this process (facts on, facts off: `callgraph_facts` replaced by a
function returning {}), best of --repeat runs each, and prints one JSON line: files, seconds
with and without facts, the overhead in percent, and the size of the facts as cached JSON.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder")
    parser.add_argument("--limit", type=int, default=200, help="at most this many files (sorted by path)")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    from graphlint.analysis.walk import file as analysis
    from graphlint.rules import ALL_RULES

    files = sorted(Path(args.folder).rglob("*.py"))[: args.limit]
    texts = [(str(p), p.read_text("utf-8", errors="replace")) for p in files]

    def run() -> tuple[float, int]:
        started = time.perf_counter()
        results = [analysis.analyze_source(path, text, ALL_RULES) for path, text in texts]
        seconds = time.perf_counter() - started
        return seconds, sum(len(json.dumps(r.extra.get("calls", {}))) for r in results)

    real = analysis.callgraph_facts
    with_facts = min(run() for _ in range(args.repeat))
    analysis.callgraph_facts = lambda *a, **k: {}
    try:
        without = min(run() for _ in range(args.repeat))
    finally:
        analysis.callgraph_facts = real
    print(json.dumps({
        "files": len(texts), "seconds_with_facts": round(with_facts[0], 3), "seconds_without": round(without[0], 3),
        "overhead_percent": round(100 * (with_facts[0] - without[0]) / without[0], 1) if without[0] else None,
        "facts_json_bytes": with_facts[1],
    }))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
