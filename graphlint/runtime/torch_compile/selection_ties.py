"""Near ties in a step's discrete choices (topk, argmax/argmin, max/min over a dim) in the eager runs of
`--compile`: a choice between values closer than rounding can tell apart may go the other way in
another backend. The mode records such choices, or replays the step with one of them flipped to its
runner-up, so a compiled step that differs from eager can be compared with the eager step that chose alike.
"""
from __future__ import annotations

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from graphlint.runtime import user_frames as sources

aten = torch.ops.aten
_CHOICES = {aten.topk.default: "topk", aten.argmax.default: "argmax", aten.argmin.default: "argmin",
            aten.max.dim: "max", aten.min.dim: "min"}
_SMALLEST = {"argmin", "min"}


def _choice(name: str, args: tuple, kwargs: dict) -> tuple[torch.Tensor, int, int, bool]:
    """(input, dim, k, largest) of a choice op; a flattened input for argmax(dim=None)."""
    x = args[0]
    if name == "topk":
        k = args[1]
        dim = args[2] if len(args) > 2 else kwargs.get("dim", -1)
        largest = args[3] if len(args) > 3 else kwargs.get("largest", True)
    else:
        k, largest = 1, name not in _SMALLEST
        dim = args[1] if len(args) > 1 else kwargs.get("dim")
    if dim is None:
        x, dim = x.flatten(), 0
    return x, dim % max(x.dim(), 1), k, largest


def _rows(x: torch.Tensor, dim: int) -> torch.Tensor:
    return x.movedim(dim, -1).reshape(-1, x.shape[dim])


def margin(name: str, args: tuple, kwargs: dict, eps: float) -> tuple[float, int] | None:
    """(gap, row): the smallest gap over the rows between the last value chosen and the first one left
    out, in units of eps x max|input|, and the row it is in. Finite values only (a tie among masked
    -inf entries is no choice); None when nothing is left out or the input holds no floats."""
    x = args[0]
    if not isinstance(x, torch.Tensor) or not x.is_floating_point() or x.numel() == 0 or x.device.type == "meta":
        return None
    x, dim, k, largest = _choice(name, args, kwargs)
    if x.dim() == 0 or k >= x.shape[dim]:
        return None
    edge = _rows(x.detach().double(), dim).topk(k + 1, dim=-1, largest=largest).values[:, k - 1:]
    gaps = (edge[:, 0] - edge[:, 1]).abs()
    gaps = torch.where(torch.isfinite(edge).all(dim=-1), gaps, torch.inf)
    finite = x.detach().double()
    finite = finite[torch.isfinite(finite)]
    scale = float(finite.abs().max()) if finite.numel() else 0.0
    row = int(gaps.argmin())
    gap = float(gaps[row])
    if gap == float("inf"):
        return None
    return (gap / (eps * scale) if scale > 0 else (0.0 if gap == 0 else float("inf"))), row


def flipped(name: str, args: tuple, kwargs: dict, out, row: int):
    """The choice's output with, in `row`, its last chosen entry replaced by the runner-up."""
    x, dim, k, largest = _choice(name, args, kwargs)
    runner = _rows(x, dim).topk(k + 1, dim=-1, largest=largest)
    value, index = runner.values[row, k], runner.indices[row, k]

    def replace(t: torch.Tensor, new: torch.Tensor) -> torch.Tensor:
        if name != "topk":  # one entry per row, in the rows' order with or without keepdim
            flat = t.reshape(-1).clone()
            flat[row] = new.to(flat.dtype)
            return flat.reshape(t.shape)
        moved = t.movedim(dim, -1)
        rows = moved.reshape(-1, k).clone()
        rows[row, k - 1] = new.to(rows.dtype)
        return rows.reshape(moved.shape).movedim(-1, dim)

    if isinstance(out, tuple):
        return type(out)((replace(out[0], value), replace(out[1], index)))
    return replace(out, index)


class SelectionTies(TorchDispatchMode):
    """Records, per step, the step's choices within `limit` eps x scale of a tie (nearest first): each
    `{op, margin, call, row, path, line, function}`, `call` counting the step's choice ops from 0. With
    `flip` (such a record), it instead flips that call's choice in `row` to the runner-up.

    The compute dtype of the eps is bf16 for a step that computes in half precision, else the input's.
    Call `next_step()` before each step.
    """

    def __init__(self, half: bool, limit: float, flip: dict | None = None):
        super().__init__()
        self.half, self.limit, self.flip = half, limit, flip
        self.steps: list[list[dict]] = []
        self._calls = 0

    def next_step(self) -> None:
        self.steps.append([])
        self._calls = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        name = _CHOICES.get(func)
        if name is None or not self.steps:
            return out
        call, self._calls = self._calls, self._calls + 1
        if self.flip is not None:
            return flipped(name, args, kwargs, out, self.flip["row"]) if call == self.flip["call"] else out
        x = args[0]
        compute = torch.bfloat16 if self.half or x.dtype in (torch.float16, torch.bfloat16) else x.dtype
        try:
            found = margin(name, args, kwargs, torch.finfo(compute).eps) if x.is_floating_point() else None
        except Exception:  # a margin that cannot be measured only loses the comparison, never the run
            found = None
        if found is not None and found[0] <= self.limit:
            where = (sources.user_stack(limit=1) or [{"path": "?", "line": 0, "function": "?"}])[-1]
            self.steps[-1].append({"op": name, "margin": found[0], "call": call, "row": found[1], **where})
            self.steps[-1].sort(key=lambda tie: tie["margin"])
        return out
