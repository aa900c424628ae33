"""Run the runtime harness on the requested devices and assemble `Report.runtime`.

`run_harness` is the one entry point (the `runtime` command, `check --runtime` and the pytest
plugin call it). The per-device work is in `cpu_run.py` (emulation) and `cuda_run.py`, each run in
a worker subprocess per device (`worker.py`); this module picks devices, runs them, merges their
results and gives each phase a verdict, placing a worker's death in the phase it happened in.
"""
from __future__ import annotations

import time
from typing import Any

from graphlint.runtime.tracing import record
from graphlint.runtime.targets import loader
from graphlint.runtime.targets.loader import TargetError, UnsupportedTarget, UsageError
from graphlint.runtime.isolation.worker import DEFAULT_STEP_TIMEOUT_S

PHASES = ("sync", "allocation", "capture", "replay", "bench")
# The device runners' own step names (result["phase_errors"]) behind each phase.
RUNNER_STEPS = {"sync": ("sync",), "allocation": ("allocation",), "capture": ("capture",),
                "replay": ("eager", "replay"), "bench": ("bench",)}


def resolve_devices(devices: str | None, cuda_count: int) -> list[str]:
    """`--device` -> device strings. Default: cuda:0 when CUDA exists, else "cpu" (the emulation).

    Raises UsageError for an unknown device, a CUDA index that does not exist, CUDA requested on a
    machine without it, or CPU and CUDA mixed.
    """
    if not devices:
        return ["cuda:0"] if cuda_count else ["cpu"]
    if devices.strip() == "all":
        return [f"cuda:{i}" for i in range(cuda_count)] if cuda_count else ["cpu"]
    resolved: list[str] = []
    for raw in devices.split(","):
        name = raw.strip().lower()
        if name == "cuda":
            name = "cuda:0"
        elif name.isdigit():
            name = f"cuda:{name}"
        if name == "cpu":
            pass
        elif name.startswith("cuda:") and name[5:].isdigit():
            if not cuda_count:
                raise UsageError(f"--device {raw.strip()}: CUDA is not available here (use --device cpu for the emulation)")
            if int(name[5:]) >= cuda_count:
                raise UsageError(f"--device {raw.strip()}: only {cuda_count} CUDA device(s) exist")
        else:
            raise UsageError(f"--device {raw.strip()!r}: expected cpu, cuda, cuda:N, a list of them, or all")
        if name not in resolved:
            resolved.append(name)
    if "cpu" in resolved and len(resolved) > 1:
        raise UsageError("--device: the CPU emulation and CUDA devices cannot be mixed in one run")
    return resolved


def run_harness(
    target: str | None,
    devices: str | None,
    steps: int | None,
    sync_mode: str = "warn",
    options: dict[str, Any] | None = None,
    atol: float = 0.0,
    rtol: float = 0.0,
    bench: bool = True,
    isolate: bool = True,
    step_timeout: float | None = DEFAULT_STEP_TIMEOUT_S,
) -> dict:
    """Run every phase on every requested device and return the `Report.runtime` dict.

    `target` is `module:callable`, `file.py:callable`, a shorthand ("reference", "graph-safe") or
    None for the bundled graph-safe step. `steps` defaults to 300 on CUDA and 8 traced steps on the
    CPU emulation. Comparison is bit-exact unless `atol`/`rtol` are given. Each device runs in its
    own subprocess (the CPU emulation too), so the target's exits, crashes, hangs, threads and
    prints never reach this process; `step_timeout` (seconds, None or 0: none) bounds each call
    into the target. `isolate=False` runs the CPU emulation in this process (for debugging the
    harness: no timeout, no protection).

    Raises UsageError (TargetError included) when the target cannot be imported or built, or the
    devices are invalid; every other failure is recorded in the returned dict, whose `verdict` is
    "fail" when any phase failed.

    .. warning:: with `isolate=False` a target that exits or crashes ends the calling process.
    """
    import torch

    if sync_mode not in ("warn", "error"):
        raise UsageError(f"--sync-mode {sync_mode!r}: expected warn or error")
    if step_timeout is not None and step_timeout < 0:
        raise UsageError(f"--timeout {step_timeout:g}: expected a number of seconds >= 0")
    started = time.perf_counter()
    spec = loader.resolve_spec(target)
    opts = {**loader.default_options(spec), **(options or {})}
    cuda_count = torch.cuda.device_count() if torch.cuda.is_available() else 0
    device_list = resolve_devices(devices, cuda_count)
    mode = "cpu-emulation" if device_list == ["cpu"] else "cuda"
    specs = [
        {"target": spec, "options": opts, "device": d, "steps": steps, "sync_mode": sync_mode,
         "atol": atol, "rtol": rtol, "bench": bench}
        for d in device_list
    ]
    if mode == "cpu-emulation" and not isolate:
        from graphlint.runtime.emulation import cpu_run

        try:
            results = [cpu_run.run(specs[0])]
        except TargetError as exc:  # as a worker reports it: classified below
            results = [{"device": "cpu", "error": {"phase": "build", "error": str(exc), "target_error": True}}]
    else:
        from graphlint.runtime.isolation import worker

        results = worker.run_isolated(specs, step_timeout_s=step_timeout)
    build_errors = [r["error"]["error"] for r in results if (r.get("error") or {}).get("target_error")]
    if build_errors and len(build_errors) == len(results):
        unsupported = build_errors[0].startswith(UnsupportedTarget.PREFIX)
        raise (UnsupportedTarget if unsupported else TargetError)(build_errors[0])
    runtime = merge(results, mode=mode, devices=device_list, bench=bench)
    runtime["functions"] = record.merge(results)  # what the traced steps ran (graphlint.runtime.tracing.record)
    runtime["torch"] = torch.__version__
    runtime["target"] = {"spec": spec, "options": opts, "entry": next((r["entry"] for r in results if r.get("entry")), None)}
    features = next((r["features"] for r in results if r.get("features")), None)
    if features:  # what the target says it exercises (hf targets: layer kinds, MoE layers, window)
        runtime["target"]["features"] = features
    runtime["settings"] = {"steps": steps, "sync_mode": sync_mode, "atol": atol, "rtol": rtol, "bench": bench,
                           "timeout_s": step_timeout or None, "isolated": isolate or mode == "cuda"}
    runtime["duration_s"] = round(time.perf_counter() - started, 3)
    return runtime


