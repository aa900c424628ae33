"""GL2xx: host control flow on device values. Branching on a host-known value (shape, dtype,
Python int, flag) is fine; the truth value or the integer value of a device tensor is not:
reading it syncs, and a capture freezes whichever branch or size it saw."""
from __future__ import annotations

from graphlint.lazy import cst

from graphlint.analysis import catalog
from graphlint.analysis.walk.rule import Context, Rule
from .shared._calls import is_device, keyword, method_name, positional

_FACTORIES = catalog.names("factories", "names")
_SIZE_METHODS = catalog.names("size_arguments", "methods")
_SIZE_FUNCTIONS = catalog.names("size_arguments", "functions")
_INPUT_FIRST = catalog.names("size_arguments", "input_first_functions")
_TOPK = catalog.names("size_arguments", "topk")
_TOPK_METHODS = catalog.names("size_arguments", "topk_methods")


def _size_parts(node: cst.BaseExpression) -> list[cst.BaseExpression]:
    """A size argument and, for a literal tuple or list of sizes, its elements."""
    if isinstance(node, (cst.Tuple, cst.List)):
        return [e.value for e in node.elements]
    return [node]
# libcst node types, by name (libcst loads lazily: nothing here may touch it at import).
_TEST_PARENTS = frozenset({"If", "While", "Assert", "IfExp", "CompIf", "BooleanOperation", "UnaryOperation"})


def _truth_tested(ctx: Context, node: cst.BaseExpression) -> list[cst.BaseExpression]:
    """The sub-expressions whose Python truth value is taken when `node` is used as a test."""
    if isinstance(node, cst.BooleanOperation):
        return _truth_tested(ctx, node.left) + _truth_tested(ctx, node.right)
    if isinstance(node, cst.UnaryOperation) and isinstance(node.operator, cst.Not):
        return _truth_tested(ctx, node.expression)
    return [node] if is_device(ctx, node) else []


