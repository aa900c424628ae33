"""The CLI habits users bring from ruff, one test (or a few) per numbered item of the list in
the README's "Coming from ruff": unknown selectors, folder walking and .gitignore, suppression
comments, config discovery, --force-exclude, runtime targets, colours, -q and broken pipes,
rule summaries, editor and CI options, the cache folder, and markers under the flagged range."""
from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from graphlint.cli import main
from graphlint.rules import ALL_RULES

STEP = ("import torch\n\n\n"
        "def decode_step(x: torch.Tensor):\n"
        "    return x.max().item()\n")
WARN_ONLY = ("import torch\n\n\n"
             "def decode_step(x: torch.Tensor):\n"
             "    return x.max()  # graphlint: ignore[GL101]\n")


def run(args, cwd: Path, input: str | None = None):
    old = os.getcwd()
    os.chdir(cwd)
    try:
        return CliRunner().invoke(main, args, input=input)
    finally:
        os.chdir(old)


def project(tmp_path: Path, config: str = "[tool.graphlint]\n", files: dict[str, str] | None = None) -> Path:
    (tmp_path / "pyproject.toml").write_text(config)
    for rel, text in (files if files is not None else {"step.py": STEP}).items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    return tmp_path


# 1. Unknown selectors are an error; rule names work everywhere.

@pytest.mark.parametrize("args", [["--select", "GL9999"], ["--ignore", "GL9999"], ["--select", "GL1,nonsense"]])
def test_unknown_selector_on_the_command_line_is_exit_2(tmp_path, args):
    result = run(["check", "--no-cache", *args], project(tmp_path))
    assert result.exit_code == 2, result.output
    assert "unknown rule selector" in result.output


@pytest.mark.parametrize("key", ['select = ["GL9999"]', 'ignore = ["GL9999"]',
                                 'per-file-ignores = {"step.py" = ["GL9999"]}', 'severity = {GL9999 = "warning"}'])
def test_unknown_selector_in_config_is_exit_2_naming_file_and_key(tmp_path, key):
    root = project(tmp_path, f"[tool.graphlint]\n{key}\n")
    result = run(["check", "--no-cache"], root)
    assert result.exit_code == 2, result.output
    assert "pyproject.toml" in result.output and f"key '{key.split(' ')[0]}'" in result.output


def test_rule_names_work_in_select_per_file_ignores_and_severity(tmp_path):
    root = project(tmp_path)
    assert run(["check", "--no-cache", "--select", "item-call"], root).exit_code == 1
    assert run(["check", "--no-cache", "--select", "tolist-call"], root).exit_code == 0  # another rule only
    project(tmp_path, '[tool.graphlint]\nper-file-ignores = {"step.py" = ["item-call"]}\n')
    assert run(["check", "--no-cache"], root).exit_code == 0
    project(tmp_path, '[tool.graphlint]\nseverity = {item-call = "warning"}\n')
    result = run(["check", "--no-cache", "--format", "json"], root)
    assert result.exit_code == 0
    [finding] = json.loads(result.stdout)["static"]["findings"]
    assert finding["severity"] == "warning"


# 2. Folders: ruff's default excludes, .gitignore read, no other folder skipped.

def test_env_and_build_folders_are_checked_venv_skipped_gitignore_read(tmp_path):
    root = project(tmp_path, files={"env/a.py": STEP, "pkg/build/b.py": STEP, "venv/c.py": STEP,
                                    "gen/d.py": STEP, "keep/e.py": STEP, ".gitignore": "gen/\n*.tmp.py\n",
                                    "keep/f.tmp.py": STEP})
    result = run(["check", "--no-cache", "--format", "json"], root)
    files = json.loads(result.stdout)["static"]["files"]
    assert files == ["env/a.py", "keep/e.py", "pkg/build/b.py"], files


