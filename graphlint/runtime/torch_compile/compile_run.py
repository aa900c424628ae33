"""Run a target's step through `torch.compile(step, mode="reduce-overhead")` and record what torch said.

Everything here that depends on torch internals lives in this one module: the structured trace
records (`dynamo_graph_break_reason`, `recompile_reasons`), the `cudagraphs` artifact log of
`torch._inductor.cudagraph_utils.log_cudagraph_skip_and_bump_counter`, `torch._dynamo.utils.counters`
and the CUDA-graph tree manager. Read in torch 2.13.0 (CPU) and run on torch 2.11 (CUDA).
"""
from __future__ import annotations

import json
import logging
import re
import statistics
import time
from contextlib import contextmanager, nullcontext
from typing import Any

import torch

from graphlint.runtime import user_frames as sources
from graphlint.runtime.torch_compile import selection_ties
from graphlint.runtime.targets import loader as targets
from graphlint.runtime.tracing.intercept import Interceptor, tensors_of

DEFAULT_STEPS = 10  # warm-up, record, then replays of the CUDA-graph tree
BENCH_STEPS = {"cpu": 5, "cuda": 50}
# dynamo and Inductor loggers: the structured trace and the CUDA-graph skip artifact.
TRACE_LOGGER = "torch.__trace"
CUDAGRAPH_LOGGER = "torch._inductor.cudagraph_utils.__cudagraphs"
# The CUDA-graph tree manager's own warnings (re-record limits, dynamic-shape graph counts).
CUDAGRAPH_TREES_LOGGER = "torch._inductor.cudagraph_trees.__cudagraphs"

_FRAME = re.compile(r'File "(?P<path>[^"]+)", line (?P<line>\d+), in (?P<function>\S+)')
_GB_AT = re.compile(r"Graph break in user code at (?P<path>.+?):(?P<line>\d+)\s*$", re.M)
_GB_LINK = re.compile(r"https://\S+/(gb\d+)\.html")
_GUARD = re.compile(r"^\s*(?:\d+/\d+:\s*)?(?P<guard>[^#\n]+?)\s*(?:#|$)", re.M)
_GUARD_SITE = re.compile(r"#\s*(?P<path>[^#\s]+):(?P<line>\d+) in (?P<function>\S+)\s*$", re.M)
_SOURCE = re.compile(r"(?:L\['self'\]|\bself)((?:\.[A-Za-z_]\w*|\[\d+\])+)")
_SKIP_REASON = re.compile(r"(?:skipping|disabling) cudagraphs? (?:due to|for) (?P<reason>.*?)(?:\. Found from :|$)", re.S)
# The same logger also warns (e.g. "CUDAGraph supports dynamic shapes by recording a new graph for
# each distinct input size ..."): only these two openings are skips.
_IS_SKIP = re.compile(r"\s*(?:skipping|disabling) cudagraph")


# --------------------------------------------------------------------------- torch's reports
class CompileLog(logging.Handler):
    """Collects dynamo's structured trace records and Inductor's CUDA-graph skip messages."""

    def __init__(self):
        super().__init__(logging.DEBUG)
        self.graph_breaks: list[str] = []
        self.recompiles: list[str] = []
        self.skips: list[str] = []
        self.notes: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        metadata = getattr(record, "metadata", None)
        if metadata is None:
            message = record.getMessage()
            if record.name == CUDAGRAPH_LOGGER and _IS_SKIP.match(message):
                self.skips.append(message)
            elif record.levelno >= logging.WARNING and len(self.notes) < 20:
                self.notes.append(message[:500])
            return
        name = (metadata.get("artifact") or {}).get("name")
        payload = getattr(record, "payload", None) or ""
        if name == "dynamo_graph_break_reason":
            self.graph_breaks.append(payload)
        elif name == "recompile_reasons":
            try:
                reasons = json.loads(payload)
            except ValueError:
                reasons = payload
            self.recompiles.extend(reasons if isinstance(reasons, list) else [reasons])


