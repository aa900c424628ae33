"""Regions learned from a real run: the runtime records the functions the traced steps ran, writes
them as a region file, and a later static check reads them back as the captured region; hf: targets
have their transformers code linted in a section of its own."""
from __future__ import annotations

import datetime
import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from graphlint.region_audit import is_recorded_root
from graphlint.callgraph import recorded
from graphlint.config import Config, load
from graphlint.engine import check
from graphlint.report import Report
from graphlint.runtime import lint_target
from graphlint.runtime.tracing import record
from graphlint.commands.runtime import runtime_command
from graphlint.runtime.harness import run_harness

from runtime_helpers import REPO, target

DAY = datetime.date(2026, 1, 2)


@pytest.fixture(scope="module")
def bundled():
    return run_harness(None, "cpu", None, bench=False)


def test_the_runtime_report_lists_the_functions_the_step_ran(bundled):
    functions = {f["qualname"]: f for f in bundled["functions"]}
    # the target's step, the model's step and what they call, per device and phase
    assert {"GraphSafeTarget.step", "GraphSafeDSV4.step", "Block.forward", "MoE.forward", "sinkhorn"} <= set(functions)
    step = functions["GraphSafeDSV4.step"]
    assert step["path"] == "dsv4_model/model.py" and step["devices"] == ["cpu"] and step["phases"] == ["sync"]
    assert step["first"] < step["last"] and len(step["hash"]) == 16
    # only functions: no module bodies, lambdas or comprehensions; nothing of torch or the harness
    assert not [f for f in bundled["functions"] if "<" in f["qualname"] or not f["path"].startswith("dsv4_model/")]


def test_the_region_file_is_stable_and_names_no_absolute_path(bundled, tmp_path):
    again = run_harness(None, "cpu", None, bench=False)
    first, _ = record.region_text(bundled, REPO, today=DAY)
    second, _ = record.region_text(again, REPO, today=DAY)
    assert first == second
    data = json.loads(first)
    assert data["schema"] == recorded.SCHEMA and data["target"] == "dsv4_model.target:graph_safe"
    assert data["recorded"] == "2026-01-02" and data["torch"] and "transformers" in data and data["options"]
    assert not [f for f in data["functions"] if Path(f["path"]).is_absolute() or str(REPO) in f["path"]]
    keys = [(f["path"], f["qualname"], f["first"]) for f in data["functions"]]
    assert keys == sorted(keys)


def _copy_project(tmp_path: Path) -> Path:
    root = tmp_path / "proj"
    shutil.copytree(REPO / "dsv4_model", root / "dsv4_model", ignore=shutil.ignore_patterns("__pycache__"))
    (root / "graphlint.toml").write_text('paths = ["dsv4_model"]\n')
    return root


def test_round_trip_on_the_bundled_model(tmp_path):
    out = tmp_path / "regions.json"
    result = CliRunner().invoke(runtime_command, ["default", "--record-regions", str(out), "--no-bench", "-o",
                                                  str(tmp_path / "r.json")])
    assert result.exit_code == 0, result.output
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["runtime"]["region_file"]["written"] is True
    ran = {(f["path"], f["qualname"]) for f in report["runtime"]["functions"]}
    root = _copy_project(tmp_path)
    (root / ".graphlint").mkdir()
    shutil.copy(out, root / ".graphlint" / "regions.json")
    static = check([str(root / "dsv4_model")], load(start=root))
    captured = {key for key, placement in static.regions.items() if placement.region == "captured"}
    from_file = {key for key, placement in static.regions.items() if is_recorded_root(placement)}
    assert ran <= captured
    assert from_file == ran  # every function the runtime saw, and only those, comes from the file
    assert not [f for f in static.findings if f.rule == "GL904"]

    # Renaming a function the step ran makes the file stale (once), naming the refresh.
    mhc = root / "dsv4_model" / "mhc.py"
    mhc.write_text(mhc.read_text().replace("sinkhorn(", "sinkhorn_iterations("))
    renamed = check([str(root / "dsv4_model")], load(start=root))
    (stale,) = [f for f in renamed.findings if f.rule == "GL904"]
    assert "sinkhorn (dsv4_model/mhc.py: gone)" in stale.message
    assert "graphlint runtime dsv4_model.target:graph_safe --record-regions" in stale.fix