class DeviceCondition(Rule):
    """Flags `if`/`elif`/`while`/`assert`, conditional expressions, `and`/`or`/`not` and
    comprehension filters whose test is a device value (a comparison of tensors, `.any()`,
    `.all()`, a bare tensor).

    ## Why it breaks a CUDA graph
    Python needs a bool, so the tensor is read on the host (a sync). During capture the read
    fails; if it were allowed, the graph would hold only the branch taken at capture time and
    replay it forever (the reference port's `if group_offsets[0] != 0`).

    ## Example
        if offsets[0] != 0:
            offsets -= offsets[0]

    ## Use instead
    Make the update unconditional on the device: `offsets -= offsets[:1]` or
    `torch.where(cond, a, b)`. Branch only on host-known values (shapes, dtypes, step counts
    kept in Python, config flags).
    """

    code = "GL201"
    name = "device-condition"
    message = "host control flow on a device value: the test is read on the host (sync) and a capture freezes one branch"
    fix = "make the update unconditional on the device (torch.where / masked_fill / arithmetic); branch only on host-known values"
    VALID = [
        "def f(x: torch.Tensor):\n    if x.shape[0] > 1:\n        return x\n",
        "def f(x: torch.Tensor):\n    if x.numel() == 0:\n        return x\n",
        "def f(x: torch.Tensor):\n    if x.dtype == torch.bfloat16:\n        return x.float()\n",
        "class M(nn.Module):\n    def forward(self, x: torch.Tensor):\n        if self.training:\n            return x\n",
        "def f(x: torch.Tensor, step: int):\n    if step % 4 == 3:\n        return x\n",
        "def f(x: torch.Tensor, mask=None):\n    if mask is None:\n        return x\n",
        "def f(x):\n    if isinstance(x, torch.Tensor):\n        return x\n",
        "def f(x: torch.Tensor):\n    if x.is_cuda:\n        return x\n",
        "def f(x: torch.Tensor):\n    for i in range(x.size(0)):\n        pass\n",
        "def f(x: torch.Tensor):\n    v = x.max().item()\n    if v > 1e4:\n        return x\n",
        "def f(x: torch.Tensor, n: int):\n    assert x.dim() == 3 and n > 0\n",
        "def f(x: torch.Tensor, cache=None):\n    y = x if cache is None else cache\n    return y\n",
        "def f(hidden_states, attention_mask=None):\n    if attention_mask is not None and attention_mask.dim() == 2:\n        return hidden_states\n",
        # Host-known twins of the call-site cases: a size, and a base that keeps a Python count.
        "def _keep(n, threshold):\n    if n > threshold:\n        return n\n    return 0\n"
        "def step(logits: torch.Tensor):\n    return _keep(logits.shape[-1], 4)\n",
        "def _keep(scores, threshold):\n    if scores > threshold:\n        return 1\n    return 0\n"
        "def step(logits: torch.Tensor, lo: torch.Tensor):\n    a = _keep(logits.max().item(), 0.5)\n    return _keep(lo, 0.5) + a\n",
        "class Base(nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.seen = None\n"
        "    def step(self, x: torch.Tensor):\n        if self.seen > 0:\n            return x\n        return -x\n"
        "class Sub(Base):\n    def __init__(self, n: int):\n        super().__init__()\n        self.seen = n\n",
        "def refine(x: torch.Tensor):\n    done = False\n    while not done:\n"
        "        x = x[: x.shape[0] // 2]\n        done = x.shape[0] < 2\n    return x\n",
    ]
    INVALID = [
        "def f(offsets: torch.Tensor):\n    if offsets[0] != 0:\n        offsets -= offsets[0]\n",
        "def f(x: torch.Tensor):\n    while (x > 1).any():\n        x = x / 2\n",
        "def f(x: torch.Tensor):\n    assert torch.isfinite(x).all()\n",
        "def f(x: torch.Tensor):\n    y = x if x.sum() > 0 else -x\n    return y\n",
        "def f(x: torch.Tensor, flag: bool):\n    if flag and x.max() > 3:\n        return x\n",
        "def f(xs: list, t: torch.Tensor):\n    return [x for x in xs if t > 0]\n",
        "def f(x: torch.Tensor):\n    if not x.any():\n        return x\n",
        # A selection helper without annotations: every call site passes a device tensor.
        "def _keep(scores, threshold):\n    if scores.max() > threshold:\n        return scores\n    return scores * 0\n"
        "def step(logits: torch.Tensor):\n    return _keep(logits.softmax(-1), 0.5)\n",
        # A base class declares the cache empty; the subclass that runs fills it on the device.
        "class Base(nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.cache = None\n"
        "    def step(self, x: torch.Tensor):\n        if self.cache.abs().max() > 0:\n            return x\n        return -x\n"
        "class Sub(Base):\n    def __init__(self, n: int):\n        super().__init__()\n"
        "        self.cache = torch.zeros(n, device='cuda')\n",
        # A convergence loop: `done` starts as a host bool and is a device reduction from the
        # second iteration on.
        "def refine(x: torch.Tensor, tol: float):\n    done = False\n    while not done:\n"
        "        x = x * 0.5\n        done = (x.abs() < tol).all()\n    return x\n",
    ]

    def _check(self, ctx: Context, test: cst.BaseExpression) -> None:
        for node in _truth_tested(ctx, test):
            ctx.report(self, node)

    def visit_If(self, node: cst.If, ctx: Context) -> None:
        self._check(ctx, node.test)

    def visit_While(self, node: cst.While, ctx: Context) -> None:
        self._check(ctx, node.test)

    def visit_Assert(self, node: cst.Assert, ctx: Context) -> None:
        self._check(ctx, node.test)

    def visit_IfExp(self, node: cst.IfExp, ctx: Context) -> None:
        self._check(ctx, node.test)

    def visit_CompIf(self, node: cst.CompIf, ctx: Context) -> None:
        self._check(ctx, node.test)

    def visit_BooleanOperation(self, node: cst.BooleanOperation, ctx: Context) -> None:
        # Outside a test (`y = a or b`) only the left operand's truth is taken.
        if type(ctx.parent).__name__ not in _TEST_PARENTS:
            self._check(ctx, node.left)

    def visit_UnaryOperation(self, node: cst.UnaryOperation, ctx: Context) -> None:
        if isinstance(node.operator, cst.Not) and type(ctx.parent).__name__ not in _TEST_PARENTS:
            self._check(ctx, node.expression)