@contextmanager
def listening():
    """Attach a CompileLog to the trace and CUDA-graph loggers for the duration; restore them after.

    The trace logger only formats records when it has a handler (`trace_structured`), and the
    CUDA-graph artifact logger does not propagate by default, so both get our handler directly and
    nothing reaches the user's stderr.
    """
    import torch._inductor.cudagraph_trees  # noqa: F401  (creates the artifact loggers)
    import torch._inductor.cudagraph_utils  # noqa: F401

    log = CompileLog()
    saved = []
    for name in (TRACE_LOGGER, CUDAGRAPH_LOGGER):
        logger = logging.getLogger(name)
        saved.append((logger, logger.level))
        logger.addHandler(log)
        logger.setLevel(logging.DEBUG)
    trees = logging.getLogger(CUDAGRAPH_TREES_LOGGER)
    trees.addHandler(log)  # its warnings only: the level stays as torch set it
    try:
        yield log
    finally:
        trees.removeHandler(log)
        for logger, level in saved:
            logger.removeHandler(log)
            logger.setLevel(level)


def _user_frames(text: str) -> list[dict]:
    frames = []
    for m in _FRAME.finditer(text):
        if sources._classify(m["path"]) == "user":
            frames.append({"path": sources.relative_path(m["path"]), "line": int(m["line"]),
                           "function": m["function"]})
    return frames


def parse_graph_break(payload: str) -> dict:
    """A `dynamo_graph_break_reason` payload -> {path, line, reason, explanation, hint, gb}."""
    at = _GB_AT.search(payload)
    frames = _user_frames(payload.split("Traceback (most recent call last)")[0])
    if at:
        where = {"path": sources.relative_path(at["path"]), "line": int(at["line"])}
    elif frames:
        where = {"path": frames[-1]["path"], "line": frames[-1]["line"]}
    else:
        where = {"path": "?", "line": 0}
    body = payload.split("Graph Break Reason:", 1)[-1].split("User code traceback:", 1)[0]
    lines = [line.strip() for line in body.splitlines() if line.strip()]
    title = next((line for line in lines if not line.startswith("Encountered graph break")), "")
    if "cannot properly resume" in payload:  # the whole frame falls back to eager
        last = [line for line in payload.strip().splitlines() if line.strip()]
        title = "the frame is skipped (falls back to eager): " + (last[-1].strip() if last else "")
    field = {k: next((line.split(":", 1)[1].strip() for line in lines if line.startswith(k + ":")), None)
             for k in ("Explanation", "Hint")}
    link = _GB_LINK.search(payload)
    return {**where, "reason": title, "explanation": field["Explanation"], "hint": field["Hint"],
            "gb": link.group(1) if link else None, "stack": frames[-4:]}


def parse_recompile(reason: str) -> dict:
    """A `recompile_reasons` entry -> {guard, source, path, line}: the guard that failed and where
    dynamo installed it (the user's line that read the value)."""
    guard = _GUARD.search(reason)
    site = _GUARD_SITE.search(reason)
    frames = _user_frames(reason)
    if frames:
        where = {"path": frames[-1]["path"], "line": frames[-1]["line"], "function": frames[-1]["function"]}
    elif site:
        where = {"path": site["path"], "line": int(site["line"]), "function": site["function"]}
    else:
        where = {"path": "?", "line": 0, "function": "?"}
    text = guard["guard"].strip() if guard else reason.strip().splitlines()[0]
    source = _SOURCE.search(text)
    return {"guard": text, "source": ("self" + source.group(1)) if source else None, **where}


def parse_skip(message: str) -> dict:
    """A CUDA-graph skip message -> {reason, category, path, line, tensor}."""
    m = _SKIP_REASON.search(message)
    reason = (m["reason"] if m else message).strip()
    frames = _user_frames(message)
    where = frames[-1] if frames else {"path": "?", "line": 0, "function": "?"}
    return {"message": message.split(". Found from")[0].strip(), "reason": reason,
            "category": skip_category(reason), **where}


