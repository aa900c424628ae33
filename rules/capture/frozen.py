"""GL508, GL509 and GL511: host values the capture freezes into the step (capture-only rules): a
per-step Python scalar as a kernel argument, Python randomness or a clock read that reaches the
device, a branch on a per-step scalar."""
from __future__ import annotations

import re

from graphlint.lazy import cst

from graphlint.analysis import catalog
from graphlint.analysis.children import code_children
from graphlint.analysis.inference.annotation_kinds import SEQUENCE_ANNOTATIONS, annotation_value
from graphlint.analysis.inference.lattice import DEVICE, HOST, HOST_TENSOR, MODULE
from graphlint.analysis.names import dotted
from graphlint.analysis.walk.rule import Context, Example, Rule
from ..shared._calls import maybe_device
from ..shared._orchestration import walk as _walk

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
_META = catalog.names("tensor", "shape_metadata")
_TORCH = catalog.prefix("namespaces", "torch")
_CUDA = catalog.prefix("namespaces", "cuda")
_HOST_APIS = catalog.prefixes("namespaces", "host_apis")


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
        # A device position in arithmetic is read at replay (the graph-safe form of the next one).
        "def f(q_len: int, pos: torch.Tensor):\n    return torch.arange(q_len, device=pos.device) + pos\n",
        # An element of a Python list picked by a position runs no kernel (qwen3_omni's grids).
        "def f(grid_hs: list[torch.Tensor], step: int):\n    return grid_hs[step] // 2\n",
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
        # A length set under a test of the fill counter is one phase's (the window filling, then
        # full: constant for every decode step once full), not a value that moves every step.
        "class SlidingLayer:\n    def __init__(self, w: int):\n        self.w = w\n        self.filled = 0\n"
        "    def update(self, n: int):\n        self.filled += n\n"
        "    def get_mask_sizes(self, q_len: int):\n        is_full = self.filled >= self.w\n"
        "        if is_full:\n            kv_length = self.w + q_len - 1\n"
        "        else:\n            kv_length = self.filled + q_len\n        return kv_length, 0\n"
        "def mask(cache, q_len: int, device):\n"
        "    kv_length, kv_offset = cache.get_mask_sizes(q_len)\n"
        "    return shifted(q_len, kv_length=kv_length, device=device)\n"
        "def shifted(q_len: int, kv_length: int, device=None):\n"
        "    return torch.arange(q_len, device=device) + kv_length\n",
        # A counter moved only in one phase (the prompt's length, advanced under `if prefill:`)
        # is no per-step value: unlimited_ocr's reference layer counts its prefill this way.
        "class PrefixLayer:\n    def __init__(self):\n        self.prefill_len = 0\n"
        "    def update(self, n: int, prefill: bool):\n        if prefill:\n            self.prefill_len += n\n"
        "    def get_seq_length(self):\n        return self.prefill_len\n"
        "def shift(cache, q_len: int, device):\n    past_seen_tokens = cache.get_seq_length()\n"
        "    return bias(q_len, device=device, past_seen_tokens=past_seen_tokens)\n"
        "def bias(q_len: int, device=None, past_seen_tokens=0):\n"
        "    return torch.arange(q_len, device=device) + past_seen_tokens\n",
        # A cache layer whose mask offsets are constants (transformers' full-attention static
        # layer): nothing per-step reaches the mask's arithmetic.
        "class FullLayer:\n    def get_mask_sizes(self, q_len: int):\n        return 16, 0\n"
        "def mask(cache, q_len: int, device):\n"
        "    kv_length, kv_offset = cache.get_mask_sizes(q_len)\n"
        "    return sdpa_mask(q_len, kv_length=kv_length, kv_offset=kv_offset, device=device)\n"
        "def sdpa_mask(q_len: int, kv_length: int, kv_offset: int = 0, device=None):\n"
        "    return torch.arange(kv_length, device=device) + kv_offset\n",
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
        # transformers' masking_utils: the offset is a host int that advances per step.
        "def f(q_len: int, start_pos: int, device):\n    return torch.arange(q_len, device=device) + start_pos\n",
        "def f(q_len: int, start_pos: int, device):\n    return torch.arange(q_len, device=device) < start_pos\n",
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
        # By dataflow across functions: transformers' static sliding-window layer returns its mask
        # offset from a counter it advances; the mask helper unpacks it and passes it on by
        # keyword; the mask adds it to an arange (masking_utils.py:531, seen frozen at runtime).
        "class SlidingLayer:\n    def __init__(self, w: int):\n        self.w = w\n        self.filled = 0\n"
        "    def update(self, n: int):\n        self.filled += n\n"
        "    def get_mask_sizes(self, q_len: int):\n        return self.w, max(self.filled - self.w + 1, 0)\n"
        "def mask(cache, q_len: int, device):\n"
        "    kv_length, kv_offset = cache.get_mask_sizes(q_len)\n"
        "    return sdpa_mask(q_len, kv_length=kv_length, kv_offset=kv_offset, device=device)\n"
        "def sdpa_mask(q_len: int, kv_length: int, kv_offset: int = 0, device=None):\n"
        "    return torch.arange(kv_length, device=device) + kv_offset\n",
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

    _sequences: frozenset[str] = frozenset()

    def visit_FunctionDef(self, node: cst.FunctionDef, ctx: Context) -> None:
        self._per_step, self._active = _per_step_names(node, ctx)
        self._sequences = _sequence_params(node)
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
        if isinstance(node.value, cst.Name) and node.value.value in self._sequences:
            return  # an element of a Python list (`grid_hs: list[Tensor]`): picked on the host, no kernel
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
            if not qualified.startswith(_TORCH) or qualified.startswith(_HOST_APIS):
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

    def visit_BinaryOperation(self, node: cst.BinaryOperation, ctx: Context) -> None:
        # `torch.arange(q_length, device=d) + q_offset`: the scalar operand is baked into the
        # kernel at capture, as a scalar argument is.
        self._operands(node.left, node.right, ctx)

    def visit_Comparison(self, node: cst.Comparison, ctx: Context) -> None:
        # `kv_idx < kv_offset + n` on a device tensor: the same for an ordering's operand
        # (equality with a scalar builds a token mask: `input_ids == image_token_id`).
        if len(node.comparisons) == 1 and type(node.comparisons[0].operator).__name__ in _ORDERINGS:
            self._operands(node.left, node.comparisons[0].comparator, ctx)

    def _operands(self, left: cst.BaseExpression, right: cst.BaseExpression, ctx: Context) -> None:
        if not self._active:
            return
        for tensor, scalar in ((left, right), (right, left)):
            if ctx.value(tensor).kind == DEVICE and self._tainted(scalar, ctx):
                ctx.report(self, scalar)
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
        if (name in PER_STEP_NAMES or (name in _ANNOTATED_ONLY and kind == HOST)
                or name in getattr(ctx.facts, "per_step_names", ())):
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
        elif not by_name and isinstance(node, cst.Attribute) and _advanced_object_attr(node, ctx):
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


