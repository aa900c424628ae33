"""Run consecutive traced steps of a target and summarise them: sync events and allocations.

Shared by the CPU emulation and the CUDA runner; both call `trace_steps` with their interceptor.
"""
from __future__ import annotations

import contextlib
import traceback
from typing import Any

from graphlint.runtime.tracing import op_catalog
from graphlint.runtime import user_frames
from graphlint.runtime.targets.loader import TargetExit
from graphlint.runtime.tracing.lines import LineRecorder
from graphlint.runtime.tracing.intercept import Interceptor, StepTrace, SyncStop, no_tensor_output  # noqa: F401


def trace_steps(target: Any, interceptor: Interceptor, steps: int,
                lines: LineRecorder | None = None) -> tuple[list[StepTrace], dict | None]:
    """reset(); then for i < steps: prepare(i) and a traced step(i); `lines` records the user
    lines each step() executes.

    Returns the traces and, when a step stopped early, `{"step", "error", "stack"}` (SyncStop in
    error mode, or an exception of the target's own). Tracing ends at the first such step.
    """
    traces: list[StepTrace] = []
    try:
        target.reset()
    except Exception as exc:
        return traces, step_error(None, exc, call="reset")
    for i in range(steps):
        try:
            target.prepare(i)
        except Exception as exc:
            return traces, step_error(i, exc, call="prepare")
        try:
            with lines if lines is not None else contextlib.nullcontext():
                interceptor.run_step(target.step, i)
        except SyncStop as stop:
            trace = interceptor.last
            trace.error = str(stop)
            traces.append(trace)
            return traces, {"step": i, "error": f"stopped at the first event: {stop}", "stack": stop.event["stack"]}
        except Exception as exc:
            trace = interceptor.last
            trace.error = f"{type(exc).__name__}: {exc}"
            traces.append(trace)
            return traces, step_error(i, exc, call="step")
        traces.append(interceptor.last)
        interceptor.last.live_bytes = _live_bytes(traces)
    return traces, None


def _live_bytes(traces: list[StepTrace]) -> int:
    """Bytes of every storage allocated by the traced steps so far that is still alive."""
    return sum(nbytes for trace in traces for _, _, nbytes, ref in trace.allocations if ref() is not None)


def step_error(step: int | None, exc: BaseException, call: str | None = None) -> dict:
    """An exception raised by the target, with the user frames that raised it and, when known,
    the protocol call it came from (`reset`, `prepare`, `step`)."""
    stack = user_frames.traceback_stack(exc.__traceback__)
    if isinstance(exc, TargetExit):
        last = str(exc)  # already says which call exited and how
    else:
        last = traceback.format_exception_only(type(exc), exc)[-1].strip()
    if call and f"{call}()" not in last:
        last = f"{call}() raised {last}"
    error = {"step": step, "error": last[:500], "stack": stack}
    if call:
        error["call"] = call
    return error


def cause(record: dict, kind: str | None = None) -> dict:
    """The short form of an event or hazard that a capture failure points to, with its explanation
    and fix."""
    short = {"op": record["op"], "kind": kind or record["kind"], "path": record["path"], "line": record["line"],
             "function": record["function"]}
    for key in ("explanation", "fix"):
        if record.get(key):
            short[key] = record[key]
    return short


def aggregate_events(traces: list[StepTrace]) -> list[dict]:
    """One record per (kind, op, path, line), in order of first occurrence, with its count, and
    why it breaks a graph (`explanation`) and what to do instead (`fix`) from the catalog."""
    merged: dict[tuple, dict] = {}
    for trace in traces:
        for event in trace.events:
            key = (event["kind"], event["op"], event["path"], event["line"])
            if key in merged:
                merged[key]["count"] += 1
                continue
            record = {k: event[k] for k in ("op", "kind", "path", "line", "function", "stack", "detail")}
            record.update(op_catalog.explain(event["kind"], event["op"]))
            record["count"] = 1
            record["first_step"] = event["step"]
            merged[key] = record
    return list(merged.values())


def grows(series: list[int]) -> bool:
    """Memory held after each step never falls and ends higher: a leak or a growing cache."""
    return len(series) >= 3 and series[-1] > series[0] and all(b >= a for a, b in zip(series, series[1:]))


def allocation_summary(traces: list[StepTrace], max_sites: int = 25) -> dict:
    """New storages per step (count, bytes, still alive after the step) and where they come from.

    `live_bytes` is what all traced steps so far allocated and still hold. `growth` is True when
    that rises step after step, or each step allocates more than the last (a cache grown with
    torch.cat, outputs appended to a list): the verdict fails on it.
    Allocations themselves do not fail the phase: inside a graph they come from the graph's private
    pool, the same addresses at each replay.
    """
    usable = [t for t in traces if t.error is None]
    per_step = [
        {"step": t.index, "count": len(t.allocations), "bytes": t.allocated_bytes(), "retained_bytes": t.retained_bytes,
         "live_bytes": t.live_bytes}
        for t in usable
    ]
    growth = grows([p["live_bytes"] for p in per_step]) or (
        len(per_step) >= 3 and all(b["bytes"] > a["bytes"] for a, b in zip(per_step, per_step[1:])))
    sites: dict[tuple, dict] = {}
    last = usable[-1] if usable else None
    for op, site, nbytes, _ref in (last.allocations if last else ()):
        where = user_frames.site_dict(site)
        key = (where["path"], where["line"])
        entry = sites.setdefault(key, {**where, "count": 0, "bytes": 0, "ops": []})
        entry["count"] += 1
        entry["bytes"] += nbytes
        if op not in entry["ops"]:
            entry["ops"].append(op)
    ranked = sorted(sites.values(), key=lambda s: (-s["count"], -s["bytes"], s["path"], s["line"]))
    # Where the memory that outlives its step was allocated: the place to look when it grows.
    held: dict[tuple, dict] = {}
    for trace in usable:
        for op, site, nbytes, ref in trace.allocations:
            if ref() is not None:
                where = user_frames.site_dict(site)
                entry = held.setdefault((where["path"], where["line"]), {**where, "count": 0, "bytes": 0, "ops": []})
                entry["count"] += 1
                entry["bytes"] += nbytes
                if op not in entry["ops"]:
                    entry["ops"].append(op)
    outputs = last.outputs if last else []
    return {
        "steps": per_step,
        "per_step": {"count": per_step[-1]["count"], "bytes": per_step[-1]["bytes"]} if per_step else None,
        "growth": growth,
        "sites": ranked[:max_sites],
        "sites_omitted": max(0, len(ranked) - max_sites),
        "held_sites": sorted(held.values(), key=lambda s: (-s["bytes"], s["path"], s["line"]))[:max_sites],
        "outputs_static": all(o["static"] for o in outputs) if outputs else None,
    }