def skip_category(reason: str) -> str:
    """Inductor's skip reasons (cudagraph_utils.py, output_code.py, compile_fx.py in 2.13) -> a kind."""
    table = (("mutated inputs", "mutated-input"), ("input storage mutation", "mutated-input"),
             ("cpu device", "cpu-tensor"), ("multiple devices", "multiple-devices"),
             ("incompatible op", "incompatible-op"), ("symbolic shape", "dynamic-shape"),
             ("dynamic shape", "dynamic-shape"), ("non-Tensor inputs", "non-tensor-input"),
             ("re-recording", "re-record"), ("caching allocator", "allocator"))
    return next((kind for text, kind in table if text in reason), "other")


def counters_snapshot() -> dict:
    from torch._dynamo.utils import counters

    return {
        "graphs": counters["stats"]["unique_graphs"],
        "frames": counters["frames"]["total"],
        "graph_breaks": sum(counters["graph_break"].values()),
        "cudagraph_skips": counters["inductor"]["cudagraph_skips"],
    }


def recorded_cudagraphs(device: torch.device) -> int | None:
    """CUDA graphs recorded by Inductor's tree manager on `device` (None when it cannot be read)."""
    if device.type != "cuda":
        return None
    try:
        from torch._inductor import cudagraph_trees

        manager = cudagraph_trees.get_manager(device.index or 0, create_if_none_exists=False)
        if manager is None:
            return 0
        count, todo = 0, [n for nodes in manager.roots.values() for n in nodes]
        while todo:
            node = todo.pop()
            count += 1
            todo.extend(n for nodes in node.children.values() for n in nodes)
        return count
    except Exception:  # an internal that moved: report unknown, never guess
        return None


# --------------------------------------------------------------------------- the run
def _scalars(obj: Any, prefix: str = "self", depth: int = 2, out: dict | None = None) -> dict:
    """Python scalars reachable from the target's attributes, by source (`self.pos`): the values a
    recompile guard may name, snapshotted before each step."""
    out = {} if out is None else out
    try:
        items = list(vars(obj).items())
    except TypeError:
        return out
    for name, value in items:
        source = f"{prefix}.{name}"
        if isinstance(value, (bool, int, float, str)) and len(out) < 400:
            out[source] = value
        elif depth > 1 and not isinstance(value, (torch.Tensor, torch.nn.Module, type)) and hasattr(value, "__dict__"):
            _scalars(value, source, depth - 1, out)
    return out


def static_tensors(obj: Any, depth: int = 8, seen: set | None = None) -> list[torch.Tensor]:
    """Every tensor held by the target's attributes (objects, lists, dicts), each once: tells
    whether the step computes in half precision."""
    seen = set() if seen is None else seen
    found: list[torch.Tensor] = []
    if id(obj) in seen or depth < 0:
        return found
    seen.add(id(obj))
    if isinstance(obj, torch.Tensor):
        return [obj]
    if isinstance(obj, (list, tuple)):
        values = list(obj)
    elif isinstance(obj, dict):
        values = list(obj.values())
    elif isinstance(obj, torch.nn.Module):
        values = list(obj.parameters()) + list(obj.buffers())
    elif hasattr(obj, "__dict__") and not isinstance(obj, type):
        values = list(vars(obj).values())
    else:
        return found
    for value in values:
        found.extend(static_tensors(value, depth - 1, seen))
    return found


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _clone(out) -> list[torch.Tensor]:
    return [t.detach().clone() for t in tensors_of(out)]


# The tolerance when none is given (--atol/--rtol), per output: the difference between two
# computations of the same step, each within the rounding of its compute dtype, is at most twice
# that rounding. With a half-precision step (any bf16/fp16 tensor on the target), Inductor keeps
# fused intermediates in float32 while eager rounds after every op: on the bundled DSV4 step
# (bf16, CPU) eager differed from a float32 eager run by 1.3 eps(bf16) x max|output| and Inductor by
# 1.1, while aot_eager was bit-exact with eager. So: atol = ULPS x eps(compute dtype) x max|eager
# output| (at least 1e-5), rtol 1.6e-2 for half precision and 1e-4 for float32; integers exact.
TOLERANCE_ULPS = 3


