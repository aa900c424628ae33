"""GL508: a per-step Python scalar as a kernel argument inside the captured region (an index, a
slice bound, a scalar argument of a tensor operation), which the capture freezes at its
capture-time value (capture-only)."""
from __future__ import annotations

from graphlint.lazy import cst

from graphlint.analysis import catalog
from graphlint.analysis.inference.annotation_kinds import SEQUENCE_ANNOTATIONS
from graphlint.analysis.inference.lattice import DEVICE, HOST, HOST_TENSOR, MODULE
from graphlint.analysis.names import dotted
from graphlint.analysis.walk.rule import Context, Rule
from ..shared._calls import maybe_device
from .per_step import mentions, per_step_names

_TORCH = catalog.prefix("namespaces", "torch")
_HOST_APIS = catalog.prefixes("namespaces", "host_apis")
# Tensor methods that take Python scalars as kernel arguments (graphlint/data/torch_values.toml).
_SCALAR_ARG_METHODS = catalog.names("tensor", "scalar_arg_methods")
_ORDERINGS = frozenset({"LessThan", "LessThanEqual", "GreaterThan", "GreaterThanEqual"})  # libcst types, by name


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
        self._per_step, self._active = per_step_names(node, ctx)
        self._sequences = _sequence_params(node)
        self._per_step_by_name = (per_step_names(node, ctx, by_name=True)[0]
                                  if getattr(ctx.facts, "per_step_params", None) or getattr(ctx.facts, "per_step_attrs", None)
                                  else self._per_step)

    def _tainted(self, node: cst.CSTNode | None, ctx: Context, dataflow: bool = True) -> bool:
        if node is None or ctx.value(node).kind in (DEVICE, HOST_TENSOR, MODULE) or ctx.value(node).is_bool:
            return False
        if not dataflow:
            return mentions(node, self._per_step_by_name, ctx, by_name=True)
        return mentions(node, self._per_step, ctx)

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


RULES = [FrozenScalar]
