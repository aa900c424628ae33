"""One device per subprocess: `python -m graphlint.runtime.worker SPEC.json RESULT.json`.

A failed capture can leave a CUDA context unusable (sticky errors, RUNTIME_NOTES §2), so each
device runs in its own process. The worker rewrites RESULT.json after every phase, so the parent
keeps what finished even when the worker dies; `run_isolated` is the parent side.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
import traceback

WORKER_TIMEOUT_S = 570  # below the 10-minute limits CI and device runners commonly have


def _write_json(path: str, data: dict) -> None:
    tmp = f"{path}.tmp"
    with open(tmp, "w", encoding="utf-8") as handle:
        json.dump(data, handle)
    os.replace(tmp, path)


def main(argv: list[str]) -> int:
    spec_path, result_path = argv
    with open(spec_path, encoding="utf-8") as handle:
        spec = json.load(handle)
    report = lambda partial: _write_json(result_path, partial)  # noqa: E731
    from graphlint.runtime import targets

    try:
        if spec["device"].startswith("cuda"):
            from graphlint.runtime import cuda_run as runner
        else:
            from graphlint.runtime import cpu_run as runner
        result = runner.run(spec, on_phase=report)
    except targets.TargetError as exc:
        result = {"device": spec["device"], "error": {"phase": "build", "error": str(exc), "target_error": True}}
    except Exception as exc:
        result = {"device": spec["device"],
                  "error": {"phase": "internal", "error": f"{type(exc).__name__}: {exc}",
                            "traceback": traceback.format_exc()[-4000:]}}
    report(result)
    return 0


def run_isolated(specs: list[dict], timeout_s: float = WORKER_TIMEOUT_S) -> list[dict]:
    """Run one worker per spec, concurrently; a worker that dies or times out is reported, not raised.

    Each result is what the worker last wrote, plus `error` when it exited abnormally.
    """
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, os.getcwd(), env.get("PYTHONPATH")) if p)
    env.setdefault("PYTHONUNBUFFERED", "1")
    with tempfile.TemporaryDirectory(prefix="graphlint-runtime-") as tmp:
        running = []
        for n, spec in enumerate(specs):
            spec_path, result_path = (os.path.join(tmp, f"{n}.{kind}.json") for kind in ("spec", "result"))
            _write_json(spec_path, spec)
            log = open(os.path.join(tmp, f"{n}.log"), "w+", encoding="utf-8")
            proc = subprocess.Popen(
                [sys.executable, "-m", "graphlint.runtime.worker", spec_path, result_path],
                stdout=log, stderr=subprocess.STDOUT, env=env,
            )
            running.append((spec, proc, result_path, log))
        deadline = time.monotonic() + timeout_s
        results = []
        for spec, proc, result_path, log in running:
            try:
                rc = proc.wait(timeout=max(1.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
                rc = None
            result = {"device": spec["device"]}
            if os.path.exists(result_path):
                with open(result_path, encoding="utf-8") as handle:
                    result = json.load(handle)
            if rc != 0:
                log.seek(0)
                tail = log.read()[-3000:]
                why = f"timed out after {timeout_s:.0f} s" if rc is None else f"exited with code {rc}"
                result["error"] = result.get("error") or {
                    "phase": _last_phase(result), "error": f"the worker for {spec['device']} {why}", "log_tail": tail,
                }
            log.close()
            results.append(result)
    return results


def _last_phase(result: dict) -> str:
    if result.get("running"):
        return result["running"]
    done = list(result.get("timings", {}))
    return f"after {done[-1]}" if done else "start"


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
