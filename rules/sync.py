"""GL1xx: explicit device-to-host reads. Each one stalls the host until the device catches
up, and inside a capture it fails ("operation not permitted when stream is capturing")."""
from __future__ import annotations

from graphlint.lazy import cst

from graphlint.analysis import catalog
from graphlint.analysis.inference.annotation_kinds import annotation_value
from graphlint.analysis.walk.rule import Context, Example, Rule
from .shared._calls import failure_message, is_device, maybe_device, method_name, positional, receiver
from .shared._ranks import scalar_tensors

_HOST_BOOL = catalog.names("sync", "host_bool")
_HOST_BOOL_METHODS = catalog.names("sync", "host_bool_methods")
_ITEM = catalog.names("sync", "item")
_TOLIST = catalog.names("sync", "tolist")
_HOST_COPY = catalog.names("sync", "host_copy")
_MOVE = catalog.names("tensor", "move_methods")
_SCALAR_BUILTINS = catalog.names("sync", "scalar_builtins")
_FORMAT_BUILTINS = catalog.names("sync", "format_builtins")
_SYNCHRONIZE = catalog.names("synchronize", "functions") | catalog.names("synchronize", "event")
_SYNCHRONIZE_METHODS = catalog.names("synchronize", "methods")
_FROM_SCALARS = catalog.names("sync", "from_scalars")


class ItemCall(Rule):
    """Flags `.item()` on a device tensor in per-step code.

    ## Why it breaks a CUDA graph
    `.item()` copies one value to the host and waits for every queued kernel. Eagerly it is a
    stall per call (the reference port's mHC magnitude check cost 122 syncs per step); inside a capture
    it raises "operation not permitted when stream is capturing".

    ## Example
        scale = x.abs().max().item()
        if scale > 1e4: warn("overflow")

    ## Use instead
    Keep the value on the device (`torch.where`, `clamp`, masks) or read it outside the step,
    after replay, from a pinned buffer.
    """

    code = "GL101"
    name = "item-call"
    message = "`.item()` reads a device value on the host: a sync every step, and an error during capture"
    fix = "keep the value on the device (torch.where / clamp / masks) or read it after replay from a pinned buffer"
    VALID = [
        "def step(x: torch.Tensor):\n    return torch.where(x.abs().max() > 1e4, x * 0.5, x)\n",
        "def step(x):\n    n = len(x.shape)\n    return {'a': 1}.items()\n",
        "def step(pinned: torch.Tensor):\n    host = torch.zeros(1, pin_memory=True)\n    return host.item()\n",
        "def report(x: torch.Tensor):  # graphlint: host\n    return x.item()\n",
        "class M(nn.Module):\n    def __init__(self, x):\n        self.scale = x.max().item()\n",
    ]
    INVALID = [
        "def post_block(X_next: torch.Tensor):\n    if X_next.abs().max().item() > 1e4:\n        print('big')\n",
        "def step(logits):\n    return logits.argmax(-1).item()\n",
        "import torch as t\ndef f(x):\n    y = t.softmax(x, -1)\n    return y[0].item()\n",
    ]

    def visit_Call(self, node: cst.Call, ctx: Context) -> None:
        if method_name(node) in _ITEM and maybe_device(ctx, receiver(node)):
            ctx.report(self, node)