# Tensor methods that take Python scalars as kernel arguments (graphlint/data/torch_values.toml).
_SCALAR_ARG_METHODS = catalog.names("tensor", "scalar_arg_methods")
_ORDERINGS = frozenset({"LessThan", "LessThanEqual", "GreaterThan", "GreaterThanEqual"})  # libcst types, by name
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


def _advanced_object_attr(node: cst.Attribute, ctx: Context) -> bool:
    """`inference_params.seqlen_offset`: an attribute of a passed object that a loop of the
    project advances between steps (graphlint.callgraph.project_summaries learns them), holding no tensor."""
    return (isinstance(node.value, cst.Name) and node.value.value != "self"
            and node.attr.value in getattr(ctx.facts, "per_step_param_attrs", ())
            and ctx.value(node).kind not in (DEVICE, HOST_TENSOR, MODULE))


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
        if not by_name and _advanced_object_attr(node, ctx):
            return True
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
            if qualified is not None and qualified.startswith(_TORCH) and not qualified.startswith(_CUDA):
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
        # The first step against the rest (mamba_ssm's `inference_params.seqlen_offset > 0`,
        # litgpt's `input_pos_maxp1 is not None`): every decode step takes the same branch.
        "def f(x: torch.Tensor, start_pos: int):\n    if start_pos == 0:\n        return x\n    return x * 2\n",
        "def f(x: torch.Tensor, mask: torch.Tensor, input_pos_maxp1=None):\n"
        "    if input_pos_maxp1 is not None:\n        mask = mask[..., :8]\n    return x + mask\n",
        # A bounds check only raises: the captured path never takes it.
        "def f(x: torch.Tensor, start_pos: int, max_len: int):\n    if start_pos >= max_len:\n"
        "        raise ValueError('too long')\n    return x\n",
    ]
    INVALID = [
        # The position derived first, then tested against zero, still changes per step.
        "def f(x: torch.Tensor, start_pos: int, ratio: int):\n    rem = (start_pos + 1) % ratio\n"
        "    if rem == 0:\n        x = x * 2\n    return x\n",
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
    _params: set[str] = set()
    _active = False  # module-level code runs before any function

    def visit_FunctionDef(self, node: cst.FunctionDef, ctx: Context) -> None:
        self._per_step, self._active = _per_step_names(node, ctx)
        params = node.params
        self._params = {p.name.value for p in [*params.posonly_params, *params.params, *params.kwonly_params]}

    def _check(self, test: cst.BaseExpression, ctx: Context) -> None:
        if self._active and ctx.value(test).kind not in (DEVICE, HOST_TENSOR) and any(
                _mentions(part, self._per_step, ctx) and not self._same_every_decode_step(part)
                for part in _test_operands(test)):
            ctx.report(self, test)

    def _same_every_decode_step(self, test: cst.BaseExpression) -> bool:
        """`start_pos == 0`, `params.seqlen_offset > 0`, `input_pos_maxp1 is not None`: the
        position itself (a parameter or an attribute, not a local computed from it) tested
        against none or zero splits the first step (prefill) from decode, and every decode step
        takes the same branch, so the capture freezes nothing that changes."""
        if not (isinstance(test, cst.Comparison) and len(test.comparisons) == 1):
            return False
        left, target = test.left, test.comparisons[0]
        source = isinstance(left, cst.Attribute) or (isinstance(left, cst.Name) and left.value in self._params)
        if not source:
            return False
        if isinstance(target.operator, (cst.Is, cst.IsNot)):
            return isinstance(target.comparator, cst.Name) and target.comparator.value == "None"
        return (isinstance(target.operator, (cst.Equal, cst.NotEqual, cst.GreaterThan, cst.LessThanEqual))
                and isinstance(target.comparator, cst.Integer) and target.comparator.value == "0")

    def visit_If(self, node: cst.If, ctx: Context) -> None:
        if _only_raises(node.body) and node.orelse is None:
            return  # a bounds check (`if pos > max_len: raise ...`): the captured path never raises
        self._check(node.test, ctx)

    def visit_While(self, node: cst.While, ctx: Context) -> None:
        self._check(node.test, ctx)

    def visit_IfExp(self, node: cst.IfExp, ctx: Context) -> None:
        self._check(node.test, ctx)


def _sequence_params(function: cst.FunctionDef) -> frozenset[str]:
    """Parameters annotated as Python lists, tuples or sequences (of anything)."""
    found = set()
    params = function.params
    for param in [*params.posonly_params, *params.params, *params.kwonly_params]:
        annotation = param.annotation.annotation if param.annotation else None
        if isinstance(annotation, cst.Subscript):
            annotation = annotation.value
        if annotation is not None and (dotted(annotation) or "").rsplit(".", 1)[-1] in SEQUENCE_ANNOTATIONS:
            found.add(param.name.value)
    return frozenset(found)


def _test_operands(test: cst.BaseExpression) -> list[cst.BaseExpression]:
    """The operands of `and` / `or` / `not` in a branch test, each judged alone."""
    if isinstance(test, cst.BooleanOperation):
        return _test_operands(test.left) + _test_operands(test.right)
    if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        return _test_operands(test.expression)
    return [test]


def _only_raises(block: cst.BaseSuite) -> bool:
    body = block.body
    if isinstance(block, cst.IndentedBlock):
        if len(body) != 1 or not isinstance(body[0], cst.SimpleStatementLine):
            return False
        body = body[0].body
    return len(body) == 1 and isinstance(body[0], cst.Raise)


RULES = [FrozenScalar, HostRandomOrClock, PerStepBranch]
