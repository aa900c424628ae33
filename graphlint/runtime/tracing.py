"""Run consecutive traced steps of a target and summarise them: sync events and allocations.

Shared by the CPU emulation and the CUDA runner; both call `trace_steps` with their interceptor.
"""
from __future__ import annotations

import traceback
from typing import Any

from graphlint.runtime import sources
from graphlint.runtime.intercept import Interceptor, StepTrace, SyncStop


def trace_steps(target: Any, interceptor: Interceptor, steps: int) -> tuple[list[StepTrace], dict | None]:
    """reset(); then for i < steps: prepare(i) and a traced step(i).

    Returns the traces and, when a step stopped early, `{"step", "error", "stack"}` (SyncStop in
    error mode, or an exception of the target's own). Tracing ends at the first such step.
    """
    target.reset()
    traces: list[StepTrace] = []
    for i in range(steps):
        target.prepare(i)
        try:
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
            return traces, step_error(i, exc)
        traces.append(interceptor.last)
    return traces, None


def step_error(step: int | None, exc: BaseException) -> dict:
    """An exception raised by the target, with the user frames that raised it."""
    stack = sources.traceback_stack(exc.__traceback__)
    last = traceback.format_exception_only(type(exc), exc)[-1].strip()
    return {"step": step, "error": last[:500], "stack": stack}


def aggregate_events(traces: list[StepTrace]) -> list[dict]:
    """One record per (kind, op, path, line), in order of first occurrence, with its count."""
    merged: dict[tuple, dict] = {}
    for trace in traces:
        for event in trace.events:
            key = (event["kind"], event["op"], event["path"], event["line"])
            if key in merged:
                merged[key]["count"] += 1
                continue
            record = {k: event[k] for k in ("op", "kind", "path", "line", "function", "stack", "detail")}
            record["count"] = 1
            record["first_step"] = event["step"]
            merged[key] = record
    return list(merged.values())


def allocation_summary(traces: list[StepTrace], max_sites: int = 25) -> dict:
    """New storages per step (count, bytes, still alive after the step) and where they come from.

    `growth` is True when the memory a step leaves alive, or what it allocates, rises step after
    step (a cache grown with torch.cat, outputs appended to a list): the verdict fails on it.
    Allocations themselves do not fail the phase: inside a graph they come from the graph's private
    pool, the same addresses at each replay.
    """
    usable = [t for t in traces if t.error is None]
    per_step = [
        {"step": t.index, "count": len(t.allocations), "bytes": t.allocated_bytes(), "retained_bytes": t.retained_bytes}
        for t in usable
    ]
    growth = False
    if len(per_step) >= 3:
        retained = [p["retained_bytes"] for p in per_step]
        allocated = [p["bytes"] for p in per_step]
        growth = (retained[-1] > retained[0] and all(b >= a for a, b in zip(retained, retained[1:]))) or all(
            b > a for a, b in zip(allocated, allocated[1:])
        )
    sites: dict[tuple, dict] = {}
    last = usable[-1] if usable else None
    for op, site, nbytes, _ref in (last.allocations if last else ()):
        where = sources.site_dict(site)
        key = (where["path"], where["line"])
        entry = sites.setdefault(key, {**where, "count": 0, "bytes": 0, "ops": []})
        entry["count"] += 1
        entry["bytes"] += nbytes
        if op not in entry["ops"]:
            entry["ops"].append(op)
    ranked = sorted(sites.values(), key=lambda s: (-s["count"], -s["bytes"], s["path"], s["line"]))
    outputs = last.outputs if last else []
    return {
        "steps": per_step,
        "per_step": {"count": per_step[-1]["count"], "bytes": per_step[-1]["bytes"]} if per_step else None,
        "growth": growth,
        "sites": ranked[:max_sites],
        "sites_omitted": max(0, len(ranked) - max_sites),
        "outputs_static": all(o["static"] for o in outputs) if outputs else None,
    }
