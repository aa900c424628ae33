"""GL5xx: capture and replay hygiene. Two kinds of rule live here:

- orchestration rules judge the code that captures and replays a graph (explicit per-device
  streams, no `set_device` in their place, no global synchronize, a warm-up before capture).
  That code is host code by design, so these rules set `applies_in_host_code` and the engine
  keeps their findings in every region, `host` and `unreached` included;
- capture-only rules judge the step itself (cross-device copies, per-step Python scalars and
  host randomness or clocks frozen into the capture). They set `capture_only`.

GL505 (a global synchronize around replay) and GL106 (synchronize in per-step code) see the
same call. The split is by region: GL106 reports it in `captured` and `eager` functions, GL505
(`host_code_only`) in `host` and `unreached` ones, so one call is reported once.
"""
from __future__ import annotations

import re
from typing import Iterator

import libcst as cst

from graphlint.analysis.children import code_children
from graphlint.analysis.inference import DEVICE, HOST, HOST_TENSOR, MODULE, annotation_value
from graphlint.analysis.names import dotted
from graphlint.analysis.rule import Context, Example, Rule
from ._calls import keyword, maybe_device, method_name, positional, receiver

_SYNCHRONIZE = frozenset({"torch.cuda.synchronize", "torch.synchronize", "torch.accelerator.synchronize"})
_STREAM_CONTEXTS = frozenset({"torch.cuda.stream", "torch.cuda.StreamContext", "torch.cuda.graph",
                              "torch.cuda.graphs.graph", "torch.accelerator.stream"})
_CUDA_INDEX = re.compile(r"cuda:\s*(\d+|\{)")
_MULTI_DEVICE_NAMES = frozenset({"devices", "device_ids", "gpus", "gpu_ids", "n_gpus", "num_gpus", "world_size"})
_RANDOM_AND_CLOCK = re.compile(
    r"^(random\.\w+|numpy\.random\.\w+|time\.(time|time_ns|perf_counter|perf_counter_ns|monotonic|monotonic_ns"
    r"|process_time|process_time_ns)|datetime\.datetime\.(now|utcnow|today)|datetime\.date\.today"
    r"|os\.urandom|secrets\.\w+|uuid\.uuid[14])$")
# Names that hold a value which changes every decode step (the reference port's red scalars: pos0,
# raw_row, n_raw, raw_start, n_comp, emit counters, token ids). `pos` and `position` are
# also common names for device tensors, so they count only when annotated as host scalars.
PER_STEP_NAMES = frozenset({
    "start_pos", "cur_pos", "step", "step_idx", "cur_step", "decode_step", "token_id", "tid",
    "next_token", "n_comp", "kv_len", "past_len", "past_length",
    "past_key_values_length", "cache_len", "cache_length", "raw_row", "n_raw", "raw_start", "pos0",
    "emit", "index_row", "num_tokens_so_far",
})
_ANNOTATED_ONLY = frozenset({"pos", "position", "cur_position"})
_META = frozenset({"shape", "dtype", "device", "ndim", "is_cuda"})
_HOST_FUNCS = frozenset({"len", "isinstance", "type", "id", "print", "str", "repr", "hasattr", "getattr"})


# ----- facts about the function being walked (shared by the rules, computed once) ---------------

class _Orchestration:
    """What a function does with graphs, streams and devices, from one scan of its body."""

    def __init__(self, function: cst.FunctionDef, ctx: Context):
        self.captures = False  # torch.cuda.graph(...) or CUDAGraph.capture_begin
        self.replays = False
        self.multi_device = False
        self.graph_names: set[str] = set()  # locals or attributes that hold a CUDAGraph
        params = function.params
        for param in list(params.params) + list(params.kwonly_params) + list(params.posonly_params):
            if param.name.value in _MULTI_DEVICE_NAMES or "gpu" in param.name.value.lower():
                self.multi_device = True
            if param.annotation is not None and (dotted(param.annotation.annotation) or "").endswith("CUDAGraph"):
                self.graph_names.add(param.name.value)
        for node in _walk(function.body):
            if isinstance(node, cst.Assign) and isinstance(node.value, cst.Call) \
                    and ctx.qualified(node.value.func) == "torch.cuda.CUDAGraph":
                for target in node.targets:
                    name = dotted(target.target)
                    if name:
                        self.graph_names.add(name)
            elif isinstance(node, cst.Call):
                self._call(node, ctx)
            elif isinstance(node, (cst.SimpleString, cst.FormattedStringText)):
                text = node.value
                match = _CUDA_INDEX.search(text)
                if match and (match.group(1) == "{" or int(match.group(1)) > 0):
                    self.multi_device = True
            elif isinstance(node, cst.Name) and (node.value in _MULTI_DEVICE_NAMES or "gpu" in node.value.lower()):
                self.multi_device = True

    def _call(self, node: cst.Call, ctx: Context) -> None:
        qualified = ctx.qualified(node.func)
        if qualified in ("torch.cuda.graph", "torch.cuda.graphs.graph"):
            self.captures = True
        elif qualified in ("torch.cuda.set_device", "torch.cuda.device_count", "torch.cuda.device"):
            self.multi_device = True
        elif qualified == "torch.device":
            args = positional(node)
            if len(args) >= 2 and not (isinstance(args[1], cst.Integer) and args[1].value == "0"):
                self.multi_device = True
        method = method_name(node)
        if method == "replay" and not node.args:
            self.replays = True
        elif method == "capture_begin":
            self.captures = True

    @property
    def orchestrates(self) -> bool:
        return self.captures or self.replays


_FACTS: dict[int, tuple[cst.FunctionDef, _Orchestration]] = {}


def _orchestration(ctx: Context) -> _Orchestration | None:
    function = ctx.parents[0] if ctx.parents and isinstance(ctx.parents[0], cst.FunctionDef) else None
    if function is None:
        return None
    cached = _FACTS.get(id(function))
    if cached is not None and cached[0] is function:
        return cached[1]
    if len(_FACTS) > 64:
        _FACTS.clear()
    facts = _Orchestration(function, ctx)
    _FACTS[id(function)] = (function, facts)
    return facts