def test_exclude_replaces_the_defaults_and_extend_exclude_adds(tmp_path):
    root = project(tmp_path, '[tool.graphlint]\nexclude = ["other"]\n', {"venv/c.py": STEP, "other/x.py": STEP})
    files = json.loads(run(["check", "--no-cache", "--format", "json"], root).stdout)["static"]["files"]
    assert files == ["venv/c.py"]
    project(tmp_path, "[tool.graphlint]\nextend-exclude = [\"other\"]\n", {})
    result = run(["check", "--no-cache", "--format", "json"], root)
    assert json.loads(result.stdout)["static"]["files"] == []


# 3. Suppressions are comments, not text in strings; unused ones are reported when selected.

def test_noqa_inside_a_string_suppresses_nothing(tmp_path):
    source = STEP.replace("return x.max().item()", 'return x.max().item(), "# noqa: GL101"')
    result = run(["check", "--no-cache", "step.py"], project(tmp_path, files={"step.py": source}))
    assert result.exit_code == 1 and "GL101" in result.output


def test_unused_suppression_is_gl902_when_selected(tmp_path):
    root = project(tmp_path, files={"step.py": WARN_ONLY})
    assert run(["check", "--no-cache"], root).exit_code == 0  # off by default, as RUF100
    result = run(["check", "--no-cache", "--select", "ALL", "--format", "json"], root)
    findings = json.loads(result.stdout)["static"]["findings"]
    assert [(f["rule"], f["line"]) for f in findings] == [("GL902", 5)], findings
    assert "GL101" in findings[0]["message"]


# 4. Config discovery as ruff: graphlint.toml or a pyproject.toml *with* [tool.graphlint].

def test_pyproject_without_section_is_skipped_for_the_one_above(tmp_path):
    root = project(tmp_path, '[tool.graphlint]\nignore = ["GL101"]\n')
    sub = root / "sub"
    sub.mkdir()
    (sub / "pyproject.toml").write_text("[tool.black]\nline-length = 100\n")
    (sub / "step.py").write_text(STEP)
    result = run(["check", "--no-cache", "step.py"], sub)
    assert result.exit_code == 0, result.output  # the parent's ignore applies


def test_graphlint_toml_is_discovered_and_paths_print_relative_to_the_current_folder(tmp_path):
    (tmp_path / "graphlint.toml").write_text('paths = ["pkg"]\n')
    (tmp_path / "pkg" / "deep").mkdir(parents=True)
    (tmp_path / "pkg" / "deep" / "step.py").write_text(STEP)
    result = run(["check", "--no-cache"], tmp_path / "pkg")
    assert result.exit_code == 1
    assert "\ndeep/step.py:5:12 GL101" in "\n" + result.stdout, result.stdout
    report = json.loads(run(["check", "--no-cache", "--format", "json"], tmp_path / "pkg").stdout)
    assert report["static"]["files"] == ["pkg/deep/step.py"]  # the report stays relative to the root
    assert report["config"]["source"].endswith("graphlint.toml")


# 5. --force-exclude applies exclude to named files (the pre-commit hook passes it).

def test_force_exclude_skips_an_excluded_file_named_on_the_command_line(tmp_path):
    root = project(tmp_path, '[tool.graphlint]\nextend-exclude = ["reference.py"]\n', {"reference.py": STEP})
    assert run(["check", "--no-cache", "reference.py"], root).exit_code == 1  # named: checked, as ruff
    forced = run(["check", "--no-cache", "--force-exclude", "reference.py"], root)
    assert forced.exit_code == 0 and "0 files checked" in forced.output
    project(tmp_path, '[tool.graphlint]\nextend-exclude = ["reference.py"]\nforce-exclude = true\n')
    assert run(["check", "--no-cache", "reference.py"], root).exit_code == 0


# 6. No runtime target configured: a clear error, not the bundled demo model's PASS.

def test_check_runtime_without_a_target_is_exit_2(tmp_path):
    result = run(["check", "--no-cache", "--runtime"], project(tmp_path))
    assert result.exit_code == 2
    assert "runtime-target" in result.output