# --------------------------------------------------------------------------- merging
def _merge_records(results: list[dict], pick, key_fields: tuple[str, ...]) -> list[dict]:
    merged: dict[tuple, dict] = {}
    for result in results:
        for record in pick(result):
            key = tuple(record.get(k) for k in key_fields)
            if key in merged:
                merged[key]["devices"].append(result["device"])
            else:
                merged[key] = {**record, "devices": [result["device"]]}
    return list(merged.values())


def _merge_lines(results: list[dict]) -> dict[str, list[int]]:
    merged: dict[str, set[int]] = {}
    for result in results:
        for path, lines in (result.get("executed") or {}).items():
            merged.setdefault(path, set()).update(lines)
    return {path: sorted(lines) for path, lines in sorted(merged.items())}


def _device_error(result: dict) -> str | None:
    error = result.get("error")
    if not error:
        return None
    return f"{result['device']}: {error.get('phase', '?')}: {_with_line(error)}"


def _with_line(error: dict) -> str:
    """An error's text with the innermost user line it happened at."""
    where = error.get("stack") or []
    at = f" at {where[-1]['path']}:{where[-1]['line']}" if where else ""
    return f"{error.get('error')}{at}"


def _failed_phase(error: dict) -> str:
    """The phase a device error belongs to: the runner step it happened in, else the first phase
    (warm-up, build and start come before any)."""
    phase = str(error.get("phase", "")).removeprefix("after ")
    for name, steps in RUNNER_STEPS.items():
        if phase in steps:
            return name
    return "sync"


def merge(results: list[dict], mode: str, devices: list[str], bench: bool = True) -> dict:
    """Per-device results -> the runtime dict with phase verdicts (see the module docstring)."""
    primary = results[0]
    errors = [e for e in (_device_error(r) for r in results) if e]
    events = _merge_records(results, lambda r: (r.get("sync") or {}).get("events", []),
                            ("kind", "op", "path", "line"))
    found = _merge_records(results, lambda r: r.get("hazards", []), ("hazard", "op", "path", "line"))
    errors += [f"{r['device']}: {e}" for r in results for e in r.get("target_errors", [])]
    runtime: dict[str, Any] = {
        "mode": mode,
        "devices": devices,
        "sync_events": events,
        "allocations": {"device": primary["device"], **(primary.get("allocation") or {})},
        "captures": [r.get("capture") or {"device": r["device"], "status": "not run"} for r in results],
        "replay": {
            "emulated": mode == "cpu-emulation",
            "hazards": found,
            "devices": [r.get("replay") or {"device": r["device"], "verdict": "fail", "reason": "not run"}
                        for r in results],
        },
        "bench": {"devices": [r.get("bench") or {"device": r["device"]} for r in results]},
        "errors": errors,
        # user lines each device's traced steps ran (the cross-check's "exercised"), merged
        "executed": _merge_lines(results),
        "device_results": [{k: r.get(k) for k in ("device", "name", "steps", "timings", "error", "phase_errors")}
                           for r in results],
    }
    phases = {
        "sync": _sync_phase(results, events, mode),
        "allocation": _allocation_phase(primary),
        "capture": _capture_phase(results, mode),
        "replay": _replay_phase(results, found, mode),
        "bench": _bench_phase(results, mode) if bench else {"verdict": "skipped", "reason": "--no-bench"},
    }
    for name, phase in phases.items():
        broken = [f"{r['device']}: {e['error']}" for r in results
                  for step, e in (r.get("phase_errors") or {}).items() if step in RUNNER_STEPS[name]]
        if broken:
            phase.update(verdict="fail", error="; ".join(broken))
    for r in results:
        # A worker that exited, crashed or timed out fails the phase it was in, with the cause.
        if r.get("error") and not r["error"].get("target_error"):
            phase = phases[_failed_phase(r["error"])]
            phase.update(verdict="fail", error=f"{r['device']}: {_with_line(r['error'])}")
    runtime["phases"] = phases
    failed = any(p["verdict"] == "fail" for p in phases.values()) or bool(errors)
    runtime["verdict"] = "fail" if failed else "pass"
    return runtime