def _walk(node: cst.CSTNode) -> Iterator[cst.CSTNode]:
    """Every node under `node` in source order, not entering nested functions or classes."""
    stack = [node]
    while stack:
        current = stack.pop()
        yield current
        stack.extend(reversed([c for c in code_children(current) if not isinstance(c, (cst.FunctionDef, cst.ClassDef))]))


def _in_stream_context(ctx: Context) -> bool:
    for parent in ctx.parents:
        if isinstance(parent, cst.With):
            for item in parent.items:
                if isinstance(item.item, cst.Call) and ctx.qualified(item.item.func) in _STREAM_CONTEXTS:
                    return True
    return False


def _graph_call(node: cst.Call, ctx: Context) -> bool:
    return ctx.qualified(node.func) in ("torch.cuda.graph", "torch.cuda.graphs.graph")


# ----- orchestration rules ------------------------------------------------------------------------

class GraphWithoutStream(Rule):
    """Flags `torch.cuda.graph(g)` without an explicit `stream=` in code that handles several devices.

    Multi-device code names `cuda:1`, `cuda:{i}` or `torch.device("cuda", i)`, calls
    `set_device` or `device_count`, or uses `devices`, `world_size` or a name with `gpu` (as
    GL502). On a single device PyTorch's default capture side stream is correct.

    ## Why it breaks a CUDA graph
    Without `stream=`, the capture runs on a side stream of the *current* device. Whenever the
    captured tensors live on another GPU, or the current device was switched with
    `set_device`, the capture records nothing for them: on cuda:0 an empty graph ("The CUDA
    Graph is empty"), on cuda:1+ a graph that replays stale capture-time data and ignores the
    updated input buffers (the reference port's all-zeros replay bug, fixed in `6650f06`).

    ## Example
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            out.copy_(inp * 2.0)

    ## Use instead
    Capture on an explicit per-device stream and replay on the same one:
    `s = torch.cuda.Stream(device=device)`; `with torch.cuda.graph(g, stream=s): ...`;
    `with torch.cuda.stream(s): g.replay()`.
    """

    code = "GL501"
    name = "graph-without-stream"
    message = "CUDA graph captured without an explicit stream=: on a non-default GPU it records an empty or stale graph"
    fix = "capture with torch.cuda.graph(g, stream=s) where s = torch.cuda.Stream(device=device), and replay on s"
    applies_in_host_code = True
    VALID = [
        "def capture(model, device):  # graphlint: host\n    s = torch.cuda.Stream(device=device)\n"
        "    g = torch.cuda.CUDAGraph()\n    model.step()\n    with torch.cuda.graph(g, stream=s):\n        model.step()\n    return g, s\n",
        # Single device (nano-vllm's model runner): the default capture side stream is right.
        "def capture(self, bs):\n    graph = torch.cuda.CUDAGraph()\n    self.model(self.input_ids[:bs])\n"
        "    with torch.cuda.graph(graph, self.graph_pool):\n        self.model(self.input_ids[:bs])\n",
    ]
    INVALID = [
        "def capture(model, devices):  # graphlint: host\n    for d in devices:\n        g = torch.cuda.CUDAGraph()\n"
        "        model.step()\n        with torch.cuda.graph(g):\n            model.step()\n",
        "from torch.cuda import graph\ndef capture(g, step):\n    torch.cuda.set_device(1)\n    step()\n"
        "    with graph(g, pool=None):\n        step()\n",
    ]

    def visit_Call(self, node: cst.Call, ctx: Context) -> None:
        if _graph_call(node, ctx) and keyword(node, "stream") is None and len(positional(node)) < 3:
            facts = _orchestration(ctx)
            if facts is not None and facts.multi_device:
                ctx.report(self, node)


class StreamWithoutDevice(Rule):
    """Flags `torch.cuda.Stream()` without `device=` in code that handles several devices.

    Multi-device code names `cuda:1`, `cuda:{i}` or `torch.device("cuda", i)`, calls
    `set_device` or `device_count`, or uses `devices`, `world_size` or a name with `gpu`.

    ## Why it breaks a CUDA graph
    A stream belongs to the device that is current when it is created. In multi-device code
    that is rarely the device whose tensors the graph captures, and a capture or replay on
    another device's stream yields an empty graph or a stale replay.

    ## Example
        for device in devices:
            s = torch.cuda.Stream()

    ## Use instead
    `torch.cuda.Stream(device=device)`: one explicit stream per device, used for both the
    capture and the replay.

    ## Known problems
    The evidence of multi-device code is looked for in the function itself, not in its file
    or its callers.
    """

    code = "GL502"
    name = "stream-without-device"
    severity = "warning"
    message = "torch.cuda.Stream() without device= in multi-device code: the stream belongs to whichever device is current"
    fix = "create one stream per device with torch.cuda.Stream(device=device) and use it for capture and replay"
    applies_in_host_code = True
    VALID = [
        "def make(devices):\n    return [torch.cuda.Stream(device=d) for d in devices]\n",
        "def make():\n    return torch.cuda.Stream()\n",
        "def make(gpu: int):\n    return torch.cuda.Stream(torch.device('cuda', gpu))\n",
    ]
    INVALID = [
        "def make(devices):\n    out = []\n    for d in devices:\n        torch.cuda.set_device(d)\n        out.append(torch.cuda.Stream())\n    return out\n",
        "def capture(x):  # graphlint: host\n    y = x.to('cuda:1')\n    s = torch.cuda.Stream()\n    return y, s\n",
    ]

    def visit_Call(self, node: cst.Call, ctx: Context) -> None:
        if ctx.qualified(node.func) != "torch.cuda.Stream" or positional(node) or keyword(node, "device") is not None:
            return
        facts = _orchestration(ctx)
        if facts is not None and facts.multi_device:
            ctx.report(self, node)


