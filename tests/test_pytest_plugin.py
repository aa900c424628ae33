"""The pytest plugin on a real project (tests/fixtures/plugin_project), run as its users run it:
`python -m pytest` in the project, the plugin found through its `pytest11` entry point."""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

# The project's model and targets run torch; on the Pythons of .ci/run without a local torch
# build the plugin has nothing to run.
pytest.importorskip("torch", reason="torch is not installed for this Python")

PROJECT = Path(__file__).parent / "fixtures" / "plugin_project"


def _line(path: Path, text: str) -> int:
    return next(n for n, line in enumerate(path.read_text().splitlines(), 1) if text in line)


@pytest.fixture(scope="module")
def project_run(tmp_path_factory):
    root = tmp_path_factory.mktemp("plugin") / "project"
    shutil.copytree(PROJECT, root)
    reports = root / "reports"
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests",
                           "--graphlint-report-dir", str(reports)],
                          cwd=root, capture_output=True, text=True, timeout=600)
    return root, proc, proc.stdout + proc.stderr


def test_graph_safe_target_passes_and_planted_hazards_fail_with_their_line(project_run):
    root, proc, output = project_run
    assert proc.returncode == 1, output
    assert "2 failed, 2 passed" in output, output
    assert "test_decode_step_captures[graph_safe]" not in output  # -q names failures only
    model = root / "tinypkg" / "model.py"
    item = _line(model, "scale = h.abs().max().item()")
    frozen = _line(model, "self.cache[start_pos % self.window].copy_(h)")
    assert f"tinypkg/model.py:{item}  host-read Tensor.item in forward_with_item" in output, output
    assert f"tinypkg/model.py:{frozen}  frozen-scalar aten.select.int in forward_at" in output, output
    assert "fix: Keep the value on the device" in output and "fix: Keep the value in a device tensor" in output
    assert "FAILED tests/test_capture.py::test_decode_step_captures[with_item]" in output
    assert "FAILED tests/test_capture.py::test_decode_step_captures[with_frozen_scalar]" in output


def test_the_output_says_when_the_cpu_emulation_ran(project_run):
    import torch

    _, _, output = project_run
    if torch.cuda.is_available():
        pytest.skip("CUDA present: the plugin captured and replayed for real")
    assert "runtime check(s) ran on the CPU emulation (no CUDA)" in output
    assert "is not graph-safe [CPU emulation (no CUDA)" in output


def test_reports_are_written_for_the_gate(project_run):
    root, _, _ = project_run
    written = {p.name: p for p in (root / "reports").glob("*.json")}
    safe = next(p for n, p in written.items() if n.endswith("graph_safe.json"))
    item = next(p for n, p in written.items() if n.endswith("with_item.json"))
    assert json.loads(safe.read_text())["runtime"]["verdict"] == "pass"
    gate = [sys.executable, "-m", "graphlint.cli", "gate", "--quiet"]
    assert subprocess.run([*gate, str(safe)], capture_output=True).returncode == 0
    assert subprocess.run([*gate, str(item)], capture_output=True).returncode == 1


def test_the_plugin_is_registered_through_its_entry_point():
    from importlib.metadata import entry_points

    found = [e for e in entry_points(group="pytest11") if e.name == "graphlint"]
    assert [e.value for e in found] == ["graphlint.pytest_plugin"]
