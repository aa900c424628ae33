"""One device per subprocess:
`python -m graphlint.runtime.isolation.worker SPEC.json RESULT.json CLOCK FAULTS`.

The target runs here, never in graphlint's own process (CPU emulation and CUDA alike): a failed
capture can leave a CUDA context unusable (sticky errors, RUNTIME_NOTES §2), and a target may exit,
crash, hang or leave threads behind. The worker rewrites RESULT.json after every phase, so the
parent keeps what finished even when the worker dies; `run_isolated` is the parent side, which
also enforces the step timeout and turns a death into an error naming the call and the line.

The worker leads its own session: every process the target starts is in it, is killed at the
end of each phase (and reported: the step started a process), and whatever is left when the
worker ends is killed with the group. The target's import runs under the step timeout too, and
a watchdog ends the worker and removes its temporary folder when graphlint itself dies.
"""
from __future__ import annotations

import faulthandler
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import traceback
from dataclasses import dataclass, field

WORKER_TIMEOUT_S = 570  # below the 10-minute limits CI and device runners commonly have
DEFAULT_STEP_TIMEOUT_S = 60.0  # one call into the target; the bundled CPU step takes well under 1 s
DUMP_GRACE_S = 2.0  # how long a timed-out worker gets to write its stack before it is killed
POLL_S = 0.05
PARENT_ENV = "GRAPHLINT_RUNTIME_PARENT"


def _write_json(path: str, data: dict) -> None:
    tmp = f"{path}.tmp"
    with open(tmp, "w", encoding="utf-8") as handle:
        json.dump(data, handle)
    os.replace(tmp, path)


def main(argv: list[str]) -> int:
    spec_path, result_path, clock_path, faults_path = argv
    faults = open(faults_path, "w", encoding="utf-8")
    faulthandler.enable(file=faults, all_threads=True)  # SIGSEGV, SIGABRT, SIGBUS, SIGFPE, SIGILL
    from graphlint.runtime.isolation import guard

    faulthandler.register(guard.DUMP_SIGNAL, file=faults, all_threads=True)
    with open(spec_path, encoding="utf-8") as handle:
        spec = json.load(handle)
    started: list[dict] = []  # processes the target started, killed at the end of a phase

    def report(partial: dict) -> None:
        started.extend(kill_descendants())
        if started:
            partial["processes"] = list(started)
        _write_json(result_path, partial)

    # When graphlint dies (SIGKILL included), its worker follows, and leaves nothing behind.
    parent = os.environ.get(PARENT_ENV, "")
    guard.watch_parent(os.path.dirname(os.path.abspath(spec_path)), kill_descendants,
                       int(parent) if parent.isdigit() else None)
    from graphlint.runtime.targets import loader

    watch = guard.Guard(guard.CallClock(clock_path))
    load_factory = loader.load_factory
    # The import of the target runs under the step timeout like every call into it.
    loader.load_factory = lambda target: watch.call("import", load_factory, target)
    try:
        if spec["device"].startswith("cuda"):
            from graphlint.runtime.cuda import cuda_run as runner
        else:
            from graphlint.runtime.emulation import cpu_run as runner
        result = runner.run(spec, on_phase=report, guard=watch)
    except loader.TargetError as exc:
        result = {"device": spec["device"], "error": {"phase": "build", "error": str(exc), "target_error": True}}
    except Exception as exc:
        result = {"device": spec["device"],
                  "error": {"phase": "internal", "error": f"{type(exc).__name__}: {exc}",
                            "traceback": traceback.format_exc()[-4000:]}}
    threads = guard.leftover_threads()
    if threads:
        # Python would wait for them at exit: record them, then leave without waiting.
        result["threads"] = threads
    report(result)  # kills and records what the last phase started
    sys.stdout.flush()
    sys.stderr.flush()
    if threads:
        os._exit(0)
    return 0


def _processes() -> dict[int, tuple[int, int]]:
    """pid -> (parent pid, process group) of every process, from /proc (Linux); {} elsewhere."""
    found: dict[int, tuple[int, int]] = {}
    try:
        entries = os.listdir("/proc")
    except OSError:
        return found
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", encoding="utf-8", errors="replace") as handle:
                fields = handle.read().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if fields and fields[0] != "Z":
            found[int(entry)] = (int(fields[1]), int(fields[2]))
    return found


