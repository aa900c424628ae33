"""GL506 and GL507: copies between devices inside the captured region (capture-only rules): a
copy to a device named explicitly, and `.to(other.device)` in code that handles several devices."""
from __future__ import annotations

import re

from graphlint.lazy import cst

from graphlint.analysis import catalog
from graphlint.analysis.inference.lattice import DEVICE
from graphlint.analysis.names import dotted
from graphlint.analysis.walk.rule import Context, Rule
from ..shared._calls import keyword, maybe_device, method_name, positional, receiver
from ..shared._orchestration import orchestration, with_evidence

_CUDA_INDEX = re.compile(r"cuda:\s*(\d+|\{)")
_DEVICE_CONSTRUCTOR = catalog.names("devices", "constructor")
_MOVE = catalog.names("tensor", "move_methods")
_TO_DEVICE = catalog.names("tensor", "to_device_methods")
_COPY_METHODS = _MOVE | _TO_DEVICE


def _explicit_other_device(node: cst.BaseExpression, ctx: Context) -> bool:
    """"cuda:1", f"cuda:{gpu}", torch.device("cuda", i) / torch.device(f"cuda:{i}")."""
    if isinstance(node, cst.SimpleString):
        match = _CUDA_INDEX.search(node.evaluated_value)
        return bool(match)
    if isinstance(node, cst.FormattedString):
        return any(isinstance(p, cst.FormattedStringText) and p.value.rstrip().endswith("cuda:") for p in node.parts)
    if isinstance(node, cst.Call) and ctx.qualified(node.func) in _DEVICE_CONSTRUCTOR:
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
        if method not in _COPY_METHODS or ctx.qualified(node.func) is not None or not maybe_device(ctx, recv):
            return
        target = keyword(node, "device")
        args = positional(node)
        if target is None and args:
            target = args[0]
        if target is None:
            return
        # `.cuda(i)` of a known device tensor; any other object's `cuda` method is its own.
        if (method in _TO_DEVICE and ctx.value(recv).kind == DEVICE) or (method in _MOVE and _explicit_other_device(target, ctx)):
            ctx.report(self, node)


class FollowDeviceCopy(Rule):
    """Flags `.to(other.device)` of a device tensor in multi-device code inside the captured region.

    Also `.to(device=other.device)`, where `other` is another tensor than the one moved. Only
    in functions that handle several devices, by what their code does with devices (GL501's
    evidence: `cuda:1`, `f"cuda:{i}"`, a loop over devices, `device_count()`; never a name):
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
        # A name is no evidence of several devices.
        "def rope(positions: torch.Tensor, rope_cos: torch.Tensor, gpu: int):\n    return positions.to(rope_cos.device)\n",
        "def moe(token_id: torch.Tensor, x: torch.Tensor, devices: list):\n    return token_id.to(device=x.device)\n",
    ]
    INVALID = [
        "def rope(positions: torch.Tensor, rope_cos: torch.Tensor, x: torch.Tensor, gpu: int):\n"
        "    x = x.to(f'cuda:{gpu}')\n    return x * positions.to(rope_cos.device)\n",
        "def moe(token_id: torch.Tensor, x: torch.Tensor):\n    y = x.to('cuda:1')\n    return y + token_id.to(device=x.device)\n",
    ]

    def visit_Call(self, node: cst.Call, ctx: Context) -> None:
        recv = receiver(node)
        if method_name(node) not in _MOVE or ctx.qualified(node.func) is not None or ctx.value(recv).kind != DEVICE:
            return
        target = keyword(node, "device")
        args = positional(node)
        if target is None and args:
            target = args[0]
        if target is not None and _device_of_other(target, recv):
            facts = orchestration(ctx)
            if facts is not None and facts.multi_device:
                ctx.report(self, node, message=with_evidence(self.message, facts))


RULES = [CrossDeviceCopy, FollowDeviceCopy]