def _tolerance(dtype: torch.dtype, atol: float, rtol: float, half: bool, scale: float = 1.0) -> tuple[float, float]:
    if atol or rtol:
        return atol, rtol
    if not dtype.is_floating_point:
        return 0.0, 0.0
    half = half or dtype in (torch.float16, torch.bfloat16)
    compute = torch.bfloat16 if half else dtype
    eps = torch.finfo(compute).eps
    return max(1e-5, TOLERANCE_ULPS * eps * scale), (1.6e-2 if half else 1e-4)


def _scales(eager: list[list[torch.Tensor]]) -> dict[int, float]:
    """max |eager| per output index over all steps (the scale of each output's rounding)."""
    scales: dict[int, float] = {}
    for outs in eager:
        for n, a in enumerate(outs):
            if a.is_floating_point() and a.numel() and a.device.type != "meta":
                scales[n] = max(scales.get(n, 0.0), float(a.double().abs().max()))
    return scales


def _near_tie(want: list[torch.Tensor], got: list[torch.Tensor], a: torch.Tensor, b: torch.Tensor,
              tolerance: dict[int, tuple[float, float]]) -> bool:
    """Integer outputs that differ only where they index a float output of the same step whose
    eager values at both indices are within that output's tolerance (a flipped argmax)."""
    if a.dim() == 0 or a.shape != b.shape:
        return False
    for n, logits in enumerate(want):
        if not logits.is_floating_point() or logits.shape[:-1] != a.shape or n >= len(got):
            continue
        if got[n].shape != logits.shape or int(torch.maximum(a, b).max()) >= logits.shape[-1] or int(torch.minimum(a, b).min()) < 0:
            continue
        t_atol, t_rtol = tolerance.get(n, (0.0, 0.0))
        picked = logits.gather(-1, a.unsqueeze(-1)).squeeze(-1).double()
        other = logits.gather(-1, b.unsqueeze(-1)).squeeze(-1).double()
        return bool(((picked - other).abs() <= t_atol + t_rtol * picked.abs()).all())
    return False


def _output_ok(n: int, want: list[torch.Tensor], got: list[torch.Tensor], tolerance: dict, default: bool) -> bool:
    """Output n of one step within its tolerance (floats), equal or a flipped near-tie argmax (integers)."""
    a, b = want[n], got[n].to(want[n].device)
    if a.shape != b.shape:
        return False
    if a.is_floating_point():
        return torch.allclose(a, b, atol=tolerance[n][0], rtol=tolerance[n][1], equal_nan=True)
    return torch.equal(a, b) or (default and _near_tie(want, [g.to(a.device) for g in got], a, b, tolerance))