class ReplayOutsideStream(Rule):
    """Flags `g.replay()` of a CUDA graph outside a `with torch.cuda.stream(s):` block, in code that handles several devices.

    The evidence of several devices is GL502's; on one device replaying on the current
    stream is correct.

    ## Why it breaks a CUDA graph
    Replay is enqueued on the current stream of the current device. On a non-default GPU,
    replaying outside the stream the graph was captured on ignores the updated input buffers
    and returns stale capture-time results (the reference port's multi-GPU requirement: explicit
    streams for capture *and* replay).

    ## Example
        graph.replay()

    ## Use instead
        with torch.cuda.stream(s):
            graph.replay()

    ## Known problems
    The `with` block must enclose the call in the same function; a replay in a helper called
    from inside the block is flagged. A graph is recognised by a local assigned from
    `torch.cuda.CUDAGraph()`, a parameter annotated `CUDAGraph`, or a name such as `g` or
    `*graph*`.
    """

    code = "GL503"
    name = "replay-outside-stream"
    message = "graph replayed outside `with torch.cuda.stream(s)`: on a non-default GPU it replays stale capture-time data"
    fix = "replay on the capture stream: with torch.cuda.stream(s): g.replay()"
    applies_in_host_code = True
    VALID = [
        "def replay(g, s):  # graphlint: host\n    with torch.cuda.stream(s):\n        g.replay()\n",
        "def run(buffer):\n    buffer.replay()\n",
        # One device: the current stream is the right one (nano-vllm's run_model).
        "def run_model(self, bs):\n    graph = self.graphs[bs]\n    graph.replay()\n    return self.outputs[:bs]\n",
    ]
    INVALID = [
        "def replay(g, device):  # graphlint: host\n    torch.cuda.set_device(device)\n    g.replay()\n",
        "class Decoder:\n    def step(self, gpu):  # graphlint: host\n        self.graph_a.replay()\n",
        "def run(step):  # graphlint: host\n    graph = torch.cuda.CUDAGraph()\n    with torch.cuda.graph(graph, stream=s):\n"
        "        step()\n    x = step.out.to('cuda:1')\n    graph.replay()\n",
    ]

    def visit_Call(self, node: cst.Call, ctx: Context) -> None:
        if method_name(node) != "replay" or node.args:
            return
        name = dotted(receiver(node)) or ""
        last = name.rsplit(".", 1)[-1].lower()
        facts = _orchestration(ctx)
        is_graph = last == "g" or "graph" in last or (facts is not None and name in facts.graph_names)
        if is_graph and facts is not None and facts.multi_device and not _in_stream_context(ctx):
            ctx.report(self, node)


class SetDeviceForCapture(Rule):
    """Flags `torch.cuda.set_device(...)` in a function that captures or replays a graph.

    ## Why it breaks a CUDA graph
    `set_device` changes the current device, not the stream a capture or replay uses; relying
    on it instead of an explicit stream was the root cause of the reference port's all-zeros replay:
    an empty graph on cuda:0 and stale replays on cuda:1+. Switching the device in the middle
    of a capture also fails with "Capture must end on the same stream it began on".

    ## Example
        torch.cuda.set_device(device)
        with torch.cuda.graph(g):
            step()

    ## Use instead
    Leave the current device alone and pass the device's stream explicitly:
    `s = torch.cuda.Stream(device=device)`; `with torch.cuda.graph(g, stream=s)` and
    `with torch.cuda.stream(s): g.replay()`.
    """

    code = "GL504"
    name = "set-device-for-capture"
    message = "torch.cuda.set_device() around capture or replay: it does not choose the stream, an explicit per-device stream does"
    fix = "drop set_device; capture and replay on s = torch.cuda.Stream(device=device) (graph(g, stream=s) / with torch.cuda.stream(s))"
    applies_in_host_code = True
    VALID = [
        "def init(rank):\n    torch.cuda.set_device(rank)\n",
        "def replay(g, s):  # graphlint: host\n    with torch.cuda.stream(s):\n        g.replay()\n",
    ]
    INVALID = [
        "def capture(g, step, device):  # graphlint: host\n    torch.cuda.set_device(device)\n    step()\n"
        "    with torch.cuda.graph(g):\n        step()\n",
        Example("def replay(g, device):  # graphlint: host\n    torch.cuda.set_device(device)\n    g.replay()\n", 1),
    ]

    def visit_Call(self, node: cst.Call, ctx: Context) -> None:
        if ctx.qualified(node.func) == "torch.cuda.set_device":
            facts = _orchestration(ctx)
            if facts is not None and facts.orchestrates and facts.multi_device:
                ctx.report(self, node)


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
        if ctx.qualified(node.func) in _SYNCHRONIZE and ctx.zone != "capture-block":
            facts = _orchestration(ctx)
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
        capture = next((i.item for i in node.items if isinstance(i.item, cst.Call) and _graph_call(i.item, ctx)), None)
        if capture is None or not ctx.parents or not isinstance(ctx.parents[0], cst.FunctionDef):
            return
        captured = {name for name in (_callee_name(c, ctx) for c in _walk(node.body) if isinstance(c, cst.Call)) if name}
        if not captured:
            return
        for earlier in _walk(ctx.parents[0].body):
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


# ----- capture-only rules (the step itself) -------------------------------------------------------

def _explicit_other_device(node: cst.BaseExpression, ctx: Context) -> bool:
    """"cuda:1", f"cuda:{gpu}", torch.device("cuda", i) / torch.device(f"cuda:{i}")."""
    if isinstance(node, cst.SimpleString):
        match = _CUDA_INDEX.search(node.evaluated_value)
        return bool(match)
    if isinstance(node, cst.FormattedString):
        return any(isinstance(p, cst.FormattedStringText) and p.value.rstrip().endswith("cuda:") for p in node.parts)
    if isinstance(node, cst.Call) and ctx.qualified(node.func) == "torch.device":
        args = positional(node)
        return len(args) >= 2 or (bool(args) and _explicit_other_device(args[0], ctx))
    return False


