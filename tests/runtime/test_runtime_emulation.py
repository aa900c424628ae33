"""The planted targets on the CPU emulation: each hazard is found, named and placed on its line.

Run in this process (`isolate=False`): these tests are about what the emulation finds; the worker
process that runs a target by default is tested in test_runtime_survival.py."""
from __future__ import annotations

import pytest

from graphlint.runtime.harness import run_harness

from runtime_helpers import marked_line, target


@pytest.fixture(scope="module")
def runs():
    cache: dict[str, dict] = {}

    def run(name: str, **kwargs) -> dict:
        key = f"{name}{sorted(kwargs.items())}"
        if key not in cache:
            cache[key] = run_harness(target(name), "cpu", None, bench=False, isolate=False, **kwargs)
        return cache[key]

    return run


def _verdicts(runtime: dict) -> dict:
    return {name: phase["verdict"] for name, phase in runtime["phases"].items()}


def _at(records: list[dict], where: tuple[str, int]) -> list[dict]:
    return [r for r in records if (r["path"], r["line"]) == where]


def test_clean_target_passes_everything(runs):
    runtime = runs("clean")
    assert runtime["mode"] == "cpu-emulation"
    assert runtime["verdict"] == "pass"
    assert _verdicts(runtime) == {"sync": "pass", "allocation": "pass", "capture": "skipped",
                                  "replay": "pass", "bench": "skipped"}
    assert runtime["sync_events"] == []
    assert runtime["replay"]["hazards"] == []
    assert runtime["captures"][0]["status"] == "skipped (no CUDA)"
    assert runtime["captures"][0]["predicted"] == "ok"
    assert runtime["allocations"]["outputs_static"] is True
    assert runtime["allocations"]["growth"] is False


def test_item_in_the_step(runs):
    runtime = runs("item_sync")
    where = marked_line("item_sync", "item")
    events = _at(runtime["sync_events"], where)
    assert [(e["kind"], e["op"], e["function"]) for e in events] == [("host-read", "Tensor.item", "step")]
    assert events[0]["stack"][-1] == {"path": where[0], "line": where[1], "function": "step"}
    assert runtime["phases"]["sync"]["verdict"] == "fail"
    assert runtime["phases"]["capture"]["verdict"] == "fail"
    assert runtime["captures"][0]["causes"][0]["line"] == where[1]
    assert runtime["verdict"] == "fail"


def test_python_int_frozen_into_the_capture(runs):
    runtime = runs("frozen_scalar")
    assert runtime["sync_events"] == []  # nothing syncs: the hazard is silent on CUDA
    frozen = [h for h in runtime["replay"]["hazards"] if h["hazard"] == "frozen-scalar"]
    lines = {(h["path"], h["line"]): h for h in frozen}
    fill = lines[marked_line("frozen_scalar", "fill")]
    assert fill["op"] == "aten.fill_.Scalar"
    assert "argument 1 is 0 at step 0, 1 at step 1" in fill["detail"]
    assert marked_line("frozen_scalar", "slice") in lines
    assert runtime["phases"]["replay"]["verdict"] == "fail"


def test_fresh_input_tensor_each_step_is_a_stale_replay(runs):
    runtime = runs("stale_input")
    stale = [h for h in runtime["replay"]["hazards"] if h["hazard"] == "stale-input"]
    assert len(stale) == 1
    assert (stale[0]["path"], stale[0]["line"]) == marked_line("stale_input", "read")
    assert stale[0]["detail"].startswith("target.x is a different tensor")
    assert runtime["phases"]["replay"]["verdict"] == "fail"


def test_work_on_another_device(runs):
    runtime = runs("other_device")
    where = marked_line("other_device", "other-device")
    other = [h for h in runtime["replay"]["hazards"] if h["hazard"] == "other-device"]
    assert [(h["path"], h["line"], h["device"]) for h in other] == [(*where, "meta")]
    assert runtime["phases"]["capture"]["verdict"] == "fail"  # predicted: an empty graph
    assert runtime["captures"][0]["causes"][0]["kind"] == "other-device"


def test_output_shape_depends_on_the_data(runs):
    runtime = runs("dynamic_output")
    where = marked_line("dynamic_output", "mask")
    assert [(e["kind"], e["op"]) for e in _at(runtime["sync_events"], where)] == [
        ("dynamic-shape", "aten.index.Tensor")]
    kinds = {h["hazard"] for h in _at(runtime["replay"]["hazards"], where)}
    assert {"dynamic-output-shape", "shape-varies"} <= kinds
    assert runtime["allocations"]["outputs_static"] is False


def test_device_synchronize_is_recorded_and_skipped(runs):
    runtime = runs("missed_syncs")
    where = marked_line("missed_syncs", "device-sync")
    assert [(e["kind"], e["op"]) for e in _at(runtime["sync_events"], where)] == [
        ("sync", "torch.cuda.synchronize")]


def test_error_mode_stops_at_the_first_event(runs):
    runtime = runs("item_sync", sync_mode="error")
    assert len(runtime["sync_events"]) == 1
    assert runtime["sync_events"][0]["count"] == 1
    assert runtime["phases"]["sync"]["stopped"]["error"].startswith("stopped at the first event")
    # the other phases still ran on whole steps
    assert runtime["phases"]["replay"]["verdict"] == "fail"


def test_growing_cache_fails_the_allocation_phase(tmp_path):
    (tmp_path / "grow.py").write_text(
        "import torch\n"
        "class Grow:\n"
        "    def __init__(self, device):\n"
        "        self.device = device\n"
        "        self.cache = torch.zeros(0, 4)\n"
        "    def reset(self):\n"
        "        self.cache = torch.zeros(0, 4)\n"
        "    def prepare(self, step):\n"
        "        pass\n"
        "    def step(self):\n"
        "        self.cache = torch.cat([self.cache, torch.ones(1, 4)])\n"
        "        return self.cache.sum(0)\n"
        "def make(device):\n"
        "    return Grow(device)\n"
    )
    runtime = run_harness(f"{tmp_path / 'grow.py'}:make", "cpu", 4, bench=False, isolate=False)
    assert runtime["phases"]["allocation"]["verdict"] == "fail"
    assert runtime["allocations"]["growth"] is True
    assert "shape-varies" in runtime["phases"]["replay"]["by_hazard"]


def test_a_step_that_raises_fails_with_its_line(tmp_path):
    (tmp_path / "boom.py").write_text(
        "import torch\n"
        "class Boom:\n"
        "    device = torch.device('cpu')\n"
        "    def reset(self): self.n = 0\n"
        "    def prepare(self, step): self.n = step\n"
        "    def step(self):\n"
        "        if self.n == 2:\n"
        "            raise ValueError('bad step')\n"
        "        return torch.ones(2)\n"
        "def make(device):\n"
        "    return Boom()\n"
    )
    runtime = run_harness(f"{tmp_path / 'boom.py'}:make", "cpu", 4, bench=False, isolate=False)
    assert runtime["verdict"] == "fail"
    assert "bad step" in runtime["phases"]["sync"]["error"]
    assert runtime["phases"]["sync"]["stopped"]["stack"][-1]["line"] == 8
