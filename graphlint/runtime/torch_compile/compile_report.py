"""Turn what torch.compile said (compile_run.py) into the report's `runtime.compile` part.

Each graph break, recompile and CUDA-graph skip becomes a finding at the user's line with a fix;
every cause the eager path found is matched against them, or the reason torch said nothing is
given. No torch import here: this is plain data in, plain data out.
"""
from __future__ import annotations

import linecache
import os
import re
from typing import Any

# (text in torch's graph-break reason, what to do) — the first match wins.
GRAPH_BREAK_FIXES = (
    ("item()", "keep the value on the device (torch.where, a mask, clamp) or move the decision out of the "
               "step; capture_scalar_outputs=True only moves the read into the graph, where Inductor then "
               "skips CUDA graphs (incompatible op _local_scalar_dense)"),
    ("Dynamic shape operator", "use a fixed-shape form: torch.where(mask, x, 0), masked_fill, "
                               "nonzero_static(size=...), or pad to a fixed size"),
    ("Data-dependent branching", "branch on the device with torch.where or torch.cond, or decide outside the step"),
    ("tolist", "read results back after the step, into a pinned buffer"),
    ("builtin operator", "move host-side work (print, logging) out of the step"),
    ("synchronize", "remove the synchronisation from the step; order work with events and wait_stream"),
)
SKIP_FIXES = {
    "mutated-input": ("{tensor} is written by the step but is an ordinary input of the compiled graph "
                      "(it lives on a plain object, not an nn.Module), so Inductor runs this graph without "
                      "CUDA graphs. Register it with register_buffer on an nn.Module whose method is the step "
                      "(on an H200, torch 2.11, the same step then recorded a CUDA graph with no skip), or "
                      "return a fresh tensor and copy it into the buffer outside the compiled function; "
                      "torch._dynamo.mark_static_address({tensor}) did not remove this skip there"),
    "cpu-tensor": "a CPU tensor is used in the graph: create it on the device at build time, or do the host "
                  "work outside the compiled step",
    "multiple-devices": "keep the step on one device; move cross-device copies outside the compiled step",
    "dynamic-shape": "the graph has symbolic shapes: pad or bucket inputs to fixed sizes, and keep per-step "
                     "Python ints in device tensors",
    "incompatible-op": "replace the op with a fixed-shape, sync-free form (see the eager path's finding at this line)",
    "non-tensor-input": "pass tensors, not Python values, into the compiled step",
}
# Why torch.compile may name nothing where the eager path found a cause (by eager kind / hazard).
SILENT_BECAUSE = {
    "stale-input": "the compiled step reads the tensor the attribute holds at each call (a non-static input, "
                   "copied into the CUDA graph's own buffer on every replay), so the rebinding is not a hazard "
                   "under torch.compile; it still costs a copy per step, and a manual torch.cuda.graph replays "
                   "stale data",
    "other-device": "Inductor names work on another device only as a CUDA-graph skip (cpu device), which is "
                    "checked on CUDA only",
}
# Per-step Python values: dynamo guards a value where it first reads it, so one recompile (at
# another line) may stand for several eager findings, and none shows once the value is dynamic.
_HOST_VALUE_KINDS = ("frozen-scalar", "shape-varies", "control-flow")
_HOST_VALUE_WHY = ("no recompile names this line: dynamo guards a Python value where it first reads it, so a "
                   "recompile listed at another line may stand for it, and none shows once the value has become "
                   "dynamic or the recompile limit is reached (the frame then runs eagerly)")
_WRITE = re.compile(r"(?P<t>[A-Za-z_][\w.]*(?:\[[^\]]*\])?)\s*\.\s*(?:copy_|index_copy_|index_put_|scatter_|"
                    r"scatter_add_|fill_|zero_|add_|mul_|sub_|div_|masked_fill_|clamp_|\w+_)\(")
_ASSIGN = re.compile(r"(?P<t>[A-Za-z_][\w.]*)\s*\[[^\]]*\]\s*=(?!=)")


def _source_line(path: str, line: int) -> str:
    if not path or path == "?" or not line:
        return ""
    return linecache.getline(path if os.path.isabs(path) else os.path.abspath(path), line).strip()


def written_tensor(path: str, line: int) -> str | None:
    """The tensor a source line writes in place (`self.out.copy_(...)` -> `self.out`)."""
    text = _source_line(path, line).split("#")[0]
    m = _WRITE.search(text) or _ASSIGN.search(text)
    return m["t"] if m else None


def _graph_break_fix(gb: dict) -> str:
    text = f"{gb.get('reason', '')} {gb.get('explanation') or ''}"
    for needle, fix in GRAPH_BREAK_FIXES:
        if needle in text:
            return fix
    return gb.get("hint") or "see torch's explanation of this graph break"


def _values(values: list) -> str:
    shown = ", ".join(repr(v) for v in values[:8])
    return shown + (", ..." if len(values) > 8 else "")


