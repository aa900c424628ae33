"""The CPU emulation of every phase, for machines (and CI) without CUDA.

The step runs eagerly on the CPU under the interceptor (`intercept.py`, emulate mode). Sync events
come from the catalog; the capture phase is not run but predicted (it would fail on any sync event
or work on another device); replay hazards come from comparing the traces of consecutive steps
(`hazards.py`); the benchmark times eager steps only.
"""
from __future__ import annotations

import statistics
import time
from typing import Any, Callable

import torch

from graphlint.runtime.tracing import hazards, traced_steps
from graphlint.runtime.targets import loader
from graphlint.runtime.tracing.intercept import Interceptor
from graphlint.runtime.tracing import record
from graphlint.runtime.tracing.lines import LineRecorder

DEFAULT_STEPS = 8  # traced steps: crosses a compressor boundary (t = 3 mod 4) of the bundled model
BENCH_STEPS = 10


def run(spec: dict, on_phase: Callable[[dict], None] | None = None, guard=None) -> dict:
    """Run all phases on the CPU for `spec` (see harness.run_harness); returns the device result.

    `guard` (a `guard.Guard`, given by the worker) times and exit-proofs every call into the target.
    Raises loader.TargetError when the target cannot be imported or built.
    """
    # A decode step's tensors are small: intra-op threads only contend (5-10x slower steps on a
    # busy 2-core machine), and the emulation needs no speed from them.
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return _run(spec, on_phase, guard)
    finally:
        torch.set_num_threads(threads)


def _run(spec: dict, on_phase: Callable[[dict], None] | None, guard) -> dict:
    device = torch.device("cpu")
    factory = loader.load_factory(spec["target"])
    target = loader.build(factory, device, spec["options"], guard=guard)
    steps = loader.effective_steps(spec.get("steps"), DEFAULT_STEPS, target)
    result: dict = {"device": str(device), "mode": "cpu-emulation", "steps": steps, "error": None, "timings": {},
                    "entry": loader.describe(target),
                    "features": _features(target)}
    written = on_phase or (lambda _r: None)

    def report(running: str | None) -> None:
        # `running` names the phase in progress, so a worker that dies can be placed.
        result["running"] = running
        written(result)

    report("warm-up")
    started = time.perf_counter()
    # Untraced steps run with torch.cuda.synchronize() & co. made no-ops, as traced ones do.
    untraced = Interceptor(device, emulate=True).patched_sync_calls
    call = "reset"
    try:
        with untraced():
            target.reset()
            call = "prepare"
            target.prepare(0)
            call = "step"
            target.step()
    except Exception as exc:
        result["error"] = {"phase": "warm-up", **traced_steps.step_error(0, exc, call=call)}
        report(None)
        return result
    result["timings"]["warm-up"] = time.perf_counter() - started
    report("sync")

    started = time.perf_counter()
    stop_first = spec.get("sync_mode") == "error"
    executed = LineRecorder()
    interceptor = Interceptor(device, emulate=True, stop_at_first=stop_first)
    traces, stopped = traced_steps.trace_steps(target, interceptor, steps, lines=executed)
    result["sync"] = {"events": traced_steps.aggregate_events(traces), "steps_traced": len(traces), "stopped": stopped}
    result["executed"] = executed.as_report()
    result["functions"] = record.functions_of(executed.code_objects(), "sync")  # region file
    if stop_first:
        # Error mode stops at the first event; the other phases need whole steps.
        traces, stopped = traced_steps.trace_steps(target, Interceptor(device, emulate=True), steps)
    result["timings"]["sync"] = time.perf_counter() - started
    report("allocation")

    result["allocation"] = traced_steps.allocation_summary(traces)
    found = hazards.compare(traces, target)
    result["hazards"] = found
    result["replay"] = {
        "emulated": True,
        "steps": len(traces),
        "error": stopped if stopped and not stop_first else None,
        "note": "no CUDA: replay predicted by comparing the op traces of consecutive eager steps",
    }
    returned = next((t.no_tensor for t in traces if t.error is None and t.no_tensor), None)
    if returned:
        result["replay"]["problems"] = [returned]
    causes = [traced_steps.cause(e) for e in result["sync"]["events"]] + [
        traced_steps.cause(h, kind=h["hazard"]) for h in found if h["hazard"] == "other-device"
    ]
    result["capture"] = {
        "device": str(device),
        "status": "skipped (no CUDA)",
        "predicted": "fail" if causes else "ok",
        "causes": causes[:10],
        "note": "a real capture needs CUDA; the prediction fails on any sync event or work on another device",
    }

    if spec.get("bench", True):
        report("bench")
        started = time.perf_counter()
        with untraced():
            result["bench"] = bench(target, min(steps, BENCH_STEPS), device)
        result["timings"]["bench"] = time.perf_counter() - started
    report(None)
    return result


def bench(target: Any, steps: int, device: torch.device) -> dict:
    """Median eager wall time of `step()` on the CPU (prepare() is not timed); a call that
    raises is the phase's error."""
    times = []
    call = "reset"
    try:
        target.reset()
        for i in range(steps):
            call = "prepare"
            target.prepare(i)
            call = "step"
            started = time.perf_counter()
            target.step()
            times.append(time.perf_counter() - started)
    except Exception as exc:
        return {"device": str(device), "error": traced_steps.step_error(len(times), exc, call=call)}
    eager = statistics.median(times) * 1e3 if times else None
    return {"device": str(device), "eager_ms": eager, "replay_ms": None, "speedup": None, "samples": len(times),
            "note": "replay n/a without CUDA; eager on one intra-op thread"}


def _features(target) -> dict | None:
    """The target's own account of what it exercises (`features`, a JSON-ready dict), if any."""
    found = getattr(target, "features", None)
    return dict(found) if isinstance(found, dict) else None