def _device_of_other(node: cst.BaseExpression, recv: cst.BaseExpression | None) -> bool:
    """`other.device` where `other` is not the receiver itself."""
    if not (isinstance(node, cst.Attribute) and node.attr.value == "device"):
        return False
    return dotted(node.value) != dotted(recv) if recv is not None else True


class CrossDeviceCopy(Rule):
    """Flags copies to an explicitly named device inside the captured region.

    `.to("cuda:1")`, `.to(f"cuda:{gpu}")`, `.to(torch.device("cuda", i))`, `.cuda(i)`.

    ## Why it breaks a CUDA graph
    A graph is captured on one device's stream; a copy to another device inside it is either
    refused or recorded against buffers the other device's graph does not own, and on replay
    the peer copy runs against capture-time addresses (the reference port's `X.to(f"cuda:{gpu}")` in
    the layer loop, categories 4 and 8 of the inventory).

    ## Example
        X = X.to(f"cuda:{gpu}")

    ## Use instead
    Per-device static buffers, and the cross-device copy outside the graph, before replay:
    `x_in_bufs[li].copy_(X)`; or capture one subgraph per device.
    """

    code = "GL506"
    name = "cross-device-copy"
    message = "copy to another device inside the captured region: a graph is captured on one device's stream"
    fix = "keep per-device static buffers and do the cross-device copy outside the graph (x_in_buf.copy_(X) before replay)"
    capture_only = True
    VALID = [
        "def step(x: torch.Tensor):\n    return x.to(torch.float32)\n",
        "def step(x: torch.Tensor, buf: torch.Tensor):\n    buf.copy_(x)\n    return buf\n",
    ]
    INVALID = [
        "def layer_loop(X: torch.Tensor, gpu: int):\n    return X.to(f'cuda:{gpu}')\n",
        "def step(x: torch.Tensor):\n    return x.to('cuda:1', non_blocking=True)\n",
        "def step(x: torch.Tensor, i: int):\n    return x.to(device=torch.device('cuda', i))\n",
        "def step(x: torch.Tensor):\n    return x.cuda(1)\n",
    ]

    def visit_Call(self, node: cst.Call, ctx: Context) -> None:
        method = method_name(node)
        recv = receiver(node)
        if method not in ("to", "cuda") or ctx.qualified(node.func) is not None or not maybe_device(ctx, recv):
            return
        target = keyword(node, "device")
        args = positional(node)
        if target is None and args:
            target = args[0]
        if target is None:
            return
        # `.cuda(i)` of a known device tensor; any other object's `cuda` method is its own.
        if (method == "cuda" and ctx.value(recv).kind == DEVICE) or (method == "to" and _explicit_other_device(target, ctx)):
            ctx.report(self, node)


class FollowDeviceCopy(Rule):
    """Flags `.to(other.device)` of a device tensor in multi-device code inside the captured region.

    Also `.to(device=other.device)`, where `other` is another tensor than the one moved. Only
    in functions that handle several devices (the evidence GL502 uses, or a name with `gpu`):
    on one GPU the copy is a no-op, and transformers-style code is full of it.

    ## Why it breaks a CUDA graph
    On one GPU it is a no-op; as soon as the model is split across devices it is a peer copy
    inside the graph, captured against one device's stream (the reference port's
    `positions.to(rope_cos.device)` and `token_id.to(x.device)`).

    ## Example
        pos = positions.to(rope_cos.device)

    ## Use instead
    Keep a copy of the value per device (`dec_pos_per_gpu[d]`), filled before replay, and
    index the one on the layer's device.
    """

    code = "GL507"
    name = "follow-device-copy"
    severity = "warning"
    message = "`.to(other.device)` inside the captured region: a peer copy whenever the model spans devices"
    fix = "keep one static copy of the value per device, filled before replay, and use the one on this layer's device"
    capture_only = True
    VALID = [
        "def step(x: torch.Tensor):\n    return x.to(x.device)\n",
        "def step(x: torch.Tensor, y: torch.Tensor):\n    return x.to(y.dtype)\n",
        "def reorder(self, keys: torch.Tensor, beam_idx: torch.Tensor):\n    return keys.index_select(0, beam_idx.to(keys.device))\n",
    ]
    INVALID = [
        "def rope(positions: torch.Tensor, rope_cos: torch.Tensor, gpu: int):\n    return positions.to(rope_cos.device)\n",
        "def moe(token_id: torch.Tensor, x: torch.Tensor, devices: list):\n    return token_id.to(device=x.device)\n",
    ]

    def visit_Call(self, node: cst.Call, ctx: Context) -> None:
        recv = receiver(node)
        if method_name(node) != "to" or ctx.qualified(node.func) is not None or ctx.value(recv).kind != DEVICE:
            return
        target = keyword(node, "device")
        args = positional(node)
        if target is None and args:
            target = args[0]
        if target is not None and _device_of_other(target, recv):
            facts = _orchestration(ctx)
            if facts is not None and facts.multi_device:
                ctx.report(self, node)