class TolistCall(Rule):
    """Flags `.tolist()` on a device tensor in per-step code.

    ## Why it breaks a CUDA graph
    `.tolist()` copies the whole tensor to the host and blocks; the Python list it builds is
    frozen into nothing a graph can replay. The reference port's MoE used `bincount(...).tolist()` to
    drive a Python loop over experts.

    ## Example
        counts = torch.bincount(idx, minlength=E).tolist()
        for e, n in enumerate(counts): ...

    ## Use instead
    `counts.zero_(); counts.scatter_add_(0, idx, ones)` into a preallocated buffer, and a
    fixed-shape gather of expert weights instead of a host loop.
    """

    code = "GL102"
    name = "tolist-call"
    message = "`.tolist()` copies a device tensor to a host list and blocks every step"
    fix = "keep the data on the device; replace host loops over the list with fixed-shape gathers (index_select / scatter_add_)"
    VALID = [
        "def step(x: torch.Tensor):\n    return x.shape.numel()\n",
        "def f(x: torch.Tensor):\n    return list(x.shape)\n",
        "def load(x: torch.Tensor):  # graphlint: host\n    return x.tolist()\n",
        # lmdeploy nn/linear/base.py: a closure reads the enclosing function's CPU tensor
        # (`nonlocal tp_sizes`, built by torch.tensor without a device): a host list, no sync.
        "class Gather(nn.Module):\n    def forward(self, x: torch.Tensor, sizes: list):\n"
        "        def take():\n            nonlocal tp_sizes\n            cur = tp_sizes.minimum(4)\n"
        "            tp_sizes -= cur\n            return cur.tolist()\n"
        "        tp_sizes = torch.tensor(sizes)\n        return take()\n",
    ]
    INVALID = [
        "def moe(idx: torch.Tensor, E: int):\n    counts = torch.bincount(idx, minlength=E).tolist()\n    return counts\n",
        "def f(ids):\n    return ids.tolist()\n",
        # The same closure over a device tensor reads it back every step.
        "class Gather(nn.Module):\n    def forward(self, x: torch.Tensor):\n"
        "        def take():\n            return counts.tolist()\n"
        "        counts = torch.zeros(4, device=x.device)\n        return take()\n",
    ]

    def visit_Call(self, node: cst.Call, ctx: Context) -> None:
        if method_name(node) in _TOLIST and maybe_device(ctx, receiver(node)):
            ctx.report(self, node)


class HostCopy(Rule):
    """Flags `.cpu()`, `.numpy()`, `.to("cpu")` and `.to(device="cpu")` of device tensors.

    ## Why it breaks a CUDA graph
    A device-to-host copy without a pinned destination is synchronous; during capture it
    raises, and its host result would not be refreshed on replay anyway.

    ## Example
        probs = logits.softmax(-1).cpu()

    ## Use instead
    Copy after replay into a pinned buffer: `host_buf.copy_(dev_buf, non_blocking=True)` and
    an event, outside the captured step.
    """

    code = "GL103"
    name = "host-copy"
    message = "device-to-host copy inside the step: it blocks, and fails during capture"
    fix = "copy after replay into a pinned host buffer with copy_(..., non_blocking=True) and an event"
    VALID = [
        "def step(x: torch.Tensor):\n    return x.to(torch.float32)\n",
        "def step(x: torch.Tensor, dev: torch.device):\n    return x.to(dev)\n",
        "def step(x: torch.Tensor):\n    y = x.to(dtype=torch.bfloat16)\n    return y\n",
        "def step(h):\n    t = torch.zeros(2)\n    return t.numpy()\n",
    ]
    INVALID = [
        "def step(logits: torch.Tensor):\n    return logits.cpu()\n",
        "def step(logits: torch.Tensor):\n    return logits.to('cpu')\n",
        "def step(logits: torch.Tensor):\n    return logits.to(device='cpu')\n",
        "def step(x: torch.Tensor):\n    return x.float().numpy()\n",
    ]

    def visit_Call(self, node: cst.Call, ctx: Context) -> None:
        method = method_name(node)
        if method in _HOST_COPY and maybe_device(ctx, receiver(node)):
            ctx.report(self, node)
        elif method in _MOVE and maybe_device(ctx, receiver(node)) and ctx.value(node).kind == "host_tensor":
            ctx.report(self, node)


