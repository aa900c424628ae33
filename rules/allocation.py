"""GL4xx: per-step allocation and host data copied to the device. A graph records a per-step
allocation from its private pool, but that defeats static buffers; host data copied per step
is frozen into the capture; a cache grown with cat changes shape every step."""
from __future__ import annotations

import libcst as cst

from graphlint.analysis import catalog
from graphlint.analysis.children import iter_code
from graphlint.analysis.names import dotted
from graphlint.analysis.rule import Context, Rule
from ._calls import is_device, keyword, method_name, positional, receiver

_FACTORIES = catalog.names("factories", "names")
_LIKE = catalog.names("factories", "like")
_NEW_METHODS = catalog.names("factories", "methods")
_FROM_HOST = catalog.names("factories", "from_host_data")


class PerStepAllocation(Rule):
    """Flags torch factories (`torch.zeros`, `torch.full`, `torch.arange`, ...), `*_like`,
    `new_*` and `.clone()` that create device tensors in per-step code.

    ## Why it breaks a CUDA graph
    Under capture the allocation comes from the graph's private pool and is replayed, so it
    is legal, but every step pays an allocation eagerly, the output address is owned by the
    graph, and static-buffer designs break (the reference port's `torch.full` in MoE, `torch.zeros` in
    the scale assembly, `zeros_like` inside `where`).

    ## Example
        gsa = torch.full((E,), l1_gs, device=x.device)

    ## Use instead
    Preallocate in `__init__` (`self.register_buffer(...)`) and write in place:
    `self._gsa_buf.fill_(l1_gs)`; pass a scalar instead of `zeros_like` to `torch.where`.
    """

    code = "GL401"
    name = "per-step-allocation"
    severity = "warning"
    message = "allocates a new device tensor every step instead of writing a preallocated buffer"
    fix = "preallocate in __init__ (register_buffer) and write in place (fill_ / copy_ / out=); use a scalar, not zeros_like, in torch.where"
    capture_only = True
    VALID = [
        "class M(nn.Module):\n    def __init__(self, n, dev):\n        super().__init__()\n        self.register_buffer('buf', torch.zeros(n, device=dev))\n    def forward(self, x: torch.Tensor):\n        self.buf.fill_(0.0)\n        return torch.where(x > 0, x, 0.0)\n",
        "def f(x: torch.Tensor):\n    return x.view(-1).contiguous()\n",
    ]
    INVALID = [
        "def f(x: torch.Tensor, v: float):\n    return torch.full((4,), v, device=x.device)\n",
        "def f(x: torch.Tensor):\n    return torch.where(x > 0, x, torch.zeros_like(x))\n",
        "def f(x: torch.Tensor):\n    y = x.clone()\n    return y\n",
        "def f(x: torch.Tensor):\n    return x.new_zeros(x.shape)\n",
    ]

    def visit_Call(self, node: cst.Call, ctx: Context) -> None:
        qualified = ctx.qualified(node.func)
        if qualified in _FACTORIES or qualified in _LIKE:
            if ctx.value(node).kind == "device":
                ctx.report(self, node, message=f"`{qualified.split('.', 1)[1]}` allocates a new device tensor every step")
        elif qualified is None and method_name(node) in _NEW_METHODS and is_device(ctx, receiver(node)):
            ctx.report(self, node, message=f"`.{method_name(node)}()` allocates a new device tensor every step")