class FrozenScalar(Rule):
    """Flags per-step Python scalars used as kernel arguments inside the captured region.

    Indices and slice bounds of device tensors (`cache[:, start_pos % W] = kv`,
    `freqs[start_pos:start_pos + 1]`) and scalar arguments of tensor operations
    (`buf.fill_(pos)`, `x.topk(min(K, (start_pos + 1) // 4))`, `torch.arange(n)`).

    A value is per-step when it is a host value (not a tensor) that comes from a parameter or
    `self` attribute named like a decode position or counter (`start_pos`, `cur_pos`, `step`,
    `seq_len`, `n_comp`, `token_id`, ...; `pos` and `position` only when annotated as host
    scalars), or, by dataflow under any name, from a `self` attribute the class advances with
    an augmented assignment (`self.filled += 1`) or a parameter that a caller's loop advances
    between calls (`offset += 1` around `decode_one(..., offset)`), directly or through local
    arithmetic.

    ## Why it breaks a CUDA graph
    A graph records kernel arguments by value. A Python int used as an offset, a bound or a
    fill value is frozen at its capture-time value: every replay writes the same cache slot,
    reads the same rope row and keeps the same k (the reference port's red scalars: pos0, raw_row,
    n_comp, token ids that "must move to a small device-side struct").

    ## Example
        self.kv_cache[:bsz, start_pos % win] = kv
        freqs = self.freqs_cis[start_pos:start_pos + 1]

    ## Use instead
    Keep the position on the device (a `pos` buffer advanced by the step itself) and index
    with it: `cache.view(-1, D).index_copy_(0, row_base + pos % W, kv)`,
    `freqs.index_select(0, pos)`; fixed-size top-k with `-inf` masking.

    ## Known problems
    Besides the dataflow cases, per-step values are recognised by name: a position kept under
    another name that nothing in the linted code advances is missed, and a host value with one
    of these names that never changes is reported.
    """

    code = "GL508"
    name = "frozen-scalar"
    message = "a per-step Python scalar is a kernel argument: the capture freezes its value, every replay reuses it"
    fix = "keep the value on the device (a pos buffer the step advances) and index with it (index_select / index_copy_ / masks)"
    capture_only = True
    VALID = [
        "def f(cache: torch.Tensor, kv: torch.Tensor, pos: torch.Tensor, row_base: torch.Tensor, W: int):\n"
        "    cache.view(-1, kv.shape[-1]).index_copy_(0, row_base + pos % W, kv)\n",
        "def f(mu: torch.Tensor, n: int):\n    return mu[:, :n] + mu[:, n:2 * n]\n",
        "def f(x: torch.Tensor, step: int):\n    if step % 4 == 3:\n        x = x * 0.5\n    return x\n",
        "def f(freqs: torch.Tensor, pos):\n    return freqs[pos]\n",
        "def f(x: torch.Tensor, start_pos: int):\n    return x[:, : x.shape[1]]\n",
        # Dataflow twins: a device counter the step advances in place, a per-layer offset that
        # takes the same values every step, a caller that passes a constant.
        "class Window:\n    def __init__(self, w: int):\n        self.cache = torch.zeros(2, w, device='cuda')\n"
        "        self.filled = torch.zeros((), dtype=torch.long, device='cuda')\n        self.w = w\n"
        "    def append(self, kv: torch.Tensor):\n        self.cache.index_copy_(1, self.filled % self.w, kv)\n"
        "        self.filled += 1\n",
        "def f(x: torch.Tensor, sizes: list):\n    offset = 0\n    parts = []\n    for s in sizes:\n"
        "        parts.append(x[:, offset:offset + s])\n        offset += s\n    return parts\n",
        "def decode_one(cache: torch.Tensor, kv: torch.Tensor, offset):\n    cache[:, offset] = kv\n"
        "def generate(cache: torch.Tensor, kv: torch.Tensor, n: int):\n    for _ in range(n):\n"
        "        decode_one(cache, kv, 0)\n",
        # lmdeploy messages.py: a host (numpy) history buffer indexed by the count it advances.
        "import numpy as np\nclass History:\n    def __init__(self):\n        self._data = np.zeros(8)\n"
        "        self._num_real = 0\n    def append(self, new_data):\n        n = len(new_data)\n"
        "        self._data = np.pad(self._data, (0, n))\n        self._data[self._num_real:self._num_real + n] = new_data\n"
        "        self._num_real += n\n    def get_real(self):\n        return self._data[:self._num_real]\n",
        # The graph-safe form: the position is a device buffer, so `self.pos` is no Python scalar.
        "class Step:\n    def __init__(self, device):\n        self.pos = torch.zeros(1, dtype=torch.long, device=device)\n"
        "        self.cache = torch.zeros(8, device=device)\n"
        "    def step(self):\n        return self.cache.index_select(0, self.pos % 8)\n",
        # `pos` of unknown kind (set from outside the class) is not assumed to be a Python int.
        "class Step:\n    def step(self, buf: torch.Tensor):\n        buf.fill_(self.pos)\n",
    ]
    INVALID = [
        "def f(cache: torch.Tensor, kv: torch.Tensor, start_pos: int, W: int):\n    cache[:, start_pos % W] = kv\n",
        "def f(freqs: torch.Tensor, start_pos: int):\n    return freqs[start_pos:start_pos + 1]\n",
        "def f(buf: torch.Tensor, pos: int):\n    buf.fill_(pos)\n",
        "def f(scores: torch.Tensor, start_pos, K: int):\n    end_pos = start_pos + 1\n    return scores.topk(min(K, end_pos // 4))\n",
        "class Attn:\n    def forward(self, x: torch.Tensor):\n        return self.freqs_cis[self.start_pos]\n",
        "def window(w: int, start_pos, device):\n    idxs = torch.full((1, w), -1, device=device)\n"
        "    n = min(start_pos + 1, w)\n    idxs[..., :n] = 0\n    return idxs\n",
        # By dataflow: a sliding-window cache whose fill count the class advances (a replay
        # writes the capture-time slot forever: the window never starts rolling) ...
        "class Window:\n    def __init__(self, w: int):\n        self.cache = torch.zeros(2, w, device='cuda')\n"
        "        self.filled = 0\n        self.w = w\n"
        "    def append(self, kv: torch.Tensor):\n        self.cache[:, self.filled % self.w] = kv\n"
        "        self.filled += 1\n",
        # ... and an offset the decode loop advances and passes to the step.
        "def decode_one(cache: torch.Tensor, kv: torch.Tensor, offset):\n    cache[:, offset] = kv\n"
        "def generate(cache: torch.Tensor, kv: torch.Tensor, n: int):\n    offset = 0\n    for _ in range(n):\n"
        "        decode_one(cache, kv, offset)\n        offset += 1\n",
        # A host position kept on the object and set by prepare(), as the harness's planted
        # target (tests/runtime/targets/frozen_scalar.py) does: the runtime saw it freeze.
        "class Step:\n    def __init__(self, device):\n        self.pos = 0\n"
        "        self.buf = torch.zeros(1, device=device)\n"
        "    def prepare(self, step: int):\n        self.pos = step\n"
        "    def step(self):\n        self.buf.fill_(self.pos)\n",
        "class Step:\n    def __init__(self, device):\n        self.pos = 0\n"
        "        self.cache = torch.arange(8.0, device=device)\n"
        "    def step(self):\n        return self.cache[self.pos % 8 : self.pos % 8 + 1]\n",
    ]

    def visit_FunctionDef(self, node: cst.FunctionDef, ctx: Context) -> None:
        self._per_step, self._active = _per_step_names(node, ctx)
        self._per_step_by_name = (_per_step_names(node, ctx, by_name=True)[0]
                                  if getattr(ctx.facts, "per_step_params", None) or getattr(ctx.facts, "per_step_attrs", None)
                                  else self._per_step)

    def _tainted(self, node: cst.CSTNode | None, ctx: Context, dataflow: bool = True) -> bool:
        if node is None or ctx.value(node).kind in (DEVICE, HOST_TENSOR, MODULE) or ctx.value(node).is_bool:
            return False
        if not dataflow:
            return _mentions(node, self._per_step_by_name, ctx, by_name=True)
        return _mentions(node, self._per_step, ctx)

    def visit_Subscript(self, node: cst.Subscript, ctx: Context) -> None:
        if not self._active or not maybe_device(ctx, node.value) or ctx.value(node.value).kind == HOST:
            return
        # Values per-step by dataflow (not by name) count only into known device tensors: host
        # buffers (numpy arrays, lists) are indexed by advancing counters all the time.
        dataflow = ctx.value(node.value).kind == DEVICE
        for element in node.slice:
            inner = element.slice
            parts = [inner.value] if isinstance(inner, cst.Index) else [inner.lower, inner.upper, inner.step]
            for part in parts:
                if self._tainted(part, ctx, dataflow):
                    ctx.report(self, part)
                    return

    def visit_Call(self, node: cst.Call, ctx: Context) -> None:
        if not self._active:
            return
        qualified = ctx.qualified(node.func)
        dataflow = True
        if qualified is not None:
            if not qualified.startswith("torch.") or qualified.startswith(("torch.cuda.", "torch.distributed.")):
                return
        elif not isinstance(node.func, cst.Attribute):
            return
        else:
            # A method of a device tensor, or a tensor-only method of a value of unknown kind
            # (`self.indexer.forward(x, start_pos)` passes the scalar on; its callee is judged).
            kind = ctx.value(node.func.value).kind
            if not (kind == DEVICE or (kind == "unknown" and node.func.attr.value in _SCALAR_ARG_METHODS)):
                return
            dataflow = kind == DEVICE
        for arg in node.args:
            if self._tainted(arg.value, ctx, dataflow):
                ctx.report(self, arg.value)
                return


