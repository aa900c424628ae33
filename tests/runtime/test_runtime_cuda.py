"""The harness on real CUDA devices: sync debug mode, trial capture on an explicit per-device
stream, replay against eager, and the multi-GPU lesson of the seeds. Skipped without CUDA."""
from __future__ import annotations

import pytest
import torch

from graphlint.runtime.harness import run_harness

from runtime_helpers import marked_line, target

pytestmark = [pytest.mark.cuda, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")]


@pytest.fixture(scope="module")
def runs():
    cache: dict[tuple, dict] = {}

    def run(name: str, factory: str = "make", devices: str = "cuda:0", **kwargs) -> dict:
        key = (name, factory, devices, tuple(sorted(kwargs.items())))
        if key not in cache:
            kwargs.setdefault("steps", 16)
            cache[key] = run_harness(target(name, factory), devices, kwargs.pop("steps"), **kwargs)
        return cache[key]

    return run


def _capture(runtime: dict, device: str = "cuda:0") -> dict:
    return next(c for c in runtime["captures"] if c["device"] == device)


def _replay(runtime: dict, device: str = "cuda:0") -> dict:
    return next(r for r in runtime["replay"]["devices"] if r["device"] == device)


def _events_at(runtime: dict, where: tuple[str, int]) -> list[tuple[str, str]]:
    return [(e["kind"], e["op"]) for e in runtime["sync_events"] if (e["path"], e["line"]) == where]


def test_clean_target_captures_replays_and_is_faster(runs):
    runtime = runs("clean")
    assert runtime["mode"] == "cuda"
    assert runtime["sync_events"] == [], runtime["sync_events"]
    assert _capture(runtime)["status"] == "captured"
    replay = _replay(runtime)
    assert replay["verdict"] == "pass" and replay["mismatched_steps"] == 0 and replay["max_abs_diff"] == 0.0
    bench = runtime["bench"]["devices"][0]
    assert bench["eager_ms"] > 0 and bench["replay_ms"] > 0 and bench["speedup"] > 0
    assert runtime["verdict"] == "pass", runtime["phases"]


def test_item_is_a_sync_and_the_capture_failure_names_its_line(runs):
    runtime = runs("item_sync")
    where = marked_line("item_sync", "item")
    assert ("host-read", "Tensor.item") in _events_at(runtime, where)
    capture = _capture(runtime)
    assert capture["verdict"] == "fail"
    assert (capture["cause"]["path"], capture["cause"]["line"]) == where
    assert _replay(runtime)["verdict"] == "skipped"
    assert runtime["verdict"] == "fail"


def test_error_mode_stops_at_the_first_sync(runs):
    runtime = runs("item_sync", sync_mode="error")
    assert len(runtime["sync_events"]) == 1
    event = runtime["sync_events"][0]
    assert (event["path"], event["line"]) == marked_line("item_sync", "item")
    assert event["op"] == "Tensor.item" and event["kind"] == "host-read"


def test_syncs_the_debug_mode_misses_are_reported(runs):
    runtime = runs("missed_syncs")
    assert ("sync", "torch.cuda.synchronize") in _events_at(runtime, marked_line("missed_syncs", "device-sync"))
    assert ("sync", "torch.cuda.Event.synchronize") in _events_at(runtime, marked_line("missed_syncs", "event-sync"))
    assert ("h2d-copy", "Tensor.copy_") in _events_at(runtime, marked_line("missed_syncs", "pageable"))
    assert _capture(runtime)["verdict"] == "fail"


def test_frozen_python_int_replays_stale_values(runs):
    runtime = runs("frozen_scalar")
    assert _capture(runtime)["status"] == "captured"  # silent at capture ...
    replay = _replay(runtime)
    assert replay["verdict"] == "fail" and replay["mismatched_steps"] > 0  # ... wrong at replay
    assert marked_line("frozen_scalar", "fill") in {
        (h["path"], h["line"]) for h in runtime["replay"]["hazards"] if h["hazard"] == "frozen-scalar"}


def test_rebound_input_replays_stale_data(runs):
    runtime = runs("stale_input")
    assert _capture(runtime)["status"] == "captured"
    replay = _replay(runtime)
    assert replay["verdict"] == "fail" and replay["mismatched_steps"] > 0
    assert any(h["hazard"] == "stale-input" for h in runtime["replay"]["hazards"])


def test_host_work_gives_an_empty_graph(runs):
    runtime = runs("other_device")
    capture = _capture(runtime)
    assert capture["status"] == "empty" and capture["empty_graph"] is True
    assert (capture["cause"]["path"], capture["cause"]["line"]) == marked_line("other_device", "other-device")
    assert _replay(runtime)["verdict"] == "fail"


def test_work_on_a_side_stream_fails_the_capture(runs):
    # Seen on an H200 (torch 2.11): not an empty graph but an invalidated capture ("operation
    # failed due to a previous error during capture"), traced back to the side stream's line.
    runtime = runs("other_device", "make_side_stream")
    capture = _capture(runtime)
    assert capture["verdict"] == "fail" and capture["status"] in ("failed", "empty"), capture
    if capture["status"] == "failed":
        assert (capture["cause"]["path"], capture["cause"]["line"]) == marked_line("other_device", "side-stream")
    assert runtime["verdict"] == "fail"


def test_data_dependent_output_fails_the_capture(runs):
    runtime = runs("dynamic_output")
    where = marked_line("dynamic_output", "mask")
    assert ("dynamic-shape", "aten.index.Tensor") in _events_at(runtime, where)
    capture = _capture(runtime)
    assert capture["verdict"] == "fail"
    assert capture["cause"]["line"] == where[1]


@pytest.mark.slow
def test_bundled_graph_safe_step_passes_300_steps():
    runtime = run_harness(None, "cuda:0", None)
    assert runtime["sync_events"] == [], runtime["sync_events"]
    assert _capture(runtime)["status"] == "captured"
    replay = _replay(runtime)
    assert replay["steps"] == 300 and replay["verdict"] == "pass", replay
    assert runtime["verdict"] == "pass", runtime["phases"]


def test_bundled_reference_fails_sync_and_capture():
    runtime = run_harness("reference", "cuda:0", 8, bench=False)
    kinds = {e["kind"] for e in runtime["sync_events"] if e["path"] == "dsv4_model/reference.py"}
    assert {"host-read", "dynamic-shape"} <= kinds
    assert _capture(runtime)["verdict"] == "fail"
    assert runtime["verdict"] == "fail"


@pytest.mark.multigpu
@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two CUDA devices")
def test_second_gpu_default_stream_is_an_empty_graph_and_cuda0_still_passes(runs):
    runtime = runs("multigpu", devices="cuda:0,cuda:1")
    assert runtime["devices"] == ["cuda:0", "cuda:1"]
    assert _capture(runtime, "cuda:0")["status"] == "captured"
    assert _replay(runtime, "cuda:0")["verdict"] == "pass"
    capture1 = _capture(runtime, "cuda:1")
    assert capture1["status"] == "empty", capture1
    replay1 = _replay(runtime, "cuda:1")
    assert replay1["verdict"] == "fail" and replay1["stale"] is True
    assert runtime["phases"]["capture"]["devices"] == {"cuda:0": "pass", "cuda:1": "fail"}


@pytest.mark.multigpu
@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two CUDA devices")
def test_clean_target_on_all_devices(runs):
    runtime = runs("clean", devices="all")
    assert len(runtime["captures"]) == torch.cuda.device_count()
    assert all(c["status"] == "captured" for c in runtime["captures"])
    assert runtime["verdict"] == "pass", runtime["phases"]