def compare(eager: list[list[torch.Tensor]], compiled: list[list[torch.Tensor]], atol: float, rtol: float,
            half: bool = False, alternatives: dict[int, list[tuple[dict, list[torch.Tensor]]]] | None = None) -> dict:
    """Compiled vs eager outputs step by step: per output the largest difference, the largest eager
    magnitude, the steps that differ; overall the first mismatch. An integer output that differs
    only by a flipped argmax of a float output (a near tie within its tolerance) is counted, not failed.
    So is a step that matches, instead, the eager step rerun with one of its near-tie choices flipped
    (`alternatives`: per step, the choice and those outputs): listed in `choice_flips` with its line."""
    first_bad, compared, failing = None, 0, set()
    flips: dict[int, dict] = {}
    per_output: dict[int, dict] = {}
    scales = _scales(eager)
    default = not (atol or rtol)
    for step, (want, got) in enumerate(zip(eager, compiled)):
        if len(want) != len(got):
            first_bad = first_bad or {"step": step, "output": None, "detail": f"{len(got)} outputs, eager gave {len(want)}"}
            continue
        tolerance = {n: _tolerance(a.dtype, atol, rtol, half, scales.get(n, 1.0)) for n, a in enumerate(want)}
        alike = next((tie for tie, outs in (alternatives or {}).get(step, []) if len(outs) == len(got) and
                      all(_output_ok(n, outs, got, tolerance, default) for n in range(len(got)))), None)
        for n, (a, b) in enumerate(zip(want, got)):
            if a.shape != b.shape:
                first_bad = first_bad or {"step": step, "output": n, "detail": f"shape {list(b.shape)} vs eager {list(a.shape)}"}
                continue
            if a.device.type == "meta" or b.device.type == "meta":
                continue  # no data to compare (a step that runs on the meta device)
            t_atol, t_rtol = tolerance[n]
            row = per_output.setdefault(n, {"output": n, "dtype": str(a.dtype).replace("torch.", ""),
                                            "atol": t_atol, "rtol": t_rtol, "max_abs_diff": 0.0,
                                            "max_abs_eager": 0.0, "steps_differing": 0})
            b = b.to(a.device)
            compared += 1
            ok = _output_ok(n, want, got, tolerance, default)
            if a.numel() and (a.is_floating_point() or not torch.equal(a, b)):
                row["max_abs_diff"] = max(row["max_abs_diff"], float((a.double() - b.double()).abs().max()))
            if a.is_floating_point() and a.numel():
                row["max_abs_eager"] = max(row["max_abs_eager"], float(a.double().abs().max()))
            elif ok and not torch.equal(a, b):
                row["near_ties"] = row.get("near_ties", 0) + 1
            if not ok:
                failing.add(step)
            if not ok and alike is not None:
                row["choice_flips"] = row.get("choice_flips", 0) + 1
                flips.setdefault(step, {"step": step, **alike, "outputs": []})["outputs"].append(n)
                ok = True
            if not ok:
                row["steps_differing"] += 1
                if first_bad is None:
                    first_bad = {"step": step, "output": n, "detail": f"output {n} differs from eager at step {step}"}
    rows = [per_output[k] for k in sorted(per_output)]
    first_tol = {"atol": rows[0]["atol"], "rtol": rows[0]["rtol"]} if rows else None
    return {"match": first_bad is None, "steps": min(len(eager), len(compiled)),
            "max_abs_diff": max((r["max_abs_diff"] for r in rows), default=0.0), "tolerance": first_tol,
            "rule": "given --atol/--rtol" if (atol or rtol) else
                    f"atol {TOLERANCE_ULPS} eps(compute dtype) x max|eager output|, rtol 1.6e-2 half / 1e-4 float32",
            "compared": compared, "per_output": rows, "first_mismatch": first_bad,
            "choice_flips": [flips[k] for k in sorted(flips)], "failing_steps": sorted(failing)}


# Steps that differ from eager and had near-tie choices: each is rerun eagerly with each of its
# nearest choices flipped (from reset: the steps before it are replayed), at most this many.
FLIP_STEPS, FLIPS_PER_STEP = 8, 3


def _flipped_runs(target: Any, step: int, ties: list[dict], half: bool) -> list[tuple[dict, list[torch.Tensor]]]:
    """The eager outputs of `step`, from the state the steps before it leave, once per near-tie choice
    of that step with that choice flipped to its runner-up."""
    runs = []
    for tie in ties[:FLIPS_PER_STEP]:
        target.reset()
        for i in range(step):
            target.prepare(i)
            target.step()
        target.prepare(step)
        flip = selection_ties.SelectionTies(half, TOLERANCE_ULPS, flip=tie)
        flip.next_step()
        with flip:
            outs = _clone(target.step())
        runs.append(({k: tie[k] for k in ("op", "margin", "path", "line", "function")}, outs))
    return runs