class ScalarConversion(Rule):
    """Flags `int()`, `float()`, `bool()` and `complex()` of a device value.

    ## Why it breaks a CUDA graph
    Converting a tensor to a Python number is `.item()` under another name: a sync, and an
    error during capture. The number it produces is then frozen into whatever it sizes.

    ## Example
        n = int(lengths.max())
        out = torch.zeros(n, device=x.device)

    ## Use instead
    Use a host-known bound (the static maximum) and mask, or keep the arithmetic on tensors.
    """

    code = "GL104"
    name = "scalar-conversion"
    message = "converting a device tensor to a Python number syncs the host"
    fix = "use a host-known bound (static maximum) and masking, or keep the arithmetic on tensors"
    VALID = [
        "def step(x: torch.Tensor, n: int):\n    return int(n) + int(x.shape[0]) + float(x.numel())\n",
        "def step(x: torch.Tensor):\n    v = x.max().item()\n    return float(v)\n",
        "def step(cfg):\n    return int(cfg.hidden_size)\n",
    ]
    INVALID = [
        "def step(lengths: torch.Tensor):\n    return int(lengths.max())\n",
        "def step(x: torch.Tensor):\n    return float(x.sum()) + bool(x.any())\n",
    ]

    def visit_Call(self, node: cst.Call, ctx: Context) -> None:
        if isinstance(node.func, cst.Name) and node.func.value in _SCALAR_BUILTINS:
            args = positional(node)
            if args and is_device(ctx, args[0]):
                ctx.report(self, node, message=f"`{node.func.value}()` of a device tensor syncs the host")


class PrintDeviceValue(Rule):
    """Flags printing or formatting a device value: `print(t)`, f-strings, `.format`, `%`, `str()`.

    ## Why it breaks a CUDA graph
    Formatting a tensor reads its values on the host: a sync eagerly and an error during
    capture. Debug prints left in a forward are the usual source.

    ## Example
        print(f"attn max {scores.max()}")

    A message built only when the step fails (a `raise`, an assert's message) is not flagged.

    ## Use instead
    Remove it from the step, gate it behind a host flag that is off during capture, or log
    after replay from the output buffers.
    """

    code = "GL105"
    name = "print-device-value"
    message = "printing or formatting a device value reads it on the host every step"
    fix = "drop the print from the step, gate it behind a host flag that is off during capture, or log after replay"
    VALID = [
        "def step(x: torch.Tensor):\n    print(f'shape {x.shape} dtype {x.dtype}')\n",
        "def step(x: torch.Tensor, i: int):\n    name = 'layer_%d' % i\n    return name\n",
        # higgs-audio's attention mask check: the message is built only when the step fails.
        "def step(mask: torch.Tensor):\n    if mask.dim() != 4:\n        raise ValueError(f'unsupported mask {mask}')\n",
        "def step(x: torch.Tensor, n: int):\n    assert x.shape[0] == n, f'bad input {x}'\n",
    ]
    INVALID = [
        "def step(scores: torch.Tensor):\n    print(f'attn max {scores.max()}')\n",
        "def step(x: torch.Tensor):\n    print(x)\n",
        "def step(x: torch.Tensor):\n    s = 'norm={:.2f}'.format(x.norm())\n    return s\n",
        "def step(x: torch.Tensor):\n    return 'v=%s' % x\n",
    ]

    def visit_FormattedStringExpression(self, node: cst.FormattedStringExpression, ctx: Context) -> None:
        if is_device(ctx, node.expression) and not failure_message(node, ctx):
            ctx.report(self, node.expression)

    def visit_Call(self, node: cst.Call, ctx: Context) -> None:
        func = node.func
        if failure_message(node, ctx):
            return
        if isinstance(func, cst.Name) and func.value in _FORMAT_BUILTINS:
            for arg in node.args:
                if is_device(ctx, arg.value):
                    ctx.report(self, arg.value)
        elif isinstance(func, cst.Attribute) and func.attr.value == "format" and isinstance(
                func.value, (cst.SimpleString, cst.ConcatenatedString)):
            for arg in node.args:
                if is_device(ctx, arg.value):
                    ctx.report(self, arg.value)

    def visit_BinaryOperation(self, node: cst.BinaryOperation, ctx: Context) -> None:
        if isinstance(node.operator, cst.Modulo) and isinstance(node.left, (cst.SimpleString, cst.ConcatenatedString)) \
                and not failure_message(node, ctx):
            operands = node.right.elements if isinstance(node.right, cst.Tuple) else None
            targets = [e.value for e in operands] if operands is not None else [node.right]
            for target in targets:
                if is_device(ctx, target):
                    ctx.report(self, target)


