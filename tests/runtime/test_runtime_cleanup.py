"""The runtime leaves nothing behind: a process the step starts is killed and reported, the
target's import is bounded by the step timeout, and the worker leads its own session."""
from __future__ import annotations

import os
import time

from graphlint.runtime import worker

from runtime_helpers import target


def _spec(name: str) -> dict:
    return {"target": target(name), "options": {}, "device": "cpu", "steps": 3, "sync_mode": "warn",
            "atol": 0.0, "rtol": 0.0, "bench": False}


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8") as handle:
            return handle.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def test_a_process_the_step_starts_is_killed_and_reported():
    (result,) = worker.run_isolated([_spec("spawner")])
    [note] = [e for e in result.get("target_errors", []) if "the step started a process" in e]
    pids = [p["pid"] for p in result["processes"]]
    assert pids and "time.sleep(120)" in note
    time.sleep(0.2)
    assert not any(_alive(pid) for pid in pids)


def test_the_step_timeout_bounds_the_targets_import():
    started = time.monotonic()
    (result,) = worker.run_isolated([_spec("hanging_import")], step_timeout_s=2)
    assert time.monotonic() - started < 30  # not the 600 s the import sleeps
    assert "import() ran past the 2 s step timeout (--timeout)" in result["error"]["error"]


def test_kill_descendants_finds_children_and_grandchildren():
    import subprocess
    import sys

    child = subprocess.Popen([sys.executable, "-c", "import subprocess, sys, time; "
                              "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)']); time.sleep(60)"])
    time.sleep(1.0)
    found = worker.kill_descendants()
    child.wait(timeout=10)
    assert child.pid in [p["pid"] for p in found] and len(found) >= 2
    time.sleep(0.2)
    assert not any(_alive(p["pid"]) for p in found)
    assert os.getpid() not in [p["pid"] for p in found]
