"""GL3xx: data-dependent shapes. The output size depends on tensor values, so on CUDA the op
reads a count back to the host, and a graph, which replays fixed shapes, cannot hold it."""
from __future__ import annotations

from graphlint.lazy import cst

from graphlint.analysis import catalog
from graphlint.analysis.walk.rule import Context, Rule
from .shared._calls import is_device, keyword, maybe_device, method_name, positional, receiver

_WHERE = catalog.names("dynamic_shape", "where")
_NARROW = catalog.names("dynamic_shape", "narrow")
_NARROW_METHODS = catalog.names("dynamic_shape", "narrow_methods")


def _call_of(ctx: Context, node: cst.Call, functions: frozenset[str], methods: frozenset[str]) -> bool:
    qualified = ctx.qualified(node.func)
    if qualified is not None:
        return qualified in functions
    return method_name(node) in methods and maybe_device(ctx, receiver(node))


def _catalog_pair(key: str) -> tuple[frozenset[str], frozenset[str]]:
    return catalog.names("dynamic_shape", key), catalog.names("dynamic_shape", key + "_methods")


class Nonzero(Rule):
    """Flags `nonzero`, `argwhere` and single-argument `torch.where(cond)`.

    ## Why it breaks a CUDA graph
    The number of indices is known only after the kernel runs: CUDA copies the count to the
    host (a sync), and a capture fails. The reference port's MoE used `torch.where(indices == e)` to
    find each expert's tokens.

    ## Example
        rows = torch.where(indices == e)[0]

    ## Use instead
    `torch.nonzero_static(cond, size=max_n)` with padding, the three-argument
    `torch.where(cond, a, b)`, or a fixed-shape gather of all candidates with a mask.
    """

    code = "GL301"
    name = "nonzero"
    message = "nonzero/argwhere/one-argument where: the output size depends on the data (a host sync; not capturable)"
    fix = "use torch.nonzero_static(cond, size=N), three-argument torch.where(cond, a, b), or a fixed-shape masked gather"
    VALID = [
        "def f(c: torch.Tensor, a: torch.Tensor):\n    return torch.where(c, a, 0.0)\n",
        "def f(c: torch.Tensor):\n    return torch.nonzero_static(c, size=16)\n",
    ]
    INVALID = [
        "def f(indices: torch.Tensor, e: int):\n    return torch.where(indices == e)\n",
        "def f(m: torch.Tensor):\n    return m.nonzero()\n",
        "import torch as t\ndef f(m: torch.Tensor):\n    return t.argwhere(m)\n",
        "from torch import nonzero as nz\ndef f(m: torch.Tensor):\n    return nz(m)\n",
    ]
    _functions, _methods = _catalog_pair("nonzero")

    def visit_Call(self, node: cst.Call, ctx: Context) -> None:
        qualified = ctx.qualified(node.func)
        if qualified in _WHERE and len(node.args) == 1:
            ctx.report(self, node)
        elif _call_of(ctx, node, self._functions, self._methods):
            ctx.report(self, node)


class Unique(Rule):
    """Flags `unique` and `unique_consecutive`.

    ## Why it breaks a CUDA graph
    The number of distinct values is data-dependent: CUDA reads it back (`.item()` inside
    the op), so the step syncs and cannot be captured.

    ## Example
        experts = torch.unique(topk_idx)

    ## Use instead
    Work over all candidates with a fixed shape (e.g. per-expert counts with `scatter_add_`
    into a preallocated buffer) and mask the unused ones.
    """

    code = "GL302"
    name = "unique"
    message = "unique/unique_consecutive: output size depends on the data (host sync; not capturable)"
    fix = "count with scatter_add_ into a preallocated buffer and mask, instead of materialising the distinct values"
    VALID = ["def f(idx: torch.Tensor, counts: torch.Tensor, ones: torch.Tensor):\n    counts.zero_()\n    counts.scatter_add_(0, idx, ones)\n"]
    INVALID = [
        "def f(idx: torch.Tensor):\n    return torch.unique(idx)\n",
        "def f(idx: torch.Tensor):\n    return idx.unique_consecutive()\n",
    ]
    _functions, _methods = _catalog_pair("unique")

    def visit_Call(self, node: cst.Call, ctx: Context) -> None:
        if _call_of(ctx, node, self._functions, self._methods):
            ctx.report(self, node)