class HostToDeviceCopy(Rule):
    """Flags host data copied to the device inside the step: `torch.tensor(values,
    device=...)`, and `.to(device)` / `.cuda()` of host tensors built in the step.

    ## Why it breaks a CUDA graph
    The copy reads pageable host memory (a hidden sync), and under capture its source is
    frozen: replay copies the capture-time data, so new positions or token ids are ignored.

    ## Example
        positions = torch.tensor([start_pos], device=x.device)

    ## Use instead
    Keep the value in a static device buffer updated before replay, from a pinned host
    buffer: `pinned[0] = start_pos; pos_buf.copy_(pinned, non_blocking=True)`.
    """

    code = "GL402"
    name = "host-to-device-copy"
    message = "host data copied to the device inside the step: a hidden sync, and the capture freezes the source"
    fix = "keep it in a static device buffer, updated before replay from a pinned host buffer (copy_(pinned, non_blocking=True))"
    capture_only = True
    VALID = [
        "def f(pos_buf: torch.Tensor, pinned: torch.Tensor):\n    pos_buf.copy_(pinned, non_blocking=True)\n",
        "def f(x: torch.Tensor, dev):\n    return x.to(dev)\n",
        "def f(x: torch.Tensor):\n    return torch.tensor(3.0)\n",
    ]
    INVALID = [
        "def f(x: torch.Tensor, start_pos: int):\n    return torch.tensor([start_pos], device=x.device)\n",
        "def f(x: torch.Tensor, n: int):\n    t = torch.arange(n).to(x.device)\n    return t\n",
        "def f(ids: list):\n    return torch.tensor(ids).cuda()\n",
    ]

    def visit_Call(self, node: cst.Call, ctx: Context) -> None:
        qualified = ctx.qualified(node.func)
        if qualified in _FROM_HOST:
            data = positional(node)[:1]
            if ctx.value(node).kind == "device" and not (data and is_device(ctx, data[0])):
                ctx.report(self, node)
            return
        method = method_name(node) if qualified is None else None
        if method in ("to", "cuda") and ctx.value(receiver(node)).kind == "host_tensor" and ctx.value(node).kind == "device":
            ctx.report(self, node)


class GrowingCache(Rule):
    """Flags caches grown with `torch.cat` / `torch.stack` onto an attribute or a
    loop-carried variable.

    ## Why it breaks a CUDA graph
    The tensor's shape changes every step, so no captured graph matches the next step, and
    every step reallocates and copies the whole cache.

    ## Example
        self.k_cache = torch.cat([self.k_cache, k], dim=1)

    ## Use instead
    A static cache of the maximum length written in place at a device-side slot:
    `self.k_cache.index_copy_(1, pos, k)` with a validity mask `arange(L) <= pos`.
    """

    code = "GL403"
    name = "growing-cache"
    message = "cache grown with cat/stack: its shape changes every step, so no captured graph fits"
    fix = "preallocate the cache at maximum length and write in place at a device-side slot (index_copy_ / scatter_) with a validity mask"
    VALID = [
        "def f(q: torch.Tensor, k: torch.Tensor):\n    return torch.cat([q, k], dim=-1)\n",
        "class A(nn.Module):\n    def forward(self, k: torch.Tensor, pos: torch.Tensor):\n        self.k_cache.index_copy_(1, pos, k)\n",
    ]
    INVALID = [
        "class A(nn.Module):\n    def forward(self, k: torch.Tensor):\n        self.k_cache = torch.cat([self.k_cache, k], dim=1)\n",
        "class Layer:\n    def update(self, key_states: torch.Tensor):\n        full = torch.cat([self.keys, key_states], dim=-2)\n        self.keys = full[:, :, -127:, :]\n        return full\n",
        "class C:\n    def update(self, name: str, compressed: torch.Tensor):\n        self.compressed_kv[name] = torch.cat([self.compressed_kv[name], compressed], dim=1)\n",
        "def f(xs, y: torch.Tensor):\n    out = y\n    for x in xs:\n        out = torch.cat((out, x), dim=0)\n    return out\n",
    ]

    _CONCAT = ("torch.cat", "torch.stack", "torch.concat", "torch.concatenate")

    def visit_FunctionDef(self, node: cst.FunctionDef, ctx: Context) -> None:
        # State this function writes back (`self.keys = ...`, `self.cache[name] = ...`): a cat
        # that reads it grows it, directly or through a local (`full = cat([self.keys, k])`).
        self._state: set[str] = set()
        for target in _assign_targets(node.body):
            if _is_self_state(target):
                self._state.add(_code(target))

    def visit_Call(self, node: cst.Call, ctx: Context) -> None:
        if ctx.qualified(node.func) not in self._CONCAT:
            return
        pieces = positional(node)[:1] or [keyword(node, "tensors")]
        if not pieces or not isinstance(pieces[0], (cst.List, cst.Tuple)):
            return
        elements = [element.value for element in pieces[0].elements]
        if any(_is_self_state(e) and _code(e) in getattr(self, "_state", ()) for e in elements):
            ctx.report(self, node)
            return
        statement = ctx.statement
        if ctx.loop_depth > 0 and isinstance(statement, cst.SimpleStatementLine):
            for small in statement.body:
                if isinstance(small, cst.Assign) and small.value is node:
                    names = {dotted(t.target) for t in small.targets}
                    if any(isinstance(e, cst.Name) and e.value in names for e in elements):
                        ctx.report(self, node)  # loop-carried: out = cat([out, x])


