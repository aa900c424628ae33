"""The catalogue of ops that sync on CUDA only (graphlint/data/cuda_sync_ops.toml): its entries, the
CPU emulation that reads it, the static rule GL109 that reads it, and the explanation and fix that
every runtime event, hazard and capture failure carries."""
from __future__ import annotations

import importlib
import os

import pytest
import torch

from graphlint.analysis import catalog as data_catalog
from graphlint.runtime.tracing import hazards, op_catalog
from graphlint.runtime.harness import run_harness

from runtime_helpers import marked_line, target


def _resolve(dotted: str):
    module, _, attr = dotted.rpartition(".")
    return getattr(importlib.import_module(module), attr, None)


def test_every_entry_is_complete_and_names_where_it_was_seen():
    entries = data_catalog.cuda_sync_ops()
    assert [e.op for e in entries][0] == "aten._grouped_mm"
    for entry in entries:
        assert entry.op.startswith("aten.") and entry.kind in op_catalog.KINDS
        assert entry.reason and entry.fix and entry.torch and entry.device and entry.python
        assert entry.seen_on == f"seen on {entry.device}, torch {entry.torch}"
    grouped = entries[0]
    assert grouped.torch.startswith("2.11") and "H200" in grouped.device
    assert "unless the CPU tensor is pinned" in grouped.capture_error
    # The H200 probe: float32 and float16 synced and failed capture, bfloat16 did neither.
    assert grouped.dtypes == ("float32", "float16") and "bfloat16" in grouped.not_seen


def test_the_python_names_exist_in_this_torch():
    # A renamed callable would silently stop the static rule from matching.
    for entry in data_catalog.cuda_sync_ops():
        assert any(callable(_resolve(name)) for name in entry.python), entry.python


def test_the_runtime_catalog_carries_the_entries():
    rules = op_catalog.OP_RULES_BY_NAME["aten._grouped_mm"]
    assert [(r.kind, r.when, r.dtypes) for r in rules] == [("sync", "dtype", ("float32", "float16"))]
    assert "seen on NVIDIA H200, torch 2.11" in rules[0].reason


def test_the_emulation_reports_grouped_mm_at_its_line():
    runtime = run_harness(target("grouped_mm"), "cpu", None, bench=False)
    where = marked_line("grouped_mm", "grouped_mm")
    events = [e for e in runtime["sync_events"] if (e["path"], e["line"]) == where]
    assert [(e["kind"], e["op"]) for e in events] == [("sync", "aten._grouped_mm.default")]
    assert len(runtime["sync_events"]) == 1
    event = events[0]
    assert "seen on NVIDIA H200, torch 2.11" in event["detail"]
    assert "grouped_mm" in event["explanation"] and "batched_mm" in event["fix"]
    assert runtime["captures"][0]["predicted"] == "fail"
    assert runtime["captures"][0]["causes"][0]["fix"] == event["fix"]


def test_bfloat16_grouped_mm_is_not_flagged():
    # Precision: on the H200 the bfloat16 path neither synced nor failed capture.
    runtime = run_harness(target("grouped_mm"), "cpu", None, options={"dtype": "bfloat16"}, bench=False)
    assert runtime["verdict"] == "pass" and runtime["errors"] == []
    assert runtime["sync_events"] == []
    assert runtime["captures"][0]["predicted"] == "ok"


def test_a_plain_mm_step_is_not_flagged():
    # Precision: the clean target's matmuls are not mistaken for the catalogued op.
    runtime = run_harness(target("clean"), "cpu", None, bench=False)
    assert runtime["sync_events"] == []


@pytest.mark.parametrize("kind", op_catalog.KINDS)
def test_every_event_kind_has_an_explanation_and_a_fix(kind):
    explained = op_catalog.explain(kind, "unknown")
    assert explained["explanation"] == op_catalog.KIND_EXPLANATION[kind]
    assert explained["fix"] == op_catalog.KIND_FIX[kind]


def test_every_catalog_entry_explains_its_events():
    names = [(r.kind, f"{r.op}.default") for r in op_catalog.OP_RULES] + [(r.kind, r.name) for r in op_catalog.PY_RULES]
    names += [("sync", dotted) for dotted, _reason, _checked in op_catalog.SYNC_CALLS]
    for kind, op in names:
        explained = op_catalog.explain(kind, op)
        assert explained["explanation"] and explained["fix"], op
    assert op_catalog.explain("dynamic-shape", "aten.nonzero.default")["fix"].startswith("torch.nonzero_static")


def test_every_hazard_has_an_explanation_and_a_fix():
    assert set(hazards.FIX) == set(hazards.WHY)
    runtime = run_harness(target("frozen_scalar"), "cpu", None, bench=False)
    found = runtime["replay"]["hazards"]
    assert found and all(h["explanation"] == hazards.WHY[h["hazard"]] and h["fix"] for h in found)


