"""What the CPU emulation flags, expression by expression (RUNTIME_NOTES §5 and its H200 table).

Each case runs one expression as a step under the interceptor and names the events it must raise;
an empty list means the expression is graph-safe on CUDA (0 syncs on the H200).
"""
from __future__ import annotations

import pytest
import torch

from graphlint.runtime.tracing.intercept import Interceptor, SyncStop

x = torch.linspace(-1, 1, 8)
mask = x > 0
idx = torch.tensor([1, 2, 3])
reps = torch.full((8,), 2)


def _set(t, key, value):
    t = t.clone()
    t[key] = value
    return t


CASES = {
    "item": (lambda: x.sum().item(), [("host-read", "Tensor.item")]),
    "if tensor": (lambda: bool(x.sum() > 0), [("host-read", "Tensor.__bool__")]),
    "int()": (lambda: int(x[0]), [("host-read", "Tensor.__int__")]),
    "f-string": (lambda: f"{x.max():.2f}", [("host-read", "Tensor.__format__")]),
    "print": (lambda: repr(x), [("host-read", "Tensor.__repr__")]),
    "v in t": (lambda: 0.5 in x, [("host-read", "Tensor.__contains__")]),
    "tolist": (lambda: x.tolist(), [("d2h-copy", "Tensor.tolist")]),
    "cpu()": (lambda: x.cpu(), [("d2h-copy", "Tensor.cpu")]),
    "numpy()": (lambda: x.numpy(), [("d2h-copy", "Tensor.numpy")]),
    "to('cpu')": (lambda: x.to("cpu"), [("d2h-copy", "Tensor.to")]),
    "to(dtype)": (lambda: x.to(torch.float16), []),
    "mask read": (lambda: x[mask], [("dynamic-shape", "aten.index.Tensor")]),
    "mask write scalar (masked_fill)": (lambda: _set(x, mask, 0.0), []),
    "mask write tensor": (lambda: _set(x, mask, x[mask] * 2),
                          [("dynamic-shape", "aten.index.Tensor"), ("dynamic-shape", "aten.index_put_.default")]),
    "index gather": (lambda: x[idx], []),
    "python scalar into one element": (lambda: _set(x, 0, 3.0), [("h2d-copy", "aten.copy_.default")]),
    "torch.tensor(list)": (lambda: torch.tensor([1, 2, 3]), [("h2d-copy", "torch.tensor")]),
    "torch.tensor(scalar) as an argument": (lambda: x * torch.tensor(2.0), []),
    "nonzero": (lambda: torch.nonzero(mask), [("dynamic-shape", "aten.nonzero.default")]),
    "argwhere": (lambda: torch.argwhere(mask), [("dynamic-shape", "aten.nonzero.default")]),
    "where(cond)": (lambda: torch.where(mask), [("dynamic-shape", "aten.nonzero.default")]),
    "where(cond, x, y)": (lambda: torch.where(mask, x, 0.0), []),
    "masked_select": (lambda: torch.masked_select(x, mask), [("dynamic-shape", "aten.masked_select.default")]),
    "unique": (lambda: torch.unique(idx), [("dynamic-shape", "aten._unique2.default")]),
    "unique_consecutive": (lambda: torch.unique_consecutive(idx),
                           [("dynamic-shape", "aten.unique_consecutive.default")]),
    "bincount": (lambda: torch.bincount(idx, minlength=8), [("dynamic-shape", "aten.bincount.default")]),
    "scatter_add_ counts": (lambda: torch.zeros(8, dtype=torch.long).scatter_add_(0, idx, torch.ones_like(idx)), []),
    "repeat_interleave": (lambda: torch.repeat_interleave(x, reps),
                          [("dynamic-shape", "aten.repeat_interleave.Tensor")]),
    "repeat_interleave output_size": (lambda: torch.repeat_interleave(x, reps, output_size=16), []),
    "histc default bounds": (lambda: torch.histc(x), [("host-read", "aten.histc.default")]),
    "histc fixed bounds": (lambda: torch.histc(x, bins=4, min=-1, max=1), []),
    "equal": (lambda: torch.equal(x, x), [("host-read", "aten.equal.default")]),
    "allclose": (lambda: torch.allclose(x, x), [("host-read", "aten.allclose.default")]),
    "cuda synchronize": (lambda: torch.cuda.synchronize(), [("sync", "torch.cuda.synchronize")]),
    "topk": (lambda: torch.topk(x, 3), []),
    "nonzero_static": (lambda: torch.nonzero_static(mask, size=8), []),
}


