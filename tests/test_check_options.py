"""The `check` options a ruff user reaches for: --extend-select (and the `extend-select` key),
--output-format, --show-settings, --show-files, --statistics (counts only), --watch, and a file
named on the command line linted whatever else is named with it."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from graphlint.cli import main

STEP = ("import torch\n\n\n"
        "def decode_step(x: torch.Tensor):\n"
        "    y = x + 1  # graphlint: ignore[GL102]\n"
        "    return y.max().item()\n")
CLEAN = ("import torch\n\n\n"
         "def decode_step(x: torch.Tensor):\n"
         "    return x.max()\n")


def run(args, cwd: Path):
    old = os.getcwd()
    os.chdir(cwd)
    try:
        return CliRunner().invoke(main, ["check", "--no-cache", *args])
    finally:
        os.chdir(old)


def project(tmp_path: Path, config: str = "", files: dict[str, str] | None = None) -> Path:
    (tmp_path / "pyproject.toml").write_text("[tool.graphlint]\n" + config)
    for rel, text in (files if files is not None else {"step.py": STEP}).items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    return tmp_path


def rules(result) -> list[str]:
    return sorted(f["rule"] for f in json.loads(result.stdout)["static"]["findings"])


# --extend-select and extend-select

def test_extend_select_adds_to_the_default_set(tmp_path):
    root = project(tmp_path)
    assert rules(run(["--format", "json"], root)) == ["GL101"]
    assert rules(run(["--format", "json", "--extend-select", "GL902"], root)) == ["GL101", "GL902"]
    assert rules(run(["--format", "json", "--extend-select", "unused-suppression"], root)) == ["GL101", "GL902"]
    assert rules(run(["--format", "json", "--extend-select", "GL9"], root)) == ["GL101", "GL902"]


def test_extend_select_adds_to_an_explicit_selection_and_ignore_still_wins(tmp_path):
    root = project(tmp_path)
    assert rules(run(["--format", "json", "--select", "GL2", "--extend-select", "GL902"], root)) == ["GL902"]
    assert rules(run(["--format", "json", "--extend-select", "GL9", "--ignore", "GL902"], root)) == ["GL101"]


def test_extend_select_config_key(tmp_path):
    root = project(tmp_path, 'extend-select = ["GL902"]\n')
    assert rules(run(["--format", "json"], root)) == ["GL101", "GL902"]
    root = project(tmp_path, 'select = ["GL2"]\nextend-select = ["GL902"]\n')
    assert rules(run(["--format", "json"], root)) == ["GL902"]


def test_unknown_extend_select_is_exit_2_naming_the_key(tmp_path):
    result = run([], project(tmp_path, 'extend-select = ["GL9999"]\n'))
    assert result.exit_code == 2 and "key 'extend-select'" in result.output and "GL9999" in result.output
    result = run(["--extend-select", "nonsense"], project(tmp_path))
    assert result.exit_code == 2 and "--extend-select" in result.output


# --output-format

def test_output_format_is_format(tmp_path):
    root = project(tmp_path)
    by_ruff, by_us = run(["--output-format", "json"], root), run(["--format", "json"], root)
    assert by_ruff.exit_code == by_us.exit_code == 1
    assert json.loads(by_ruff.stdout)["static"]["findings"] == json.loads(by_us.stdout)["static"]["findings"]


# --show-settings, --show-files

def test_show_settings_prints_the_settings_in_force_and_checks_nothing(tmp_path):
    root = project(tmp_path, 'extend-select = ["GL902"]\nignore = ["GL5"]\n')
    result = run(["--show-settings"], root)
    assert result.exit_code == 0, result.output
    assert f"Settings path: {root / 'pyproject.toml'}" in result.stdout
    assert 'extend-select = ["GL902"]' in result.stdout
    in_force = json.loads(result.stdout.split("rules in force = ")[1].splitlines()[0])
    assert "GL902" in in_force and "GL101" in in_force and not any(code.startswith("GL5") for code in in_force)
    assert "GL101" not in result.stdout.split("rules in force")[0]  # no finding was printed


def test_show_files_lists_what_would_be_checked(tmp_path):
    root = project(tmp_path, 'extend-exclude = ["gen.py"]\n', {"step.py": STEP, "gen.py": STEP, "pkg/a.py": CLEAN})
    result = run(["--show-files"], root)
    assert result.exit_code == 0 and result.stdout.splitlines() == ["pkg/a.py", "step.py"]
    assert run(["--show-files", ".", "gen.py"], root).stdout.splitlines() == ["gen.py", "pkg/a.py", "step.py"]
    assert run(["--show-files", "--force-exclude", ".", "gen.py"], root).stdout.splitlines() == ["pkg/a.py", "step.py"]


# --statistics

def test_statistics_prints_counts_only(tmp_path):
    source = STEP.replace("return y.max().item()", "a = y.max().item()\n    return a, y.min().item(), y.tolist()")
    root = project(tmp_path, files={"step.py": source})
    result = run(["--statistics"], root)
    assert result.exit_code == 1  # the exit code is the check's
    assert result.stdout.splitlines() == ["2\tGL101\titem-call", "1\tGL102\ttolist-call"], result.stdout
    data = json.loads(run(["--statistics", "--output-format", "json"], root).stdout)
    assert data == [{"code": "GL101", "name": "item-call", "severity": "error", "count": 2},
                    {"code": "GL102", "name": "tolist-call", "severity": "error", "count": 1}]
    assert run(["--statistics", "--format", "sarif"], root).exit_code == 2


# A named file is linted whatever else is named with it

@pytest.mark.parametrize("order", [["pkg", "pkg/gen.py"], ["pkg/gen.py", "pkg"]])
def test_named_excluded_file_is_linted_beside_its_folder(tmp_path, order):
    root = project(tmp_path, 'extend-exclude = ["pkg/gen.py"]\n', {"pkg/gen.py": STEP, "pkg/a.py": CLEAN})
    assert json.loads(run(["--format", "json", "pkg"], root).stdout)["static"]["files"] == ["pkg/a.py"]
    data = json.loads(run(["--format", "json", *order], root).stdout)["static"]
    assert sorted(data["files"]) == ["pkg/a.py", "pkg/gen.py"]
    assert [(f["path"], f["rule"]) for f in data["findings"]] == [("pkg/gen.py", "GL101")]
    forced = json.loads(run(["--format", "json", "--force-exclude", *order], root).stdout)["static"]
    assert forced["files"] == ["pkg/a.py"]


# --watch

def _wait_for(stream_lines: list[str], needle: str, proc, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if any(needle in line for line in stream_lines):
            return
        if proc.poll() is not None:
            break
        time.sleep(0.1)
    raise AssertionError(f"{needle!r} not seen; output so far: {''.join(stream_lines)}")


@pytest.mark.parametrize("backend", ["watchfiles", "polling"])
def test_watch_checks_again_after_a_change_until_interrupted(tmp_path, backend):
    if backend == "watchfiles":
        pytest.importorskip("watchfiles")
    root = project(tmp_path)
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    code = "from graphlint.cli import main; main()"
    if backend == "polling":  # as an install without watchfiles
        code = "import sys; sys.modules['watchfiles'] = None; " + code
    import threading

    proc = subprocess.Popen([sys.executable, "-c", code, "check", "--no-cache", "-q", "--watch", "step.py"],
                            cwd=root, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(iter(proc.stdout.readline, "")), daemon=True)
    reader.start()
    try:
        _wait_for(lines, "watching for changes", proc)
        assert any(line.startswith("FAIL") for line in lines)
        (root / "step.py").write_text(CLEAN)
        _wait_for(lines, "PASS", proc)
        assert any("change in step.py" in line for line in lines)
    finally:
        proc.send_signal(signal.SIGINT)
        rc = proc.wait(timeout=30)
        reader.join(timeout=5)
    assert rc == 130, "".join(lines)  # interrupted, as a shell reports it


@pytest.mark.parametrize("backend", ["watchfiles", "polling"])
def test_a_change_saved_while_the_check_runs_is_not_missed(tmp_path, backend):
    import threading

    from graphlint.commands import watch

    (tmp_path / "step.py").write_text(STEP)
    roots = [tmp_path]
    since = watch._snapshot(roots)  # taken before the check
    time.sleep(0.05)
    (tmp_path / "step.py").write_text(CLEAN)  # saved while it runs, before any watcher exists
    stop = threading.Event()
    if backend == "watchfiles":
        batches = watch._watchfiles_changes(pytest.importorskip("watchfiles"), roots, stop, since)
    else:
        batches = watch.polling_changes(roots, stop, since, interval=0.05)
    timer = threading.Timer(20, stop.set)  # bounded: a missed change ends the wait, and the test fails
    timer.start()
    try:
        changed = next(batches, set())
    finally:
        timer.cancel()
        batches.close()
    assert changed == {str(tmp_path / "step.py")}
