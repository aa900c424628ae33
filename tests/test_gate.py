"""Gating: `graphlint gate REPORT.json` decides from a report written earlier (0 pass, 1 fail,
2 unreadable), `ci/gate.sh` passes on this repository and fails on a copy with a planted
violation, `check --diff REV` reports only changed files, and the CI templates are valid YAML
whose steps call only documented commands."""
from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import click
import pytest
import yaml
from click.testing import CliRunner

from graphlint.cli import main
from graphlint.report import Report, StaticResult, dumps

ROOT = Path(__file__).resolve().parents[1]
BAD = "import torch\n\ndef step(x: torch.Tensor):\n    return x.max().item()\n"
CLEAN = "import torch\n\ndef step(x: torch.Tensor):\n    return torch.where(x > 0, x, 0.0)\n"


def cli(*args: str):
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


def env() -> dict[str, str]:
    """The environment of a CI job: graphlint on PATH, next to this interpreter."""
    values = dict(os.environ)
    values["PATH"] = os.path.dirname(sys.executable) + os.pathsep + values.get("PATH", "")
    values.pop("GITHUB_ACTIONS", None)
    return values


# --- graphlint gate ------------------------------------------------------------------------

@pytest.fixture
def reports(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    Path("step.py").write_text(BAD)
    assert cli("check", "step.py", "--no-cache", "--format", "json", "-o", "bad.json").exit_code == 1
    Path("step.py").write_text(CLEAN)
    assert cli("check", "step.py", "--no-cache", "--format", "json", "-o", "good.json").exit_code == 0
    return tmp_path


def test_gate_passes_and_fails_from_the_report_alone(reports: Path):
    assert cli("gate", "good.json").exit_code == 0
    result = cli("gate", "bad.json")
    assert result.exit_code == 1
    assert "GL101" in result.stdout and "FAIL" in result.stdout


def test_gate_fails_on_a_failed_runtime_phase(reports: Path):
    report = Report(tool_version="0", static=StaticResult(), runtime={"verdict": "fail", "phases": {}})
    Path("runtime.json").write_text(dumps(report))
    assert cli("gate", "runtime.json").exit_code == 1
    report.runtime = {"verdict": "pass"}
    Path("runtime.json").write_text(dumps(report))
    assert cli("gate", "runtime.json").exit_code == 0


@pytest.mark.parametrize("content, message", [
    (None, "report not found"),
    ('{"schema": "graphlint-report/1", "static": {"findings": [{"rule"', "not valid JSON"),
    ("[]", "not a graphlint report"),
    ('{"schema": "other/1"}', "not a graphlint report"),
    ('{"schema": "graphlint-report/1", "static": {"findings": [{"rule": "GL101"}]}}', "malformed"),
])
def test_an_unreadable_report_exits_2(reports: Path, content, message):
    if content is not None:
        Path("broken.json").write_text(content)
    result = cli("gate", "broken.json")
    assert result.exit_code == 2
    assert message in result.stderr and "Traceback" not in result.output


def test_gate_applies_a_baseline_by_the_reports_fingerprints(reports: Path):
    Path("step.py").write_text(BAD)
    assert cli("baseline", "write", "step.py", "--no-cache", "-o", "base.json").exit_code == 0
    Path("step.py").write_text("# the source may be gone or changed: the report's fingerprints decide\n")
    assert cli("gate", "bad.json", "--baseline", "base.json").exit_code == 0
    Path("base.json").write_text(json.dumps({"schema": "graphlint-baseline/1", "findings": []}))
    assert cli("gate", "bad.json", "--baseline", "base.json").exit_code == 1


def test_gate_renders_other_formats_and_exit_zero(reports: Path):
    result = cli("gate", "bad.json", "--format", "sarif", "-o", "out.sarif", "--exit-zero")
    assert result.exit_code == 0
    assert json.loads(Path("out.sarif").read_text())["runs"][0]["results"][0]["ruleId"] == "GL101"
    assert cli("gate", "missing.json", "--exit-zero").exit_code == 2


# --- check --diff --------------------------------------------------------------------------

def git(*args: str, cwd: Path) -> None:
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True)


