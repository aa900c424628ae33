"""GL4xx: per-step allocation and host data copied to the device. A per-step allocation that
outlives the step is overwritten by the next replay (GL401; used and dropped in the step: GL405,
off by default); host data copied per step is frozen in; a cache grown with cat changes shape."""
from __future__ import annotations

from graphlint.lazy import cst

from graphlint.analysis import catalog
from graphlint.analysis.capture_sites import CAPTURE_BLOCK
from graphlint.analysis.children import iter_code
from graphlint.analysis.walk.rule import Context, Example, Rule
from .shared._calls import is_device, keyword, method_name, positional, receiver, source_text
from .shared._escape import RETURNED, STORED, Escapes

_FACTORIES = catalog.names("factories", "names")
_LIKE = catalog.names("factories", "like")
_NEW_METHODS = catalog.names("factories", "methods")
_FROM_HOST = catalog.names("factories", "from_host_data")
_FROM_HOST_METHODS = catalog.names("factories", "from_host_data_methods")
_TO_DEVICE_METHODS = catalog.names("tensor", "move_methods") | catalog.names("tensor", "to_device_methods")
_INDEX_PUT_METHODS = catalog.names("factories", "index_put_methods")
_PINNED_METHODS = catalog.names("tensor", "pinned_methods")


class PerStepAllocation(Rule):
    """Flags torch factories (`torch.zeros`, `torch.full`, `torch.arange`, ...), `*_like`,
    `new_*` and `.clone()` in per-step code whose tensor outlives the step: returned by the
    captured callable, or kept on `self`, in a global or in a container that persists (a list
    attribute, a cache's `update`), and `.new_tensor()` of host data.

    An allocation used and dropped inside the step is GL405's (off by default): at replay the
    graph serves it from its private pool, which is no hazard. So is one whose data is copied
    into a buffer that persists (`self.cache.index_copy_(1, pos, k)`, `buf[:, i] = k`,
    `buf.copy_(k)`): the data outlives the step, the tensor does not. One that the capture's
    own `with torch.cuda.graph(g):` block makes and keeps is the graph's static output, as
    PyTorch's documentation writes it (`static_y = model(static_x)` inside the block).

    ## Why it breaks a CUDA graph
    Under capture the allocation comes from the graph's private pool, and every replay writes
    the same memory again. A tensor the step hands out (its output, a tensor kept on the
    module or appended to a list) is therefore overwritten by the next replay while the caller
    still holds it, and eager code that replaces it is never seen by the graph. Outputs of a
    captured step must be static buffers the caller copies from. `.new_tensor(values)` copies
    host data the capture freezes.

    ## Example
        def forward(self, x):
            out = torch.empty_like(x)
            torch.mul(x, 2, out=out)
            return out                  # the captured callable returns it

    ## Use instead
    Preallocate the output in `__init__` (`self.register_buffer(...)`), write it in place
    (`fill_` / `copy_` / `out=`) and return that buffer; the caller copies what it keeps
    (`logits = static_out.clone()` after replay, outside the graph).

    ## Known problems
    The fate of a tensor is followed within its function: a tensor returned to a caller counts
    as the step's output only when the function is the root of its region (the captured
    callable, an entry point, an `nn.Module` forward nothing linted holds); returned from an
    inner layer to the model's forward it is an intermediate (GL405), even when the root
    returns it on. A tensor passed to another function is assumed not to be kept by it; an
    object built from it (`Output(logits=x)`, by the convention that classes are
    capitalised) holds it.
    """

    code = "GL401"
    name = "per-step-allocation"
    severity = "warning"
    message = "allocates a device tensor every step that outlives the step: the next replay overwrites it"
    fix = "preallocate in __init__ (register_buffer), write it in place (fill_ / copy_ / out=) and return or keep that buffer"
    capture_only = True
    VALID = [
        "class M(nn.Module):\n    def __init__(self, n, dev):\n        super().__init__()\n        self.register_buffer('buf', torch.zeros(n, device=dev))\n    def forward(self, x: torch.Tensor):\n        self.buf.fill_(0.0)\n        return torch.where(x > 0, x, 0.0)\n",
        "def f(x: torch.Tensor):\n    return x.view(-1).contiguous()\n",
        # Intermediates (GL405): used and dropped inside the step, served from the graph's pool.
        "def f(x: torch.Tensor):\n    return torch.where(x > 0, x, torch.zeros_like(x))\n",
        "def f(x: torch.Tensor, w: torch.Tensor):\n    tmp = torch.empty(x.shape[0], w.shape[1], device=x.device)\n"
        "    torch.mm(x, w, out=tmp)\n    return tmp.sum(-1)\n",
        # A captured sampler (nano-vllm's Sampler): the exponential noise is an intermediate.
        "class Sampler(nn.Module):\n    def forward(self, logits: torch.Tensor, temperatures: torch.Tensor):\n"
        "        probs = torch.softmax(logits.div_(temperatures.unsqueeze(1)), dim=-1)\n"
        "        noise = torch.empty_like(probs).exponential_(1)\n"
        "        return probs.div_(noise.clamp_min_(1e-10)).argmax(dim=-1)\n",
        # A constant from host data (`new_tensor(0)`), a mask multiplied in place, a gathered copy.
        "def f(scores: torch.Tensor, mutual: torch.Tensor):\n    zero = scores.new_tensor(0)\n"
        "    return torch.where(mutual, scores, zero)\n",
        "def f(pixels: torch.Tensor, n: int):\n    mask = torch.ones(n, n, device=pixels.device)\n    mask[1:, :] = 0.0\n"
        "    pixels *= mask\n    return pixels\n",
        "def f(out: dict, table_idx: torch.Tensor):\n    table = torch.zeros(21, 37, device=table_idx.device)\n"
        "    out['mask'] = table[table_idx]\n    return out\n",
        # Awaited and yielded values (an async engine loop) are read like any other.
        "async def step(x: torch.Tensor, fetch):\n    y = await fetch(x)\n    await fetch(torch.zeros_like(y))\n    return y\n",
        # An object the step builds (attention metadata made per step): its constructor's tensors
        # live one step.
        "class Seqlen:\n    def __init__(self, input_lengths: torch.Tensor):\n"
        "        self.cu_seqlen_q = torch.arange(input_lengths.shape[0] + 1, device=input_lengths.device)\n",
        # State made when it is missing or of another batch size (recurrent-gemma's conv state):
        # the warm-up makes it, a replay never runs the branch.
        "class Block(nn.Module):\n    def forward(self, x: torch.Tensor):\n"
        "        if self.state is None or self.state.shape[0] != x.shape[0]:\n"
        "            self.state = torch.zeros(x.shape[0], 4, device=x.device)\n"
        "            self.other = torch.zeros(x.shape[0], 2, device=x.device)\n"
        "        self.state.add_(x[:, :4])\n        return x\n",
        # The one-line form (ktransformers' chunked attention mask).
        "class Attn(nn.Module):\n    def forward(self, x: torch.Tensor):\n"
        "        self.mask = torch.zeros(1, 8, device=x.device) if self.mask is None else self.mask\n"
        "        return x + self.mask\n",
        # Copied into a static cache in place: the data outlives the step, the tensor does not.
        "class Attn(nn.Module):\n    def forward(self, x: torch.Tensor, pos: torch.Tensor):\n"
        "        k = x.clone()\n        self.k_cache.index_copy_(1, pos, k)\n        self.k_cache[:, 0] = k[:, 0]\n"
        "        return x\n",
        # The capture block's own static outputs (a decoder's state made while it is captured).
        "class Decoder:\n    def capture(self, x: torch.Tensor):\n        self.graph = torch.cuda.CUDAGraph()\n"
        "        with torch.cuda.graph(self.graph):\n            self.scores = torch.zeros_like(x)\n"
        "            self.scores.add_(x)\n",
    ]
    INVALID = [
        "def f(x: torch.Tensor, v: float):\n    return torch.full((4,), v, device=x.device)\n",
        "def f(x: torch.Tensor):\n    y = x.clone()\n    return y\n",
        "def f(x: torch.Tensor):\n    return x.new_zeros(x.shape)\n",
        # Kept on the module, in a list attribute, in a cache the step updates, in a global.
        "class M(nn.Module):\n    def forward(self, x: torch.Tensor):\n        self.last = torch.zeros_like(x)\n        return x\n",
        "class M(nn.Module):\n    def forward(self, x: torch.Tensor):\n        h = x.clone()\n        self.history.append(h)\n        return x\n",
        "class Attn(nn.Module):\n    def forward(self, x: torch.Tensor, cache):\n"
        "        k = torch.empty_like(x)\n        k.copy_(x)\n        cache.update(k, self.layer_idx)\n        return x\n",
        "LAST = None\ndef f(x: torch.Tensor):\n    global LAST\n    LAST = torch.ones_like(x)\n    return x\n",
        # Returned by the captured callable through an output object, and built from host data.
        "class Model(nn.Module):\n    def forward(self, x: torch.Tensor):\n        logits = torch.zeros(x.shape[0], 8, device=x.device)\n"
        "        logits.copy_(x[:, :8])\n        return Output(logits=logits)\n",
        "def f(x: torch.Tensor, ids: list):\n    return x[:, 0] + x.new_tensor(ids)\n",
        # Kept in the caller's dict (SAM's tracker metadata, carried from frame to frame).
        "def update(meta: dict, prev: torch.Tensor, mask: torch.Tensor):\n    new = prev.clone()\n"
        "    new.masked_fill_(mask, 0)\n    meta['last'] = new[0:1]\n",
        # The captured callable of a runner (`with torch.cuda.graph(g): out = model(x)` elsewhere).
        Example("class Model(nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.layer = Layer()\n"
                "    def forward(self, x: torch.Tensor):\n        out = torch.empty_like(x)\n        tmp = torch.empty_like(x)\n"
                "        torch.mul(self.layer(x), 2, out=tmp)\n        out.copy_(tmp)\n        return out\n"
                "class Layer(nn.Module):\n    def forward(self, x: torch.Tensor):\n        return x * 2\n", 1),
    ]

    def visit_FunctionDef(self, node: cst.FunctionDef, ctx: Context) -> None:
        self._escapes: Escapes | None = None

    def _allocation(self, node: cst.Call, ctx: Context) -> str | None:
        """The op's display name when `node` allocates a device tensor, else None."""
        qualified = ctx.qualified(node.func)
        if qualified in _FACTORIES or qualified in _LIKE:
            return f"`{qualified.split('.', 1)[1]}`" if ctx.value(node).kind == "device" else None
        if qualified is None and method_name(node) in _NEW_METHODS and is_device(ctx, receiver(node)):
            return f"`.{method_name(node)}()`"
        return None

    def visit_Call(self, node: cst.Call, ctx: Context) -> None:
        op = self._allocation(node, ctx)
        if op is None:
            return
        data = positional(node)[:1]
        if method_name(node) in _FROM_HOST_METHODS and data and not is_device(ctx, data[0]) and not _constant(data[0]):
            ctx.report(self, node, message=f"{op} builds a device tensor from host data every step: the capture freezes the data")
            return
        escapes = getattr(self, "_escapes", None)
        function = ctx.parents[0] if ctx.parents and isinstance(ctx.parents[0], cst.FunctionDef) else None
        if escapes is None and function is not None:
            escapes = self._escapes = Escapes(function, ctx, lambda call: self._allocation(call, ctx) is not None)
        fate = escapes.fate(node) if escapes is not None else None
        if fate in (STORED, RETURNED) and ctx.zone == CAPTURE_BLOCK:
            # Made by the `with torch.cuda.graph(g):` block itself and kept: the graph's static
            # output, which every replay rewrites by design (`static_y = model(static_x)`).
            return
        if fate == STORED:
            where = escapes.where.get(id(node), "state that outlives the step")
            ctx.report(self, node, message=f"{op} allocates a tensor kept in {where}: it outlives the step, "
                                           f"and every replay overwrites it")
        elif fate == RETURNED:
            ctx.report(self, node, message=f"{op} allocates the tensor the step returns: the next replay overwrites "
                                           f"it while the caller holds it", escape=RETURNED)
        else:
            ctx.report(IntermediateAllocation, node,
                       message=f"{op} allocates an intermediate device tensor every step")


