"""GL505 and GL510: what the code around a replay and a capture does (a device-wide synchronize
between replays, a capture without a warm-up). Orchestration rules: they hold in host code."""
from __future__ import annotations

import libcst as cst

from graphlint.analysis.names import dotted
from graphlint.analysis.rule import Context, Rule
from ._orchestration import SYNCHRONIZE, graph_call, orchestration, walk

_HOST_FUNCS = frozenset({"len", "isinstance", "type", "id", "print", "str", "repr", "hasattr", "getattr"})


class SynchronizeAroundReplay(Rule):
    """Flags a device-wide `torch.cuda.synchronize()` in code that replays graphs.

    Only around a replay: a synchronize in one-time set-up (after capturing, before timing)
    costs nothing per step and is not reported.

    ## Why it breaks a CUDA graph
    `torch.cuda.synchronize()` blocks the host until every stream of the current device (or
    of the device it is given) has drained. Between a graph and an eager part (the reference
    port's Graph A -> eager attention -> Graph B) that stall erases the launch-overhead gain the
    graph was for. Inside the captured step itself GL106 reports the same call; this rule
    covers the orchestration code around the step (host and unreached functions).

    ## Example
        graph_a.replay()
        torch.cuda.synchronize()
        attention()

    ## Use instead
    Order the streams with events: `ev.record(graph_stream)`;
    `torch.cuda.current_stream().wait_event(ev)` (or `wait_stream`), no host wait.
    """

    code = "GL505"
    name = "synchronize-around-replay"
    severity = "warning"
    message = "device-wide synchronize around a graph replay: the host waits for every stream of the current device"
    fix = "order graph and eager streams with events: ev.record(s); torch.cuda.current_stream().wait_event(ev)"
    applies_in_host_code = True
    host_code_only = True
    VALID = [
        "def run(g, s, ev, attention):  # graphlint: host\n    with torch.cuda.stream(s):\n        g.replay()\n"
        "    ev.record(s)\n    torch.cuda.current_stream().wait_event(ev)\n    attention()\n",
        "def bench(fn):  # graphlint: host\n    torch.cuda.synchronize()\n    fn()\n",
        # One-time set-up after each capture (nano-vllm's capture_cudagraph).
        "def capture_all(self, sizes):  # graphlint: host\n    for bs in sizes:\n        graph = torch.cuda.CUDAGraph()\n"
        "        self.model(self.x[:bs])\n        with torch.cuda.graph(graph, self.pool):\n"
        "            self.out[:bs] = self.model(self.x[:bs])\n        torch.cuda.synchronize()\n",
    ]
    INVALID = [
        "def run(graph_a, s, attention):  # graphlint: host\n    with torch.cuda.stream(s):\n        graph_a.replay()\n"
        "    torch.cuda.synchronize()\n    attention()\n",
    ]

    def visit_Call(self, node: cst.Call, ctx: Context) -> None:
        if ctx.qualified(node.func) in SYNCHRONIZE and ctx.zone != "capture-block":
            facts = orchestration(ctx)
            if facts is not None and facts.replays:
                ctx.report(self, node)


class CaptureWithoutWarmup(Rule):
    """Flags a `torch.cuda.graph(...)` capture with no warm-up run of the step before it.

    The callables called inside the block must have been called earlier in the same function
    (a warm-up call or loop), or a function whose name contains `warm`; a caller that runs
    the warm-up before calling the capture function (`self.warmup_model();
    self.capture_cudagraph()`, or the captured callee itself) counts too.

    ## Why it breaks a CUDA graph
    The first run of a step initialises what must not happen during capture: cuBLAS and
    cuDNN handles, autotuning, lazy module state, caching-allocator growth (cudaMalloc is
    forbidden inside a capture). Capturing a cold step fails, or records the one-time work.

    ## Example
        with torch.cuda.graph(g, stream=s):
            model.step()

    ## Use instead
    Run the step a few times on the capture stream first, then reset the state and capture:
        with torch.cuda.stream(s):
            for _ in range(3):
                model.step()
        with torch.cuda.graph(g, stream=s):
            model.step()

    ## Known problems
    A warm-up two calls up, or in a caller that reaches the capture function through a value
    the call graph cannot resolve, is not seen: suppress the finding with the reason.
    """

    code = "GL510"
    name = "capture-without-warmup"
    severity = "warning"
    message = "capture without a warm-up run of the captured step in this function"
    fix = "run the step a few times on the capture stream before torch.cuda.graph(...), then reset state and capture"
    applies_in_host_code = True
    VALID = [
        "def capture(model, s):  # graphlint: host\n    g = torch.cuda.CUDAGraph()\n    with torch.cuda.stream(s):\n"
        "        for _ in range(3):\n            model.step()\n    with torch.cuda.graph(g, stream=s):\n        model.step()\n",
        "def capture(fn, s):  # graphlint: host\n    warmup(fn)\n    g = torch.cuda.CUDAGraph()\n"
        "    with torch.cuda.graph(g, stream=s):\n        fn()\n",
    ]
    INVALID = [
        "def capture(model, s):  # graphlint: host\n    g = torch.cuda.CUDAGraph()\n"
        "    with torch.cuda.graph(g, stream=s):\n        model.step()\n",
    ]

    def visit_With(self, node: cst.With, ctx: Context) -> None:
        capture = next((i.item for i in node.items if isinstance(i.item, cst.Call) and graph_call(i.item, ctx)), None)
        if capture is None or not ctx.parents or not isinstance(ctx.parents[0], cst.FunctionDef):
            return
        captured = {name for name in (_callee_name(c, ctx) for c in walk(node.body) if isinstance(c, cst.Call)) if name}
        if not captured:
            return
        for earlier in walk(ctx.parents[0].body):
            if earlier is node:
                break
            if isinstance(earlier, cst.Call):
                name = _callee_name(earlier, ctx) or ""
                if name in captured or "warm" in name.lower():
                    return
        ctx.report(self, capture)


def _callee_name(call: cst.Call, ctx: Context) -> str | None:
    """The dotted callee of a user call (`model.step`, `fn`); None for torch, builtins and
    tensor operations (`out.copy_(x * 2)` has nothing to warm up)."""
    if ctx.qualified(call.func) is not None:
        return None
    if isinstance(call.func, cst.Attribute) and (call.func.attr.value.endswith("_") or ctx.value(call.func.value).is_tensor):
        return None
    name = dotted(call.func)
    if name is None or name in _HOST_FUNCS or name in ("range", "enumerate", "zip", "super"):
        return None
    return name


RULES = [SynchronizeAroundReplay, CaptureWithoutWarmup]
