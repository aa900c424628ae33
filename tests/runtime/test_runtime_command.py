"""`graphlint runtime` through click: exit codes, JSON and text output, the report file."""
from __future__ import annotations

import json

from click.testing import CliRunner

from graphlint.commands.runtime import runtime_command

from runtime_helpers import marked_line, target


def invoke(*args: str):
    return CliRunner().invoke(runtime_command, list(args), catch_exceptions=False)


def test_clean_target_exits_0_with_a_json_report():
    result = invoke(target("clean"), "--format", "json", "--no-bench")
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    assert report["schema"] == "graphlint-report/1"
    runtime = report["runtime"]
    assert runtime["verdict"] == "pass"
    assert report["summary"]["runtime_verdict"] == "pass"
    assert set(runtime) >= {"torch", "devices", "target", "mode", "sync_events", "allocations", "captures",
                            "replay", "bench", "phases", "verdict"}
    assert set(runtime["phases"]) == {"sync", "allocation", "capture", "replay", "bench"}


def test_failing_target_exits_1_and_the_text_names_the_line():
    path, line = marked_line("item_sync", "item")
    result = invoke(target("item_sync"), "--no-bench")
    assert result.exit_code == 1
    assert f"{path}:{line}" in result.output
    assert "host-read" in result.output and "Tensor.item" in result.output
    assert "runtime verdict: FAIL" in result.output


def test_output_file_is_written_and_text_still_shown(tmp_path):
    out = tmp_path / "report.json"
    result = invoke(target("frozen_scalar"), "--output", str(out), "--no-bench", "--steps", "3")
    assert result.exit_code == 1
    assert "frozen-scalar" in result.output
    report = json.loads(out.read_text())
    assert report["runtime"]["phases"]["replay"]["verdict"] == "fail"
    assert report["runtime"]["replay"]["hazards"][0]["steps"] == [0, 1]


def test_options_reach_the_factory():
    result = invoke(target("clean"), "--option", "size=3", "--format", "json", "--no-bench")
    runtime = json.loads(result.output)["runtime"]
    assert runtime["target"]["options"] == {"size": 3}
    assert runtime["allocations"]["steps"][0]["bytes"] > 0


def test_import_failure_exits_2_without_a_traceback(tmp_path):
    out = tmp_path / "report.json"
    result = CliRunner().invoke(runtime_command, ["nosuchmodule_graphlint:make", "--output", str(out)])
    assert result.exit_code == 2
    assert "cannot import target module 'nosuchmodule_graphlint'" in result.output
    assert "Traceback" not in result.output
    report = json.loads(out.read_text())
    assert report["runtime"]["verdict"] == "error"
    assert report["summary"]["verdict"] == "fail"


def test_broken_file_target_and_bad_usage_exit_2():
    for args in (["tests/runtime/targets/broken_import.py:make"],
                 [target("clean"), "--reference"],
                 [target("clean"), "--option", "oops"],
                 [target("clean"), "--device", "tpu:0"]):
        result = CliRunner().invoke(runtime_command, args)
        assert result.exit_code == 2, (args, result.output)
        assert "graphlint runtime: error:" in result.output