def findings(result: dict) -> list[dict]:
    """One record per graph break, recompile and CUDA-graph skip, each at the user's line with a fix."""
    found: list[dict] = []
    for gb in result.get("graph_breaks", []):
        found.append({"kind": "graph-break", "path": gb["path"], "line": gb["line"],
                      "message": f"graph break: {gb['reason']}", "fix": _graph_break_fix(gb),
                      "detail": gb.get("explanation"), "gb": gb.get("gb")})
    seen = set()
    for rc in result.get("recompiles", []):
        key = (rc["path"], rc["line"], rc["guard"].split("==")[0].strip())
        if key in seen:
            continue
        seen.add(key)
        source, values = rc.get("source"), [v for v in rc.get("values") or [] if v is not None]
        if source and len(set(map(repr, values))) > 1:
            fix = (f"{source} is a Python value that changes per step ({_values(values)}): a new value fails "
                   "the guard and recompiles (then the value becomes a dynamic input); keep it in a device "
                   "tensor updated in place (pos.add_(1), copy_ from the host before the step) and index with it")
        elif "___stack" in rc["guard"]:
            fix = ("the guarded value is a Python number handed over from the code before a graph break "
                   "(an .item() or similar host read): every new value recompiles; keep the value on the device "
                   "and remove the host read")
        else:
            fix = ("a value read here differs between calls (per step, or per layer when layers share code): "
                   "keep per-step values in device tensors instead of Python values, and give layers that "
                   "differ in a Python attribute separate code or a tensor flag")
        found.append({"kind": "recompile", "path": rc["path"], "line": rc["line"],
                      "message": f"recompile: guard failed: {rc['guard']}", "fix": fix, "source": source,
                      "values": rc.get("values")})
    per_step = next((f for f in found if f["kind"] == "recompile" and f.get("values")
                     and len(set(map(repr, f["values"]))) > 1), None)
    for note in result.get("cudagraph_notes", []):
        if "distinct input size" in note or "distinct sizes" in note:
            # One CUDA graph per value of the per-step input: the recompile's value is why.
            where = {"path": per_step["path"], "line": per_step["line"]} if per_step else {"path": "?", "line": 0}
            found.append({"kind": "cudagraph-warning", **where, "message": note.split(". Please")[0],
                          "fix": "keep the per-step value in a device tensor so the graph's shapes and "
                                 "arguments do not change from step to step"})
    for skip in result.get("cudagraph_skips", []):
        tensor = written_tensor(skip["path"], skip["line"]) if skip["category"] == "mutated-input" else None
        template = SKIP_FIXES.get(skip["category"], "see torch's reason")
        record = {"kind": "cudagraph-skip", "path": skip["path"], "line": skip["line"],
                  "message": skip["message"], "category": skip["category"],
                  "fix": template.format(tensor=tensor or "the buffer written at this line")}
        if tensor:
            record["tensor"] = tensor
        found.append(record)
    return found


def _eager_causes(runtime: dict) -> list[dict]:
    causes = [{"source": "sync", "kind": e.get("kind"), "op": e.get("op"), "path": e.get("path"),
               "line": e.get("line")} for e in runtime.get("sync_events", [])]
    causes += [{"source": "replay", "kind": h.get("hazard"), "op": h.get("op"), "path": h.get("path"),
                "line": h.get("line")} for h in (runtime.get("replay") or {}).get("hazards", [])]
    return causes


def cross_check(runtime: dict, found: list[dict], cudagraphs_checked: bool, on_cpu: bool = False,
                result_error: dict | None = None) -> list[dict]:
    """Every cause of the eager path, with the compile findings that name it or why none does."""
    rows = []
    for cause in _eager_causes(runtime):
        at = [f for f in found if (f["path"], f["line"]) == (cause["path"], cause["line"])]
        if not at and cause["kind"] == "other-device":  # a host-only graph's skip names no line
            at = [f for f in found if f.get("category") == "cpu-tensor" and f["line"] == 0]
        if not at:  # a recompile names the value; the eager path may name another line that reads it
            text = _source_line(cause["path"], cause["line"])
            at = [f for f in found if f["kind"] == "recompile" and f.get("source")
                  and re.search(re.escape(f["source"]) + r"\b", text)]
        row = {**cause, "named_by": sorted({f["kind"] for f in at})}
        if not at:
            why = SILENT_BECAUSE.get(cause["kind"])
            if why is None and cause["kind"] in _HOST_VALUE_KINDS and any(f["kind"] == "recompile" for f in found):
                why = _HOST_VALUE_WHY
            error = result_error
            if why is None and error and error.get("step") is not None:
                why = (f"the compiled step raised at step {error['step']} ({str(error.get('error'))[:120]}), "
                       "so torch.compile did not report past it")
            if cause["kind"] == "other-device" and cudagraphs_checked:
                why = None
            if cause["kind"] == "sync" and on_cpu:
                why = ("on a machine without CUDA the synchronize call does nothing (as in the CPU emulation), "
                       "so the compiled path cannot see it; run --compile on CUDA")
            row["why_not"] = why or "torch.compile reported nothing at this line; graphlint's eager path did"
        rows.append(row)
    return rows


