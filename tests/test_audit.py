"""`graphlint audit` as a specification: the bundled graph-safe step is capturable function by
function; the eager reference port shows the seed inventory's categories (001: item syncs,
per-step allocations, data-dependent control flow and shapes, Python ints frozen into the
step); host and eager functions are listed but do not fail the audit."""
from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from graphlint import region_audit
from graphlint.cli import main
from graphlint.config import Config

REPO = Path(__file__).resolve().parents[1]
FIXTURES = Path(__file__).parent / "fixtures" / "regions"
GRAPH_SAFE = "dsv4_model.model:GraphSafeDSV4.step"
REFERENCE = "dsv4_model.reference:ReferenceDSV4.forward"


def rows(result: region_audit.AuditResult) -> dict[str, region_audit.AuditRow]:
    return {row.function: row for row in result.rows}


def test_every_function_of_the_graph_safe_step_is_capturable():
    result = region_audit.run([REPO / "dsv4_model"], Config(root=REPO, entry_points=(GRAPH_SAFE,)), jobs=1)
    found = rows(result)
    # The whole step: mHC, attention with its compressor and indexer, rope, MoE and its router.
    assert {"GraphSafeDSV4.step", "Block.forward", "hc_pre", "hc_post", "hc_head", "sinkhorn",
            "Attention.forward", "Compressor.forward", "Indexer.forward", "sink_attention",
            "RopeTable.at", "apply_rope", "PositionIndex.context", "MoE.forward", "MoE.route"} <= set(found)
    captured = [row for row in result.rows if row.region == "captured"]
    assert {row.cls for row in captured} == {"capturable"}, [r for r in captured if r.cls != "capturable"]
    assert result.verdict() == "pass" and result.unresolved == []
    assert all(row.line > 0 and row.reached_via[0] == "GraphSafeDSV4.step" for row in captured)
    # The capture and replay code of generate.py is host (marked), listed with its reason.
    host = {row.function: row.reason for row in result.rows if row.region == "host"}
    assert host and set(host.values()) == {"`# graphlint: host` marker"}


def test_zero_config_audit_finds_the_captured_step_from_the_capture_site():
    result = region_audit.run([REPO / "dsv4_model"], Config(root=REPO), jobs=1)
    captured = {row.function: row for row in result.rows if row.region == "captured"}
    assert {"GraphSafeDSV4.step", "Block.forward", "Attention.forward", "MoE.route"} <= set(captured)
    assert {row.reason for row in captured.values()} == {"capture site at dsv4_model/generate.py:73 (torch.cuda.graph)"}
    assert result.verdict() == "pass"


def test_the_reference_port_shows_the_seed_inventory_categories():
    # The seeds' per-step allocations are intermediates (returned to a caller inside the step):
    # GL405, off by default, selected here with the default set.
    config = Config(root=REPO, entry_points=(REFERENCE,), select=("GL1", "GL2", "GL3", "GL4", "GL5"))
    result = region_audit.run([REPO / "dsv4_model" / "reference.py"], config, jobs=1)
    found = rows(result)
    assert found["RefBlock.hc_post"].cls == "sync"                        # 001 cat 1: .item() in mHC
    assert {"sync", "host-branch", "dynamic-shape", "allocates"} <= set(found["RefMoE.forward"].classes)
    assert found["sparse_attn"].cls == "host-branch"                      # if on a device value, mask read
    assert found["RefAttention.forward"].cls == "frozen-scalar"           # cache[:, start_pos % W] = kv
    assert found["RefCompressor.forward"].cls == "frozen-scalar"          # n_comp / slot from start_pos
    assert "allocates" in found["window_topk_idxs"].classes               # 001 cat 2: torch.full per step
    every_class = {c for row in result.rows for c in row.classes}
    assert every_class == {"sync", "host-branch", "dynamic-shape", "allocates", "frozen-scalar"}
    assert result.verdict() == "fail"
    assert found["RefMoE.gate"].cls == "capturable"


def test_host_and_eager_functions_are_listed_without_failing_the_audit():
    config = Config(root=FIXTURES, entry_points=("servepkg.engine:serve_step",), eager=("servepkg.moe:MoE.forward",))
    found = rows(region_audit.run([FIXTURES], config, jobs=1))
    assert {name: found[name].cls for name in ("sample", "is_stop", "detokenize", "MoE.forward", "route")} == {
        "sample": "host", "is_stop": "host", "detokenize": "host", "MoE.forward": "eager", "route": "eager"}
    # route's sync-like branch still shows as a finding of the eager break.
    assert found["route"].findings == {"GL201": 1}
    assert "load_weights" not in found


def test_cli_json_report_and_exit_codes(tmp_path):
    runner = CliRunner()
    out = tmp_path / "audit.json"
    ok = runner.invoke(main, ["audit", str(REPO / "dsv4_model"), "--entry-point", GRAPH_SAFE, "--no-cache",
                              "--format", "json", "--output", str(out), "-j", "1"])
    assert ok.exit_code == 0, ok.output
    data = json.loads(out.read_text())
    assert data["schema"] == "graphlint-audit/1" and data["summary"]["verdict"] == "pass"
    assert data["counts"]["capturable"] == data["summary"]["captured"]
    assert set(data["counts"]) == {"capturable", "host"}
    assert data["summary"]["unresolved_calls"] == 0
    assert {"function", "path", "line", "region", "region_reason", "class", "classes", "findings",
            "reached_via"} <= set(data["functions"][0])

    bad = runner.invoke(main, ["audit", str(REPO / "dsv4_model" / "reference.py"), "-e", REFERENCE, "--no-cache", "-j", "1"])
    assert bad.exit_code == 1
    assert "frozen-scalar" in bad.output and "FAIL" in bad.output


def test_cli_errors_exit_2_with_a_message(tmp_path):
    (tmp_path / "m.py").write_text("import torch\ndef step(x):\n    return x\n")
    runner = CliRunner()
    # No capture site, no nn.Module forward, no entry point: nothing to audit.
    none = runner.invoke(main, ["audit", str(tmp_path / "m.py"), "--no-cache", "--config", str(_empty_config(tmp_path))])
    assert none.exit_code == 2 and "entry point" in none.output
    wrong = runner.invoke(main, ["audit", str(tmp_path / "m.py"), "-e", "m:nope", "--no-cache"])
    assert wrong.exit_code == 2 and "names no function" in wrong.output and "Traceback" not in wrong.output
    check = runner.invoke(main, ["check", str(tmp_path / "m.py"), "--no-cache", "--config", str(_config(tmp_path))])
    assert check.exit_code == 2 and "names no function" in check.output


def test_def_lines_from_indentation():
    text = "class A:\n    def f(self):\n        def inner():\n            pass\n\ndef g():\n    pass\n"
    assert region_audit.def_lines(text) == {"A": 1, "A.f": 2, "A.f.inner": 3, "g": 6}


def _empty_config(folder: Path) -> Path:
    path = folder / "graphlint.toml"
    path.write_text("")
    return path


def _config(folder: Path) -> Path:
    path = folder / "pyproject.toml"
    path.write_text('[tool.graphlint]\nentry-points = ["m:nope"]\n')
    return path
