"""Every phase on one CUDA device: sync detection, allocation audit, trial capture, replay, benchmark.

Runs inside a worker subprocess (`worker.py`), one per device, so a sticky CUDA error stays there.
The recipe is the one verified on H200s (RUNTIME_NOTES, "Verified on an H200 pair"):
`s = torch.cuda.Stream(device=d)`, everything under `torch.cuda.device(d)`, warm-up on `s`,
`torch.cuda.graph(g, stream=s)`, replay inside `torch.cuda.stream(s)`, and the empty-graph warning
turned into a failure.

.. warning:: `set_sync_debug_mode` is process-wide; this module assumes it owns the process.
"""
from __future__ import annotations

import contextlib
import statistics
import sys
import time
import warnings
from typing import Any, Callable

import torch

from graphlint.runtime.tracing import hazards, op_catalog, traced_steps
from graphlint.runtime.targets import loader
from graphlint.runtime.tracing.intercept import Interceptor, no_tensor_output, tensors_of
from graphlint.runtime.tracing import record
from graphlint.runtime.tracing.lines import LineRecorder

DEFAULT_STEPS = 300  # crosses the bundled model's window wrap (64) and HCA boundaries (127, 255)
TRACE_STEPS = 8
WARMUP_STEPS = 3
ALLOC_STEPS = 4
BENCH_STEPS = 20
BENCH_REPEATS = 5
SYNC_MESSAGE = "synchronizing CUDA operation"
EMPTY_GRAPH = "The CUDA Graph is empty"


@contextlib.contextmanager
def sync_debug_mode(mode: str):
    torch.cuda.set_sync_debug_mode(mode)
    try:
        yield
    finally:
        torch.cuda.set_sync_debug_mode("default")


@contextlib.contextmanager
def sync_debug(interceptor: Interceptor, mode: str):
    """Arm sync debug mode around each traced step; in "warn" mode every warning becomes an event.

    Python's default filter shows a warning once per location, so the filter is "always", and the
    hook runs while the stack is still the one that synced (RUNTIME_NOTES §1).
    """
    with warnings.catch_warnings():
        warnings.filterwarnings("always", message=f".*{SYNC_MESSAGE}")
        previous = warnings.showwarning

        def hook(message, category, filename, lineno, file=None, line=None):
            if SYNC_MESSAGE in str(message) and interceptor.rec is not None:
                interceptor.on_sync_warning(str(message), sys._getframe(1))
            else:
                previous(message, category, filename, lineno, file, line)

        warnings.showwarning = hook
        interceptor.arm = lambda: sync_debug_mode(mode)
        try:
            yield
        finally:
            interceptor.arm = contextlib.nullcontext


def _to_host(out) -> list[torch.Tensor]:
    return [t.detach().to("cpu", copy=True) for t in tensors_of(out)]


def run(spec: dict, on_phase: Callable[[dict], None] | None = None, guard=None) -> dict:
    """Run all phases on `spec["device"]`; returns the device result (see harness.merge).

    `guard` (a `guard.Guard`, given by the worker) times and exit-proofs every call into the target.

    Raises loader.TargetError when the target cannot be imported or built. Any other failure is
    recorded in the phase it happened in, and the phases after it still run where they can.
    """
    device = torch.device(spec["device"])
    report = on_phase or (lambda _r: None)
    with torch.cuda.device(device):
        factory = loader.load_factory(spec["target"])
        target = loader.build(factory, device, spec["options"], guard=guard)
        steps = loader.effective_steps(spec.get("steps"), DEFAULT_STEPS, target)
        stream = torch.cuda.Stream(device=device)
        result: dict = {"device": str(device), "mode": "cuda", "steps": steps, "error": None, "timings": {},
                        "name": torch.cuda.get_device_name(device), "entry": loader.describe(target),
                        "features": _features(target)}
        runner = _DeviceRun(target, device, stream, steps, spec, result, report)
        runner.all_phases()
    return result


