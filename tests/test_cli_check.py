"""`graphlint check` end to end: exit codes, JSON contract, suppressions, selection, bad
input (unparsable files, broken config) and the promise never to import analysed code."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from graphlint.cli import main

BAD = "import torch\n\ndef step(x: torch.Tensor):\n    return x.max().item()\n"
CLEAN = "import torch\n\ndef step(x: torch.Tensor):\n    return torch.where(x > 0, x, 0.0)\n"


def run(args, cwd: Path):
    """The real process, as a user runs it (exit codes and stderr included)."""
    return subprocess.run([sys.executable, "-m", "graphlint", *args], cwd=cwd, capture_output=True, text=True)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "pyproject.toml").write_text("[tool.graphlint]\npaths = ['pkg']\n")
    (tmp_path / "pkg").mkdir()
    return tmp_path


def test_exit_codes_clean_and_violation(project: Path):
    (project / "pkg" / "a.py").write_text(CLEAN)
    assert run(["check", "--no-cache"], project).returncode == 0
    (project / "pkg" / "b.py").write_text(BAD)
    result = run(["check", "--no-cache"], project)
    assert result.returncode == 1
    assert "pkg/b.py:4:12 GL101" in result.stdout
    assert "fix:" in result.stdout


def test_json_report_contract(project: Path):
    (project / "pkg" / "b.py").write_text(BAD)
    result = run(["check", "--no-cache", "--format", "json", "--output", "report.json"], project)
    assert result.returncode == 1
    report = json.loads((project / "report.json").read_text())
    assert report["schema"] == "graphlint-report/1"
    finding = report["static"]["findings"][0]
    for key in ("rule", "family", "severity", "path", "line", "col", "end_line", "end_col", "function",
                "region", "message", "fix", "suppressed", "reached_via"):
        assert key in finding
    assert finding["path"] == "pkg/b.py" and finding["function"] == "step" and finding["rule"] == "GL101"
    assert report["summary"]["verdict"] == "fail" and report["summary"]["errors"] == 1
    assert report["runtime"] is None


def test_suppressions_keep_the_finding_marked(project: Path):
    (project / "pkg" / "b.py").write_text(BAD.replace(".item()", ".item()  # graphlint: ignore[GL101] -- logged once per run"))
    (project / "pkg" / "c.py").write_text(BAD.replace(".item()", ".item()  # noqa: GL101"))
    result = run(["check", "--no-cache", "--format", "json"], project)
    assert result.returncode == 0
    findings = json.loads(result.stdout)["static"]["findings"]
    assert len(findings) == 2 and all(f["suppressed"] for f in findings)
    assert findings[0]["suppression_reason"] == "logged once per run"


def test_suppression_on_first_line_of_multiline_statement(project: Path):
    code = ("import torch\n\ndef step(x: torch.Tensor):\n    y = (x + 1  # graphlint: ignore[item-call]\n"
            "         ).max().item()\n    return y\n")
    (project / "pkg" / "b.py").write_text(code)
    assert run(["check", "--no-cache"], project).returncode == 0


def test_unknown_suppression_code_is_gl901(project: Path):
    (project / "pkg" / "b.py").write_text(BAD.replace(".item()", ".item()  # graphlint: ignore[GL1O1]"))
    result = run(["check", "--no-cache", "--format", "json"], project)
    rules = [f["rule"] for f in json.loads(result.stdout)["static"]["findings"]]
    assert "GL901" in rules and "GL101" in rules


def test_select_and_ignore_prefixes(project: Path):
    (project / "pkg" / "b.py").write_text(BAD)
    assert run(["check", "--no-cache", "--ignore", "GL1"], project).returncode == 0
    assert run(["check", "--no-cache", "--select", "GL2"], project).returncode == 0
    assert run(["check", "--no-cache", "--select", "GL1", "--ignore", "GL102"], project).returncode == 1


def test_parse_error_is_a_finding_and_other_files_are_checked(project: Path):
    (project / "pkg" / "broken.py").write_text("import torch\ndef step(x:\n    return x\n")
    (project / "pkg" / "b.py").write_text(BAD)
    result = run(["check", "--no-cache", "--format", "json"], project)
    assert result.returncode == 1
    rules = sorted(f["rule"] for f in json.loads(result.stdout)["static"]["findings"])
    assert rules == ["GL101", "GL900"]


def test_bad_config_key_exits_2_naming_it(project: Path):
    (project / "pyproject.toml").write_text("[tool.graphlint]\npathz = ['pkg']\n")
    result = run(["check"], project)
    assert result.returncode == 2
    assert "pathz" in result.stderr and "pyproject.toml" in result.stderr and "Traceback" not in result.stderr


def test_wrong_type_config_exits_2(project: Path):
    (project / "pyproject.toml").write_text("[tool.graphlint]\nexclude = 'tests'\n")
    result = run(["check"], project)
    assert result.returncode == 2 and "exclude" in result.stderr


def test_missing_path_exits_2(project: Path):
    result = run(["check", "does_not_exist"], project)
    assert result.returncode == 2 and "Traceback" not in result.stderr


def test_host_config_and_exclude(project: Path):
    (project / "pyproject.toml").write_text(
        "[tool.graphlint]\npaths = ['pkg']\nhost = ['pkg.b:step']\nexclude = ['pkg/gen_*.py']\n")
    (project / "pkg" / "b.py").write_text(BAD)
    (project / "pkg" / "gen_x.py").write_text(BAD)
    assert run(["check", "--no-cache"], project).returncode == 0


def test_analysed_code_is_never_imported_or_run(project: Path):
    marker = project / "ran.txt"
    (project / "pkg" / "evil.py").write_text(
        f"import torch\nopen({str(marker)!r}, 'w').write('x')\n\ndef step(x: torch.Tensor):\n    return x.item()\n")
    run(["check", "--no-cache"], project)
    assert not marker.exists()


def test_rules_and_explain():
    runner = CliRunner()
    listing = runner.invoke(main, ["rules"])
    assert listing.exit_code == 0 and "GL101" in listing.output and "item-call" in listing.output
    text = runner.invoke(main, ["explain", "GL305"])
    assert text.exit_code == 0 and "## Why it breaks a CUDA graph" in text.output and "scatter_add_" in text.output
    assert runner.invoke(main, ["explain", "bincount"]).exit_code == 0
    assert runner.invoke(main, ["explain", "GL999"]).exit_code == 2
