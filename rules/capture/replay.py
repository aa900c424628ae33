"""GL505 and GL510: what the code around a replay and a capture does (a device-wide synchronize
between replays, a capture without a warm-up). Orchestration rules: they hold in host code."""
from __future__ import annotations

from graphlint.lazy import cst

from graphlint.analysis import catalog
from graphlint.analysis.capture_sites import CAPTURE_BLOCK
from graphlint.analysis.children import iter_code
from graphlint.analysis.names import dotted
from graphlint.analysis.walk.rule import Context, Rule
from ..shared._orchestration import SYNCHRONIZE, Orchestration, graph_call, orchestration, walk

_CLOCKS = catalog.names("timing", "clocks")
_EVENT_TIMERS = catalog.names("timing", "event_methods")

_HOST_FUNCS = frozenset({"len", "isinstance", "type", "id", "print", "str", "repr", "hasattr", "getattr"})


class SynchronizeAroundReplay(Rule):
    """Flags a device-wide `torch.cuda.synchronize()` between graph replays: in the per-step
    loop that replays, or after a replay in the function that replays once per step.

    Never in warm-up (a loop of a fixed count, a function named for the warm-up), a prefill (a
    function named for it, or a closure one returns: once per request), capture
    set-up (a function that captures, outside a loop that replays) or timing (a function that
    reads a clock or a CUDA event timer): there it costs nothing per step. Inside the captured
    region GL106 reports a synchronize.

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

    ## Known problems
    A decode loop that also times its steps with a clock is taken for timing code, and a
    replay loop of a fixed literal count for a warm-up.
    """

    code = "GL505"
    name = "synchronize-around-replay"
    severity = "warning"
    message = "device-wide synchronize between graph replays: the host waits for every stream of the current device"
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
        # Timing around replays, with a clock and with CUDA events.
        "import time\ndef bench(g, n: int):  # graphlint: host\n    torch.cuda.synchronize()\n    t0 = time.perf_counter()\n"
        "    for _ in range(n):\n        g.replay()\n    torch.cuda.synchronize()\n"
        "    gpu_time = (time.perf_counter() - t0) / n\n    return gpu_time\n",
        "def timed(g, n: int):  # graphlint: host\n    start = torch.cuda.Event(enable_timing=True)\n"
        "    end = torch.cuda.Event(enable_timing=True)\n    times = []\n    for _ in range(n):\n        start.record()\n"
        "        g.replay()\n        end.record()\n        torch.cuda.synchronize()\n        times.append(start.elapsed_time(end))\n"
        "    return times\n",
        # Warm-up replays before the serving loop, and a check of the first replay after capture.
        "def warm(g):  # graphlint: host\n    for _ in range(3):\n        g.replay()\n        torch.cuda.synchronize()\n",
        "def capture_and_check(step, out, ref):  # graphlint: host\n    g = torch.cuda.CUDAGraph()\n    step()\n"
        "    with torch.cuda.graph(g):\n        step()\n    g.replay()\n    torch.cuda.synchronize()\n"
        "    assert torch.allclose(out, ref)\n    return g\n",
        # The prefill graph's replay closure, once per request (BitNet's compile_prefill).
        "def compile_prefill(self):  # graphlint: host\n    def replay(tokens):\n        self.inputs.copy_(tokens)\n"
        "        self.prefill_graph.replay()\n        torch.cuda.synchronize()\n        return self.logits\n"
        "    return replay\n",
    ]
    INVALID = [
        # A class named for the prefill does not make its decode loop a prefill.
        "class PrefillDecodeEngine:\n    def generate(self, n: int):  # graphlint: host\n        for step in range(n):\n"
        "            self.graph.replay()\n            torch.cuda.synchronize()\n            self.sample(step)\n",
        "def run(graph_a, s, attention):  # graphlint: host\n    with torch.cuda.stream(s):\n        graph_a.replay()\n"
        "    torch.cuda.synchronize()\n    attention()\n",
        # Between replays in the per-step loop.
        "def generate(self, n: int):  # graphlint: host\n    for step in range(n):\n        self.graph.replay()\n"
        "        torch.cuda.synchronize()\n        self.sample(step)\n",
        "def serve(runner, requests):  # graphlint: host\n    while requests:\n        runner.graph.replay()\n"
        "        torch.cuda.synchronize()\n        requests.pop()\n",
    ]

    def visit_Call(self, node: cst.Call, ctx: Context) -> None:
        if ctx.qualified(node.func) in SYNCHRONIZE and ctx.zone != CAPTURE_BLOCK:
            facts = orchestration(ctx)
            if facts is not None and facts.replays and _between_replays(node, ctx, facts):
                ctx.report(self, node)


# A function named for the warm-up, or for the prefill (or one defined inside such a function:
# the replay closure `compile_prefill` returns), replays once per run or per request, never
# between the decode steps' replays.
_ONCE_PER_REQUEST = ("warm", "prefill")