def status_line(result: dict) -> str:
    """The CUDA-graph status of the compiled step, in words."""
    if not result.get("cudagraphs_checked"):
        if result.get("device", "cpu").startswith("cpu"):
            return "not checked (no CUDA: graph breaks and recompiles are device-independent)"
        return f"not checked (backend {result.get('backend')}: only Inductor's reduce-overhead uses CUDA graphs)"
    skips = result.get("cudagraph_skips", [])
    recorded = result.get("cudagraphs_recorded")
    if skips:
        return f"skipped ({len(skips)} graph(s) fell back: {skips[0]['reason'][:80]})"
    if recorded:
        return f"captured ({recorded} CUDA graph(s) recorded)"
    return "no CUDA graph recorded" if recorded == 0 else "captured (no skip reported; recorded count unknown)"


def build(runtime: dict, result: dict) -> dict:
    """The `runtime.compile` dict: the raw result plus findings, cross-check, status and verdict."""
    if result.get("error") and "graph_breaks" not in result:
        return {**result, "verdict": "fail", "findings": [], "cross_check": []}
    found = findings(result)
    outputs = result.get("outputs") or {}
    checked = bool(result.get("cudagraphs_checked"))
    part = {**result, "findings": found, "cross_check": cross_check(runtime, found, checked, str(result.get("device", "cpu")).startswith("cpu"),
                                       result.get("error")),
            "cudagraphs": status_line(result)}
    failed = bool(found) or not outputs.get("match", False) or bool(result.get("error"))
    part["verdict"] = "fail" if failed else "pass"
    return part


def attach(runtime: dict, part: dict) -> dict:
    """Put the compile part into the runtime dict, as a phase with a verdict of its own."""
    runtime["compile"] = part
    phase: dict[str, Any] = {"verdict": part["verdict"], "findings": len(part.get("findings", [])),
                             "cudagraphs": part.get("cudagraphs")}
    if part.get("error"):
        err = part["error"]
        step = f" step {err['step']}" if err.get("step") is not None else ""
        phase["error"] = f"{err.get('phase', 'compiled')}{step}: {err.get('error')}"
    runtime.setdefault("phases", {})["compile"] = phase
    if part["verdict"] == "fail" and runtime.get("verdict") == "pass":
        runtime["verdict"] = "fail"
    return runtime


def run_phase(runtime: dict, backend: str = "inductor", steps: int | None = None, atol: float = 0.0,
              rtol: float = 0.0, bench: bool = True, quiet: bool = False) -> dict:
    """Compile the runtime dict's target on its first device and attach the result (`--compile`).

    A failure inside the compile run is recorded in the part (verdict "fail"), never raised. Progress
    lines go to stderr (unless `quiet` or stderr is captured); the compile phase's wall time is
    added to `runtime["duration_s"]`, so the verdict line gives the whole command's time.
    """
    import time

    from graphlint.runtime.torch_compile import compile_run

    target = runtime.get("target") or {}
    device = "cpu" if runtime.get("mode") == "cpu-emulation" else (runtime.get("devices") or ["cpu"])[0]
    spec = {"target": target.get("spec"), "options": target.get("options") or {}, "device": device,
            "steps": steps, "backend": backend, "atol": atol, "rtol": rtol, "bench": bench}
    started = time.perf_counter()
    with _progress(f"torch.compile ({backend}) of {target.get('spec')} on {device}", quiet):
        try:
            result = compile_run.run(spec)
        except Exception as exc:  # a torch internal error must not lose the eager half of the report
            result = {"device": device, "backend": backend,
                      "error": {"phase": "compile", "step": None, "error": f"{type(exc).__name__}: {exc}"[:2000]}}
    elapsed = time.perf_counter() - started
    result["duration_s"] = round(elapsed, 3)
    if runtime.get("duration_s") is not None:
        runtime["duration_s"] = round(runtime["duration_s"] + elapsed, 3)
    return attach(runtime, build(runtime, result))



def _progress(what: str, quiet: bool):
    """Plain stderr lines for the compile phase: what runs, a line every heartbeat, the end."""
    import contextlib
    import sys
    import time

    from graphlint.io.terminal import heartbeat, real_stderr

    @contextlib.contextmanager
    def lines():
        if quiet or not real_stderr():
            yield
            return
        print(f"graphlint runtime: compile phase: {what} (compiling takes a while) ...", file=sys.stderr, flush=True)
        with heartbeat(lambda elapsed: f"graphlint runtime: compile phase still running ({elapsed:.0f} s)") as started:
            yield
        print(f"graphlint runtime: compile phase done in {time.monotonic() - started:.1f} s", file=sys.stderr,
              flush=True)

    return lines()