def test_runtime_command_without_a_target_is_exit_2(tmp_path):
    pytest.importorskip("torch")
    result = run(["runtime", "--no-bench"], project(tmp_path))
    assert result.exit_code == 2, result.output
    assert "no target" in result.output and "runtime-target" in result.output


# 7. NO_COLOR honoured through rich's own handling; --color.

class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def _rendered(monkeypatch, tmp_path, no_color: str | None, color: bool | None) -> str:
    from graphlint.engine import check
    from graphlint.config import load
    from graphlint.report import Report
    from graphlint.views.text import render

    root = project(tmp_path)
    config = load(start=root)
    report = Report(tool_version="t", static=check([root], config))
    if no_color is None:
        monkeypatch.delenv("NO_COLOR", raising=False)
    else:
        monkeypatch.setenv("NO_COLOR", no_color)
    monkeypatch.delenv("FORCE_COLOR", raising=False)
    monkeypatch.setenv("TERM", "xterm-256color")
    stream = _Terminal()
    render(report, stream, root, color=color)
    return stream.getvalue()


def test_no_color_is_honoured_at_a_terminal(monkeypatch, tmp_path):
    red = "\x1b[1;31m"  # the error code's style; NO_COLOR keeps bold, drops colours (no-color.org)
    assert red in _rendered(monkeypatch, tmp_path, None, None)
    assert red not in _rendered(monkeypatch, tmp_path, "1", None)
    assert "\x1b[" not in _rendered(monkeypatch, tmp_path, None, False)  # --color never: plain text


def test_color_always_colours_a_pipe(tmp_path):
    root = project(tmp_path)
    assert "\x1b[" in run(["check", "--no-cache", "--color", "always"], root).stdout
    assert "\x1b[" not in run(["check", "--no-cache", "--color", "never"], root).stdout


# 8. Progress: `graphlint runtime` says at once what runs (plain lines off a terminal).

