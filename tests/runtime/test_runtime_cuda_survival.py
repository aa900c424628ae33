"""On CUDA: the worker survives a target that exits or crashes, and the cross-check joins sync
debug mode's events with the findings. Skipped without CUDA."""
from __future__ import annotations

import pytest
import torch

from graphlint.config import load
from graphlint import crosscheck
from graphlint.runtime import lint_target
from graphlint.runtime.harness import run_harness

from runtime_helpers import REPO, marked_line, target

pytestmark = [pytest.mark.cuda, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")]


@pytest.mark.parametrize("how, message", [
    ("sys_exit", "step() called sys.exit(3)"),
    ("segfault", "the worker for cuda:0 was killed by SIGSEGV in step() (step 0)"),
])
def test_a_cuda_worker_that_breaks_fails_the_phase_with_its_line(how, message):
    runtime = run_harness(target("misbehave"), "cuda:0", 8, options={"how": how}, bench=False, step_timeout=60)
    where = marked_line("misbehave", how)
    assert runtime["verdict"] == "fail"
    assert runtime["phases"]["sync"]["error"] == f"cuda:0: {message} at {where[0]}:{where[1]}"


def test_a_step_returning_none_fails_the_cuda_replay():
    runtime = run_harness(target("misbehave"), "cuda:0", 8, options={"how": "return_none"}, bench=False)
    assert runtime["phases"]["replay"]["verdict"] == "fail"
    replay = runtime["replay"]["devices"][0]
    assert replay["reason"].startswith("step() returned None")


def test_cross_check_of_the_syncs_sync_debug_mode_misses():
    runtime = run_harness(target("missed_syncs"), "cuda:0", 8, bench=False)
    config = load(None)
    static = lint_target.lint(runtime, config, jobs=1)
    joined = crosscheck.join(static.findings, runtime, config.root, REPO, static.files)
    seen = {(r["source"], r["kind"], r["op"], r["line"]) for c in joined["confirmed"] for r in c["runtime"]
            if r["source"] != "allocation"}
    assert len(seen) + len(joined["missed_by_static"]) == len(runtime["sync_events"]) + len(
        runtime["replay"]["hazards"])
    confirmed = {(c["rule"], c["line"]) for c in joined["confirmed"]}
    assert ("GL106", marked_line("missed_syncs", "device-sync")[1]) in confirmed
    assert ("GL106", marked_line("missed_syncs", "event-sync")[1]) in confirmed
    print("missed_by_static on CUDA:", [(m["kind"], m["op"], m["line"]) for m in joined["missed_by_static"]])
