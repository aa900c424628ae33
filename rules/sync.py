"""GL1xx: explicit device-to-host reads. Each one stalls the host until the device catches
up, and inside a capture it fails ("operation not permitted when stream is capturing")."""
from __future__ import annotations

import libcst as cst

from graphlint.analysis import catalog
from graphlint.analysis.rule import Context, Example, Rule
from ._calls import is_device, maybe_device, method_name, positional, receiver

_HOST_BOOL = catalog.names("sync", "host_bool")
_HOST_BOOL_METHODS = catalog.names("sync", "host_bool_methods")


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
        if method_name(node) == "item" and maybe_device(ctx, receiver(node)):
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
    ]
    INVALID = [
        "def moe(idx: torch.Tensor, E: int):\n    counts = torch.bincount(idx, minlength=E).tolist()\n    return counts\n",
        "def f(ids):\n    return ids.tolist()\n",
    ]

    def visit_Call(self, node: cst.Call, ctx: Context) -> None:
        if method_name(node) == "tolist" and maybe_device(ctx, receiver(node)):
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
        if method in ("cpu", "numpy") and maybe_device(ctx, receiver(node)):
            ctx.report(self, node)
        elif method == "to" and maybe_device(ctx, receiver(node)) and ctx.value(node).kind == "host_tensor":
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
        if isinstance(node.func, cst.Name) and node.func.value in ("int", "float", "bool", "complex"):
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
    ]
    INVALID = [
        "def step(scores: torch.Tensor):\n    print(f'attn max {scores.max()}')\n",
        "def step(x: torch.Tensor):\n    print(x)\n",
        "def step(x: torch.Tensor):\n    s = 'norm={:.2f}'.format(x.norm())\n    return s\n",
        "def step(x: torch.Tensor):\n    return 'v=%s' % x\n",
    ]

    def visit_FormattedStringExpression(self, node: cst.FormattedStringExpression, ctx: Context) -> None:
        if is_device(ctx, node.expression):
            ctx.report(self, node.expression)

    def visit_Call(self, node: cst.Call, ctx: Context) -> None:
        func = node.func
        if isinstance(func, cst.Name) and func.value in ("print", "str", "repr", "format"):
            for arg in node.args:
                if is_device(ctx, arg.value):
                    ctx.report(self, arg.value)
        elif isinstance(func, cst.Attribute) and func.attr.value == "format" and isinstance(
                func.value, (cst.SimpleString, cst.ConcatenatedString)):
            for arg in node.args:
                if is_device(ctx, arg.value):
                    ctx.report(self, arg.value)

    def visit_BinaryOperation(self, node: cst.BinaryOperation, ctx: Context) -> None:
        if isinstance(node.operator, cst.Modulo) and isinstance(node.left, (cst.SimpleString, cst.ConcatenatedString)):
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
        if qualified in ("torch.cuda.synchronize", "torch.synchronize", "torch.accelerator.synchronize",
                         "torch.cuda.Event.synchronize"):
            ctx.report(self, node)
        elif qualified is None and method_name(node) == "synchronize":
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


RULES = [ItemCall, TolistCall, HostCopy, ScalarConversion, PrintDeviceValue, DeviceSynchronize, HostBooleanOp]

__all__ = ["RULES", "Example"]