def _is_bool_mask(ctx: Context, subscript: cst.Subscript) -> bool:
    for element in subscript.slice:
        inner = element.slice
        if isinstance(inner, cst.Index):
            value = ctx.value(inner.value)
            if value.kind == "device" and value.is_bool:
                return True
    return False


class BooleanMaskRead(Rule):
    """Flags reading through a boolean mask (`x[mask]`) and `masked_select`.

    ## Why it breaks a CUDA graph
    Indexing with a bool tensor keeps a data-dependent number of elements: CUDA runs
    `nonzero` underneath (a sync), and the result's shape cannot be captured.

    ## Example
        valid_scores = scores[scores > -1e9]

    ## Use instead
    Keep the full shape and mask: `scores.masked_fill(~valid, float("-inf"))` or
    `torch.where(valid, x, 0.0)`.
    """

    code = "GL303"
    name = "boolean-mask-read"
    message = "indexing with a boolean mask keeps a data-dependent number of elements (nonzero underneath; not capturable)"
    fix = "keep the full shape: masked_fill(~mask, value) or torch.where(mask, x, fill)"
    VALID = [
        "def f(x: torch.Tensor, idx: torch.Tensor):\n    return x[idx]\n",
        "def f(x: torch.Tensor):\n    m = x > 0\n    return x.masked_fill(~m, 0.0)\n",
        "def f(x: torch.Tensor):\n    m = x > 0\n    x[m] = 0.0\n",
    ]
    INVALID = [
        "def f(scores: torch.Tensor):\n    return scores[scores > -1e9]\n",
        "def f(x: torch.Tensor, m: torch.Tensor):\n    return torch.masked_select(x, m > 0)\n",
        "def f(x: torch.Tensor):\n    keep = torch.isfinite(x)\n    return x[keep].sum()\n",
    ]
    _functions, _methods = _catalog_pair("masked_select")

    def visit_Subscript(self, node: cst.Subscript, ctx: Context) -> None:
        parent = ctx.parent
        is_target = (isinstance(parent, cst.AssignTarget) and parent.target is node) or (
            isinstance(parent, cst.AugAssign) and parent.target is node)
        if not is_target and _is_bool_mask(ctx, node) and maybe_device(ctx, node.value):
            ctx.report(self, node)

    def visit_Call(self, node: cst.Call, ctx: Context) -> None:
        if _call_of(ctx, node, self._functions, self._methods):
            ctx.report(self, node)


class BooleanMaskWrite(Rule):
    """Flags assigning a tensor through a boolean mask: `x[m] = y[m]`, `x[m] += y`.

    ## Why it breaks a CUDA graph
    `index_put_` with a bool index runs `nonzero` on CUDA to find the positions (a sync);
    capture fails. Assigning a Python scalar (`x[m] = 0`) becomes `masked_fill_` and is fine.

    ## Example
        out[mask] = expert_out[mask]

    ## Use instead
    `out = torch.where(mask, expert_out, out)` or `out.copy_(torch.where(...))` for an
    in-place static buffer.
    """

    code = "GL304"
    name = "boolean-mask-write"
    message = "assigning a tensor through a boolean mask runs nonzero on CUDA (a sync; not capturable)"
    fix = "use torch.where(mask, value, x) (copy_ into the static buffer if it must stay in place)"
    VALID = [
        "def f(x: torch.Tensor):\n    m = x < 0\n    x[m] = 0\n",
        "def f(x: torch.Tensor, y: torch.Tensor):\n    m = x < 0\n    x.copy_(torch.where(m, y, x))\n",
        "def f(x: torch.Tensor, y: torch.Tensor, idx: torch.Tensor):\n    x[idx] = y\n",
    ]
    INVALID = [
        "def f(out: torch.Tensor, y: torch.Tensor):\n    mask = out > 0\n    out[mask] = y[mask]\n",
        "def f(out: torch.Tensor, y: torch.Tensor):\n    out[out > 0] += y\n",
    ]

    def _check(self, ctx: Context, target: cst.BaseExpression, value: cst.BaseExpression) -> None:
        if isinstance(target, cst.Subscript) and _is_bool_mask(ctx, target) and maybe_device(ctx, target.value):
            if ctx.value(value).kind not in ("host", "none"):
                ctx.report(self, target)

    def visit_Assign(self, node: cst.Assign, ctx: Context) -> None:
        for target in node.targets:
            self._check(ctx, target.target, node.value)

    def visit_AugAssign(self, node: cst.AugAssign, ctx: Context) -> None:
        self._check(ctx, node.target, node.value)


