"""The runtime leaves nothing behind: a process the step starts is killed and reported, the
target's import is bounded by the step timeout, and the worker leads its own session."""
from __future__ import annotations

import os
import time

from graphlint.runtime.isolation import worker

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


def _workers_of(parent: int) -> list[tuple[int, list[str]]]:
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", encoding="utf-8") as handle:
                ppid = int(handle.read().rsplit(")", 1)[1].split()[1])
            with open(f"/proc/{entry}/cmdline", "rb") as handle:
                argv = [part.decode() for part in handle.read().split(b"\0") if part]
        except (OSError, ValueError, IndexError):
            continue
        if ppid == parent and "graphlint.runtime.isolation.worker" in argv:
            found.append((int(entry), argv))
    return found


def test_a_killed_graphlint_takes_its_worker_and_temporary_folder_with_it():
    import signal
    import subprocess
    import sys
    from pathlib import Path

    run = subprocess.Popen([sys.executable, "-m", "graphlint", "runtime", target("misbehave"), "--option", "how=hang",
                            "--timeout", "120", "--no-bench", "-q"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                           cwd=Path(__file__).resolve().parents[2])
    try:
        deadline = time.monotonic() + 60
        workers = []
        while not workers and time.monotonic() < deadline:
            time.sleep(0.2)
            workers = _workers_of(run.pid)
        [(pid, argv)] = workers
        folder = Path(argv[argv.index("graphlint.runtime.isolation.worker") + 1]).parent
        assert folder.is_dir() and folder.name.startswith("graphlint-runtime-")
        os.kill(run.pid, signal.SIGKILL)  # no finally, no atexit: the worker must see it itself
        run.wait(timeout=10)
        deadline = time.monotonic() + 15
        while (_alive(pid) or folder.exists()) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not _alive(pid) and not folder.exists()
    finally:
        if run.poll() is None:
            run.kill()
