"""The bundled DSV4 targets through `graphlint runtime` on the CPU emulation.

Done-when criteria of the harness: the graph-safe step passes sync detection with zero events; the
reference port fails and lists the seeds' violation lines (mHC `.item()`, the MoE bincount/tolist
and its Python loop's host reads, the boolean-mask ops), each with path and line.
"""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

import dsv4_model.target
from graphlint.commands.runtime import runtime_command

REFERENCE = Path(dsv4_model.target.__file__).with_name("reference.py")
STEPS = "4"  # crosses the first compressor boundary (t = 3 mod 4)


def _json(*args: str) -> tuple[int, dict]:
    result = CliRunner().invoke(runtime_command, [*args, "--steps", STEPS, "--no-bench", "--format", "json"],
                                catch_exceptions=False)
    return result.exit_code, json.loads(result.output)["runtime"]


def _line(pattern: str) -> int:
    """The line of the reference port matching `pattern` (so edits to the model do not break the test)."""
    for number, text in enumerate(REFERENCE.read_text().splitlines(), start=1):
        if re.search(pattern, text):
            return number
    raise AssertionError(f"{pattern!r} not found in {REFERENCE}")


@pytest.fixture(scope="module")
def graph_safe():
    return _json()


@pytest.fixture(scope="module")
def reference():
    return _json("--reference")


def test_graph_safe_step_passes_with_zero_sync_events(graph_safe):
    code, runtime = graph_safe
    entry = runtime["target"].pop("entry")
    assert runtime["target"] == {"spec": "dsv4_model.target:graph_safe",
                                 "options": {"config": "tiny", "batch": 1, "seed": 0}}
    assert (entry["path"], entry["qualname"], entry["files"]) == (
        "dsv4_model/target.py", "GraphSafeTarget.step", ["dsv4_model/target.py"])
    assert runtime["sync_events"] == []
    assert runtime["phases"]["sync"]["verdict"] == "pass"
    assert runtime["replay"]["hazards"] == []
    assert runtime["allocations"]["outputs_static"] is True
    assert runtime["verdict"] == "pass" and code == 0


def test_reference_port_fails_on_the_seeds_violations(reference):
    code, runtime = reference
    assert code == 1 and runtime["verdict"] == "fail"
    assert runtime["phases"]["sync"]["verdict"] == "fail"
    path = "dsv4_model/reference.py"
    found = {(e["line"], e["kind"], e["op"]) for e in runtime["sync_events"] if e["path"] == path}
    expected = {
        (_line(r"^\s+if y\.abs\(\)\.max\(\)\.item\(\)"), "host-read", "Tensor.item"),  # mHC post_block
        (_line(r"^\s+counts_t = torch\.bincount\("), "dynamic-shape", "aten.bincount.default"),  # MoE counts
        (_line(r"^\s+counts = counts_t\.tolist\(\)"), "d2h-copy", "Tensor.tolist"),  # the loop's host copy
        (_line(r"^\s+if offsets\[0\] != 0:"), "host-read", "Tensor.__bool__"),  # host branch on a device value
        (_line(r"^\s+idx, top = torch\.where\(indices == e\)"), "dynamic-shape", "aten.where.default"),
        (_line(r"^\s+topk_idxs = topk_idxs\[valid\]"), "dynamic-shape", "aten.index.Tensor"),  # boolean mask
        (_line(r"^\s+if not valid\.all\(\):"), "host-read", "Tensor.__bool__"),
        (_line(r"^\s+self\.tok_buf\[b, 0\] = token"), "h2d-copy", "aten.copy_.default"),  # Python int write
    }
    assert expected <= found, expected - found
    for event in runtime["sync_events"]:
        assert event["stack"][-1]["line"] == event["line"]


def test_reference_port_replay_hazards_name_the_host_start_pos(reference):
    _, runtime = reference
    hazards = {h["hazard"] for h in runtime["replay"]["hazards"]}
    assert {"frozen-scalar", "control-flow", "shape-varies"} <= hazards
    frozen = {h["line"] for h in runtime["replay"]["hazards"] if h["hazard"] == "frozen-scalar"}
    assert _line(r"^\s+freqs_cis = self\.freqs_cis\[start_pos:start_pos \+ 1\]") in frozen  # host slice offset
    assert _line(r"^\s+self\.kv_cache\[:bsz, start_pos % win\] = kv") in frozen  # host ring-buffer slot
    assert runtime["phases"]["capture"]["verdict"] == "fail"