def _compare_like_with_like(target: Any, eager: list, compiled: list, ties: list[list[dict]], atol: float,
                            rtol: float, half: bool) -> dict:
    """compare(); then the steps that differ after a near-tie choice are compared with eager reruns
    that chose the other way (with the default tolerance only)."""
    outputs = compare(eager, compiled, atol, rtol, half)
    retry = [s for s in outputs["failing_steps"] if s < len(ties) and ties[s]][:FLIP_STEPS]
    if outputs["match"] or atol or rtol or not retry:
        return outputs
    alternatives = {s: _flipped_runs(target, s, ties[s], half) for s in retry}
    return compare(eager, compiled, atol, rtol, half, alternatives)


def _timed_steps(target: Any, fn, steps: int, device: torch.device, mark_step: bool) -> list[float]:
    times = []
    target.reset()
    for i in range(steps):
        target.prepare(i)
        _sync(device)
        started = time.perf_counter()
        if mark_step:
            torch.compiler.cudagraph_mark_step_begin()
        fn()
        _sync(device)
        times.append((time.perf_counter() - started) * 1e3)
    return times


def _run_compiled(target: Any, step_fn, steps: int, device: torch.device, backend: str) -> dict:
    """One fresh compile of the step over `steps` steps; what torch said and the outputs."""
    import torch._dynamo
    from torch._dynamo.utils import counters

    torch._dynamo.reset()
    counters.clear()
    kwargs = {"mode": "reduce-overhead"} if backend == "inductor" else {"backend": backend}
    compiled = torch.compile(step_fn, **kwargs)
    outputs, values, error = [], [], None
    cudagraph_step = device.type == "cuda" and backend == "inductor"
    started = time.perf_counter()
    with listening() as log:
        target.reset()
        for i in range(steps):
            target.prepare(i)
            values.append(_scalars(target))
            try:
                if cudagraph_step:
                    torch.compiler.cudagraph_mark_step_begin()
                outputs.append(_clone(compiled()))
            except Exception as exc:
                error = {"step": i, "error": f"{type(exc).__name__}: {exc}".strip()[:2000],
                         "stack": sources.traceback_stack(exc.__traceback__)}
                break
        _sync(device)
    return {"compiled": compiled, "step_fn": step_fn, "log": log, "outputs": outputs, "values": values, "error": error,
            "counters": counters_snapshot(), "cudagraphs_recorded": recorded_cudagraphs(device),
            "seconds": time.perf_counter() - started}


def _summarise(run: dict, device: torch.device, backend: str) -> dict:
    log: CompileLog = run["log"]
    breaks, seen = [], set()
    for payload in log.graph_breaks:
        gb = parse_graph_break(payload)
        key = (gb["path"], gb["line"], gb["reason"])
        if key not in seen:
            seen.add(key)
            breaks.append(gb)
    recompiles = []
    step_code = getattr(run["step_fn"], "__code__", None)
    for reason in log.recompiles:
        rc = parse_recompile(reason)
        # `self` in a guard is the compiled frame's: the target only when the frame is step() itself.
        in_step = step_code is not None and rc["function"] == step_code.co_name and \
            rc["path"] == sources.relative_path(step_code.co_filename)
        if rc["source"] and in_step:
            rc["values"] = [v.get(rc["source"]) for v in run["values"]]
        recompiles.append(rc)
    skips_checked = device.type == "cuda" and backend == "inductor"
    skips: list[dict] = []
    for message in log.skips if skips_checked else []:
        skip = parse_skip(message)
        if all((skip["message"], skip["line"]) != (s["message"], s["line"]) for s in skips):
            skips.append(skip)
    silent = run["counters"]["cudagraph_skips"] - len(log.skips)  # every logged skip bumps it once
    if skips_checked and silent > 0:
        # output_code.py bumps the counter without a message for a graph with no CUDA op at all.
        skips.append({"message": f"{silent} graph(s) skipped CUDA graphs without a message: no CUDA op in them "
                                 "(the work runs on host tensors)", "reason": "no CUDA op in the graph",
                      "category": "cpu-tensor", "path": "?", "line": 0, "function": "?"})
    return {"graph_breaks": breaks, "recompiles": recompiles, "cudagraph_skips": skips,
            "cudagraphs_checked": skips_checked, "counters": run["counters"], "cudagraph_notes": log.notes,
            "cudagraphs_recorded": run["cudagraphs_recorded"], "error": run["error"]}