# Helper processes torch starts for itself (inductor's compile pool): not the target's doing.
_TORCH_HELPERS = ("torch._inductor.compile_worker", "torch/_inductor/compile_worker")


def kill_descendants(root: int | None = None) -> list[dict]:
    """Kill every live process below `root` (default: this one) or in its process group, and
    describe each: {pid, command}."""
    root = os.getpid() if root is None else root
    table = _processes()
    below = {pid for pid, (_, group) in table.items() if group == root and pid != root}
    grew = True
    while grew:
        more = {pid for pid, (parent, _) in table.items() if (parent == root or parent in below) and pid != root}
        grew = not more <= below
        below |= more
    described = []
    for pid in sorted(below):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as handle:
                command = handle.read().replace(b"\0", b" ").decode("utf-8", "replace").strip()[:200]
        except OSError:
            command = ""
        if any(name in command for name in _TORCH_HELPERS):
            continue  # torch's own compile workers, started by the harness's torch.compile phase
        try:
            os.kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            continue
        described.append({"pid": pid, "command": command})
    return described


@dataclass
class _Worker:
    spec: dict
    proc: subprocess.Popen
    result_path: str
    faults_path: str
    clock: object
    log: object
    stopped: dict | None = None  # why the parent ended it: {"call", "step", "limit"} or {"overall"}
    extra: dict = field(default_factory=dict)


def run_isolated(specs: list[dict], timeout_s: float = WORKER_TIMEOUT_S,
                 step_timeout_s: float | None = DEFAULT_STEP_TIMEOUT_S) -> list[dict]:
    """Run one worker per spec, concurrently; a worker that exits, dies or hangs is reported, not raised.

    A call into the target (factory, reset, prepare, step) that runs longer than `step_timeout_s`
    (None or 0: no limit) has its stack written and the worker killed; every worker is killed after
    `timeout_s` in all. Each result is what the worker last wrote, plus `error` when it ended
    abnormally, with the call in progress and the user's frames where they are known.
    """
    import graphlint
    from graphlint.runtime.isolation import guard

    # The folder graphlint is imported from goes first on the worker's path, so the worker runs this copy.
    root = os.path.dirname(os.path.dirname(os.path.abspath(graphlint.__file__)))
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, os.getcwd(), env.get("PYTHONPATH")) if p)
    env.setdefault("PYTHONUNBUFFERED", "1")
    env[PARENT_ENV] = str(os.getpid())  # the worker's watchdog compares its parent with this
    with tempfile.TemporaryDirectory(prefix="graphlint-runtime-") as tmp:
        workers: list[_Worker] = []
        try:
            for n, spec in enumerate(specs):
                path = lambda kind: os.path.join(tmp, f"{n}.{kind}")  # noqa: E731
                _write_json(path("spec.json"), spec)
                clock = guard.CallClock(path("clock"), create=True)
                log = open(path("log"), "w+", encoding="utf-8", errors="replace")
                proc = subprocess.Popen(
                    [sys.executable, "-m", "graphlint.runtime.isolation.worker", path("spec.json"), path("result.json"),
                     path("clock"), path("faults")],
                    stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, env=env,
                    start_new_session=True,  # its own group: what the target starts is ended with it
                )
                workers.append(_Worker(spec, proc, path("result.json"), path("faults"), clock, log))
            _watch(workers, timeout_s, step_timeout_s)
        finally:
            for w in workers:  # Ctrl-C or an error here: leave no worker behind
                if w.proc.poll() is None:
                    w.proc.kill()
                    w.proc.wait()
                w.extra["left"] = _end_group(w.proc.pid)
        results = [_collect(w, timeout_s) for w in workers]
        for w in workers:
            w.log.close()
            w.clock.close()
    return results


def _end_group(group: int) -> list[dict]:
    """Kill what is left of a worker's session (processes the target started that outlived it)."""
    left = [{"pid": pid, "command": ""} for pid, (_, g) in _processes().items() if g == group]
    try:
        os.killpg(group, signal.SIGKILL)
    except (ProcessLookupError, PermissionError, OSError):
        pass
    return left