def _per_step_names(function: cst.FunctionDef, ctx: Context, by_name: bool = False) -> tuple[set[str], bool]:
    """The function's per-step local names, and whether anything per-step (a name or a
    `self.<per-step attribute>`) appears in it at all; `by_name`: from names alone, without
    the dataflow facts."""
    names: set[str] = set()
    params = function.params
    for param in list(params.posonly_params) + list(params.params) + list(params.kwonly_params):
        name = param.name.value
        kind = annotation_value(param.annotation.annotation, ctx.imports).kind if param.annotation else None
        if kind in (DEVICE, HOST_TENSOR, MODULE):
            continue
        if name in PER_STEP_NAMES or (name in _ANNOTATED_ONLY and kind == HOST):
            names.add(name)
        elif not by_name and name in getattr(ctx.facts, "per_step_params", ()):
            names.add(name)  # a caller's loop advances it between calls
    assignments = []
    self_attrs = False
    for node in _walk(function.body):
        if isinstance(node, (cst.Assign, cst.AugAssign, cst.AnnAssign)):
            assignments.append(node)
        elif isinstance(node, cst.Attribute) and isinstance(node.value, cst.Name) and node.value.value == "self" \
                and (_per_step_attr(node.attr.value, ctx, by_name) or node.attr.value in _ANNOTATED_ONLY):
            self_attrs = True
    # Local arithmetic on a per-step value is per-step too (`end_pos = start_pos + 1`); two
    # passes let loop-carried assignments settle.
    for _ in range(2 if names or self_attrs else 0):
        for assign in assignments:
            value = assign.value
            if value is None or ctx.value(value).kind in (DEVICE, HOST_TENSOR, MODULE):
                continue
            if not _mentions(value, names, ctx, by_name):
                continue
            targets = [t.target for t in assign.targets] if isinstance(assign, cst.Assign) else [assign.target]
            for target in targets:
                parts = [e.value for e in target.elements] if isinstance(target, (cst.Tuple, cst.List)) else [target]
                for inner in parts:
                    if isinstance(inner, cst.Name):
                        names.add(inner.value)
    return names, bool(names) or self_attrs


# Tensor methods that take Python scalars as kernel arguments (offsets, sizes, fill values).
_SCALAR_ARG_METHODS = frozenset({
    "fill_", "narrow", "narrow_copy", "topk", "kthvalue", "roll", "index_fill", "index_fill_", "masked_fill",
    "masked_fill_", "add", "add_", "sub", "sub_", "mul", "mul_", "div", "div_", "clamp", "clamp_", "select",
    "new_full", "view", "reshape", "expand", "repeat", "tril", "tril_", "triu", "triu_", "fmod", "remainder",
})
_ARITHMETIC = frozenset({"min", "max", "abs", "int", "float", "round", "divmod", "pow"})