def test_runtime_prints_its_start_at_once_on_stderr(tmp_path):
    pytest.importorskip("torch")
    target = Path(__file__).parent / "runtime" / "targets" / "clean.py"
    assert target.is_file()
    proc = subprocess.Popen([sys.executable, "-m", "graphlint", "runtime", f"{target}:make", "--no-bench",
                             "--format", "json"], cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    first = proc.stderr.readline()  # before the harness has finished: the report is not out yet
    assert first.startswith("graphlint runtime: running") and str(target) in first
    out, err = proc.communicate(timeout=600)
    assert proc.returncode == 0, err
    json.loads(out)  # stdout is the report alone
    assert "graphlint runtime: done in" in err


def test_runtime_progress_heartbeat_off_a_terminal(tmp_path):
    pytest.importorskip("torch")
    script = ("import time, graphlint.commands.runtime as c\n"
              "c.HEARTBEAT_SECONDS = 0.2\n"
              "with c.runtime_progress('pkg.step:make'):\n"
              "    time.sleep(1.0)\n")
    proc = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    lines = proc.stderr.splitlines()
    assert lines[0].startswith("graphlint runtime: running pkg.step:make"), proc.stderr
    assert any(line.startswith("graphlint runtime: still running") for line in lines[1:-1]), proc.stderr
    assert lines[-1].startswith("graphlint runtime: done in")


def test_long_static_check_shows_phase_lines_off_a_terminal(tmp_path):
    from graphlint.views.progress import LONG_CHECK_FILES

    files = {f"pkg/m{i}.py": "import torch\n" for i in range(LONG_CHECK_FILES)}
    root = project(tmp_path, files=files)
    proc = subprocess.run([sys.executable, "-m", "graphlint", "check", "--no-cache", "-j", "1"], cwd=root,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    assert f"graphlint: analysing ({LONG_CHECK_FILES} files" in proc.stderr
    assert "graphlint: checked in" in proc.stderr
    quiet = subprocess.run([sys.executable, "-m", "graphlint", "check", "--no-cache", "-q", "-j", "1"], cwd=root,
                           capture_output=True, text=True, timeout=600)
    assert "analysing" not in quiet.stderr


# 9. -q hides the runtime section; a closed pipe ends quietly.

def test_quiet_hides_the_runtime_section():
    from graphlint.report import Report
    from graphlint.views.text import render

    runtime = {"verdict": "error", "error": "the harness section"}
    loud, quiet = io.StringIO(), io.StringIO()
    render(Report(tool_version="t", runtime=runtime), loud, Path("."))
    render(Report(tool_version="t", runtime=runtime), quiet, Path("."), quiet=True)
    assert "the harness section" in loud.getvalue()
    assert quiet.getvalue().splitlines() == loud.getvalue().splitlines()[-1:]  # the summary line only


def test_rules_into_a_closed_pipe_is_quiet(tmp_path):
    # `true` exits before graphlint writes: every write meets a closed pipe (EPIPE).
    proc = subprocess.run(["bash", "-c", f"{sys.executable} -m graphlint rules | true; echo ${{PIPESTATUS[0]}}"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert proc.stdout.strip() == "0"
    assert proc.stderr == "", proc.stderr
    head = subprocess.run(f"{sys.executable} -m graphlint rules | head -1", shell=True, cwd=tmp_path,
                          capture_output=True, text=True, timeout=120)
    assert head.stdout.startswith("GL101") and head.stderr == ""


# 10. Summaries are whole sentences in every view; explain speaks to users.

def test_rule_summaries_are_the_whole_first_paragraph():
    for rule in ALL_RULES:
        first = rule.docs().split("\n\n")[0]
        assert rule.summary() == " ".join(first.split()), rule.code
        assert rule.summary().endswith((".", ")")), (rule.code, rule.summary())


def test_explain_texts_do_not_speak_of_the_seeds():
    for rule in ALL_RULES:
        assert "seed" not in rule.docs().lower(), rule.code


def test_sarif_and_json_carry_whole_summaries(tmp_path):
    root = project(tmp_path)
    sarif = json.loads(run(["check", "--no-cache", "--format", "sarif"], root).stdout)
    rules = {r["id"]: r for r in sarif["runs"][0]["tool"]["driver"]["rules"]}
    from graphlint.rules import BY_CODE

    assert rules["GL101"]["shortDescription"]["text"] == BY_CODE["GL101"].summary()
    listed = json.loads(run(["rules", "--format", "json"], root).stdout)
    assert all(item["summary"] == BY_CODE[item["code"]].summary() for item in listed)


# 11. `check --runtime .` checks `.`; --exit-zero; stdin for editors; GitLab and JUnit; --fail-on.

def test_runtime_flag_does_not_take_the_path_as_its_target(tmp_path):
    result = run(["check", "--no-cache", "--runtime", "."], project(tmp_path))
    assert result.exit_code == 2 and "needs a target" in result.output  # `.` was a path, not a target


def test_exit_zero_and_fail_on_warning(tmp_path):
    root = project(tmp_path)
    assert run(["check", "--no-cache", "--exit-zero"], root).exit_code == 0
    project(tmp_path, '[tool.graphlint]\nseverity = {GL101 = "warning"}\n')
    assert run(["check", "--no-cache"], root).exit_code == 0
    assert run(["check", "--no-cache", "--fail-on", "warning"], root).exit_code == 1


def test_source_from_stdin_with_a_filename(tmp_path):
    root = project(tmp_path, '[tool.graphlint]\nper-file-ignores = {"ignored.py" = ["GL101"]}\n', {})
    result = run(["check", "--no-cache", "--stdin-filename", "pkg/step.py", "-"], root, input=STEP)
    assert result.exit_code == 1
    assert "pkg/step.py:5:12 GL101" in result.stdout and "return x.max().item()" in result.stdout
    assert run(["check", "--no-cache", "--stdin-filename", "ignored.py"], root, input=STEP).exit_code == 0
    bare = run(["check", "--no-cache", "-"], root, input=STEP)
    assert bare.exit_code == 1 and "-:5:12 GL101" in bare.stdout


def test_gitlab_code_quality_and_junit_formats(tmp_path):
    import xml.etree.ElementTree as ET

    root = project(tmp_path)
    gitlab = run(["check", "--no-cache", "--format", "gitlab"], root)
    [issue] = json.loads(gitlab.stdout)
    assert issue["check_name"].startswith("GL101") and issue["location"] == {"path": "step.py",
                                                                               "lines": {"begin": 5, "end": 5}}
    assert issue["severity"] == "major" and len(issue["fingerprint"]) >= 16
    junit = run(["check", "--no-cache", "--format", "junit"], root)
    tree = ET.fromstring(junit.stdout)
    assert tree.get("failures") == "1"
    case = tree.find("testsuite/testcase")
    assert case.get("name") == "graphlint.GL101" and case.find("failure") is not None
    assert gitlab.exit_code == junit.exit_code == 1


# 12. The cache folder is tagged and ignored, and evicts stale entries.

def test_cache_folder_has_cachedir_tag_and_gitignore(tmp_path):
    root = project(tmp_path)
    run(["check"], root)
    cache = root / ".graphlint_cache"
    assert (cache / "CACHEDIR.TAG").read_text().startswith("Signature: 8a477f597d28d172789f06886806bc55")
    assert (cache / ".gitignore").read_text().splitlines()[-1] == "*"
    subprocess.run(["git", "init", "-q"], cwd=root, check=True)
    status = subprocess.run(["git", "status", "--porcelain", "--untracked-files=all"], cwd=root,
                            capture_output=True, text=True, check=True).stdout
    assert ".graphlint_cache" not in status and "step.py" in status


def test_cache_evicts_entries_not_used_for_a_month(tmp_path):
    from graphlint.engine.cache import MAX_AGE_SECONDS, evict_stale

    root = project(tmp_path)
    run(["check"], root)
    cache = root / ".graphlint_cache"
    entries = list(cache.glob("??/*.json"))
    assert entries
    old = time.time() - MAX_AGE_SECONDS - 3600
    os.utime(entries[0], (old, old))
    assert evict_stale(cache) == 1
    assert not entries[0].exists() and all(e.exists() for e in entries[1:])
    assert evict_stale(cache) == 0  # at most once a day


# 13. Markers under the flagged range with tabs and wide characters; GL900 where it stops.

def test_marker_is_under_the_range_with_tabs_and_wide_characters(tmp_path):
    from graphlint.views.text import shown_line

    text, before, under = shown_line("\tx = '日本'; y.item()", 11, 19)
    assert text == "    x = '日本'; y.item()"
    assert before == 4 + 12 and under == 8  # the tab is 4 cells, each of 日本 two
    source = "import torch\n\n\ndef decode_step(x: torch.Tensor):\n\ts = '日本'; return x.max().item()\n"
    result = run(["check", "--no-cache", "step.py"], project(tmp_path, files={"step.py": source}))
    lines = result.stdout.splitlines()
    row = next(i for i, line in enumerate(lines) if "|     s = '日本'" in line)
    from rich.cells import cell_len

    code_line, marker = lines[row], lines[row + 1]
    assert cell_len(code_line[:code_line.index("x.max")]) == marker.index("^")
    assert marker.count("^") == len("x.max().item()")


def test_gl900_for_mixed_indentation_points_at_the_line(tmp_path):
    source = "import torch\n\n\ndef f(x):\n\tif x:\n        return 1\n\treturn 2\n"
    result = run(["check", "--no-cache", "--format", "json", "step.py"], project(tmp_path, files={"step.py": source}))
    [finding] = json.loads(result.stdout)["static"]["findings"]
    assert finding["rule"] == "GL900" and finding["line"] == 6, finding