class DeviceValueAsInt(Rule):
    """Flags a device value used where Python needs an integer: `range(t)`, slice bounds,
    list indices, `topk(k=t)`, and sizes passed to factories and views.

    ## Why it breaks a CUDA graph
    The integer is read on the host (a sync), and everything it sizes is frozen at capture:
    replay keeps the old size or offset whatever the device value becomes.

    ## Example
        n = lengths.max()
        keys = cache[:, :n]

    ## Use instead
    Use the static maximum (`cache[:, :max_len]`) with a validity mask built on the device
    (`arange(max_len) < lengths[:, None]`), and a fixed `k` with `-inf` masking for top-k.
    """

    code = "GL202"
    name = "device-value-as-int"
    message = "a device value is used as a Python int (size, index, bound): a sync, and the value is frozen at capture"
    fix = "use the static maximum with a device-side validity mask (arange(max) < n); fixed k with -inf masking for topk"
    VALID = [
        "def f(cache: torch.Tensor, n: int):\n    return cache[:, :n]\n",
        "def f(x: torch.Tensor, idx: torch.Tensor):\n    return x[idx]\n",
        "def f(x: torch.Tensor):\n    return torch.topk(x, 16, dim=-1)\n",
        "def f(x: torch.Tensor):\n    return x.view(x.shape[0], -1)\n",
        "def f(x: torch.Tensor):\n    for i in range(x.size(0)):\n        pass\n",
        "def _window(cache, n):\n    return cache[:, :n]\n"
        "def step(cache: torch.Tensor, lengths: torch.Tensor):\n    return _window(cache, cache.shape[1] // 2)\n",
        "def _width(mask: torch.Tensor):\n    return mask.shape[-1]\n"
        "def step(cache: torch.Tensor, mask: torch.Tensor):\n    n = _width(mask)\n    return cache[:, :n]\n",
        # Host-known twins: sizes from shapes, numel(), an .item() result, a config int.
        "def f(x: torch.Tensor, cfg):\n    n = x.shape[0]\n    return torch.zeros((n, cfg.hidden_size), device=x.device)\n",
        "def f(cache: torch.Tensor, lengths: torch.Tensor):\n    end = int(lengths.numel()) + 1\n"
        "    return cache.narrow(1, 0, end)\n",
        "def f(k: torch.Tensor, cache_position: torch.Tensor):\n    end = cache_position[-1].item() + 1\n    return k[:, :end]\n",
        # torch.narrow's first argument is the tensor it narrows (ktransformers' chunk mask).
        "def f(mask: torch.Tensor, n: int):\n    return torch.narrow(mask, 2, 0, min(8, n))\n",
    ]
    INVALID = [
        "def f(cache: torch.Tensor, lengths: torch.Tensor):\n    n = lengths.max()\n    return cache[:, :n]\n",
        "def f(x: torch.Tensor, t: torch.Tensor):\n    for i in range(t):\n        pass\n",
        "def f(x: torch.Tensor, k: torch.Tensor):\n    return x.topk(k)\n",
        "def f(x: torch.Tensor, n: torch.Tensor):\n    return torch.zeros(n, device=x.device)\n",
        "def f(x: torch.Tensor, n: torch.Tensor):\n    return x.view(n, -1)\n",
        # A 0-dim device tensor handed to a helper that uses it as a bound, and a helper's
        # device result used as one.
        "def _window(cache, n):\n    return cache[:, :n]\n"
        "def step(cache: torch.Tensor, lengths: torch.Tensor):\n    return _window(cache, lengths.max())\n",
        "def _lengths(mask: torch.Tensor):\n    return mask.sum(-1)\n"
        "def step(cache: torch.Tensor, mask: torch.Tensor):\n    n = _lengths(mask).max()\n    return cache[:, :n]\n",
        # A 0-dim device tensor as a size inside a shape tuple, and as a narrow() start: the
        # last cache position plus one, an element of a lengths tensor.
        "def f(x: torch.Tensor, lengths: torch.Tensor):\n    n = lengths[0]\n"
        "    return torch.zeros((n, x.shape[-1]), device=x.device)\n",
        "def f(cache: torch.Tensor, cache_position: torch.Tensor):\n    end = cache_position[-1] + 1\n"
        "    return cache.narrow(1, 0, end)\n",
        "def f(k: torch.Tensor, cache_position: torch.Tensor):\n    return k[:, : cache_position[-1] + 1]\n",
    ]

    def visit_Call(self, node: cst.Call, ctx: Context) -> None:
        func = node.func
        args = positional(node)
        if isinstance(func, cst.Name) and func.value == "range":
            for arg in args:
                if is_device(ctx, arg):
                    ctx.report(self, arg)
            return
        qualified = ctx.qualified(func)
        method = method_name(node) if qualified is None else None
        if qualified in _TOPK or method in _TOPK_METHODS:
            k = keyword(node, "k")
            if k is None:
                k = args[1] if qualified and len(args) > 1 else (args[0] if method and args else None)
            if is_device(ctx, k):
                ctx.report(self, k, message="`topk` with a device-valued k: a sync, and the output shape changes with the data")
            return
        if qualified in _FACTORIES or qualified in _SIZE_FUNCTIONS:
            for arg in args[1:] if qualified in _INPUT_FIRST else args:
                for part in _size_parts(arg):
                    if is_device(ctx, part):
                        ctx.report(self, part)
            return
        if method in _SIZE_METHODS and is_device(ctx, func.value if isinstance(func, cst.Attribute) else None):
            for arg in args:
                for part in _size_parts(arg):
                    if is_device(ctx, part):
                        ctx.report(self, part)

    def visit_Subscript(self, node: cst.Subscript, ctx: Context) -> None:
        base = ctx.value(node.value)
        for element in node.slice:
            inner = element.slice
            if isinstance(inner, cst.Slice):
                for part in (inner.lower, inner.upper, inner.step):
                    if is_device(ctx, part):
                        ctx.report(self, part, message="a device value as a slice bound: a sync, and the slice is frozen at capture")
            elif isinstance(inner, cst.Index) and base.kind == "host" and is_device(ctx, inner.value):
                ctx.report(self, inner.value, message="a device value indexes a Python container: a sync every step")


RULES = [DeviceCondition, DeviceValueAsInt]