def _sync_phase(results: list[dict], events: list[dict], mode: str) -> dict:
    by_kind: dict[str, int] = {}
    for event in events:
        by_kind[event["kind"]] = by_kind.get(event["kind"], 0) + 1
    missing = [r["device"] for r in results if "sync" not in r]
    stopped = [(r.get("sync") or {}).get("stopped") for r in results]
    step_errors = [s for s in stopped if s and not s["error"].startswith("stopped at the first event")]
    source = ("sync debug mode 'warn' + patched synchronize calls + pageable non_blocking copies"
              if mode == "cuda" else "CPU emulation: TorchFunctionMode + TorchDispatchMode, argument-aware catalog")
    phase = {
        "verdict": "fail" if events or missing or step_errors else "pass",
        "events": len(events),
        "by_kind": by_kind,
        "steps_traced": (results[0].get("sync") or {}).get("steps_traced"),
        "source": source,
        "stopped": next((s for s in stopped if s), None),
    }
    if missing:
        phase["error"] = f"not run on {', '.join(missing)}"
    elif step_errors:
        phase["error"] = _with_line(step_errors[0])
    return phase


def _allocation_phase(primary: dict) -> dict:
    alloc = primary.get("allocation")
    if alloc is None:
        return {"verdict": "fail", "error": f"not run on {primary['device']}"}
    per_step = alloc.get("per_step") or {}
    return {
        "verdict": "fail" if alloc.get("growth") else "pass",
        "allocations_per_step": per_step.get("count"),
        "bytes_per_step": per_step.get("bytes"),
        "growth": alloc.get("growth"),
        "sites": len(alloc.get("sites", [])) + alloc.get("sites_omitted", 0),
        "outputs_static": alloc.get("outputs_static"),
    }


def _capture_phase(results: list[dict], mode: str) -> dict:
    if mode == "cpu-emulation":
        capture = results[0].get("capture")
        if capture is None:
            return {"verdict": "fail", "error": "not run"}
        predicted = capture.get("predicted")
        return {"verdict": "fail" if predicted == "fail" else "skipped", "status": capture.get("status"),
                "predicted": predicted, "causes": len(capture.get("causes", []))}
    verdicts = {r["device"]: (r.get("capture") or {}).get("verdict") or "fail" for r in results}
    return {"verdict": "fail" if "fail" in verdicts.values() else "pass", "devices": verdicts}


def _replay_phase(results: list[dict], found: list[dict], mode: str) -> dict:
    by_hazard: dict[str, int] = {}
    for hazard in found:
        by_hazard[hazard["hazard"]] = by_hazard.get(hazard["hazard"], 0) + 1
    phase: dict[str, Any] = {"hazards": len(found), "by_hazard": by_hazard}
    if mode == "cpu-emulation":
        replay = results[0].get("replay")
        failed = replay is None or bool(replay.get("error")) or bool(found) or bool((replay or {}).get("problems"))
        phase.update(verdict="fail" if failed else "pass", emulated=True)
        if replay is not None and replay.get("error"):
            phase["error"] = _with_line(replay["error"])
        elif replay is not None and replay.get("problems"):
            phase["error"] = "; ".join(replay["problems"])
        return phase
    verdicts = {r["device"]: (r.get("replay") or {}).get("verdict") or "fail" for r in results}
    if "fail" in verdicts.values() or found:
        verdict = "fail"
    elif all(v == "skipped" for v in verdicts.values()):
        verdict = "skipped"
    else:
        verdict = "pass"
    phase.update(verdict=verdict, devices=verdicts, emulated=False)
    return phase


def _bench_phase(results: list[dict], mode: str) -> dict:
    benches = [r.get("bench") for r in results]
    failed = any(b is None or b.get("error") for b in benches)
    phase = {"verdict": "fail" if failed else "pass", "replay": "n/a" if mode == "cpu-emulation" else "measured"}
    broken = [b["error"] for b in benches if b and isinstance(b.get("error"), dict)]
    if broken:
        phase["error"] = _with_line(broken[0])
    return phase