def test_capture_errors_are_explained():
    message = ("Cannot copy between CPU and CUDA tensors during CUDA graph capture unless the CPU tensor is "
               "pinned. Please pin the CPU tensor.")
    named = op_catalog.explain_capture_error(message, "aten._grouped_mm.default")
    assert named["explanation"].startswith("aten._grouped_mm: grouped_mm on float32 or float16 inputs synchronizes")
    assert "batched_mm" in named["fix"]
    generic = op_catalog.explain_capture_error(message, "aten.copy_.default")
    assert "pageable host memory" in generic["explanation"]
    assert op_catalog.explain_capture_error("called a synchronizing CUDA operation")["fix"] == op_catalog.KIND_FIX["sync"]
    assert op_catalog.explain_capture_error("something else entirely") is None


def test_the_static_check_flags_grouped_mm_in_transformers(tmp_path):
    transformers = pytest.importorskip("transformers")
    from click.testing import CliRunner

    from graphlint.cli import main

    moe = os.path.join(os.path.dirname(transformers.__file__), "integrations", "moe.py")
    with open(moe, encoding="utf-8") as handle:
        lines = handle.read().splitlines()
    expected = [n for n, text in enumerate(lines, 1)
                if "return torch.nn.functional.grouped_mm(" in text or "return torch._grouped_mm(" in text]
    assert expected, "transformers' moe.py no longer calls grouped_mm: update this test"
    out = tmp_path / "report.json"
    result = CliRunner().invoke(main, ["check", moe, "--select", "GL109", "--no-cache", "--format", "json",
                                       "--output", str(out)])
    # A warning: the linter cannot see the dtype, and bfloat16 call sites are safe on torch 2.11.
    assert result.exit_code == 0, result.output
    import json

    findings = json.loads(out.read_text())["static"]["findings"]
    assert sorted(f["line"] for f in findings) == expected
    assert all(f["severity"] == "warning" for f in findings)
    assert all("float32/float16" in f["message"] and "torch 2.11" in f["message"] and "batched_mm" in f["fix"]
               for f in findings)


def test_a_capture_failure_takes_the_fix_of_its_cause():
    from graphlint.runtime.cuda.cuda_run import _explain_capture

    event = {"op": "aten.nonzero.default", "kind": "dynamic-shape", "path": "m.py", "line": 3, "function": "f",
             **op_catalog.explain("dynamic-shape", "aten.nonzero.default")}
    assert _explain_capture("RuntimeError: called a synchronizing CUDA operation", event)["fix"].startswith(
        "torch.nonzero_static")
    unknown = {"op": "unknown", "kind": "capture-error", "path": "m.py", "line": 3, "function": "f",
               **op_catalog.explain("sync", "unknown")}
    copy_error = "Cannot copy between CPU and CUDA tensors during CUDA graph capture unless the CPU tensor is pinned"
    assert "pageable host memory" in _explain_capture(copy_error, unknown)["explanation"]
    assert _explain_capture("an unheard-of error", unknown)["fix"] == op_catalog.KIND_FIX["sync"]
    assert _explain_capture("an unheard-of error", None) == {}


def test_one_hot_with_num_classes_is_not_a_sync_but_without_it_is():
    # The reverse case: the CPU kernel reads min/max on the host, the CUDA kernel does not when
    # num_classes is given (Onehot.cpp; no warning at Mixtral's one_hot line on the H200).
    given = run_harness(target("one_hot"), "cpu", None, bench=False)
    assert given["verdict"] == "pass" and given["sync_events"] == []
    inferred = run_harness(target("one_hot"), "cpu", None, options={"given": False}, bench=False)
    where = marked_line("one_hot", "inferred")
    assert {(e["kind"], e["path"], e["line"]) for e in inferred["sync_events"]} == {("host-read", *where)}


def test_the_emulation_agrees_with_the_h200_probe():
    # Every probe the H200 ran (torch 2.11): the emulation flags it iff it synced or failed capture.
    import json
    import sys
    from pathlib import Path

    from graphlint.runtime.tracing.intercept import Interceptor

    repo = Path(__file__).resolve().parents[2]
    recorded = json.loads((repo / "tests" / "data" / "h200_sync_probe.json").read_text())
    assert recorded["torch"].startswith("2.11") and "H200" in recorded["device"]
    sys.path.insert(0, str(repo / "bench"))
    try:
        import probe_cuda_sync_ops
    finally:
        sys.path.remove(str(repo / "bench"))
    probes = probe_cuda_sync_ops.probes(torch.device("cpu"))
    assert {row["probe"] for row in recorded["probes"]} == set(probes)
    for row in recorded["probes"]:
        on_cuda = row["sync_warnings"] > 0 or row.get("capture") == "fail"
        _, trace = Interceptor(torch.device("cpu"), emulate=True).run_step(probes[row["probe"]], 0)
        assert bool(trace.events) == on_cuda, (row, trace.events)
