"""One subprocess per device: a worker that dies is reported and the others finish."""
from __future__ import annotations

from graphlint.runtime import harness
from graphlint.runtime.isolation import worker

from runtime_helpers import target


def _spec(name: str, **options) -> dict:
    return {"target": target(name), "options": options, "device": "cpu", "steps": 3, "sync_mode": "warn",
            "atol": 0.0, "rtol": 0.0, "bench": False}


def test_a_dead_worker_does_not_lose_the_others():
    results = worker.run_isolated([_spec("crash", crash=True), _spec("crash", crash=False)])
    dead, alive = results
    assert dead["error"]["error"] == "the worker for cpu was killed by SIGKILL in step() (step 0)"
    assert dead["error"]["phase"] == "warm-up"
    assert alive.get("error") is None
    assert alive["capture"]["predicted"] == "ok"
    runtime = harness.merge(results, mode="cpu-emulation", devices=["cpu", "cpu"], bench=False)
    assert runtime["verdict"] == "fail"
    assert runtime["errors"] == ["cpu: warm-up: the worker for cpu was killed by SIGKILL in step() (step 0)"]
    assert runtime["phases"]["sync"]["error"] == "cpu: the worker for cpu was killed by SIGKILL in step() (step 0)"


def test_build_errors_in_a_worker_are_target_errors():
    spec = _spec("clean")
    spec["options"] = {"no_such_option": 1}
    (result,) = worker.run_isolated([spec])
    assert result["error"]["target_error"] is True


def test_a_fault_dump_is_read_from_the_main_threads_block(tmp_path):
    # A timeout signal may land on any thread: the block that runs the worker's main() is the
    # step's, wherever faulthandler lists it.
    from graphlint.runtime.isolation import guard

    user = str(tmp_path / "model.py")
    dump = (f'Thread 0x00007f01 (most recent call first):\n  File "{guard.__file__}", line 150 in watch\n\n'
            f'Current thread 0x00007f02 (most recent call first):\n  File "{user}", line 7 in step\n'
            f'  File "{worker.__file__}", line 80 in main\n')
    assert guard.fault_stack(dump) == [{"path": guard.user_frames.relative_path(user), "line": 7, "function": "step"}]
