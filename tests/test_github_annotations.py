"""`--format github`: one workflow command per unsuppressed finding, in the form GitHub turns
into an annotation on that line, with GitHub's escaping."""
from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from graphlint.cli import main
from graphlint.report import Finding, Report, StaticResult
from graphlint.views.ci.github import to_annotations


def finding(**overrides) -> Finding:
    values = dict(rule="GL101", family="sync", severity="error", path="pkg/step.py", line=12, col=5, end_line=12,
                  end_col=17, function="step", region="captured", message="`.item()` reads a device value",
                  fix="keep it on the device", name="item-call")
    values.update(overrides)
    return Finding(**values)


def test_annotation_line_format():
    text = to_annotations(Report(tool_version="0", static=StaticResult(findings=[finding()])))
    assert text == ("::error file=pkg/step.py,line=12,col=5,endLine=12,endColumn=17,title=GL101 item-call::"
                    "`.item()` reads a device value%0Afix: keep it on the device\n")


def test_warnings_suppressed_findings_and_escaping():
    findings = [
        finding(severity="warning", rule="GL401", name="per-step-allocation", message="50% more: a, b"),
        finding(suppressed=True, suppression_reason="why"),
        finding(path="odd,name:x.py"),
    ]
    lines = to_annotations(Report(tool_version="0", static=StaticResult(findings=findings))).splitlines()
    assert len(lines) == 2
    assert lines[0].startswith("::warning file=pkg/step.py,") and lines[0].endswith("::50%25 more: a, b%0Afix: keep it on the device")
    assert "file=odd%2Cname%3Ax.py," in lines[1]


def test_report_errors_become_annotations():
    text = to_annotations(Report(tool_version="0", errors=["runtime: capture failed\non cuda:1"]))
    assert text == "::error title=graphlint::runtime: capture failed%0Aon cuda:1\n"


def test_cli_writes_annotations(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.chdir(tmp_path)
    Path("step.py").write_text("import torch\n\ndef step(x: torch.Tensor):\n    return x.max().item()\n")
    result = CliRunner().invoke(main, ["check", "--no-cache", "--format", "github", "step.py"])
    assert result.exit_code == 1
    assert result.stdout.startswith("::error file=step.py,line=4,col=12,endLine=4,endColumn=26,title=GL101 item-call::")


def test_runtime_events_with_a_source_line_are_annotated():
    report = Report(tool_version="0", runtime={"verdict": "fail", "sync_events": [
        {"op": "Tensor.item", "kind": "host-read", "path": "m.py", "line": 7, "detail": "reads a value"},
        {"op": "aten.nonzero", "kind": "dynamic-shape", "path": "?", "line": 0}]})
    assert to_annotations(report) == ("::error file=m.py,line=7,title=runtime host-read::"
                                      "the runtime harness saw host-read: Tensor.item (reads a value)\n")
