"""One root cause, one record; and host tensors in the CPU emulation (`hazards.py`, `residence.py`)."""
from __future__ import annotations

import pytest

from graphlint.runtime.harness import run_harness

from runtime_helpers import marked_line, target


@pytest.fixture(scope="module")
def runs():
    cache: dict[str, dict] = {}

    def run(kind: str) -> dict:
        if kind not in cache:
            cache[kind] = run_harness(target("root_causes"), "cpu", None, options={"kind": kind}, bench=False,
                                      isolate=False)
        return cache[kind]

    return run


def test_one_python_value_is_one_record_with_its_symptoms(runs):
    (record,) = runs("one_value")["replay"]["hazards"]
    assert record["hazard"] == "frozen-scalar"
    assert (record["path"], record["line"]) == marked_line("root_causes", "first use")
    assert record["symptoms"] == 2 and len(record["symptom_sites"]) == 2
    assert "the same Python value reaches the other ops" in record["detail"]


def test_a_first_step_path_is_one_record_at_its_branch(runs):
    runtime = runs("first_call")
    (record,) = runtime["replay"]["hazards"]
    assert record["hazard"] == "control-flow"
    assert (record["path"], record["line"]) == marked_line("root_causes", "branch")
    assert "only the first traced step takes this path" in record["detail"]
    assert runtime["phases"]["replay"]["verdict"] == "fail"  # a capture at step 0 would freeze it


def test_a_branch_between_two_helpers_is_placed_at_the_callers_if(runs):
    (record,) = runs("helper_choice")["replay"]["hazards"]
    assert record["hazard"] == "control-flow"
    assert (record["path"], record["line"]) == marked_line("root_causes", "helper branch")


def test_a_constant_made_in_the_step_is_no_stale_input(runs):
    runtime = runs("constant_index")
    assert [h for h in runtime["replay"]["hazards"] if h["hazard"] == "stale-input"] == []
    (event,) = runtime["sync_events"]  # the copy from the host is still one
    assert (event["kind"], event["op"]) == ("h2d-copy", "torch.tensor")
    assert (event["path"], event["line"]) == marked_line("root_causes", "constant")


def test_a_host_tensor_moved_to_the_device_is_a_host_to_device_copy(runs):
    runtime = runs("host_copy")
    (event,) = runtime["sync_events"]
    assert (event["kind"], event["op"]) == ("h2d-copy", "Tensor.to")
    assert (event["path"], event["line"]) == marked_line("root_causes", "move")
    assert runtime["captures"][0]["predicted"] == "fail"


def test_tensors_made_on_the_device_are_not_host_copies(runs):
    runtime = runs("device_ramp")
    assert runtime["sync_events"] == [] and runtime["verdict"] == "pass"


def test_a_branch_on_a_host_tensor_is_no_device_read(runs):
    runtime = runs("host_branch")
    assert runtime["sync_events"] == [] and runtime["verdict"] == "pass"