class DeviceSynchronize(Rule):
    """Flags `torch.cuda.synchronize()` and `.synchronize()` on streams and events.

    ## Why it breaks a CUDA graph
    A synchronize blocks the host until the device drains, on every GPU for the global form,
    and is illegal during capture. Sync debug mode does not report the global or event form,
    so only a linter sees them before a profile does.

    ## Example
        torch.cuda.synchronize()
        graph_b.replay()

    ## Use instead
    Order work between streams with events: `ev.record(s1); s2.wait_event(ev)` or
    `s2.wait_stream(s1)`; keep timing syncs behind a profiling flag that is off in capture.
    """

    code = "GL106"
    name = "device-synchronize"
    message = "synchronize() blocks the host until the device drains; illegal during capture"
    fix = "order streams with events (event.record(); stream.wait_event(event)) or stream.wait_stream(); no host sync in the step"
    VALID = [
        "def step(s1, s2, ev):\n    ev.record(s1)\n    s2.wait_event(ev)\n",
        "def bench():  # graphlint: host\n    torch.cuda.synchronize()\n",
    ]
    INVALID = [
        "def step(g):\n    torch.cuda.synchronize()\n    g.replay()\n",
        "def step(ev):\n    ev.synchronize()\n",
        "def step():\n    torch.cuda.current_stream().synchronize()\n",
        "from torch.cuda import synchronize\ndef step():\n    synchronize()\n",
    ]

    def visit_Call(self, node: cst.Call, ctx: Context) -> None:
        qualified = ctx.qualified(node.func)
        if qualified in _SYNCHRONIZE:
            ctx.report(self, node)
        elif qualified is None and method_name(node) in _SYNCHRONIZE_METHODS:
            ctx.report(self, node)


class HostBooleanOp(Rule):
    """Flags `torch.equal`, `torch.allclose` and `torch.is_nonzero` (and their methods).

    ## Why it breaks a CUDA graph
    These return a Python bool computed from device data: a sync to read it, and a branch on
    it would be frozen into a capture.

    ## Example
        if torch.allclose(q, k): ...

    ## Use instead
    `torch.isclose(a, b).all()` stays a device tensor; combine it with `torch.where` instead
    of branching.
    """

    code = "GL107"
    name = "host-boolean-op"
    message = "returns a host bool computed from device data: a sync every step"
    fix = "use torch.isclose(...).all() / torch.eq(...).all() as a device tensor and torch.where instead of a branch"
    VALID = [
        "def step(a: torch.Tensor, b: torch.Tensor):\n    same = torch.isclose(a, b).all()\n    return torch.where(same, a, b)\n",
    ]
    INVALID = [
        "def step(a: torch.Tensor, b: torch.Tensor):\n    if torch.allclose(a, b):\n        return a\n    return b\n",
        "def step(a: torch.Tensor, b: torch.Tensor):\n    return a.equal(b)\n",
    ]

    def visit_Call(self, node: cst.Call, ctx: Context) -> None:
        qualified = ctx.qualified(node.func)
        if qualified in _HOST_BOOL:
            ctx.report(self, node)
        elif qualified is None and method_name(node) in _HOST_BOOL_METHODS and is_device(ctx, receiver(node)):
            ctx.report(self, node)


def _param_by_evidence(node: cst.BaseExpression, ctx: Context) -> bool:
    """An unannotated parameter that is a tensor only because the function calls tensor
    methods on it somewhere: these builtins take containers as often, so it is not enough."""
    if not isinstance(node, cst.Name) or not ctx.parents or not isinstance(ctx.parents[0], cst.FunctionDef):
        return False
    params = ctx.parents[0].params
    for param in [*params.posonly_params, *params.params, *params.kwonly_params]:
        if param.name.value == node.value:
            return param.annotation is None or annotation_value(param.annotation.annotation, ctx.imports).kind == "unknown"
    return False


