"""What reading a region file costs a warm `graphlint check`: the median of interleaved warm runs of
one tree without a region file and with one that names every function the check places in the
captured region (as large as a recorded run of that tree could make it).

    python bench/region_file_speed.py /tmp/trees/lmdeploy/pytorch --runs 7

The tree is copied to a temporary folder (the region file goes to its .graphlint/); the figures
are printed for bench/README.md.
"""
from __future__ import annotations

import argparse
import json
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from graphlint.callgraph import recorded
from graphlint.config import load
from graphlint.engine import check


def region_file(root: Path, folder: str) -> int:
    """Write .graphlint/regions.json naming every captured function under `root`; how many."""
    static = check([str(root / folder)], load(start=root))
    functions = []
    texts: dict[str, list[str]] = {}
    for (path, qualname), placement in sorted(static.regions.items()):
        if placement.region != "captured":
            continue
        text = texts.setdefault(path, (root / path).read_text("utf-8", "replace").splitlines())
        span = next((s for s in recorded.function_spans("\n".join(text)) if s.qualname == qualname), None)
        if span is not None:
            functions.append({"path": path, "qualname": qualname, "first": span.first, "last": span.last,
                              "hash": recorded.source_hash(text, span.first, span.last)})
    (root / ".graphlint").mkdir(exist_ok=True)
    (root / ".graphlint" / "regions.json").write_text(json.dumps(
        {"schema": recorded.SCHEMA, "target": "bench", "recorded": "2026-01-01", "functions": functions}))
    return len(functions)


def warm(root: Path, folder: str, cache: Path) -> tuple[float, float]:
    """(wall, CPU) seconds of one warm check in its own process. CPU time (user + system of the
    child) is the steadier figure on a shared machine: other load stretches wall time only."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    subprocess.run([sys.executable, "-m", "graphlint", "check", folder, "-q", "--cache-dir", str(cache),
                    "--exit-zero"], cwd=root, check=True, capture_output=True)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("tree", type=Path)
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="graphlint-region-speed-") as tmp:
        root = Path(tmp)
        folder = args.tree.resolve().name
        shutil.copytree(args.tree, root / folder)
        (root / "graphlint.toml").write_text(f'paths = ["{folder}"]\n')
        count = region_file(root, folder)
        regions = root / ".graphlint" / "regions.json"
        parked = root / "regions.parked"
        cache = root / ".cache"
        times: dict[str, list[tuple[float, float]]] = {"without": [], "with": []}
        for name in ("without", "with"):  # fill the cache for both call-graph keys
            if name == "without":
                regions.rename(parked)
            else:
                parked.rename(regions)
            warm(root, folder, cache)
        for _ in range(args.runs):  # interleaved: background load hits both alike
            regions.rename(parked)
            times["without"].append(warm(root, folder, cache))
            parked.rename(regions)
            times["with"].append(warm(root, folder, cache))
        print(f"{args.tree}: region file of {count} functions; warm check, median of {args.runs} interleaved runs:")
        for index, what in ((0, "wall"), (1, "CPU")):
            without = statistics.median(t[index] for t in times["without"])
            with_file = statistics.median(t[index] for t in times["with"])
            print(f"  {what}: {without:.3f} s without, {with_file:.3f} s with ({(with_file / without - 1) * 100:+.1f}%)")


if __name__ == "__main__":
    main()
