"""GL501-GL504: streams and devices in the code that captures and replays graphs. Host code by
design, so these rules set `applies_in_host_code` and hold in every region. Each fires only in
code that handles several devices, by what the code does with devices (rules/shared/_devices.py)."""
from __future__ import annotations

from graphlint.lazy import cst

from graphlint.analysis import catalog
from graphlint.analysis.names import dotted
from graphlint.analysis.walk.rule import Context, Example, Rule
from ..shared._calls import keyword, method_name, positional, receiver
from ..shared._orchestration import REPLAY_METHODS, graph_call, in_stream_context, orchestration, with_evidence

_STREAM = catalog.names("devices", "stream")
_SET_DEVICE = catalog.names("devices", "set_current")


class GraphWithoutStream(Rule):
    """Flags `torch.cuda.graph(g)` without an explicit `stream=` in code that handles several devices.

    Several devices: an index other than the current device (`"cuda:1"`, `torch.device("cuda",
    i)`, `f"cuda:{i}"`, `.cuda(i)`, `torch.cuda.device(i)` with `i` not the device made current
    by `set_device`), a loop whose variable is used as a device, or `torch.cuda.device_count()`
    (not a loop over it that only indexes a per-device list, such as registering each device's
    default generator with the graph); never a variable's name. `set_device(d)` followed by work on `d` is single-device code.
    On a single device PyTorch's default capture side stream is correct.

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
        # One device made current, then captured on (a worker per GPU): single-device code.
        "class Worker:\n    def __init__(self, local_rank: int):\n        self.device = torch.device(f'cuda:{local_rank}')\n"
        "    def capture(self, step):  # graphlint: host\n        torch.cuda.set_device(self.device)\n        g = torch.cuda.CUDAGraph()\n"
        "        step()\n        with torch.cuda.graph(g):\n            step()\n        return g\n",
        # Registering every device's default generator with the graph is no work on those devices.
        "def capture(step, s):  # graphlint: host\n    g = torch.cuda.CUDAGraph()\n    step()\n"
        "    for i in range(torch.cuda.device_count()):\n        g.register_generator_state(torch.cuda.default_generators[i])\n"
        "    with torch.cuda.graph(g):\n        step()\n",
        # A benchmark's timer named like a GPU is no evidence of several GPUs.
        "import time\ndef bench(step, n_gpus: int):  # graphlint: host\n    g = torch.cuda.CUDAGraph()\n    step()\n"
        "    with torch.cuda.graph(g):\n        step()\n    t0 = time.perf_counter()\n    g.replay()\n"
        "    gpu_time = time.perf_counter() - t0\n    return gpu_time / n_gpus\n",
    ]
    INVALID = [
        "def capture(model, devices):  # graphlint: host\n    for d in devices:\n        with torch.cuda.device(d):\n"
        "            g = torch.cuda.CUDAGraph()\n            model.step()\n            with torch.cuda.graph(g):\n"
        "                model.step()\n",
        "def capture_all(step):  # graphlint: host\n    graphs = []\n    for i in range(torch.cuda.device_count()):\n"
        "        g = torch.cuda.CUDAGraph()\n        step(i)\n        with torch.cuda.graph(g):\n            step(i)\n"
        "        graphs.append(g)\n    return graphs\n",
        "from torch.cuda import graph\ndef capture(g, step):\n    torch.cuda.set_device(1)\n    step()\n"
        "    with graph(g, pool=None):\n        step()\n",
    ]

    def visit_Call(self, node: cst.Call, ctx: Context) -> None:
        if graph_call(node, ctx) and keyword(node, "stream") is None and len(positional(node)) < 3:
            facts = orchestration(ctx)
            if facts is not None and facts.multi_device:
                ctx.report(self, node, message=with_evidence(self.message, facts))


class StreamWithoutDevice(Rule):
    """Flags `torch.cuda.Stream()` without `device=` in code that handles several devices.

    Several devices as GL501 tells them: by what the code does with devices, never by a name.

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
    or its callers: a function that only receives the devices (`def make(devices): for d in
    devices: ...`) and never uses one as a device is single-device code to this rule.
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
        # set_device(d), then a stream on that same device: single-device code.
        "class Runner:\n    def init(self):  # graphlint: host\n        torch.cuda.set_device(self.device)\n"
        "        self.stream = torch.cuda.Stream()\n        self.graph = torch.cuda.CUDAGraph()\n",
        "def init(local_rank: int):  # graphlint: host\n    device = torch.device('cuda', local_rank)\n"
        "    torch.cuda.set_device(device)\n    return torch.cuda.Stream()\n",
        # Names say nothing: `gpu_time`, `devices`, `world_size` and `rank` in one-device code.
        "import time\ndef time_step(step, devices, world_size: int, rank: int):  # graphlint: host\n"
        "    s = torch.cuda.Stream()\n    start = time.perf_counter()\n    with torch.cuda.stream(s):\n        step()\n"
        "    gpu_time = time.perf_counter() - start\n    return gpu_time, len(devices), world_size, rank\n",
        "def make(devices):\n    return torch.cuda.Stream()\n",
    ]
    INVALID = [
        "def make(devices):\n    out = []\n    for d in devices:\n        torch.cuda.set_device(d)\n        out.append(torch.cuda.Stream())\n    return out\n",
        "def capture(x):  # graphlint: host\n    y = x.to('cuda:1')\n    s = torch.cuda.Stream()\n    return y, s\n",
        # Buffers on cuda:1, the stream on whichever device is current.
        "def setup(n: int):  # graphlint: host\n    buf = torch.zeros(n, device='cuda:1')\n    s = torch.cuda.Stream()\n"
        "    with torch.cuda.stream(s):\n        buf.add_(1)\n    return buf, s\n",
        "def streams():  # graphlint: host\n    return [torch.cuda.Stream() for _ in range(torch.cuda.device_count())]\n",
    ]

    def visit_Call(self, node: cst.Call, ctx: Context) -> None:
        if ctx.qualified(node.func) not in _STREAM or positional(node) or keyword(node, "device") is not None:
            return
        facts = orchestration(ctx)
        if facts is not None and facts.multi_device:
            ctx.report(self, node, message=with_evidence(self.message, facts))