class IntermediateAllocation(Rule):
    """Flags per-step allocations used and dropped inside the step: the static-buffer
    opportunities, no capture hazard (off by default: select GL405 or ALL).

    Reported by the same walk as GL401, for every allocation that GL401 does not flag: used
    only inside its function, or returned to a caller inside the step.

    ## Why it breaks a CUDA graph
    It does not: under capture the allocation comes from the graph's private memory pool, and
    every replay reuses that memory. Eagerly each step pays an allocation, and the graph's pool
    holds the memory of every intermediate for as long as the graph lives.

    ## Example
        scale = torch.where(amax > 0, amax / 6.0, torch.zeros_like(amax))

    ## Use instead
    A scalar instead of `zeros_like` in `torch.where`; a buffer allocated once in `__init__`
    and written in place (`out=`, `copy_`) where the pool's size matters.
    """

    code = "GL405"
    name = "intermediate-allocation"
    severity = "warning"
    default_enabled = False
    message = "allocates an intermediate device tensor every step (served from the graph's pool at replay: no hazard)"
    fix = "where memory matters, preallocate in __init__ and write in place (out= / copy_); use a scalar, not zeros_like, in torch.where"
    capture_only = True
    VALID = [
        "class M(nn.Module):\n    def __init__(self, n, dev):\n        super().__init__()\n        self.register_buffer('buf', torch.zeros(n, device=dev))\n    def forward(self, x: torch.Tensor):\n        self.buf.fill_(0.0)\n        return torch.where(x > 0, x, 0.0)\n",
        # Outlives the step: GL401's.
        "def f(x: torch.Tensor):\n    y = x.clone()\n    return y\n",
    ]
    INVALID = [
        "def f(x: torch.Tensor):\n    return torch.where(x > 0, x, torch.zeros_like(x))\n",
        "class Sampler(nn.Module):\n    def forward(self, probs: torch.Tensor):\n"
        "        noise = torch.empty_like(probs).exponential_(1)\n        return probs.div(noise).argmax(dim=-1)\n",
    ]