_EMPTY_MODULE = cst.Module(body=[])


def _code(node: cst.CSTNode) -> str:
    return _EMPTY_MODULE.code_for_node(node)


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
    """Flags writing a Python scalar into an element or slice of a device tensor:
    `buf[0] = token_id`.

    ## Why it breaks a CUDA graph
    The scalar is copied from pageable host memory (one sync each), and during capture the
    copy is refused ("Cannot copy between CPU and CUDA tensors during CUDA graph capture
    unless the CPU tensor is pinned"). The reference port's `dec_tid_buf[0] = python_int`.

    ## Example
        tok_buf[0] = next_token

    ## Use instead
    A pinned host buffer and an asynchronous copy before replay:
    `tok_pinned[0] = next_token; tok_buf.copy_(tok_pinned, non_blocking=True)`. Through a
    boolean mask (`x[mask] = 0.0`) a scalar is fine: that is `masked_fill_`.
    """

    code = "GL404"
    name = "scalar-write-to-device"
    message = "a Python scalar written into a device tensor: a host-to-device copy per write, refused during capture"
    fix = "write into a pinned host buffer and copy_(pinned, non_blocking=True) into the device buffer before replay"
    VALID = [
        "class D(nn.Module):\n    def __init__(self, dev):\n        super().__init__()\n        self.tok_pinned = torch.zeros(1, dtype=torch.long, pin_memory=True)\n        self.tok = torch.zeros(1, dtype=torch.long, device=dev)\n    def set_token(self, tid: int):\n        self.tok_pinned[0] = tid\n        self.tok.copy_(self.tok_pinned, non_blocking=True)\n",
        "def f(x: torch.Tensor):\n    m = x < 0\n    x[m] = 0.0\n",
        "def f(x: torch.Tensor, y: torch.Tensor):\n    x[0] = y\n",
    ]
    INVALID = [
        "def f(tok_buf: torch.Tensor, next_token: int):\n    tok_buf[0] = next_token\n",
        "class M:\n    def __init__(self, dev):\n        self.tok_buf = torch.zeros(2, 1, dtype=torch.long, device=dev)\n    def set_tokens(self, tokens):\n        for b, token in enumerate(tokens):\n            self.tok_buf[b, 0] = token\n",
        "def f(offsets: torch.Tensor, g: int, n: int):\n    offsets[g] = n * 128\n",
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
            element_write = all(isinstance(i, cst.Index) and ctx.value(i.value).kind == "host" for i in indices)
            # An unknown value is reported only for a single-element write (buf[b, 0] = token),
            # where a tensor value would be unusual; slices take tensors (cache[:, s] = kv).
            if value.kind == "host" or element_write:
                ctx.report(self, sub)


RULES = [PerStepAllocation, HostToDeviceCopy, GrowingCache, ScalarWriteToDevice]