def run(spec: dict) -> dict:
    """Compile the target's step on `spec["device"]` and run it `spec["steps"]` times with new inputs.

    Returns the raw result: graph breaks, recompiles (with the per-step values of the guarded
    source), CUDA-graph skips (CUDA with the inductor backend only), the comparison with eager and
    the eager vs compiled time. Raises targets.TargetError when the target cannot be built.
    On the CPU it runs on one intra-op thread, as the emulation's bench does (extra threads only
    contend on a busy machine), so the eager figures of both are one measurement.
    """
    threads = torch.get_num_threads()
    if torch.device(spec["device"]).type == "cpu":
        torch.set_num_threads(1)
    try:
        return _run(spec)
    finally:
        torch.set_num_threads(threads)


def _run(spec: dict) -> dict:
    device = torch.device(spec["device"])
    backend = spec.get("backend") or "inductor"
    factory = targets.load_factory(spec["target"])
    target = targets.build(factory, device, spec["options"])
    steps = targets.effective_steps(spec.get("steps"), DEFAULT_STEPS, target)
    atol, rtol = spec.get("atol", 0.0), spec.get("rtol", 0.0)
    # A CPU build has no CUDA to wait for: synchronize calls are no-ops, as in the CPU emulation.
    patched = Interceptor(device, emulate=True).patched_sync_calls() if device.type == "cpu" else nullcontext()
    result: dict[str, Any] = {"device": str(device), "backend": backend, "steps": steps,
                              "mode": "reduce-overhead" if backend == "inductor" else f"backend={backend}"}
    with patched, torch.no_grad():
        eager, error = [], None
        half = any(t.dtype in (torch.float16, torch.bfloat16) for t in static_tensors(target))
        ties = selection_ties.SelectionTies(half, TOLERANCE_ULPS)  # the eager step's near-tie choices
        target.reset()
        for i in range(steps):
            target.prepare(i)
            ties.next_step()
            try:
                with ties:
                    eager.append(_clone(target.step()))
            except Exception as exc:
                error = {"step": i, "error": f"{type(exc).__name__}: {exc}"[:2000],
                         "stack": sources.traceback_stack(exc.__traceback__)}
                break
        if error:
            result["error"] = {"phase": "eager", **error}
            return result
        first = _run_compiled(target, target.step, steps, device, backend)
        result.update(_summarise(first, device, backend))
        result["compile_s"] = round(first["seconds"], 3)
        result["outputs"] = _compare_like_with_like(target, eager, first["outputs"], ties.steps, atol, rtol, half)
        fn = first["compiled"]
        if spec.get("bench", True) and not result.get("error"):
            n = min(BENCH_STEPS["cuda" if device.type == "cuda" else "cpu"], getattr(target, "max_steps", 10**9) or 10**9)
            eager_ms = _timed_steps(target, target.step, n, device, mark_step=False)
            compiled_ms = _timed_steps(target, fn, n, device, mark_step=device.type == "cuda" and backend == "inductor")
            e, c = statistics.median(eager_ms), statistics.median(compiled_ms)
            # Both timed back to back in this process, with its intra-op threads (the bench phase's
            # eager figure comes from the emulation's worker on one thread: a different measurement).
            result["bench"] = {"eager_ms": round(e, 4), "compiled_ms": round(c, 4),
                               "measured": f"eager and compiled back to back, {torch.get_num_threads()} "
                                           "intra-op thread(s)",
                               "speedup": round(e / c, 3) if c else None, "samples": n}
    torch._dynamo.reset()
    return result