class HostToDeviceCopy(Rule):
    """Flags host data copied to the device inside the step: `torch.tensor(values,
    device=...)`, `.to(device)` / `.cuda()` of host tensors built in the step, and the
    implicit copies of a host index: a device tensor indexed (read, written or
    `index_put_`) with a Python list, a numpy array or a CPU tensor.

    ## Why it breaks a CUDA graph
    The copy reads pageable host memory (a hidden sync), and under capture its source is
    frozen: replay copies the capture-time data, so new positions or token ids are ignored.

    ## Example
        positions = torch.tensor([start_pos], device=x.device)
        rows = hidden[[0, 2, 5]]          # the list is copied to the device first

    ## Use instead
    Keep the value in a static device buffer updated before replay, from a pinned host
    buffer: `pinned[0] = start_pos; pos_buf.copy_(pinned, non_blocking=True)`; keep index
    tensors on the device (a buffer made once in `__init__`). A pinned tensor copied with
    `non_blocking=True` is that pattern and is not reported.
    """

    code = "GL402"
    name = "host-to-device-copy"
    message = "host data copied to the device inside the step: a hidden sync, and the capture freezes the source"
    fix = "keep it in a static device buffer, updated before replay from a pinned host buffer (copy_(pinned, non_blocking=True))"
    stream_capture_only = True
    capture_only = True
    VALID = [
        "def f(pos_buf: torch.Tensor, pinned: torch.Tensor):\n    pos_buf.copy_(pinned, non_blocking=True)\n",
        "def f(x: torch.Tensor, dev):\n    return x.to(dev)\n",
        "def f(x: torch.Tensor):\n    return torch.tensor(3.0)\n",
        # nano-vllm model_runner.py: a pinned upload, asynchronous, before replay.
        "def prepare_sample(temperatures: list):\n"
        "    return torch.tensor(temperatures, dtype=torch.float32, pin_memory=True).cuda(non_blocking=True)\n",
        "def f(x: torch.Tensor, idx: torch.Tensor, i: int):\n    return x[idx] + x[i] + x[:, 0:2]\n",
        "def f(x: torch.Tensor, rows: list):\n    return [rows[i] for i in range(len(rows))]\n",
        "import numpy as np\ndef f(n: int):\n    rows = np.arange(n)\n    host = np.zeros((n, 2))\n    host[rows, 0] = 0.0\n    return host\n",
    ]
    INVALID = [
        "def f(x: torch.Tensor, start_pos: int):\n    return torch.tensor([start_pos], device=x.device)\n",
        "def f(hidden: torch.Tensor):\n    return hidden[[0, 2, 5]]\n",
        "import numpy as np\ndef f(scores: torch.Tensor, n: int):\n    rows = np.arange(n)\n    scores[rows, 0] = 0.0\n",
        "def f(x: torch.Tensor, v: torch.Tensor, n: int):\n    idx = torch.arange(n)\n    x.index_put_((idx,), v)\n",
        # A per-step position vector built from CPU aranges and moved every step.
        "def f(x: torch.Tensor, a: int, b: int):\n"
        "    pos = torch.cat([torch.arange(a), torch.arange(b)]).to(x.device)\n    return x[pos]\n",
        "def f(x: torch.Tensor, n: int):\n    t = torch.arange(n).to(x.device)\n    return t\n",
        "def f(ids: list):\n    return torch.tensor(ids).cuda()\n",
    ]

    def visit_Call(self, node: cst.Call, ctx: Context) -> None:
        qualified = ctx.qualified(node.func)
        if qualified in _FROM_HOST:
            data = positional(node)[:1]
            if (ctx.value(node).kind == "device" and not (data and is_device(ctx, data[0]))
                    and not (data and _has_device_element(ctx, data[0]))):  # GL108 reports those
                ctx.report(self, node)
            return
        method = method_name(node) if qualified is None else None
        if method in _TO_DEVICE_METHODS and ctx.value(receiver(node)).kind == "host_tensor" and ctx.value(node).kind == "device":
            if not (_is_pinned(receiver(node), ctx) and _is_true(keyword(node, "non_blocking"))):
                ctx.report(self, node)
        elif method in _INDEX_PUT_METHODS and is_device(ctx, receiver(node)):
            indices = positional(node)[:1]
            if indices and any(_is_host_index(ctx, part) for part in _elements(indices[0])):
                ctx.report(self, indices[0], message="a host index (list, numpy array, CPU tensor) is copied to the device every step")

    def visit_Subscript(self, node: cst.Subscript, ctx: Context) -> None:
        if not is_device(ctx, node.value):
            return
        for element in node.slice:
            inner = element.slice
            if isinstance(inner, cst.Index) and _is_host_index(ctx, inner.value):
                ctx.report(self, inner.value, message="a host index (list, numpy array, CPU tensor) into a device tensor is copied to the device every step")
                return