# Builtins that take the truth value of elements or compare them: over a device tensor each
# element is a 0-dim device tensor, and every `bool()` / `<` on one is a host read.
_TRUTH_BUILTINS = frozenset({"all", "any", "max", "min", "sorted"})


class ImplicitHostRead(Rule):
    """Flags Python builtins and operators that read device values on the host without a
    visible `.item()`: `all`, `any`, `max`, `min`, `sorted` over a device tensor or with a
    device argument, and membership tests (`tok in ids` with `ids` a device tensor, or a
    device value looked up in a list or tuple).

    ## Why it breaks a CUDA graph
    Iterating a tensor yields 0-dim device tensors; `all` / `any` take the truth value of
    each (one sync per element), `max` / `min` / `sorted` compare them with `<` (a sync per
    comparison), and `x in t` is `(t == x).any()` read as a Python bool. During capture the
    first read raises; eagerly the step stalls once per element.

    ## Example
        if any(finished):          # finished: a device bool tensor
            ...
        if next_token in stop_ids: # stop_ids: a device tensor
            ...

    ## Use instead
    Reduce on the device and keep the result there: `finished.any()` combined with
    `torch.where`, `torch.isin(next_token, stop_ids)` as a mask, `torch.maximum(a, b)` for
    two tensors; read a flag on the host only after replay.
    """

    code = "GL108"
    name = "implicit-host-read"
    message = "a builtin or operator reads device values on the host (a truth value or comparison per element): a sync"
    fix = "reduce on the device (t.any() / t.all() / t.max() / torch.maximum / torch.isin) and keep the result there (torch.where)"
    VALID = [
        "def f(x: torch.Tensor, n: int):\n    return max(n, x.size(-1)) + min(x.shape)\n",
        "def f(x: torch.Tensor):\n    return x.any() & x.all()\n",
        "def f(flags: list, procs):\n    if any(procs):\n        return all(flags)\n",
        "def f(x: torch.Tensor, ids: list):\n    v = x.argmax().item()\n    return v in ids\n",
        "def f(x: torch.Tensor, names: dict):\n    return 'k' in names and x.dim() in (2, 3)\n",
        # lmdeploy nn/linear/awq.py: a tag stored on a parameter is not a tensor.
        "def weight_loader(param: torch.nn.Parameter, loaded_weight: torch.Tensor):\n"
        "    if param._weight_type in ['scales', 'bias']:\n        param.copy_(loaded_weight)\n",
        # lmdeploy multimodal/data_type.py: one parameter, a tensor in one branch, a dict in another.
        "def hash_value(hasher, value: Any):\n    if isinstance(value, torch.Tensor):\n"
        "        hasher.update(value.view(torch.uint8).numpy().tobytes())\n    elif isinstance(value, dict):\n"
        "        for key in sorted(value, key=repr):\n            hash_value(hasher, key)\n",
        # gpt-fast generate.py: temperature is a float, the top-k bound a host size.
        "def logits_to_probs(logits, temperature: float = 1.0, top_k: int = 8):\n"
        "    logits = logits / max(temperature, 1e-5)\n"
        "    v, _ = torch.topk(logits, min(top_k, logits.size(-1)))\n    return v\n",
    ]
    INVALID = [
        "def f(finished: torch.Tensor):\n    if any(finished):\n        return 1\n",
        "def f(scores: torch.Tensor):\n    return max(scores.softmax(-1)[0])\n",
        "def f(tok: int, stop_ids: torch.Tensor):\n    return tok in stop_ids\n",
        "def f(logits: torch.Tensor, eos: list):\n    nxt = logits.argmax(-1)\n    return nxt in [eos[0], eos[1]]\n",
        "def f(a: torch.Tensor, b: torch.Tensor):\n    return max(a.sum(), b.sum())\n",
        # torch.tensor over a list of 0-dim device tensors reads each one (gpt-fast model.py
        # apply_rope_scaling builds the new frequencies this way).
        "def f(freqs: torch.Tensor, factor: float):\n    new = []\n    for freq in freqs:\n"
        "        new.append(freq / factor)\n    return torch.tensor([new[0], freqs[1]], device=freqs.device)\n",
    ]

    def visit_Call(self, node: cst.Call, ctx: Context) -> None:
        self._tensor_of_device_scalars(node, ctx)
        func = node.func
        if not (isinstance(func, cst.Name) and func.value in _TRUTH_BUILTINS) or ctx.qualified(func):
            return
        args = positional(node)
        if any(is_device(ctx, arg) and not _param_by_evidence(arg, ctx) for arg in args):
            ctx.report(self, node, message=f"`{func.value}()` over a device value reads each element on the host: a sync")

    def _tensor_of_device_scalars(self, node: cst.Call, ctx: Context) -> None:
        if ctx.qualified(node.func) not in _FROM_SCALARS:
            return
        data = positional(node)[:1]
        if data and isinstance(data[0], (cst.List, cst.Tuple)) and any(is_device(ctx, e.value) for e in data[0].elements):
            ctx.report(self, data[0], message="`torch.tensor` of device scalars reads each one on the host (a sync) and copies it back")

    def visit_Comparison(self, node: cst.Comparison, ctx: Context) -> None:
        left = node.left
        for target in node.comparisons:
            right = target.comparator
            if isinstance(target.operator, (cst.In, cst.NotIn)):
                in_tensor = is_device(ctx, right)
                in_literal = isinstance(right, (cst.List, cst.Tuple, cst.Set)) and is_device(ctx, left)
                if in_tensor or in_literal:
                    ctx.report(self, target, message="a membership test on a device value is a host read: a sync")
            left = right