class Bincount(Rule):
    """Flags `bincount`, with or without `minlength`.

    ## Why it breaks a CUDA graph
    Its size is `max(input) + 1` (at least `minlength`), so CUDA reads the maximum back to the
    host: two syncs per call on an H200, `minlength` or not. The reference port's MoE paid it per layer.

    ## Example
        counts = torch.bincount(topk_idx.flatten(), minlength=n_experts)

    ## Use instead
    `counts.zero_(); counts.scatter_add_(0, idx.flatten(), ones)` into a buffer preallocated
    with the number of experts.
    """

    code = "GL305"
    name = "bincount"
    message = "bincount sizes its output from the data (max + 1), even with minlength: a host sync, not capturable"
    fix = "counts.zero_(); counts.scatter_add_(0, idx.flatten(), ones) into a preallocated [n_experts] buffer"
    VALID = ["def f(idx: torch.Tensor, counts: torch.Tensor, ones: torch.Tensor):\n    counts.zero_()\n    counts.scatter_add_(0, idx.flatten(), ones)\n"]
    INVALID = [
        "def f(idx: torch.Tensor, E: int):\n    return torch.bincount(idx.flatten(), minlength=E)\n",
        "def f(idx: torch.Tensor):\n    return idx.bincount()\n",
    ]
    _functions, _methods = _catalog_pair("bincount")

    def visit_Call(self, node: cst.Call, ctx: Context) -> None:
        if _call_of(ctx, node, self._functions, self._methods):
            ctx.report(self, node)


class RepeatInterleave(Rule):
    """Flags `repeat_interleave` with tensor repeats and no `output_size`.

    ## Why it breaks a CUDA graph
    The output length is the sum of the repeats, read back to the host on CUDA (two syncs
    per call on an H200). With `output_size=` the length is host-known and it is capturable.

    ## Example
        rows = torch.repeat_interleave(arange, counts)

    ## Use instead
    Pass `output_size=` (a host-known bound), or gather with a precomputed index buffer.
    """

    code = "GL306"
    name = "repeat-interleave"
    message = "repeat_interleave with tensor repeats and no output_size: the length is read back to the host"
    fix = "pass output_size= (a host-known bound) or gather with a precomputed index"
    VALID = [
        "def f(x: torch.Tensor, counts: torch.Tensor):\n    return torch.repeat_interleave(x, counts, output_size=64)\n",
        "def f(x: torch.Tensor):\n    return x.repeat_interleave(4, dim=0)\n",
    ]
    INVALID = [
        "def f(x: torch.Tensor, counts: torch.Tensor):\n    return torch.repeat_interleave(x, counts)\n",
        "def f(x: torch.Tensor, counts: torch.Tensor):\n    return x.repeat_interleave(counts, dim=0)\n",
    ]
    _functions, _methods = _catalog_pair("repeat_interleave")

    def visit_Call(self, node: cst.Call, ctx: Context) -> None:
        if not _call_of(ctx, node, self._functions, self._methods) or keyword(node, "output_size") is not None:
            return
        args = positional(node)
        is_function = ctx.qualified(node.func) is not None
        repeats = keyword(node, "repeats")
        if repeats is None:
            if is_function:
                repeats = args[1] if len(args) > 1 else (args[0] if len(args) == 1 else None)
            else:
                repeats = args[0] if args else None
        if repeats is not None and maybe_device(ctx, repeats) and ctx.value(repeats).kind != "unknown":
            ctx.report(self, node)
        elif is_function and len(args) == 1 and repeats is args[0]:
            ctx.report(self, node)  # torch.repeat_interleave(repeats): the index form