def _per_step_attr(attr: str, ctx: Context, by_name: bool = False) -> bool:
    """A `self` attribute named like a position, or one the class advances itself."""
    return attr in PER_STEP_NAMES or (not by_name and attr in getattr(ctx.facts, "per_step_attrs", ()))


def _per_step_attribute(node: cst.Attribute, ctx: Context, by_name: bool = False) -> bool:
    """`self.start_pos` or an attribute the class advances (no tensor either), or `self.pos`
    known to hold a Python scalar (the class assigns it host values only), as a parameter
    `pos: int` is."""
    kind = ctx.value(node).kind
    if _per_step_attr(node.attr.value, ctx, by_name):
        return kind not in (DEVICE, HOST_TENSOR, MODULE)
    return node.attr.value in _ANNOTATED_ONLY and kind == HOST


def _mentions(node: cst.CSTNode, names: set[str], ctx: Context, by_name: bool = False) -> bool:
    """Whether a per-step value flows into `node` through arithmetic (not through shapes,
    metadata or the result of a function, which may well be a tensor)."""
    if isinstance(node, cst.Name):
        return node.value in names
    if isinstance(node, cst.Attribute):
        if node.attr.value in _META:
            return False
        if isinstance(node.value, cst.Name) and node.value.value == "self":
            return _per_step_attribute(node, ctx, by_name)
        return _mentions(node.value, names, ctx, by_name)
    if isinstance(node, cst.Call):
        func = dotted(node.func) or ""
        if func in _ARITHMETIC or func.startswith("math."):
            return any(_mentions(a.value, names, ctx, by_name) for a in node.args)
        return False
    if isinstance(node, (cst.Subscript, cst.Lambda, cst.BaseComp)):
        return False  # an element of something is not the per-step scalar itself
    return any(_mentions(child, names, ctx, by_name) for child in code_children(node))


class HostRandomOrClock(Rule):
    """Flags Python randomness and wall-clock reads inside the captured region whose value reaches the device.

    `random.*`, `numpy.random.*`, `time.time`, `time.perf_counter`, `datetime.now`, when the
    value (directly or through local names) is an argument of a torch op or a tensor method,
    an operand next to a tensor, an index of a tensor or a branch condition. Timing code
    around a step (`t0 = time.perf_counter()` ... logged) is not a hazard.

    ## Why it breaks a CUDA graph
    The host value is computed once, at capture, and baked into the kernels as a constant:
    every replay reuses the same "random" draw or timestamp. Eagerly it changes every step,
    so graphs-on and graphs-off silently diverge.

    ## Example
        keep = random.random() > p
        noise = np.random.randn(*x.shape)

    ## Use instead
    Draw on the device with a generator the graph can replay (`torch.rand(..., device=d,
    generator=g)`, registered with the graph), and time steps with CUDA events outside the
    step.
    """

    code = "GL509"
    name = "host-random-or-clock"
    message = "Python randomness or a clock read inside the captured region: the capture freezes the value for every replay"
    fix = "draw random numbers on the device (torch.rand(..., generator=g)); time with CUDA events outside the step"
    capture_only = True
    VALID = [
        "def step(x: torch.Tensor, gen: torch.Generator):\n    return x * torch.rand(x.shape, device=x.device, generator=gen)\n",
        "def bench(fn):  # graphlint: host\n    t0 = time.perf_counter()\n    fn()\n    return time.perf_counter() - t0\n",
        # Timing around a step, in per-step code: the clock never reaches a kernel.
        "import time\ndef forward(self, x: torch.Tensor):\n    t0 = time.perf_counter()\n    y = self.layer(x)\n"
        "    self.stats.append(time.perf_counter() - t0)\n    return y\n",
        "import time\ndef step(self, x: torch.Tensor):\n    start = time.time()\n    out = x * 2\n"
        "    logger.info('step took %.3f', time.time() - start)\n    return out\n",
    ]
    INVALID = [
        "import random\ndef step(x: torch.Tensor, p: float):\n    if random.random() > p:\n        return x\n    return x * 0\n",
        "import numpy as np\ndef step(x: torch.Tensor):\n    return x + torch.from_numpy(np.random.randn(4)).to(x.device)\n",
        Example("import time\nimport random\ndef step(x: torch.Tensor):\n    t = time.time()\n"
                "    x = x + t\n    k = random.randint(0, 3)\n    j = k + 1\n    return x[:, j]\n", 2),
    ]

    def visit_Call(self, node: cst.Call, ctx: Context) -> None:
        qualified = ctx.qualified(node.func)
        if qualified is not None and _RANDOM_AND_CLOCK.match(qualified) and _reaches_device(node, ctx):
            ctx.report(self, node, message=f"`{qualified}` inside the captured region: the capture freezes its value")


def _device_use(chain: list[cst.CSTNode], ctx: Context) -> tuple[bool, list[str]]:
    """Walk from a value up through its parents (nearest first, up to its statement): whether
    it becomes a device op's argument, an operand next to a device value, an index of a device
    tensor or a branch condition; else the local names it is assigned to."""
    child: cst.CSTNode | None = None
    for parent in chain:
        if isinstance(parent, cst.Call) and child is not parent.func:
            qualified = ctx.qualified(parent.func)
            if qualified is not None and qualified.startswith("torch.") and not qualified.startswith("torch.cuda."):
                return True, []
            if isinstance(parent.func, cst.Attribute) and ctx.value(parent.func.value).kind == DEVICE:
                return True, []
            if qualified is not None or not isinstance(parent.func, cst.Attribute):
                pass  # a host call (print, min, a helper): its result may still flow on
        elif isinstance(parent, cst.BinaryOperation):
            other = parent.right if child is parent.left else parent.left
            if ctx.value(other).kind == DEVICE:
                return True, []
        elif isinstance(parent, cst.Subscript) and child is not parent.value:
            if ctx.value(parent.value).kind == DEVICE:
                return True, []
        elif isinstance(parent, (cst.If, cst.While)) and child is parent.test:
            return True, []  # which kernels are captured is decided once, at capture
        elif isinstance(parent, cst.IfExp) and child is parent.test:
            return True, []
        elif isinstance(parent, (cst.Assign, cst.AnnAssign, cst.AugAssign)):
            targets = [t.target for t in parent.targets] if isinstance(parent, cst.Assign) else [parent.target]
            names = []
            for target in targets:
                parts = [e.value for e in target.elements] if isinstance(target, (cst.Tuple, cst.List)) else [target]
                names.extend(p.value for p in parts if isinstance(p, cst.Name))
            return False, names
        elif isinstance(parent, (cst.BaseStatement, cst.BaseSmallStatement)):
            return False, []
        child = parent
    return False, []