def test_diff_reports_only_changed_and_untracked_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    git("init", "-q", cwd=tmp_path)
    (tmp_path / "old.py").write_text(BAD)
    (tmp_path / "edited.py").write_text(CLEAN)
    git("add", ".", cwd=tmp_path)
    git("-c", "user.email=t@t", "-c", "user.name=t", "commit", "-qm", "base", cwd=tmp_path)
    (tmp_path / "edited.py").write_text(BAD)
    (tmp_path / "new.py").write_text(BAD)
    monkeypatch.chdir(tmp_path)
    result = cli("check", "--no-cache", "--format", "json", "--diff", "HEAD")
    assert result.exit_code == 1
    report = json.loads(result.stdout)
    assert sorted({f["path"] for f in report["static"]["findings"]}) == ["edited.py", "new.py"]
    assert report["static"]["files"] == ["edited.py", "new.py"]
    assert report["static"]["diff"]["rev"] == "HEAD"
    assert cli("check", "--no-cache", "--diff", "HEAD", "old.py").exit_code == 0  # old.py is unchanged


def test_diff_with_entry_points_places_functions_from_the_whole_package(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch):
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pyproject.toml").write_text('[tool.graphlint]\npaths = ["pkg"]\n'
                                             'entry-points = ["pkg.step:decode_step"]\n')
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "step.py").write_text(
        "import torch\nfrom pkg.helpers import helper\n\n\ndef decode_step(x: torch.Tensor):\n    return helper(x)\n"
        "\n\ndef unused(x: torch.Tensor):\n    return x.max().item()\n")
    (tmp_path / "pkg" / "helpers.py").write_text(
        "import torch\n\n\ndef helper(x: torch.Tensor):\n    return x.sum()\n")
    git("init", "-q", cwd=tmp_path)
    git("add", ".", cwd=tmp_path)
    git("-c", "user.email=t@t", "-c", "user.name=t", "commit", "-qm", "base", cwd=tmp_path)
    helpers = tmp_path / "pkg" / "helpers.py"
    helpers.write_text(helpers.read_text().replace("x.sum()", "x.sum().item()")
                       + "\n\ndef not_reached(x: torch.Tensor):\n    return x.max().item()\n")
    monkeypatch.chdir(tmp_path)
    result = cli("check", "--no-cache", "--format", "json", "--diff", "HEAD")
    assert result.exit_code == 1
    static = json.loads(result.stdout)["static"]
    # Reached from the unchanged step.py; the unchanged and the unreached functions are not reported.
    assert [(f["path"], f["function"], f["reached_via"]) for f in static["findings"]] == [
        ("pkg/helpers.py", "helper", ["decode_step", "helper"])]
    assert static["diff"]["analysed_files"] == 3


def test_diff_with_a_bad_revision_is_a_usage_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    git("init", "-q", cwd=tmp_path)
    monkeypatch.chdir(tmp_path)
    result = cli("check", "--no-cache", "--diff", "no-such-rev")
    assert result.exit_code == 2
    assert "not a commit" in result.stderr


# --- ci/gate.sh ----------------------------------------------------------------------------

def gate_sh(cwd: Path, out: Path) -> subprocess.CompletedProcess:
    values = env()
    values.update(GRAPHLINT_REPORT_DIR=str(out), GRAPHLINT_RUNTIME="0")
    return subprocess.run(["bash", str(ROOT / "ci" / "gate.sh")], cwd=cwd, env=values, capture_output=True,
                          text=True, timeout=300)