def _between_replays(sync: cst.Call, ctx: Context, facts: Orchestration) -> bool:
    """In a loop that replays (not a warm-up loop), or after a replay of a function that
    replays once (and neither captures nor times)."""
    function = facts.function
    named = [name.rpartition(".")[2].lower() for name in (*ctx.enclosing, ctx.function)]
    if any(word in name for name in named for word in _ONCE_PER_REQUEST) or _times(function, ctx):
        return False
    replays = {id(r) for r in facts.replays}
    for loop in (p for p in ctx.parents if isinstance(p, (cst.For, cst.While))):
        if not _fixed_count(loop) and any(id(n) in replays for n in iter_code(loop)):
            return True
    if facts.captures:
        return False  # set-up: after the capture, the check of its first replay
    in_loops = {id(n) for loop in walk(function.body) if isinstance(loop, (cst.For, cst.While)) for n in iter_code(loop)}
    for node in walk(function.body):
        if node is sync:
            return False
        if id(node) in replays and id(node) not in in_loops:
            return True  # a replay of this step, then the host waits
    return False


def _times(function: cst.FunctionDef, ctx: Context) -> bool:
    """Reads a host clock or a CUDA event timer: a benchmark, or timing around the step."""
    for node in walk(function.body):
        if isinstance(node, cst.Call):
            if ctx.qualified(node.func) in _CLOCKS:
                return True
            if isinstance(node.func, cst.Attribute) and node.func.attr.value in _EVENT_TIMERS:
                return True
    return False


def _fixed_count(loop: cst.For | cst.While) -> bool:
    """`for _ in range(3)`: a warm-up, not the per-step loop."""
    if not isinstance(loop, cst.For) or not isinstance(loop.iter, cst.Call):
        return False
    func, args = loop.iter.func, loop.iter.args
    return isinstance(func, cst.Name) and func.value == "range" and len(args) == 1 and isinstance(args[0].value, cst.Integer)


class CaptureWithoutWarmup(Rule):
    """Flags a `torch.cuda.graph(...)` capture with no warm-up run of the step before it.

    The callables called inside the block must have been called earlier in the same function
    (a warm-up call or loop; for a closure the block calls, what the closure calls), or a
    function whose name contains `warm`; a caller that runs
    the warm-up before calling the capture function (`self.warmup_model();
    self.capture_cudagraph()`, or the captured callee itself) counts too, and so does a capture
    under a test of a warm-up count (`if step == self.cuda_graph_warmup_steps:`): the calls
    before that one ran the step eagerly.

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
        # Zonos' decode: the warm-up runs the closure's calls inline.
        "def decode(self, ids):  # graphlint: host\n    for _ in range(3):\n        self.step(ids)\n"
        "    g = torch.cuda.CUDAGraph()\n    def region():\n        self.out = self.step(ids)\n"
        "    with torch.cuda.graph(g):\n        region()\n",
        # A capture on the call that reaches the warm-up count: the earlier calls warmed it up.
        "def __call__(self, fn, s):  # graphlint: host\n    if self.step == self.warmup_steps:\n"
        "        g = torch.cuda.CUDAGraph()\n        with torch.cuda.graph(g, stream=s):\n            fn()\n"
        "    self.step += 1\n",
    ]
    INVALID = [
        "def capture(model, s):  # graphlint: host\n    g = torch.cuda.CUDAGraph()\n"
        "    with torch.cuda.graph(g, stream=s):\n        model.step()\n",
        "def decode(self, ids):  # graphlint: host\n    self.prepare(ids)\n"
        "    g = torch.cuda.CUDAGraph()\n    def region():\n        self.out = self.step(ids)\n"
        "    with torch.cuda.graph(g):\n        region()\n",
        "def __call__(self, fn, s):  # graphlint: host\n    if self.step == self.capture_step:\n"
        "        g = torch.cuda.CUDAGraph()\n        with torch.cuda.graph(g, stream=s):\n            fn()\n"
        "    self.step += 1\n",
    ]

    def visit_With(self, node: cst.With, ctx: Context) -> None:
        capture = next((i.item for i in node.items if isinstance(i.item, cst.Call) and graph_call(i.item, ctx)), None)
        if capture is None or not ctx.parents or not isinstance(ctx.parents[0], cst.FunctionDef):
            return
        captured = _called_names(node.body, ctx)
        if not captured or _under_warmup_count(ctx.parents[0], node):
            return
        # A closure the block calls (`def capture_region(): ...`) is the step: running what it
        # calls before the capture warms it up as well as calling it would.
        for inner in iter_code(ctx.parents[0].body, (cst.FunctionDef, cst.ClassDef)):
            if type(inner) is cst.FunctionDef and inner.name.value in captured:
                captured |= _called_names(inner.body, ctx)
        for earlier in walk(ctx.parents[0].body):
            if earlier is node:
                break
            if isinstance(earlier, cst.Call):
                name = _callee_name(earlier, ctx) or ""
                if name in captured or "warm" in name.lower():
                    return
        ctx.report(self, capture)


def _under_warmup_count(function: cst.FunctionDef, capture: cst.With) -> bool:
    """Whether the capture sits under a test of a warm-up count (`if step == self.warmup_steps:`):
    the earlier calls of the function, run eagerly, are its warm-up."""
    for node in walk(function.body):
        if isinstance(node, cst.If) and any(inner is capture for inner in walk(node.body)):
            names = [n.value for n in walk(node.test) if isinstance(n, cst.Name)]
            names += [n.attr.value for n in walk(node.test) if isinstance(n, cst.Attribute)]
            if any("warm" in name.lower() for name in names):
                return True
    return False


def _called_names(block: cst.CSTNode, ctx: Context) -> set[str]:
    """The user callees (`_callee_name`) of the calls in a block, nested scopes left out."""
    return {name for name in (_callee_name(c, ctx) for c in walk(block) if isinstance(c, cst.Call)) if name}


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
