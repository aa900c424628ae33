"""Where graphlint's per-file analysis spends its time: CPU seconds per phase and per rule
handler, on one core, over every .py file of a tree. Profile before optimising; this is the
breakdown bench/README.md quotes.

    python bench/profile_phases.py /tmp/trees/lmdeploy/pytorch

It wraps graphlint's internal functions in timers, so it follows the code as it is today;
when a phase is renamed, update the list below.
"""
from __future__ import annotations

import argparse
import sys
import time
from collections import defaultdict
from pathlib import Path

import libcst

from graphlint.engine import pool as engine
from graphlint.analysis import positions as positions_module
from graphlint.analysis.walk import file as analysis

SECONDS: dict[str, float] = defaultdict(float)
RULES: dict[str, float] = defaultdict(float)


def timed(name: str, function):
    def wrapper(*args, **kwargs):
        started = time.process_time()
        try:
            return function(*args, **kwargs)
        finally:
            SECONDS[name] += time.process_time() - started
    return wrapper


def instrument() -> None:
    class TimedLibcst:
        parse_module = staticmethod(timed("libcst parse", libcst.parse_module))

        def __getattr__(self, name: str):
            return getattr(libcst, name)

    analysis.cst = TimedLibcst()  # only analyze_source's parse goes through this name
    for module, name, label in [
        (analysis, "collect_imports", "imports"), (analysis, "_collect_classes", "class facts (inference)"),
        (analysis, "enumerate_functions", "functions"), (positions_module, "positions", "positions"),
        (analysis, "callgraph_facts", "call-graph facts"), (engine, "finding_texts", "fingerprint texts"),
        (engine.suppressions, "scan", "suppressions"),
    ]:
        setattr(module, name, timed(label, getattr(module, name)))
    analysis.Inference.run_function = timed("inference", analysis.Inference.run_function)
    walk = analysis._walk

    def top_walk(node, ctx, dispatch, top=False):  # time the whole walk of a function once
        if not top:
            return walk(node, ctx, dispatch, top)
        started = time.process_time()
        try:
            return walk(node, ctx, dispatch, top)
        finally:
            SECONDS["rules (walk + handlers)"] += time.process_time() - started

    analysis._walk = top_walk
    init = analysis._Dispatch.__init__

    def timed_dispatch(self, rules):
        init(self, rules)
        for node_type, handlers in self.table.items():
            self.table[node_type] = [_timed_handler(h) for h in handlers]
        self.kinds.clear()

    analysis._Dispatch.__init__ = timed_dispatch


def _timed_handler(handler):
    key = f"{type(handler.__self__).__name__}.{handler.__name__}"

    def run(node, ctx):
        started = time.process_time()
        try:
            return handler(node, ctx)
        finally:
            RULES[key] += time.process_time() - started
    return run


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("tree", type=Path)
    parser.add_argument("--top", type=int, default=8, help="rule handlers to list")
    args = parser.parse_args(argv)
    files = sorted(str(p) for p in args.tree.rglob("*.py"))
    instrument()
    started = time.process_time()
    for path in files:
        engine.analyse_file((path, path))
    total = time.process_time() - started
    print(f"{len(files)} files, {total:.2f} CPU s on one core")
    for name, seconds in sorted(SECONDS.items(), key=lambda kv: -kv[1]):
        print(f"  {name:<28} {seconds:7.2f} s {100 * seconds / total:5.1f}%")
    print(f"  {'other':<28} {total - sum(SECONDS.values()):7.2f} s")
    print("slowest rule handlers:")
    for name, seconds in sorted(RULES.items(), key=lambda kv: -kv[1])[:args.top]:
        print(f"  {name:<44} {seconds:7.2f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