def _constant(node: cst.BaseExpression) -> bool:
    """A literal number, or a list or tuple of them: data a capture may freeze, it never changes."""
    if isinstance(node, cst.UnaryOperation):
        return _constant(node.expression)
    if isinstance(node, (cst.Integer, cst.Float, cst.Imaginary)):
        return True
    if isinstance(node, cst.Name):
        return node.value in ("True", "False")
    return isinstance(node, (cst.List, cst.Tuple)) and all(_constant(e.value) for e in node.elements)


def _call_on_device(ctx: Context, node: cst.BaseExpression) -> bool:
    return isinstance(node, cst.Call) and any(is_device(ctx, arg.value) for arg in node.args)


def _elements(node: cst.BaseExpression) -> list[cst.BaseExpression]:
    return [e.value for e in node.elements] if isinstance(node, (cst.Tuple, cst.List)) else [node]


def _is_host_index(ctx: Context, node: cst.BaseExpression) -> bool:
    """A list literal of indices or a host array used as an index: copied to the device."""
    if isinstance(node, cst.List):
        return bool(node.elements) and all(ctx.value(e.value).kind == "host" for e in node.elements)
    return ctx.value(node).kind == "host_tensor"


def _has_device_element(ctx: Context, node: cst.BaseExpression) -> bool:
    return isinstance(node, (cst.List, cst.Tuple)) and any(is_device(ctx, e.value) for e in node.elements)