# Python callables of the ops that sync on CUDA only (graphlint/data/cuda_sync_ops.toml) -> entry.
_CUDA_SYNC_CALLS = {name: entry for entry in catalog.cuda_sync_ops() for name in entry.python}


class CudaOnlySyncOp(Rule):
    """Flags calls of torch ops that synchronize or cannot be captured on CUDA although nothing
    in their CPU behaviour shows it (the catalogue graphlint/data/cuda_sync_ops.toml, first of
    all `torch._grouped_mm` / `torch.nn.functional.grouped_mm`).

    ## Why it breaks a CUDA graph
    The op synchronizes inside its CUDA implementation: a stall every eager step, and a capture
    of the step fails. On torch 2.11 (H200) grouped_mm on float32 or float16 inputs synced once
    per call and its capture failed with "Cannot copy between CPU and CUDA tensors during CUDA
    graph capture unless the CPU tensor is pinned"; on bfloat16 inputs it did neither. Each
    catalogue entry names the torch version and device it was seen on, and the dtypes.

    ## Known problems
    A linter cannot see the dtype a call runs with, so the rule is a warning: a bfloat16-only
    call site is safe on that torch version (the runtime harness checks the real dtype). A call
    whose operand an earlier `assert` of the function pins to a dtype that does not sync
    (`assert x.dtype == w.dtype == torch.bfloat16`) is not flagged.

    ## Example
        out = torch.nn.functional.grouped_mm(tokens_by_expert, expert_weights, offs=offsets)

    ## Use instead
    bfloat16 experts, or a batched matmul over the selected experts' weights (transformers:
    `experts_implementation="batched_mm"`), or run the op outside the captured region.
    """

    code = "GL109"
    name = "cuda-only-sync-op"
    severity = "warning"
    message = "this op synchronizes on CUDA (capture fails) although its CPU run shows nothing"
    fix = "use bfloat16 experts or a batched matmul over the selected experts (transformers: experts_implementation='batched_mm'), or keep the op out of the captured region"
    VALID = [
        "def step(x: torch.Tensor, w: torch.Tensor, idx: torch.Tensor):\n    return torch.bmm(x.unsqueeze(1), w[idx]).squeeze(1)\n",
        "def step(a: torch.Tensor, b: torch.Tensor):\n    return torch.mm(a, b)\n",
        "def grouped_mm(a, b, offs):\n    return a @ b\ndef step(a: torch.Tensor, b: torch.Tensor, offs):\n    return grouped_mm(a, b, offs)\n",
        "def prefill(a, w, offs):  # graphlint: host\n    return torch._grouped_mm(a, w, offs=offs)\n",
        # An MoE experts layer that asserts bfloat16 first (the dtype grouped_mm does not sync for).
        "def experts(x, w1, offs):\n    assert x.dtype == w1.dtype == torch.bfloat16, 'bf16 only'\n"
        "    return torch._grouped_mm(x, w1, offs=offs)\n",
        # The second operand is pinned, and the first must match it.
        "def experts(h, w2, offs):\n    assert w2.dtype == torch.bfloat16\n    return torch._grouped_mm(h, w2, offs=offs)\n",
    ]
    INVALID = [
        "def step(a: torch.Tensor, w: torch.Tensor, offs: torch.Tensor):\n    return torch._grouped_mm(a, w, offs=offs)\n",
        "import torch.nn.functional as F\ndef experts(a, w, offs):\n    return F.grouped_mm(a, w, offs=offs)\n",
        "from torch.nn.functional import grouped_mm\ndef experts(a, w, offs):\n    return grouped_mm(a, w, offs=offs)\n",
        # The assert pins another tensor, or a dtype that syncs.
        "def experts(x, w1, offs):\n    assert offs.dtype == torch.int32\n    return torch._grouped_mm(x, w1, offs=offs)\n",
        "def experts(x, w1, offs):\n    assert x.dtype == torch.float16\n    return torch._grouped_mm(x, w1, offs=offs)\n",
    ]

    def visit_Assert(self, node: cst.Assert, ctx: Context) -> None:
        pinned = _pinned_dtypes(node.test, ctx)
        if pinned:
            ctx.memo.setdefault(_PINNED, {}).update(pinned)

    def visit_Call(self, node: cst.Call, ctx: Context) -> None:
        qualified = ctx.qualified(node.func)
        entry = _CUDA_SYNC_CALLS.get(qualified or "")
        if entry is not None:
            # The operands of a grouped matmul share one dtype (torch 2.13 refuses "m1 and m2 to
            # have the same dtype" otherwise): one pinned operand pins them all.
            known = ctx.memo.get(_PINNED, {})
            pinned = {known[arg.value] for arg in positional(node) if isinstance(arg, cst.Name) and arg.value in known}
            if entry.dtypes and pinned and not pinned & set(entry.dtypes):
                return  # asserted above to run in a dtype the op was seen not to sync for
            inputs = f" for {'/'.join(entry.dtypes)} inputs" if entry.dtypes else ""
            ctx.report(self, node, message=f"`{qualified}` ({entry.op}) synchronizes on CUDA{inputs} and its "
                                           f"capture fails, though its CPU run shows nothing ({entry.seen_on})",
                       fix=entry.fix)