class ReplayOutsideStream(Rule):
    """Flags `g.replay()` of a CUDA graph outside a `with torch.cuda.stream(s):` block, in code that handles several devices.

    The evidence of several devices is GL501's (what the code does with devices); on one device
    replaying on the current stream is correct.

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
        # A parameter named like a GPU, or set_device of one device: one device.
        "class Decoder:\n    def step(self, gpu):  # graphlint: host\n        self.graph_a.replay()\n",
        "def replay(g, device):  # graphlint: host\n    torch.cuda.set_device(device)\n    g.replay()\n",
    ]
    INVALID = [
        "def replay(g):  # graphlint: host\n    torch.cuda.set_device(1)\n    g.replay()\n",
        "def replay_all(graphs):  # graphlint: host\n    for index, g in enumerate(graphs):\n"
        "        with torch.cuda.device(index):\n            g.replay()\n",
        "def run(step):  # graphlint: host\n    graph = torch.cuda.CUDAGraph()\n    with torch.cuda.graph(graph, stream=s):\n"
        "        step()\n    x = step.out.to('cuda:1')\n    graph.replay()\n",
    ]

    def visit_Call(self, node: cst.Call, ctx: Context) -> None:
        if method_name(node) not in REPLAY_METHODS or node.args:
            return
        name = dotted(receiver(node)) or ""
        last = name.rsplit(".", 1)[-1].lower()
        facts = orchestration(ctx)
        is_graph = last == "g" or "graph" in last or (facts is not None and name in facts.graph_names)
        if is_graph and facts is not None and facts.multi_device and not in_stream_context(ctx):
            ctx.report(self, node, message=with_evidence(self.message, facts))


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
        # One device per process, made current before capture: single-device code.
        "def capture(g, step, device):  # graphlint: host\n    torch.cuda.set_device(device)\n    step()\n"
        "    with torch.cuda.graph(g):\n        step()\n",
        "def replay(g, s):  # graphlint: host\n    with torch.cuda.stream(s):\n        g.replay()\n",
    ]
    INVALID = [
        "def capture(graphs, step):  # graphlint: host\n    for index, g in enumerate(graphs):\n"
        "        torch.cuda.set_device(index)\n        step()\n        with torch.cuda.graph(g):\n            step()\n",
        Example("def replay(g):  # graphlint: host\n    torch.cuda.set_device(1)\n    g.replay()\n", 1),
    ]

    def visit_Call(self, node: cst.Call, ctx: Context) -> None:
        if ctx.qualified(node.func) in _SET_DEVICE:
            facts = orchestration(ctx)
            if facts is not None and facts.orchestrates and facts.multi_device:
                ctx.report(self, node, message=with_evidence(self.message, facts))


RULES = [GraphWithoutStream, StreamWithoutDevice, ReplayOutsideStream, SetDeviceForCapture]
