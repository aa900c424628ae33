"""Time one `graphlint runtime` run of the bundled default target, wall clock, as a user runs it.

    python bench/runtime_speed.py                 # default device (cuda:0, else the CPU emulation)
    python bench/runtime_speed.py --device cpu    # extra arguments go to `graphlint runtime`

Prints one JSON line: seconds, exit code, mode, the goal (30 s on the CPU emulation, 60 s on an
H200) and the per-phase timings of each device from the report.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time

GOALS_S = {"cpu-emulation": 30.0, "cuda": 60.0}


def main(argv: list[str]) -> int:
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    with tempfile.TemporaryDirectory() as tmp:
        report_path = os.path.join(tmp, "runtime.json")
        command = [sys.executable, "-m", "graphlint", "runtime", "--output", report_path, *argv]
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH")) if p)}
        started = time.perf_counter()
        proc = subprocess.run(command, cwd=root, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        seconds = time.perf_counter() - started
        runtime = {}
        if os.path.exists(report_path):
            with open(report_path, encoding="utf-8") as handle:
                runtime = json.load(handle).get("runtime") or {}
    mode = runtime.get("mode", "?")
    print(json.dumps({
        "seconds": round(seconds, 2),
        "exit_code": proc.returncode,
        "mode": mode,
        "goal_s": GOALS_S.get(mode),
        "within_goal": seconds <= GOALS_S.get(mode, float("inf")),
        "verdict": runtime.get("verdict"),
        "devices": [{"device": r.get("device"), "steps": r.get("steps"),
                     "timings_s": {k: round(v, 2) for k, v in (r.get("timings") or {}).items()}}
                    for r in runtime.get("device_results", [])],
        "bench": runtime.get("bench"),
    }))
    if proc.returncode not in (0, 1):
        sys.stderr.write(proc.stderr[-2000:])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