def test_gate_sh_passes_on_this_repository(tmp_path: Path):
    result = gate_sh(ROOT, tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    report = json.loads((tmp_path / "graphlint.json").read_text())
    assert report["summary"]["verdict"] == "pass" and report["static"]["files"]
    assert json.loads((tmp_path / "graphlint.sarif").read_text())["version"] == "2.1.0"


def test_gate_sh_fails_on_a_copy_with_a_planted_violation(tmp_path: Path):
    copy = tmp_path / "repo"
    copy.mkdir()
    shutil.copy(ROOT / "pyproject.toml", copy / "pyproject.toml")
    shutil.copytree(ROOT / "dsv4_model", copy / "dsv4_model", ignore=shutil.ignore_patterns("__pycache__"))
    (copy / "dsv4_model" / "planted.py").write_text(
        "import torch\n\n\ndef planted_decode_step(logits: torch.Tensor) -> int:  # graphlint: entry\n"
        "    return logits.argmax(-1).item()\n")
    result = gate_sh(copy, tmp_path / "out")
    assert result.returncode == 1, result.stdout + result.stderr
    assert "dsv4_model/planted.py:5" in result.stdout and "GL101" in result.stdout
    report = json.loads((tmp_path / "out" / "graphlint.json").read_text())
    assert [f["path"] for f in report["static"]["findings"] if not f["suppressed"]] == ["dsv4_model/planted.py"]


def test_gate_sh_exits_2_when_graphlint_cannot_run(tmp_path: Path):
    (tmp_path / "pyproject.toml").write_text("[tool.graphlint]\nno-such-key = 1\n")
    result = gate_sh(tmp_path, tmp_path / "out")
    assert result.returncode == 2
    assert "unknown key" in result.stderr


# --- CI templates --------------------------------------------------------------------------

# Documented commands a template may run: graphlint's own subcommands, the gate script, and the
# install line. Actions are the stock ones the templates rely on.
ALLOWED_ACTIONS = {"actions/checkout", "actions/setup-python", "actions/upload-artifact",
                   "actions/download-artifact", "github/codeql-action/upload-sarif"}


def _check_command(line: str) -> None:
    words = shlex.split(line)
    if words[:2] == ["bash", "ci/gate.sh"]:
        assert (ROOT / "ci" / "gate.sh").is_file()
        return
    if words[:4] == ["python", "-m", "pip", "install"]:
        # This project, from its repository at the pinned revision: never the index's `graphlint`.
        assert words[4:] == ["graphlint-cuda @ git+${GRAPHLINT_REPO}@${GRAPHLINT_REV}"], line
        return
    assert words[0] == "graphlint", f"undocumented command in a template: {line}"
    command: click.Command = main
    args = words[1:]
    while isinstance(command, click.Group):
        # Through get_command: a command loaded on first use (runtime) is there too.
        found = command.get_command(click.Context(command), args[0]) if args else None
        assert found is not None, f"no such graphlint command: {line}"
        command, args = found, args[1:]
    # Parsing with the real command rejects unknown options and bad values.
    command.make_context(words[0], list(args))


def _run_lines(script: str) -> list[str]:
    lines = [line.strip() for line in script.splitlines()]
    return [line for line in lines if line and not line.startswith("#")]


def test_github_workflow_is_valid_and_calls_only_documented_commands():
    workflow = yaml.safe_load((ROOT / "ci" / "github" / "graphlint.yml").read_text())
    triggers = workflow.get("on", workflow.get(True))  # YAML 1.1 reads the key `on` as true
    assert set(triggers) >= {"push", "pull_request"}
    jobs = workflow["jobs"]
    used = set()
    for name, job in jobs.items():
        assert job["runs-on"] and job["steps"], name
        for step in job["steps"]:
            assert ("uses" in step) != ("run" in step), step
            if "uses" in step:
                action, _, version = step["uses"].partition("@")
                assert action in ALLOWED_ACTIONS and version, step
                used.add(action)
            else:
                for line in _run_lines(step["run"]):
                    _check_command(line)
    static_steps = jobs["static"]["steps"]
    assert any(s.get("run") == "bash ci/gate.sh" for s in static_steps)
    sarif = [s for s in static_steps if s.get("uses", "").startswith("github/codeql-action/upload-sarif")]
    assert sarif and sarif[0]["with"]["sarif_file"] == "graphlint-report/graphlint.sarif"
    assert jobs["static"]["env"]["GRAPHLINT_REPORT_DIR"] == "graphlint-report"
    assert jobs["static"]["permissions"]["security-events"] == "write"
    assert any("graphlint runtime" in s.get("run", "") for s in jobs["runtime"]["steps"])
    assert jobs["runtime-gate"]["needs"] == "runtime"
    assert "actions/upload-artifact" in used


def test_gitlab_job_is_valid_and_calls_only_documented_commands():
    pipeline = yaml.safe_load((ROOT / "ci" / "gitlab-ci.yml").read_text())
    for name in ("graphlint", "graphlint-runtime"):
        job = pipeline[name]
        for line in job.get("before_script", []) + job["script"]:
            _check_command(line)
        assert job["artifacts"]["when"] == "always"
