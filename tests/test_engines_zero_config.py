"""Zero-config regions on engines in the shapes real ones use (tests/fixtures/engine/tinyserve):
a model built with `.to(device).eval().requires_grad_(False)`, layers in a container class of the
engine's own, plain-class layers holding their weights, and attention chosen from a dict by a
config string. A capture whose callee cannot be resolved is said (GL905), and the audit is
INCOMPLETE, never PASS (tests/fixtures/engine/tinyserve_blind)."""
from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from graphlint import region_audit
from graphlint.cli import main
from graphlint.config import Config
from graphlint.engine import check

ENGINE = Path(__file__).parent / "fixtures" / "engine"
PLANTED = {("GL101", "paged_attention"), ("GL301", "GatedMLP.forward")}


def test_the_planted_hazards_and_nothing_else():
    result = check([ENGINE / "tinyserve"], Config(root=ENGINE), jobs=1)
    assert {(f.rule, f.function) for f in result.findings} == PLANTED
    by_rule = {f.rule: f for f in result.findings}
    # Through `.to(device).eval()`, the engine's LayerStack, the plain DecoderLayer's __call__ and
    # the dict of attention implementations.
    assert by_rule["GL101"].reached_via == ("TinyLM.forward", "DecoderLayer.__call__", "paged_attention")
    assert by_rule["GL301"].reached_via == ("TinyLM.forward", "DecoderLayer.__call__", "GatedMLP.forward")
    assert {f.region_reason for f in result.findings} == {"capture site at tinyserve/runner.py:21 (torch.cuda.graph)"}
    assert result.unresolved_calls == []


def test_audit_reaches_every_layer_through_the_container_and_the_dispatch():
    result = region_audit.run([ENGINE / "tinyserve"], Config(root=ENGINE), jobs=1)
    captured = {row.function for row in result.rows if row.region == "captured"}
    assert captured == {"TinyLM.forward", "DecoderLayer.__call__", "dense_attention", "paged_attention",
                        "GatedMLP.forward"}
    assert result.verdict() == "fail" and result.incomplete == []


def test_an_unresolved_capture_callee_is_a_warning_and_the_audit_is_incomplete():
    result = check([ENGINE / "tinyserve_blind"], Config(root=ENGINE), jobs=1)
    [finding] = result.findings
    assert (finding.rule, finding.severity, finding.function, finding.line) == ("GL905", "warning", "capture_step", 7)
    assert "`step_fn`" in finding.message
    audited = region_audit.run([ENGINE / "tinyserve_blind"], Config(root=ENGINE), jobs=1)
    assert audited.verdict() == "incomplete"
    assert audited.to_dict()["summary"]["verdict"] == "incomplete"
    assert [site["function"] for site in audited.incomplete] == ["capture_step"]


def test_the_audit_command_says_incomplete_and_fails(tmp_path):
    (tmp_path / "graphlint.toml").write_text("")
    runner = CliRunner()
    with runner.isolated_filesystem(temp_dir=tmp_path):
        result = runner.invoke(main, ["audit", str(ENGINE / "tinyserve_blind"), "--config",
                                      str(tmp_path / "graphlint.toml"), "--no-cache"])
    assert result.exit_code == 1, result.output
    assert "INCOMPLETE" in result.output and "PASS" not in result.output


def test_a_capture_step_passed_as_an_argument_is_followed(tmp_path):
    (tmp_path / "capture.py").write_text((ENGINE / "tinyserve_blind" / "capture.py").read_text())
    (tmp_path / "engine.py").write_text(
        "import torch\n"
        "from capture import capture_step\n\n\n"
        "class Decoder:\n"
        "    def __init__(self):\n"
        "        self.ids = torch.zeros(8, dtype=torch.long, device='cuda')\n"
        "        self.graph, self.out = capture_step(self.decode, (self.ids,))\n\n"
        "    def decode(self, ids: torch.Tensor) -> torch.Tensor:\n"
        "        if ids.sum() > 0:\n"
        "            return ids + 1\n"
        "        return ids\n")
    result = check([tmp_path], Config(root=tmp_path), jobs=1)
    assert {(f.rule, f.function) for f in result.findings} == {("GL201", "Decoder.decode")}
    assert result.findings[0].reached_via == ("Decoder.decode",)
