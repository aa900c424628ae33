"""The gate fails closed: a report it cannot trust (neither half, another schema, an unknown
severity or runtime verdict, a field of the wrong type) exits 2 with the file and the field
named, never passes; views never see such a report. A FIFO or a device given as a report or a
baseline is refused by type, never read (reading a FIFO would block forever)."""
from __future__ import annotations

import copy
import json
import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from graphlint.cli import main
from graphlint.report import Finding, Report, StaticResult, dumps

FINDING = Finding(rule="GL101", family="sync", severity="error", path="step.py", line=4, col=12, end_line=4,
                  end_col=30, function="step", region="captured", message="`.item()` reads a device value",
                  fix="keep it on the device", name="item-call", fingerprint="0123456789abcdef0123")


def cli(*args: str):
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


def good_report() -> dict:
    return json.loads(dumps(Report(tool_version="0", static=StaticResult(files=["step.py"], findings=[FINDING]))))


@pytest.fixture(autouse=True)
def in_tmp(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)


def gate(data, *extra: str):
    Path("r.json").write_text(json.dumps(data))
    return cli("gate", "r.json", *extra)


def test_a_well_formed_report_still_gates():
    assert gate(good_report()).exit_code == 1
    clean = json.loads(dumps(Report(tool_version="0", static=StaticResult(files=["step.py"], findings=[]))))
    assert gate(clean).exit_code == 0


def test_a_report_with_neither_half_exits_2():
    result = gate({"schema": "graphlint-report/1"})
    assert result.exit_code == 2 and "neither a static nor a runtime half" in result.stderr


def test_an_unknown_schema_exits_2():
    data = good_report()
    data["schema"] = "graphlint-report/2"
    result = gate(data)
    assert result.exit_code == 2 and "schema 'graphlint-report/2'" in result.stderr


@pytest.mark.parametrize("severity", ["critical", "ERROR", "", None])
def test_an_unknown_severity_exits_2_not_a_warning(severity):
    data = good_report()
    data["static"]["findings"][0]["severity"] = severity
    result = gate(data, "--format", "sarif")
    assert result.exit_code == 2 and "static.findings[0].severity" in result.stderr


def test_an_unknown_runtime_verdict_exits_2():
    data = json.loads(dumps(Report(tool_version="0", runtime={"verdict": "skipped"})))
    data["runtime"] = {"verdict": "probably fine"}
    assert gate(data).exit_code == 2
    data["runtime"] = {"verdict": "skipped"}
    assert gate(data).exit_code == 0
    data["runtime"] = {"verdict": "error"}
    assert gate(data).exit_code == 1


@pytest.mark.parametrize("field, value", [
    ("line", "4"), ("line", True), ("col", None), ("path", 7), ("message", ["x"]), ("reached_via", "a -> b"),
    ("reached_via", [1, 2]), ("suppressed", "no"), ("function", 3), ("fingerprint", 12),
])
@pytest.mark.parametrize("fmt", ["text", "sarif", "json", "github"])
def test_a_wrong_typed_field_exits_2_naming_it_in_every_view(field, value, fmt):
    data = good_report()
    data["static"]["findings"][0][field] = value
    result = gate(data, "--format", fmt)
    assert result.exit_code == 2, result.output
    assert f"r.json: malformed graphlint report: static.findings[0].{field}" in result.stderr
    assert "Traceback" not in result.output


@pytest.mark.parametrize("mutate", [
    lambda d: d.update(static=[]), lambda d: d["static"].update(files="step.py"),
    lambda d: d["static"].update(findings={}), lambda d: d["static"]["findings"].append("GL101"),
    lambda d: d.update(errors="boom"), lambda d: d.update(runtime=[]),
    lambda d: d["static"]["findings"][0].pop("rule"),
])
def test_wrong_shapes_exit_2(mutate):
    data = good_report()
    mutate(data)
    result = gate(data)
    assert result.exit_code == 2 and "malformed graphlint report" in result.stderr, result.output


def test_a_fifo_as_report_or_baseline_is_refused_not_read(tmp_path):
    os.mkfifo("fifo.json")
    result = cli("gate", "fifo.json")
    assert result.exit_code == 2 and "a FIFO, not a regular file" in result.stderr
    Path("r.json").write_text(json.dumps(good_report()))
    result = cli("gate", "r.json", "--baseline", "fifo.json")
    assert result.exit_code == 2 and "a FIFO, not a regular file" in result.stderr
    Path("step.py").write_text("import torch\n")
    result = cli("check", "step.py", "--no-cache", "--baseline", "fifo.json")
    assert result.exit_code == 2 and "a FIFO, not a regular file" in result.stderr


def test_a_device_as_report_is_refused():
    result = cli("gate", "/dev/zero")
    assert result.exit_code == 2 and "a character device, not a regular file" in result.stderr


def test_a_baseline_with_wrong_typed_entries_exits_2():
    Path("r.json").write_text(json.dumps(good_report()))
    entry = {"fingerprint": "0123456789abcdef0123", "rule": "GL101", "path": "other.py", "line": "9"}
    Path("b.json").write_text(json.dumps({"schema": "graphlint-baseline/1", "findings": [entry]}))
    result = cli("gate", "r.json", "--baseline", "b.json")
    assert result.exit_code == 2 and "findings[0].line must be an integer" in result.stderr