def _is_true(node: cst.BaseExpression | None) -> bool:
    return isinstance(node, cst.Name) and node.value == "True"


def _is_pinned(node: cst.BaseExpression | None, ctx: Context) -> bool:
    """`torch.tensor(..., pin_memory=True)` or `.pin_memory()`: page-locked host memory."""
    if not isinstance(node, cst.Call):
        return False
    return _is_true(keyword(node, "pin_memory")) or method_name(node) in _PINNED_METHODS


class GrowingCache(Rule):
    """Flags caches grown with `torch.cat` / `torch.stack` onto state that outlives the step
    (an attribute, an object's field through a local alias).

    ## Why it breaks a CUDA graph
    The tensor's shape changes every step, so no captured graph matches the next step, and
    every step reallocates and copies the whole cache.

    ## Example
        self.k_cache = torch.cat([self.k_cache, k], dim=1)

    ## Use instead
    A static cache of the maximum length written in place at a device-side slot:
    `self.k_cache.index_copy_(1, pos, k)` with a validity mask `arange(L) <= pos`. A loop
    inside the step that concatenates (`out = cat([out, x])` per chunk or per condition) is
    not this: its trip count is fixed for a captured shape, so the result's shape is too.
    """

    code = "GL403"
    name = "growing-cache"
    message = "cache grown with cat/stack: its shape changes every step, so no captured graph fits"
    fix = "preallocate the cache at maximum length and write in place at a device-side slot (index_copy_ / scatter_) with a validity mask"
    VALID = [
        # lmdeploy step_inputs.py merge: two batches joined once into a new local.
        "def merge(a, b):\n    num_ignore_eos = torch.cat([a.num_ignore_eos, b.num_ignore_eos], 0)\n    return num_ignore_eos\n",
        "def f(delta, other_ids: torch.Tensor, new: torch.Tensor):\n    delta.ids = torch.cat([other_ids, new], 1)\n",
        "def f(q: torch.Tensor, k: torch.Tensor):\n    return torch.cat([q, k], dim=-1)\n",
        "class A(nn.Module):\n    def forward(self, k: torch.Tensor, pos: torch.Tensor):\n        self.k_cache.index_copy_(1, pos, k)\n",
        # A loop inside the step (moshi's conditioner fuser, ktransformers' chunked attention).
        "def f(xs, y: torch.Tensor):\n    out = y\n    for x in xs:\n        out = torch.cat((out, x), dim=0)\n    return out\n",
    ]
    INVALID = [
        # lmdeploy strategies/ar/step_inputs.py: the token history of a state object, grown
        # by one column every decode step through a local alias.
        "def step_sampling_delta(sampling_delta, next_token_ids: torch.Tensor):\n"
        "    all_ids = sampling_delta.all_ids\n    if all_ids is not None:\n"
        "        sampling_delta.all_ids = torch.cat([all_ids, next_token_ids[:, None]], 1)\n    return sampling_delta\n",
        "class A(nn.Module):\n    def forward(self, k: torch.Tensor):\n        self.k_cache = torch.cat([self.k_cache, k], dim=1)\n",
        "class Layer:\n    def update(self, key_states: torch.Tensor):\n        full = torch.cat([self.keys, key_states], dim=-2)\n        self.keys = full[:, :, -127:, :]\n        return full\n",
        "class C:\n    def update(self, name: str, compressed: torch.Tensor):\n        self.compressed_kv[name] = torch.cat([self.compressed_kv[name], compressed], dim=1)\n",
    ]

    _CONCAT = catalog.names("factories", "concat")

    def visit_FunctionDef(self, node: cst.FunctionDef, ctx: Context) -> None:
        # State this function writes back (`self.keys = ...`, `self.cache[name] = ...`): a cat
        # that reads it grows it, directly or through a local (`full = cat([self.keys, k])`).
        self._state: set[str] = set()
        for target in _assign_targets(node.body):
            if _is_self_state(target):
                self._state.add(source_text(target))
        # Locals that alias an attribute of some object (`all_ids = inputs.all_ids`): a cat of
        # the alias written back to that attribute grows it just the same.
        self._aliases: dict[str, str] = {}
        for assign in iter_code(node.body, skip=(cst.FunctionDef,)):
            if (type(assign) is cst.Assign and len(assign.targets) == 1 and isinstance(assign.targets[0].target, cst.Name)
                    and isinstance(assign.value, cst.Attribute) and isinstance(assign.value.value, cst.Name)):
                self._aliases[assign.targets[0].target.value] = source_text(assign.value)

    def visit_Call(self, node: cst.Call, ctx: Context) -> None:
        if ctx.qualified(node.func) not in self._CONCAT:
            return
        pieces = positional(node)[:1] or [keyword(node, "tensors")]
        if not pieces or not isinstance(pieces[0], (cst.List, cst.Tuple)):
            return
        elements = [element.value for element in pieces[0].elements]
        if any(_is_self_state(e) and source_text(e) in getattr(self, "_state", ()) for e in elements):
            ctx.report(self, node)
            return
        statement = ctx.statement
        if isinstance(statement, cst.SimpleStatementLine):
            for small in statement.body:
                if isinstance(small, cst.Assign) and small.value is node:
                    written = {source_text(t.target) for t in small.targets if isinstance(t.target, cst.Attribute)}
                    grown = {source_text(e) if isinstance(e, cst.Attribute) else getattr(self, "_aliases", {}).get(e.value)
                             for e in elements if isinstance(e, (cst.Attribute, cst.Name))}
                    if written & grown:
                        ctx.report(self, node)  # obj.ids = cat([obj.ids, new]), through an alias or not
                        return