# ctx.memo key: name -> the dtype an earlier assert of the function pins it to.
_PINNED = "cuda-only-sync-op:pinned-dtypes"
_TORCH = catalog.prefix("namespaces", "torch")


def _pinned_dtypes(test: cst.BaseExpression, ctx: Context) -> dict[str, str]:
    """The names an assert's test pins to one torch dtype: every operand of a chain of `==`
    (`x.dtype == w.dtype == torch.bfloat16`), or each side of an `and`."""
    if isinstance(test, cst.BooleanOperation) and isinstance(test.operator, cst.And):
        return {**_pinned_dtypes(test.left, ctx), **_pinned_dtypes(test.right, ctx)}
    if not isinstance(test, cst.Comparison) or not all(isinstance(t.operator, cst.Equal) for t in test.comparisons):
        return {}
    operands = [test.left] + [t.comparator for t in test.comparisons]
    dtypes = {qualified.rpartition(".")[2] for qualified in map(ctx.qualified, operands)
              if qualified and qualified.startswith(_TORCH) and qualified.count(".") == 1}
    if len(dtypes) != 1:
        return {}
    dtype = dtypes.pop()
    return {operand.value.value: dtype for operand in operands
            if isinstance(operand, cst.Attribute) and operand.attr.value == "dtype" and isinstance(operand.value, cst.Name)}