@pytest.mark.parametrize("name", list(CASES))
def test_expression(name):
    fn, expected = CASES[name]
    _, trace = Interceptor(torch.device("cpu"), emulate=True).run_step(fn, 0)
    assert [(e["kind"], e["op"]) for e in trace.events] == expected
    for event in trace.events:
        assert event["path"].endswith("test_runtime_intercept.py")
        assert event["function"] == "<lambda>" or event["function"] == "_set"


def test_inference_mode_where_is_still_nonzero():
    # Under inference_mode the composite one-argument where reaches the dispatch mode whole.
    with torch.inference_mode():
        _, trace = Interceptor(torch.device("cpu"), emulate=True).run_step(lambda: torch.where(mask), 0)
    assert [(e["kind"], e["op"]) for e in trace.events] == [("dynamic-shape", "aten.where.default")]


def test_error_mode_stops_at_the_first_event():
    def step():
        x.sum().item()
        x.tolist()

    it = Interceptor(torch.device("cpu"), emulate=True, stop_at_first=True)
    with pytest.raises(SyncStop) as stop:
        it.run_step(step, 0)
    assert stop.value.event["op"] == "Tensor.item"
    assert len(it.last.events) == 1


def test_every_occurrence_is_recorded_with_its_stack():
    def inner(t):
        return t.sum().item()

    def step():
        for _ in range(3):
            inner(x)

    _, trace = Interceptor(torch.device("cpu"), emulate=True).run_step(step, 0)
    assert len(trace.events) == 3
    stack = trace.events[0]["stack"]
    assert [f["function"] for f in stack] == ["step", "inner"]


def test_allocations_and_static_outputs():
    out = torch.zeros(8)

    def step():
        out.copy_(torch.tanh(x) * 2)  # two new storages, output is the static buffer
        return out

    _, trace = Interceptor(torch.device("cpu"), emulate=True).run_step(step, 0)
    assert len(trace.allocations) == 2
    assert trace.outputs[0]["static"] is True
    _, trace = Interceptor(torch.device("cpu"), emulate=True).run_step(lambda: x * 2, 0)
    assert trace.outputs[0]["static"] is False


def test_work_on_another_device_is_recorded():
    meta = torch.zeros(4, device="meta")
    _, trace = Interceptor(torch.device("cpu"), emulate=True).run_step(lambda: meta * 2, 0)
    assert {d for _, _, d in trace.other_device} == {"meta"}


def test_a_sync_warning_is_named_after_the_op_on_its_line():
    # On CUDA the warning surfaces after the outermost call returned; the op that synced is found
    # among the recent ops of the warning's line (here the warning is sent by hand, on that line).
    import sys

    it = Interceptor(torch.device("cpu"), emulate=False)

    def step():
        torch.tanh(x); y = x[mask]; it.on_sync_warning("called a synchronizing CUDA operation (Triggered internally at X)", sys._getframe(0))  # noqa: E702,E501
        return y

    _, trace = it.run_step(step, 0)
    (event,) = trace.events
    assert (event["kind"], event["op"], event["function"]) == ("dynamic-shape", "aten.index.Tensor", "step")
    assert event["detail"].startswith("sync debug mode: called a synchronizing CUDA operation; boolean-mask")