def test_record_regions_needs_a_json_file_and_a_whole_run(tmp_path):
    typo = CliRunner().invoke(runtime_command, ["--record-regions", "dsv4_model.target:graph_safe"])
    assert typo.exit_code == 2 and "expected a .json file" in typo.output
    out = tmp_path / "regions.json"
    stopped = CliRunner().invoke(runtime_command, [target("item_sync"), "--sync-mode", "error", "--no-bench",
                                                   f"--record-regions={out}", "-o", str(tmp_path / "r.json")])
    assert stopped.exit_code == 1 and not out.exists()
    assert "region file not written: the traced steps stopped early" in stopped.output
    assert json.loads((tmp_path / "r.json").read_text())["runtime"]["region_file"]["written"] is False


def test_the_default_path_comes_from_the_config(tmp_path):
    assert record.default_path(Config(root=tmp_path)) == tmp_path / ".graphlint" / "regions.json"
    assert record.default_path(Config(root=tmp_path, region_file="ci/r.json")) == tmp_path / "ci" / "r.json"


# ----------------------------------------------------------------- hf: targets, transformers linted
@pytest.fixture(scope="module")
def llama():
    pytest.importorskip("transformers")
    return run_harness("hf:llama", "cpu", 4, bench=False)


def test_hf_llama_round_trip(llama, tmp_path):
    text, unplaced = record.region_text(llama, REPO, today=DAY)
    assert unplaced == 0
    data = json.loads(text)
    ours = [f for f in data["functions"] if f.get("package") == "transformers"]
    assert {"LlamaForCausalLM.forward", "LlamaModel.forward", "LlamaAttention.forward"} <= {f["qualname"] for f in ours}
    (tmp_path / "regions.json").write_text(text)
    groups = lint_target.third_party_files(llama, REPO)
    (base,) = [b for b, files in groups.items() if "transformers/models/llama/modeling_llama.py" in files]
    files = [f for f in groups[base] if f.startswith("transformers/")]
    config = Config(root=Path(base), exclude=(), region_file=str(tmp_path / "regions.json"), respect_gitignore=False)
    static = check([str(Path(base) / f) for f in files], config)
    from_file = {key for key, placement in static.regions.items() if is_recorded_root(placement)}
    assert from_file == {(f["path"], f["qualname"]) for f in ours if f["path"] in files}
    assert not [f for f in static.findings if f.rule == "GL904"]


def test_hf_llama_lint_reads_the_transformers_code_the_step_ran(llama):
    static, joined = lint_target.lint_and_join(llama, load(None), jobs=1)
    section = static.extra["third_party"]
    assert "transformers/models/llama/modeling_llama.py" in section["files"] and section["gates"] is False
    assert section["findings"] and "transformers" in section["packages"]
    # Every runtime cause is judged against code the static half saw as captured, or said not to be.
    assert all(entry["reason"] for entry in joined["not_linted"])
    # hf:llama's step has no sync or capture cause, and its allocations are intermediates (GL405,
    # off by default): nothing is missed, and nothing needs confirming.
    assert joined["missed_by_static"] == []
    report = Report(tool_version="t", static=static, runtime={**llama, "verdict": "pass"}, crosscheck=joined)
    assert report.summary()["verdict"] == "pass"  # third-party findings do not gate
    errors = [f for f in section["findings"] if f["severity"] == "error" and not f["suppressed"]]
    if errors:  # --gate-third-party sets `gates`: then they count
        section["gates"] = True
        assert report.summary()["verdict"] == "fail"
        section["gates"] = False
    from graphlint.views.ci.sarif import to_sarif

    results = json.loads(to_sarif(report))["runs"][0]["results"]
    marked = [r for r in results if r["properties"].get("thirdParty")]
    assert len(marked) == len(section["findings"]) and all(r["level"] == "note" for r in marked)


def test_check_runtime_joins_on_what_the_step_ran(tmp_path):
    """`check --runtime` on the adapter's own file: the runner it calls through an untyped object is
    linted as captured code for the cross-check, and the check's static half stays as checked."""
    from graphlint.cli import main

    from runtime_helpers import marked_line

    out = tmp_path / "r.json"
    result = CliRunner().invoke(main, ["check", "tests/runtime/targets/adapter.py", "--no-cache", "--runtime-target",
                                       target("adapter"), "--format", "json", "-o", str(out)])
    assert result.exit_code == 1, result.output
    report = json.loads(out.read_text())
    assert report["static"]["files"] == ["tests/runtime/targets/adapter.py"]
    confirmed = {(c["path"], c["rule"], c["line"]) for c in report["crosscheck"]["confirmed"]}
    path, line = marked_line("adapter_runner", "item")
    assert (path, "GL101", line) in confirmed
    assert report["crosscheck"]["missed_by_static"] == []