class ScalarTensorIndex(Rule):
    """Flags indexing with a 0-dim integer device tensor: `w[e]` where `e` is a full reduction
    (`scores.argmax()`), or one element of a row of `nonzero()` (`for e in hit: e = e[0]`).

    ## Why it breaks a CUDA graph
    A 0-dim integer tensor in a subscript is read as a Python int (`Tensor.__index__`): a
    device-to-host copy and a stall, and an error during capture. Measured on an H200 (torch
    2.11, `bench/probe_tensor_index.py`): `w[e]` and `w[e, 1]` are synchronizing CUDA operations
    under sync debug mode, and a capture of `w[e]` fails; `w[e.view(1)]`, a 1-dim index, gathers
    on the device with no sync. transformers' eager experts loop does it per expert
    (`self.gate_up_proj[expert_idx]` with `expert_idx` from `nonzero()`).

    ## Example
        for expert_idx in expert_hit:          # expert_hit = (...).nonzero()
            expert_idx = expert_idx[0]
            w = self.gate_up_proj[expert_idx]

    ## Use instead
    Index with a 1-dim tensor (`w[e.view(1)]`, `index_select(0, e.view(1))`) and squeeze, or
    run every expert over a static capacity (batched or grouped matmul) without a host loop.

    ## Known problems
    A tensor's rank is read from the code that made it: a full reduction, an element of a
    `nonzero()` row, a loop over a 1-dim tensor (`unique()`, `nonzero(as_tuple=True)[0]`).
    """

    code = "GL110"
    name = "scalar-tensor-index"
    message = "a 0-dim device tensor as an index is read on the host (`__index__`): a sync every step, and an error during capture"
    fix = "index with a 1-dim tensor (w[e.view(1)], index_select) and squeeze, or avoid the per-element host loop"
    VALID = [
        # A 1-dim index tensor gathers on the device.
        "def f(w: torch.Tensor, idx: torch.Tensor):\n    return w[idx]\n",
        "def f(w: torch.Tensor, scores: torch.Tensor):\n    e = scores.argmax()\n    return w[e.view(1)]\n",
        "def f(w: torch.Tensor, scores: torch.Tensor):\n    top = scores.argmax(dim=-1)\n    return w[top]\n",
        # A Python int from the host, and a reduction's value used as data, not as an index.
        "def f(w: torch.Tensor, i: int):\n    return w[i]\n",
        "def f(w: torch.Tensor, x: torch.Tensor):\n    m = x.max()\n    return w * m\n",
    ]
    INVALID = [
        "def f(w: torch.Tensor, scores: torch.Tensor):\n    e = scores.argmax()\n    return w[e]\n",
        # transformers' eager experts (modeling_mixtral.py): one host read per expert hit.
        "def f(w: torch.Tensor, mask: torch.Tensor):\n    hit = torch.greater(mask.sum(dim=-1), 0).nonzero()\n"
        "    for expert_idx in hit:\n        expert_idx = expert_idx[0]\n        y = w[expert_idx]\n    return y\n",
        "def f(w: torch.Tensor, ids: torch.Tensor):\n    for e in ids.unique():\n        w = w + w[e, 0]\n    return w\n",
    ]

    def visit_FunctionDef(self, node: cst.FunctionDef, ctx: Context) -> None:
        self._scalars = scalar_tensors(node)

    def visit_Subscript(self, node: cst.Subscript, ctx: Context) -> None:
        if not self._scalars or not maybe_device(ctx, node.value):
            return
        for element in node.slice:
            inner = element.slice
            if isinstance(inner, cst.Index) and isinstance(inner.value, cst.Name) and inner.value.value in self._scalars:
                ctx.report(self, inner.value)
                return

    _scalars: frozenset[str] = frozenset()


RULES = [ItemCall, TolistCall, HostCopy, ScalarConversion, PrintDeviceValue, DeviceSynchronize, HostBooleanOp,
         ImplicitHostRead, CudaOnlySyncOp, ScalarTensorIndex]

__all__ = ["RULES", "Example"]
