"""The harness survives its target: exits, crashes, hangs, raising protocol calls, lingering
threads, bad return values. Each run writes its report, and the failed phase names the cause."""
from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest
from click.testing import CliRunner

from graphlint.cli import main
from graphlint.commands.runtime import runtime_command

from runtime_helpers import marked_line, target


def run(tmp_path, how: str, *extra: str) -> tuple[int, dict, str]:
    out = tmp_path / f"{how}.json"
    result = CliRunner().invoke(runtime_command, [target("misbehave"), "--option", f"how={how}", "--no-bench",
                                                  "--steps", "4", "--timeout", "3", "-o", str(out), *extra])
    return result.exit_code, json.loads(out.read_text()), result.output


@pytest.mark.parametrize("how, phase, message", [
    ("sys_exit", "sync", "step() called sys.exit(3)"),
    ("os_exit", "sync", "step() called os._exit(4)"),
    ("segfault", "sync", "the worker for cpu was killed by SIGSEGV in step() (step 0)"),
    ("hang", "sync", "step() (step 0) ran past the 3 s step timeout (--timeout)"),
    ("raise_in_reset", "sync", "reset() raised RuntimeError: reset failed"),
    ("raise_in_step", "sync", "step() raised ValueError: bad step"),
])
def test_a_target_that_breaks_fails_a_phase_with_its_line(tmp_path, how, phase, message):
    code, report, output = run(tmp_path, how)
    runtime = report["runtime"]
    where = marked_line("misbehave", how.removeprefix("raise_in_"))
    assert code == 1, output
    assert runtime["verdict"] == "fail"
    assert runtime["phases"][phase]["verdict"] == "fail"
    assert runtime["phases"][phase]["error"] == f"cpu: {message} at {where[0]}:{where[1]}"
    assert f"{where[0]}:{where[1]}" in output
    assert report["summary"]["verdict"] == "fail"


def test_a_prepare_that_raises_fails_the_traced_phases(tmp_path):
    code, report, _ = run(tmp_path, "raise_in_prepare")
    where = marked_line("misbehave", "prepare")
    assert code == 1
    assert report["runtime"]["phases"]["sync"]["error"] == (
        f"prepare() raised KeyError: 'no input for step 2' at {where[0]}:{where[1]}")


def test_a_hang_is_ended_by_the_step_timeout(tmp_path):
    started = time.monotonic()
    code, report, _ = run(tmp_path, "hang")
    assert code == 1
    assert time.monotonic() - started < 30  # the 3 s timeout, not the worker's 570 s limit
    assert report["runtime"]["settings"]["timeout_s"] == 3


def test_a_lingering_thread_is_reported_and_does_not_keep_graphlint_alive(tmp_path):
    started = time.monotonic()
    code, report, _ = run(tmp_path, "thread")
    assert time.monotonic() - started < 60  # the thread sleeps 600 s
    where = marked_line("misbehave", "thread")
    assert code == 1
    (error,) = report["runtime"]["errors"]
    assert "the target left 1 non-daemon thread(s) running after the run: 'lingering'" in error
    assert f"at {where[0]}:" in error  # the thread's function is named by its file
    assert report["runtime"]["verdict"] == "fail"


@pytest.mark.parametrize("how, returned", [("return_none", "None"), ("return_int", "a int with no tensor in it"),
                                           ("return_dict", "a dict with no tensor in it")])
def test_a_step_that_returns_no_tensor_is_reported(tmp_path, how, returned):
    code, report, _ = run(tmp_path, how)
    replay = report["runtime"]["phases"]["replay"]
    assert code == 1
    assert replay["verdict"] == "fail"
    assert replay["error"].startswith(f"step() returned {returned}: replay cannot be compared with eager")


def test_a_target_without_device_is_a_usage_error_with_a_report(tmp_path):
    out = tmp_path / "r.json"
    result = CliRunner().invoke(runtime_command, [target("misbehave", "make_without_device"), "-o", str(out)])
    assert result.exit_code == 2
    assert "lacks a device attribute" in result.output and "Traceback" not in result.output
    assert json.loads(out.read_text())["runtime"]["verdict"] == "error"


def test_json_on_stdout_holds_no_print_of_the_target():
    proc = subprocess.run([sys.executable, "-m", "graphlint.cli", "runtime", target("misbehave"), "--no-bench",
                           "--steps", "2", "--format", "json"], capture_output=True, text=True, timeout=300)
    assert "a print from the step" not in proc.stdout
    assert json.loads(proc.stdout)["runtime"]["verdict"] == "pass"
    assert proc.returncode == 0


def test_check_runtime_keeps_the_static_half_when_the_target_exits(tmp_path):
    out = tmp_path / "both.json"
    result = CliRunner().invoke(main, ["check", "--no-cache", "tests/runtime/targets/item_sync.py",
                                       "--runtime-target", target("misbehave", "make_exiting"), "--format", "json",
                                       "-o", str(out)])
    assert result.exit_code == 1
    report = json.loads(out.read_text())
    assert [f["rule"] for f in report["static"]["findings"]] == ["GL101"]
    where = marked_line("misbehave", "sys_exit")
    assert report["runtime"]["phases"]["sync"]["error"] == f"cpu: step() called sys.exit(3) at {where[0]}:{where[1]}"
    assert report["crosscheck"]["counts"]["missed_by_static"] == 0


def test_check_runtime_with_an_unloadable_target_still_writes_the_static_half(tmp_path):
    out = tmp_path / "both.json"
    result = CliRunner().invoke(main, ["check", "--no-cache", "tests/runtime/targets/item_sync.py",
                                       "--runtime-target", "nosuchmodule_graphlint:make", "--format", "json", "-o", str(out)])
    assert result.exit_code == 2
    report = json.loads(out.read_text())
    assert [f["rule"] for f in report["static"]["findings"]] == ["GL101"]
    assert report["runtime"]["verdict"] == "error"
    assert "cannot import target module" in report["errors"][0]