def _reaches_device(node: cst.Call, ctx: Context) -> bool:
    """Whether a host random draw or clock read reaches the device or a branch, directly or
    through local names (two assignments deep); timing code around a step does not."""
    used, names = _device_use(list(reversed(ctx.parents)), ctx)
    if used:
        return True
    function = ctx.parents[0] if ctx.parents and isinstance(ctx.parents[0], cst.FunctionDef) else None
    if function is None or not names:
        return False
    tainted = set(names)
    for _ in range(2):
        grown = False
        stack: list[tuple[cst.CSTNode, tuple]] = [(function.body, ())]
        while stack:
            current, ancestors = stack.pop()
            if isinstance(current, cst.Name) and current.value in tainted and ancestors:
                used, more = _device_use(list(reversed(ancestors)), ctx)
                if used:
                    return True
                if set(more) - tainted:
                    tainted |= set(more)
                    grown = True
                continue
            if isinstance(current, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
                continue
            below = ancestors + (current,)
            stack.extend((c, below) for c in code_children(current))
        if not grown:
            break
    return False


class PerStepBranch(Rule):
    """Flags `if`/`elif`/`while` and conditional expressions inside the captured region whose
    test is a per-step Python scalar (a decode position or counter, as GL508 recognises them).

    ## Why it breaks a CUDA graph
    The test is evaluated once, on the host, at capture: the graph holds the branch taken then
    and replays it at every step. The reference port's compressor boundary (`if (start_pos + 1) % ratio
    == 0: compress()`) then compresses at every replay or never; no error is raised.

    ## Example
        should_compress = (start_pos + 1) % ratio == 0
        if should_compress:
            kv_all = torch.cat([...])

    ## Use instead
    Run the branch's work every step and select its effect with a device mask or position
    (`torch.where(pos % ratio == ratio - 1, new, old)`, a write into slot `pos // ratio` that is
    masked until the boundary), or capture one graph per branch and pick the graph on the host.

    ## Known problems
    Per-step values are recognised by name, as in GL508. A branch on a host-known flag or on a
    shape is never flagged.
    """

    code = "GL511"
    name = "per-step-branch"
    message = "a branch on a per-step Python scalar inside the captured region: the capture freezes the branch it took"
    fix = "compute both paths and select with a device mask (torch.where on a device position), or capture one graph per branch"
    capture_only = True
    VALID = [
        # Host-known configuration and shapes are fine.
        "def f(x: torch.Tensor, ratio: int):\n    if ratio > 1:\n        x = x * 2\n    return x\n",
        "def f(x: torch.Tensor, start_pos: int):\n    if x.shape[0] > 1:\n        x = x[:1]\n    return x\n",
        # The graph-safe boundary: the position is a device tensor, the branch a mask.
        "def f(kv: torch.Tensor, new: torch.Tensor, pos: torch.Tensor, ratio: int):\n"
        "    return torch.where(pos % ratio == ratio - 1, new, kv)\n",
        # Outside the captured region (host orchestration) a per-step branch is expected.
        "def prepare(state, start_pos: int):  # graphlint: host\n    if start_pos == 0:\n        state.reset()\n",
    ]
    INVALID = [
        "def f(x: torch.Tensor, start_pos: int, ratio: int):\n    if (start_pos + 1) % ratio == 0:\n"
        "        x = x * 2\n    return x\n",
        # The reference port's compressor (dsv4_model/reference.py): the runtime sees the ops differ.
        "class Compressor:\n    def forward(self, x: torch.Tensor, start_pos: int):\n"
        "        should_compress = (start_pos + 1) % self.ratio == 0\n        if should_compress:\n"
        "            x = torch.cat([x, x], dim=1)\n        return x\n",
        "def f(x: torch.Tensor, step: int):\n    return x * 2 if step % 4 == 3 else x\n",
        "class Attn:\n    def forward(self, x: torch.Tensor):\n        while self.cur_pos > 8:\n"
        "            x = x * 0.5\n            break\n        return x\n",
    ]

    _per_step: set[str] = set()
    _active = False  # module-level code runs before any function

    def visit_FunctionDef(self, node: cst.FunctionDef, ctx: Context) -> None:
        self._per_step, self._active = _per_step_names(node, ctx)

    def _check(self, test: cst.BaseExpression, ctx: Context) -> None:
        if self._active and ctx.value(test).kind not in (DEVICE, HOST_TENSOR) and _mentions(test, self._per_step, ctx):
            ctx.report(self, test)

    def visit_If(self, node: cst.If, ctx: Context) -> None:
        self._check(node.test, ctx)

    def visit_While(self, node: cst.While, ctx: Context) -> None:
        self._check(node.test, ctx)

    def visit_IfExp(self, node: cst.IfExp, ctx: Context) -> None:
        self._check(node.test, ctx)


RULES = [GraphWithoutStream, StreamWithoutDevice, ReplayOutsideStream, SetDeviceForCapture, SynchronizeAroundReplay,
         CrossDeviceCopy, FollowDeviceCopy, FrozenScalar, HostRandomOrClock, CaptureWithoutWarmup, PerStepBranch]

__all__ = ["RULES", "PER_STEP_NAMES"]