class DeviceSplit(Rule):
    """Flags `split`/`narrow`/`tensor_split` whose sizes or offsets are device values.

    ## Why it breaks a CUDA graph
    Split sizes must be Python ints: a device value is read back (a sync), and the pieces'
    shapes are frozen at capture.

    ## Example
        chunks = x.split(counts)

    ## Use instead
    Split by host-known sizes, or keep one fixed-shape tensor and a mask.
    """

    code = "GL307"
    name = "device-split"
    message = "split/narrow with device sizes: the sizes are read back to the host and frozen at capture"
    fix = "split by host-known sizes, or keep the fixed-shape tensor with a validity mask"
    VALID = [
        "def f(x: torch.Tensor):\n    return x.split(128, dim=-1)\n",
        "def f(x: torch.Tensor, n: int):\n    return torch.narrow(x, 0, 0, n)\n",
    ]
    INVALID = [
        "def f(x: torch.Tensor, counts: torch.Tensor):\n    return x.split(counts)\n",
        "def f(x: torch.Tensor, start: torch.Tensor):\n    return torch.narrow(x, 0, start, 4)\n",
    ]
    _functions, _methods = _catalog_pair("split")

    def visit_Call(self, node: cst.Call, ctx: Context) -> None:
        if not _call_of(ctx, node, self._functions, self._methods):
            return
        args = positional(node)
        sizes = args[1:] if ctx.qualified(node.func) is not None else args
        if method_name(node) in _NARROW_METHODS or ctx.qualified(node.func) in _NARROW:
            sizes = sizes[1:]  # skip dim
        elif sizes and ctx.qualified(node.func) is None:
            sizes = sizes[:1]
        for size in sizes:
            if is_device(ctx, size):
                ctx.report(self, size)


class HistcDefaultBounds(Rule):
    """Flags `histc` without explicit, distinct `min` and `max`.

    ## Why it breaks a CUDA graph
    With the default bounds (min == max == 0) CUDA computes the data's min and max and reads
    them back to the host (two syncs on an H200); CPU emulation does not notice.

    ## Example
        hist = torch.histc(scores, bins=32)

    ## Use instead
    Pass host-known bounds: `torch.histc(scores, bins=32, min=-10.0, max=10.0)`.
    """

    code = "GL308"
    name = "histc-default-bounds"
    message = "histc with default bounds reads the data's min and max back to the host"
    fix = "pass host-known bounds: histc(x, bins=N, min=lo, max=hi)"
    VALID = ["def f(x: torch.Tensor):\n    return torch.histc(x, bins=32, min=-10.0, max=10.0)\n"]
    INVALID = [
        "def f(x: torch.Tensor):\n    return torch.histc(x, bins=32)\n",
        "def f(x: torch.Tensor):\n    return x.histc(32, 0, 0)\n",
    ]
    _functions, _methods = _catalog_pair("histc")

    def visit_Call(self, node: cst.Call, ctx: Context) -> None:
        if not _call_of(ctx, node, self._functions, self._methods):
            return
        args = positional(node)
        offset = 1 if ctx.qualified(node.func) is not None else 0
        low = keyword(node, "min") or (args[offset + 1] if len(args) > offset + 1 else None)
        high = keyword(node, "max") or (args[offset + 2] if len(args) > offset + 2 else None)
        if low is None or high is None or (_literal(low) is not None and _literal(low) == _literal(high)):
            ctx.report(self, node)


def _literal(node: cst.BaseExpression) -> float | None:
    if isinstance(node, (cst.Integer, cst.Float)):
        return float(node.evaluated_value)
    if isinstance(node, cst.UnaryOperation) and isinstance(node.operator, cst.Minus):
        inner = _literal(node.expression)
        return None if inner is None else -inner
    return None


RULES = [Nonzero, Unique, BooleanMaskRead, BooleanMaskWrite, Bincount, RepeatInterleave, DeviceSplit, HistcDefaultBounds]