def _is_self_state(node: cst.BaseExpression) -> bool:
    while isinstance(node, cst.Subscript):
        node = node.value
    return isinstance(node, cst.Attribute) and isinstance(node.value, cst.Name) and node.value.value == "self"


def _assign_targets(body: cst.CSTNode) -> list[cst.BaseExpression]:
    """Targets of the assignments in a function body (nested functions are their own)."""
    targets: list[cst.BaseExpression] = []
    for node in iter_code(body, skip=(cst.FunctionDef,)):
        if type(node) is cst.Assign:
            targets.extend(t.target for t in node.targets)
        elif type(node) is cst.AnnAssign:
            targets.append(node.target)
    return targets


class ScalarWriteToDevice(Rule):
    """Flags writing a Python scalar into one element of a device tensor: `buf[0] = token_id`.

    ## Why it breaks a CUDA graph
    The scalar is copied from pageable host memory (one sync each), and during capture the
    copy is refused ("Cannot copy between CPU and CUDA tensors during CUDA graph capture
    unless the CPU tensor is pinned"). The reference port's `dec_tid_buf[0] = python_int`.

    ## Example
        tok_buf[0] = next_token

    ## Use instead
    A pinned host buffer and an asynchronous copy before replay:
    `tok_pinned[0] = next_token; tok_buf.copy_(tok_pinned, non_blocking=True)`. Through a
    boolean mask (`x[mask] = 0.0`) a scalar is fine: that is `masked_fill_`; into a slice
    (`ids[:, 0] = start_id`) it is `fill_`, a kernel with the scalar as its argument and no copy
    (a scalar that changes every step is then frozen: GL508's case, not a copy).
    """

    code = "GL404"
    name = "scalar-write-to-device"
    message = "a Python scalar written into a device tensor: a host-to-device copy per write, refused during capture"
    fix = "write into a pinned host buffer and copy_(pinned, non_blocking=True) into the device buffer before replay"
    stream_capture_only = True
    VALID = [
        "class D(nn.Module):\n    def __init__(self, dev):\n        super().__init__()\n        self.tok_pinned = torch.zeros(1, dtype=torch.long, pin_memory=True)\n        self.tok = torch.zeros(1, dtype=torch.long, device=dev)\n    def set_token(self, tid: int):\n        self.tok_pinned[0] = tid\n        self.tok.copy_(self.tok_pinned, non_blocking=True)\n",
        "def f(x: torch.Tensor):\n    m = x < 0\n    x[m] = 0.0\n",
        "def f(x: torch.Tensor, y: torch.Tensor):\n    x[0] = y\n",
        # A literal into a slice is fill_ (litgpt's top-p mask, its sliding-window mask).
        "def f(remove: torch.Tensor):\n    remove[-1:] = 0\n",
        "def f(mask: torch.Tensor, i: int, start: int):\n    mask[i, start : i + 1] = float('-inf')\n",
        "def f(is_vision: torch.Tensor):\n    is_vision[..., 0] = False\n",
        # transformers' shift_tokens_right: a config value into a column is fill_ too.
        "def shift(input_ids: torch.Tensor, decoder_start_token_id: int):\n"
        "    shifted = input_ids.new_zeros(input_ids.shape)\n"
        "    shifted[:, 1:] = input_ids[:, :-1].clone()\n"
        "    shifted[:, 0] = decoder_start_token_id\n    return shifted\n",
        # lmdeploy logits_process.py: a custom processor maps a row of logits to a new row.
        "def apply(processors: list, all_ids: torch.Tensor, logits: torch.Tensor):\n"
        "    for seq_id, processor in enumerate(processors):\n"
        "        logits[seq_id] = processor(all_ids[seq_id], logits[seq_id])\n    return logits\n",
    ]
    INVALID = [
        "def f(tok_buf: torch.Tensor, next_token: int):\n    tok_buf[0] = next_token\n",
        "class M:\n    def __init__(self, dev):\n        self.tok_buf = torch.zeros(2, 1, dtype=torch.long, device=dev)\n    def set_tokens(self, tokens):\n        for b, token in enumerate(tokens):\n            self.tok_buf[b, 0] = token\n",
        "def f(offsets: torch.Tensor, g: int, n: int):\n    offsets[g] = n * 128\n",
        # One element: a copy from host memory even for a literal.
        "def f(flags: torch.Tensor):\n    flags[0] = 1\n",
    ]

    def visit_Assign(self, node: cst.Assign, ctx: Context) -> None:
        value = ctx.value(node.value)
        if value.kind not in ("host", "unknown"):
            return
        for target in node.targets:
            sub = target.target
            if not (isinstance(sub, cst.Subscript) and is_device(ctx, sub.value)):
                continue
            indices = [e.slice for e in sub.slice]
            if any(isinstance(i, cst.Index) and ctx.value(i.value).is_bool for i in indices):
                continue  # through a mask a scalar is masked_fill_
            # One element: every index a host integer (`...` or `None` keep whole dimensions).
            element_write = all(isinstance(i, cst.Index) and not isinstance(i.value, cst.Ellipsis)
                                and not (isinstance(i.value, cst.Name) and i.value.value == "None")
                                and ctx.value(i.value).kind == "host" for i in indices)
            # An unknown value is reported only for a single-element write (buf[b, 0] = token),
            # where a tensor value would be unusual; slices take tensors (cache[:, s] = kv). A
            # call on device tensors (`processor(ids[i], logits[i])`) returns a tensor.
            if value.kind == "unknown" and _call_on_device(ctx, node.value):
                continue
            # Into a slice a scalar is `fill_` (torch's indexing copy_to): no copy (whether the
            # value changes per step is GL508's question). Into one element it is a copy from
            # host memory.
            if element_write:
                ctx.report(self, sub)


RULES = [PerStepAllocation, HostToDeviceCopy, GrowingCache, ScalarWriteToDevice, IntermediateAllocation]