class _DeviceRun:
    def __init__(self, target, device, stream, steps, spec, result, report):
        self.target, self.device, self.stream, self.steps = target, device, stream, steps
        self.spec, self.result, self.report = spec, result, report
        self.events: list[dict] = []

    def timed(self, name: str, fn: Callable[[], Any]) -> Any:
        # `running` names the phase in progress, so a worker that dies can be placed.
        self.result["running"] = name
        self.report(self.result)
        started = time.perf_counter()
        try:
            return fn()
        except Exception as exc:
            # A phase that breaks fails alone (harness.merge reads phase_errors); the next ones run.
            self.result.setdefault("phase_errors", {})[name] = traced_steps.step_error(None, exc)
            return None
        finally:
            self.result["timings"][name] = time.perf_counter() - started
            self.result["running"] = None
            self.report(self.result)

    def all_phases(self) -> None:
        self.timed("warm-up", self.warm_up)
        failed = self.result.get("phase_errors", {}).pop("warm-up", None)
        if failed is not None:
            self.result["error"] = {"phase": "warm-up", **failed}
            self.report(self.result)
            return
        self.timed("sync", self.sync_phase)
        self.timed("allocation", self.allocation_phase)
        eager = self.timed("eager", self.eager_reference)
        graph, static_out = self.timed("capture", self.capture_phase) or (None, None)
        self.timed("replay", lambda: self.replay_phase(graph, static_out, eager))
        if self.spec.get("bench", True):
            self.timed("bench", lambda: self.bench_phase(graph))

    # ----------------------------------------------------------------- phases
    def warm_up(self) -> None:
        """A few eager steps on the capture stream: lazy per-stream state (cuBLAS workspaces) is
        made here, not during the capture (RUNTIME_NOTES §2, "Per-stream lazy state")."""
        self.target.reset()
        with torch.cuda.stream(self.stream):
            for i in range(min(WARMUP_STEPS, self.steps)):
                self.target.prepare(i)
                self.target.step()
        torch.cuda.synchronize(self.device)

    def sync_phase(self) -> None:
        mode = self.spec.get("sync_mode", "warn")
        it = Interceptor(self.device, emulate=False, stop_at_first=mode == "error")
        executed = LineRecorder()
        with torch.cuda.stream(self.stream), sync_debug(it, mode):
            traces, stopped = traced_steps.trace_steps(self.target, it, min(TRACE_STEPS, self.steps), lines=executed)
        self.result["executed"] = executed.as_report()
        self.result["functions"] = record.functions_of(executed.code_objects(), "sync")  # region file
        torch.cuda.synchronize(self.device)
        if stopped and mode == "error" and SYNC_MESSAGE in stopped["error"]:
            # torch's error mode raised inside the op: name it like a warning would have.
            event = it.error_event(stopped)
            traces[-1].events.append(event)
            stopped = {**stopped, "error": f"stopped at the first event: {event['op']} at {event['path']}:{event['line']}"}
        self.result["sync"] = {"events": traced_steps.aggregate_events(traces), "steps_traced": len(traces),
                               "stopped": stopped}
        self.events = self.result["sync"]["events"]
        if mode == "error" or stopped:
            # The replay hazards need whole steps, traced without stopping.
            it = Interceptor(self.device, emulate=False)
            with torch.cuda.stream(self.stream):
                traces, _ = traced_steps.trace_steps(self.target, it, min(TRACE_STEPS, self.steps))
            torch.cuda.synchronize(self.device)
        self.traces = traces
        self.result["hazards"] = hazards.compare(traces, self.target)

    def allocation_phase(self) -> None:
        summary = traced_steps.allocation_summary(self.traces)
        per_step = []
        try:
            self.target.reset()
            torch.cuda.synchronize(self.device)
            start = torch.cuda.memory_stats(self.device)
            with torch.cuda.stream(self.stream):
                for i in range(min(ALLOC_STEPS, self.steps)):
                    self.target.prepare(i)
                    torch.cuda.synchronize(self.device)
                    before = torch.cuda.memory_stats(self.device)
                    self.target.step()
                    torch.cuda.synchronize(self.device)
                    after = torch.cuda.memory_stats(self.device)
                    per_step.append({
                        "step": i,
                        "count": _delta(before, after, "allocation.all.allocated"),
                        "bytes": _delta(before, after, "allocated_bytes.all.allocated"),
                        "retained_bytes": _delta(before, after, "allocated_bytes.all.current"),
                        "live_bytes": _delta(start, after, "allocated_bytes.all.current"),
                        "device_mallocs": _delta(before, after, "num_device_alloc"),
                    })
        except Exception as exc:
            summary["error"] = traced_steps.step_error(None, exc)
        cuda_growth = traced_steps.grows([p["live_bytes"] for p in per_step])
        summary["cuda"] = {"steps": per_step, "growth": cuda_growth,
                           "source": "torch.cuda.memory_stats deltas around each step"}
        summary["growth"] = summary["growth"] or cuda_growth
        self.result["allocation"] = summary

    def eager_reference(self) -> list[list[torch.Tensor]] | None:
        try:
            self.target.reset()
            outputs = []
            with torch.cuda.stream(self.stream):
                for i in range(self.steps):
                    self.target.prepare(i)
                    outputs.append(_to_host(self.target.step()))
            torch.cuda.synchronize(self.device)
            return outputs
        except Exception as exc:
            self.result["eager_error"] = traced_steps.step_error(None, exc)
            return None

    def capture_phase(self):
        capture: dict = {"device": str(self.device), "stream": "torch.cuda.Stream(device=%s)" % self.device}
        self.result["capture"] = capture
        graph = torch.cuda.CUDAGraph()
        static_out = None
        try:
            self.warm_up()  # again, on the capture stream, right before the capture
            self.target.reset()
            self.target.prepare(0)
        except Exception as exc:
            capture.update(verdict="fail", status="failed", error=f"warm-up before capture: {exc}"[:500])
            return None, None
        started = time.perf_counter()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            # "error" makes a sync raise a clean RuntimeError before it can invalidate the capture
            # (seen on H200: the process stayed usable).
            torch.cuda.set_sync_debug_mode("error")
            try:
                with torch.cuda.graph(graph, stream=self.stream):
                    static_out = self.target.step()
            except Exception as exc:
                cause = self._cause_of(exc)
                capture.update(verdict="fail", status="failed", error=f"{type(exc).__name__}: {exc}"[:800],
                               cause=cause)
                capture.update(_explain_capture(str(exc), cause))
                graph = None
            finally:
                torch.cuda.set_sync_debug_mode("default")
        capture["duration_ms"] = (time.perf_counter() - started) * 1e3
        capture["warnings"] = sorted({str(w.message).split("(Triggered")[0].strip()[:300] for w in caught})
        if graph is None:
            return None, None
        empty = any(EMPTY_GRAPH in str(w.message) for w in caught)
        capture["empty_graph"] = empty
        if empty:
            capture.update(verdict="fail", status="empty",
                           error="the captured graph is empty: the step's work ran on another device or stream "
                                 "than the capturing one (replay would return stale capture-time data)",
                           cause=self._empty_cause(),
                           explanation=hazards.WHY["other-device"], fix=hazards.FIX["other-device"])
        else:
            capture.update(verdict="pass", status="captured", error=None)
        return graph, static_out

    def replay_phase(self, graph, static_out, eager) -> None:
        replay: dict = {"device": str(self.device), "steps": self.steps,
                        "atol": self.spec.get("atol", 0.0), "rtol": self.spec.get("rtol", 0.0)}
        self.result["replay"] = replay
        if graph is None:
            replay.update(verdict="skipped", reason="no graph: the capture failed")
            return
        if eager is None:
            replay.update(verdict="fail", reason="the eager reference run failed", error=self.result.get("eager_error"))
            return
        returned = no_tensor_output(static_out)
        if returned:
            replay.update(verdict="fail", reason=returned, problems=[returned])
            return
        atol, rtol = float(replay["atol"]), float(replay["rtol"])
        current = torch.cuda.current_stream(self.device)
        diffs: list[float] = []
        mismatched: list[int] = []
        replayed: list[list[torch.Tensor]] = []
        memory = []
        try:
            for i in range(self.steps):
                self.target.prepare(i)
                self.stream.wait_stream(current)
                with torch.cuda.stream(self.stream):
                    graph.replay()
                current.wait_stream(self.stream)
                got = _to_host(static_out)
                diff, same = _compare(got, eager[i], atol, rtol)
                diffs.append(diff)
                if not same:
                    mismatched.append(i)
                if i < 2 or i == self.steps - 1:
                    replayed.append(got)
                if i in (1, self.steps - 1):  # from step 1: a one-time lazy allocation is no leak
                    torch.cuda.synchronize(self.device)
                    memory.append(torch.cuda.memory_stats(self.device).get("allocated_bytes.all.current", 0))
        except Exception as exc:
            replay.update(verdict="fail", error=traced_steps.step_error(len(diffs), exc))
            return
        quarter = max(1, len(diffs) // 4)
        stale = (self.steps >= 3 and bool(mismatched) and _constant(replayed)
                 and not _constant([eager[0], eager[1], eager[-1]]))
        growth = memory[-1] - memory[0] if len(memory) == 2 else 0
        replay.update(
            mismatched_steps=len(mismatched),
            first_mismatch_step=mismatched[0] if mismatched else None,
            max_abs_diff=_finite(max(diffs)) if diffs else 0.0,
            diff_by_quarter=[_finite(max(diffs[k:k + quarter])) for k in range(0, len(diffs), quarter)][:4],
            stale=stale,
            memory_growth_bytes=growth,
        )
        problems = []
        if mismatched:
            worst = max(diffs)
            how = "shapes or dtypes differ" if worst == float("inf") else f"max |diff| {worst:.3g}"
            problems.append(f"replay differs from eager at {len(mismatched)} of {self.steps} steps "
                            f"(first at step {mismatched[0]}, {how})")
        if stale:
            problems.append("replay outputs never change although eager outputs do: stale capture-time data")
        if growth > 0:
            problems.append(f"device memory grew by {growth} bytes over {self.steps} replays")
        replay["verdict"] = "fail" if problems else "pass"
        replay["problems"] = problems

    def bench_phase(self, graph) -> None:
        k = min(BENCH_STEPS, self.steps)
        bench: dict = {"device": str(self.device), "steps_per_repeat": k, "repeats": BENCH_REPEATS}
        self.result["bench"] = bench
        try:
            bench["eager_ms"] = self._time(self.target.step, k)
            bench["replay_ms"] = self._time(graph.replay, k) if graph is not None else None
        except Exception as exc:
            bench["error"] = traced_steps.step_error(None, exc)
            return
        if bench["replay_ms"]:
            bench["speedup"] = bench["eager_ms"] / bench["replay_ms"]
        else:
            bench["speedup"] = None
            bench["note"] = "replay n/a: no graph"

    # ----------------------------------------------------------------- helpers
    def _time(self, fn: Callable[[], Any], k: int) -> float:
        """Median over repeats of (CUDA-event time of k calls on the capture stream) / k, in ms."""
        samples = []
        for _ in range(BENCH_REPEATS):
            self.target.reset()
            self.target.prepare(0)
            torch.cuda.synchronize(self.device)
            start = torch.cuda.Event(enable_timing=True)
            end = torch.cuda.Event(enable_timing=True)
            with torch.cuda.stream(self.stream):
                start.record(self.stream)
                for _ in range(k):
                    fn()
                end.record(self.stream)
            end.synchronize()
            samples.append(start.elapsed_time(end) / k)
        return statistics.median(samples)

    def _cause_of(self, exc: BaseException) -> dict | None:
        """The line a capture failure comes from: the sync event at the raising user frame if the
        sync phase saw one there, else that frame, else the first sync event."""
        # A failed capture_end chains its error onto the step's: the step's carries the user line.
        stack, error = [], exc
        while error is not None and not stack:
            stack = traced_steps.step_error(None, error)["stack"]
            error = error.__context__
        top = stack[-1] if stack else None
        if top is not None:
            for event in self.events:
                if (event["path"], event["line"]) == (top["path"], top["line"]):
                    return traced_steps.cause(event)
            kind = "sync" if SYNC_MESSAGE in str(exc) else "capture-error"
            return {"op": "unknown", "kind": kind, **top, **op_catalog.explain("sync", "unknown")}
        return traced_steps.cause(self.events[0]) if self.events else None

    def _empty_cause(self) -> dict | None:
        for h in self.result.get("hazards", []):
            if h["hazard"] == "other-device":
                return traced_steps.cause(h, kind="other-device")
        return None


def _explain_capture(message: str, cause: dict | None) -> dict:
    """Why the capture failed and the fix: the cause's own when the sync phase named its op (that
    says what to change at that line), else what torch's message tells."""
    from_cause = {k: cause[k] for k in ("explanation", "fix") if cause and cause.get(k)}
    if cause and cause.get("op") != "unknown" and from_cause:
        return from_cause
    return op_catalog.explain_capture_error(message, (cause or {}).get("op")) or from_cause


def _finite(value: float) -> float | None:
    """JSON has no infinity: a shape or dtype mismatch (diff = inf) is reported as None."""
    return None if value == float("inf") else value


def _delta(before: dict, after: dict, key: str) -> int:
    return int(after.get(key, 0) - before.get(key, 0))


def _compare(got: list[torch.Tensor], want: list[torch.Tensor], atol: float, rtol: float) -> tuple[float, bool]:
    """(max |diff|, within tolerance); bit-exact when atol == rtol == 0. NaN matches NaN."""
    if len(got) != len(want):
        return float("inf"), False
    worst, same = 0.0, True
    for a, b in zip(got, want):
        if a.shape != b.shape or a.dtype != b.dtype:
            return float("inf"), False
        if a.is_floating_point() or a.is_complex():
            a64, b64 = a.to(torch.float64 if a.is_floating_point() else torch.complex128), b.to(
                torch.float64 if b.is_floating_point() else torch.complex128)
            both_nan = torch.isnan(a64) & torch.isnan(b64)
            diff = (a64 - b64).abs().masked_fill(both_nan, 0)
            diff = torch.nan_to_num(diff, nan=float("inf"))
            limit = atol + rtol * b64.abs().masked_fill(both_nan, 0)
            ok = bool((diff <= limit).all()) if (atol or rtol) else bool((diff == 0).all())
        else:
            diff = (a.to(torch.float64) - b.to(torch.float64)).abs()
            ok = bool((diff <= atol + rtol * b.to(torch.float64).abs()).all())
        if diff.numel():
            worst = max(worst, float(diff.max()))
        same = same and ok
    return worst, same


def _constant(outputs: list[list[torch.Tensor]]) -> bool:
    first = outputs[0]
    return all(len(o) == len(first) and all(torch.equal(a, b) for a, b in zip(o, first)) for o in outputs[1:])


def _features(target) -> dict | None:
    """The target's own account of what it exercises (`features`, a JSON-ready dict), if any."""
    found = getattr(target, "features", None)
    return dict(found) if isinstance(found, dict) else None