def _watch(workers: list[_Worker], timeout_s: float, step_timeout_s: float | None) -> None:
    deadline = time.monotonic() + timeout_s
    while any(w.proc.poll() is None for w in workers):
        now = time.monotonic()
        for w in workers:
            if w.proc.returncode is not None or w.stopped is not None:
                continue
            call = w.clock.read()
            if step_timeout_s and call is not None and now - call["started"] > step_timeout_s:
                w.stopped = {**call, "limit": step_timeout_s}
                _stop(w)
            elif now > deadline:
                w.stopped = {**(call or {}), "overall": timeout_s}
                _stop(w)
        time.sleep(POLL_S)


def _stop(w: _Worker) -> None:
    """Ask for the worker's stack (faulthandler answers even while C code holds the GIL), then kill."""
    from graphlint.runtime.isolation import guard

    size = os.path.getsize(w.faults_path) if os.path.exists(w.faults_path) else 0
    try:
        os.kill(w.proc.pid, guard.DUMP_SIGNAL)
        until = time.monotonic() + DUMP_GRACE_S
        while time.monotonic() < until and w.proc.poll() is None:
            if os.path.exists(w.faults_path) and os.path.getsize(w.faults_path) > size:
                time.sleep(0.1)  # let it finish the dump
                break
            time.sleep(POLL_S)
    except ProcessLookupError:
        pass
    if w.proc.poll() is None:
        w.proc.kill()
        w.proc.wait()


def _collect(w: _Worker, timeout_s: float) -> dict:
    from graphlint.runtime.isolation import guard

    spec, rc = w.spec, w.proc.returncode
    result: dict = {"device": spec["device"]}
    if os.path.exists(w.result_path):
        try:
            with open(w.result_path, encoding="utf-8") as handle:
                result = json.load(handle)
        except (OSError, ValueError):
            pass  # killed while writing: the partial file is lost, the error below says why
    started = [*(result.get("processes") or []), *w.extra.get("left", [])]
    if started:
        names = ", ".join(f"{p['pid']} {p['command']!r}" if p.get("command") else str(p["pid"]) for p in started)
        result.setdefault("target_errors", []).append(
            f"the step started a process that was still running at the end of its phase: {names} (killed; a "
            "process started every step cannot be captured in a CUDA graph, and one left running outlives the run)")
    if result.get("threads"):
        names = ", ".join(_thread_label(t) for t in result["threads"])
        result.setdefault("target_errors", []).append(
            f"the target left {len(result['threads'])} non-daemon thread(s) running after the run: {names} "
            "(make them daemon threads or join them; the worker was ended without waiting)")
    if rc == 0 and w.stopped is None:
        return result
    call = w.stopped if w.stopped is not None else w.clock.read()
    during = _during(call)
    if w.stopped is not None and "limit" in w.stopped:
        why = f"{during} ran past the {w.stopped['limit']:g} s step timeout (--timeout)"
    elif w.stopped is not None:
        why = f"the worker for {spec['device']} timed out after {timeout_s:.0f} s{' in ' + during if call else ''}"
    elif rc is not None and rc < 0:
        try:
            name = signal.Signals(-rc).name
        except ValueError:
            name = f"signal {-rc}"
        why = f"the worker for {spec['device']} was killed by {name}" + (f" in {during}" if call else "")
    else:
        why = f"the worker for {spec['device']} exited with code {rc}" + (f" in {during}" if call else "")
    try:
        with open(w.faults_path, encoding="utf-8", errors="replace") as handle:
            stack = guard.fault_stack(handle.read())
    except OSError:
        stack = []
    w.log.seek(0)
    error = {"phase": _last_phase(result), "error": why, "stack": stack, "log_tail": w.log.read()[-3000:]}
    if call:
        error["call"] = call.get("call")
        error["step"] = call.get("step")
    if result.get("error") and not result["error"].get("target_error"):
        error["earlier"] = result["error"]
    result["error"] = error if not (result.get("error") or {}).get("target_error") else result["error"]
    return result


def _during(call: dict | None) -> str:
    if not call or not call.get("call"):
        return "the harness"
    step = f" (step {call['step']})" if call.get("step") is not None else ""
    return f"{call['call']}(){step}"


def _thread_label(thread: dict) -> str:
    where = f" at {thread['path']}:{thread['line']}" if thread.get("path") else ""
    return f"{thread['name']!r}{where}"


def _last_phase(result: dict) -> str:
    if result.get("running"):
        return result["running"]
    done = list(result.get("timings", {}))
    return f"after {done[-1]}" if done else "start"


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
