"""Writes never touch what they should not and bad settings never end in a traceback: -o refuses a
runtime target's source and a linted file (or a link to one) before any work, numeric options
are range-checked with the key named, a config the TOML parser cannot survive names its file,
-j is capped with a note, and the gate refuses a report whose counts disagree with its findings
or that repeats a key."""
from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

from graphlint.cli import main
from graphlint.config import ConfigError, from_mapping, load
from graphlint.engine import pool

ROOT = Path(__file__).resolve().parents[1]
BAD = "import torch\n\n\ndef step(x: torch.Tensor):\n    return x.item()\n"


def cli(*args: str):
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


@pytest.fixture(autouse=True)
def in_tmp(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)


def test_runtime_output_onto_its_own_target_is_refused_before_the_run(tmp_path):
    target = tmp_path / "t.py"
    target.write_text("def make(device):\n    raise SystemExit('the run must not start')\n")
    (tmp_path / "link.json").symlink_to(target)
    for output in ("t.py", "link.json"):
        result = cli("runtime", "t.py:make", "--lint", "-o", output)
        assert result.exit_code == 2 and "refusing to overwrite a source file" in result.stderr, result.output
    assert target.read_text().startswith("def make")


def test_gate_output_onto_a_linted_file_is_refused(tmp_path):
    (tmp_path / "step.py").write_text(BAD)
    assert cli("check", ".", "--no-cache", "--format", "json", "-o", "r.json").exit_code == 1
    (tmp_path / "alias.txt").symlink_to(tmp_path / "step.py")
    for output in ("step.py", "alias.txt"):
        result = cli("gate", "r.json", "-o", output)
        assert result.exit_code == 2 and "refusing to overwrite" in result.stderr
    assert (tmp_path / "step.py").read_text() == BAD


def test_baseline_output_onto_a_linted_file_is_refused(tmp_path):
    (tmp_path / "step.py").write_text(BAD)
    result = cli("baseline", "write", ".", "--no-cache", "-o", "step.py")
    assert result.exit_code == 2 and (tmp_path / "step.py").read_text() == BAD


@pytest.mark.parametrize("key, value", [
    ("file-timeout", "3000000"), ("file-timeout", "-1"), ("file-timeout", "nan"), ("max-file-size", "1e300"),
    ("max-file-size", "2147483648"), ("worker-memory", "16"), ("worker-memory", "true"),
])
def test_a_numeric_option_outside_its_range_exits_2_naming_the_key(tmp_path, key, value):
    (tmp_path / "pyproject.toml").write_text(f"[tool.graphlint]\n{key} = {value}\n")
    (tmp_path / "a.py").write_text(BAD)
    result = CliRunner().invoke(main, ["check", "a.py", "--no-cache"])
    assert result.exit_code == 2 and f"'{key}'" in result.stderr and "internal error" not in result.stderr


def test_values_inside_the_ranges_are_taken(tmp_path):
    config = from_mapping({"file-timeout": 86_400, "max-file-size": 0, "worker-memory": 0}, tmp_path / "p.toml")
    assert (config.file_timeout, config.max_file_size, config.worker_memory) == (86_400, 0, 0)


def test_a_config_the_toml_parser_cannot_survive_names_its_file(tmp_path):
    config = tmp_path / "pyproject.toml"
    config.write_text("[tool.graphlint]\nselect = " + "[" * 5000 + "]" * 5000 + "\n")
    with pytest.raises(ConfigError, match="pyproject.toml"):
        load(config)
    (tmp_path / "a.py").write_text(BAD)
    result = CliRunner().invoke(main, ["check", "a.py", "--no-cache"])
    assert result.exit_code == 2 and "pyproject.toml" in result.stderr and "RecursionError" not in result.stderr


def test_jobs_are_capped_with_a_note(tmp_path, capsys):
    assert pool.capped_jobs(1) == 1
    assert pool.capped_jobs(10_000) == pool.max_jobs() == pool.JOBS_PER_CORE * pool.default_jobs()
    assert "capped at" in capsys.readouterr().err


def _report(tmp_path: Path) -> dict:
    (tmp_path / "step.py").write_text(BAD)
    cli("check", ".", "--no-cache", "--format", "json", "-o", "r.json")
    return json.loads((tmp_path / "r.json").read_text())


def test_the_gate_refuses_a_report_whose_findings_were_emptied(tmp_path):
    data = _report(tmp_path)
    assert data["summary"]["errors"] == 1
    data["static"]["findings"] = []
    Path("r.json").write_text(json.dumps(data))
    result = cli("gate", "r.json")
    assert result.exit_code == 2 and "summary.errors is 1 but the findings give 0" in result.stderr


def test_the_gate_refuses_counts_that_disagree(tmp_path):
    data = _report(tmp_path)
    del data["summary"]
    data["static"]["counts"] = {}
    Path("r.json").write_text(json.dumps(data))
    result = cli("gate", "r.json")
    assert result.exit_code == 2 and "static.counts" in result.stderr


def test_the_gate_refuses_a_duplicate_key(tmp_path):
    data = _report(tmp_path)
    text = json.dumps(data)
    clean = json.dumps({"files": ["step.py"], "findings": [], "counts": {}})
    Path("r.json").write_text(text[:-1] + f', "static": {clean}}}')  # a second "static", at the end
    result = cli("gate", "r.json")
    assert result.exit_code == 2 and "appears twice" in result.stderr
    Path("r.json").write_text(text)
    assert cli("gate", "r.json").exit_code == 1


def _gate_sh(cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess:
    import os
    import sys

    values = {**os.environ, "GRAPHLINT": f"{sys.executable} -m graphlint", "PYTHON": sys.executable,
              "GRAPHLINT_RUNTIME": "0", **env}
    values["GRAPHLINT"] = str(Path(sys.executable).parent / "graphlint")
    return subprocess.run(["bash", str(ROOT / "ci" / "gate.sh"), "--no-cache"], cwd=cwd, env=values,
                          capture_output=True, text=True, timeout=120)


def test_gate_sh_refuses_a_committed_link_at_the_report_path(tmp_path):
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    checkout = tmp_path / "checkout"
    (checkout / "graphlint-report").mkdir(parents=True)
    (checkout / "step.py").write_text(BAD)
    (checkout / "graphlint-report" / "graphlint.json").symlink_to(victim)
    result = _gate_sh(checkout, {})
    assert result.returncode == 2 and "symbolic link" in result.stderr
    assert victim.read_text() == "precious"
    outside = tmp_path / "outside"
    outside.mkdir()
    (checkout / "graphlint-report" / "graphlint.json").unlink()
    (checkout / "graphlint-report").rmdir()
    (checkout / "graphlint-report").symlink_to(outside)
    result = _gate_sh(checkout, {})
    assert result.returncode == 2 and "symbolic link" in result.stderr and not list(outside.iterdir())
    result = _gate_sh(checkout, {"GRAPHLINT_REPORT_DIR": "../outside"})
    assert result.returncode == 2 and "outside the checkout" in result.stderr and not list(outside.iterdir())


def test_gate_sh_says_what_it_found_about_cuda(tmp_path):
    (tmp_path / "step.py").write_text(BAD)
    result = _gate_sh(tmp_path, {"GRAPHLINT_RUNTIME": "auto", "PYTHON": "/nonexistent/python"})
    assert "CUDA is available" not in result.stderr
    assert "CUDA seen by /nonexistent/python: no torch: the static check alone is the gate" in result.stderr
    assert result.returncode == 1
