"""`--format sarif`: valid SARIF 2.1.0 (checked against the OASIS schema vendored in tests/data),
every result cites a rule that carries help text, locations and partial fingerprints are set, and
suppressed findings are marked, not dropped."""
from __future__ import annotations

import copy
import json
import shutil
from pathlib import Path

import jsonschema
import pytest
from click.testing import CliRunner

from graphlint.cli import main
from graphlint.report import Report, StaticResult
from graphlint.rules import ALL_RULES
from graphlint.views.ci.sarif import FINGERPRINT_KEY, to_sarif

SCHEMA = json.loads((Path(__file__).parent / "data" / "sarif-schema-2.1.0.json").read_text())
REFERENCE = Path(__file__).resolve().parents[1] / "dsv4_model" / "reference.py"


def validate(document: dict) -> None:
    jsonschema.Draft4Validator(SCHEMA).validate(document)


@pytest.fixture
def sarif(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict:
    shutil.copy(REFERENCE, tmp_path / "reference.py")
    (tmp_path / "step.py").write_text("import torch\n\ndef step(x: torch.Tensor):  # graphlint: entry\n"
                                      "    return x.max().item()  # graphlint: ignore[GL101] -- once per run\n")
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(main, ["check", "--no-cache", "--format", "sarif", "reference.py", "step.py"])
    assert result.exit_code == 1, result.output
    return json.loads(result.stdout)


def test_sarif_validates_against_the_2_1_0_schema(sarif: dict):
    validate(sarif)
    assert sarif["version"] == "2.1.0"
    assert len(sarif["runs"][0]["results"]) > 5


def test_the_schema_check_is_not_vacuous(sarif: dict):
    broken = copy.deepcopy(sarif)
    broken["runs"][0]["results"][0]["level"] = "fatal"
    with pytest.raises(jsonschema.ValidationError):
        validate(broken)
    del broken["version"]
    with pytest.raises(jsonschema.ValidationError):
        validate(broken)


def test_every_result_has_a_rule_with_help_text(sarif: dict):
    run = sarif["runs"][0]
    rules = run["tool"]["driver"]["rules"]
    assert {r["id"] for r in rules} >= {rule.code for rule in ALL_RULES}
    for result in run["results"]:
        rule = rules[result["ruleIndex"]]
        assert rule["id"] == result["ruleId"]
        assert rule["help"]["text"].strip() and "Fix:" in rule["help"]["text"]
        assert rule["shortDescription"]["text"].strip()


def test_results_have_locations_and_fingerprints(sarif: dict):
    results = sarif["runs"][0]["results"]
    for result in results:
        [location] = result["locations"]
        physical = location["physicalLocation"]
        assert physical["artifactLocation"]["uri"] in ("reference.py", "step.py")
        assert physical["artifactLocation"]["uriBaseId"] == "%SRCROOT%"
        assert physical["region"]["startLine"] >= 1 and physical["region"]["startColumn"] >= 1
        assert result["partialFingerprints"][FINGERPRINT_KEY]
    prints = [r["partialFingerprints"][FINGERPRINT_KEY] for r in results]
    assert len(set(prints)) == len(prints)


def test_suppressed_findings_carry_a_suppression(sarif: dict):
    [suppressed] = [r for r in sarif["runs"][0]["results"] if "suppressions" in r]
    assert suppressed["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] == "step.py"
    assert suppressed["suppressions"] == [{"kind": "inSource", "status": "accepted", "justification": "once per run"}]


def test_runtime_events_and_errors_validate_too():
    report = Report(tool_version="0", static=StaticResult(),
                    runtime={"verdict": "fail", "sync_events": [
                        {"op": "aten._local_scalar_dense", "kind": "host-read", "path": "m.py", "line": 7,
                         "function": "step", "detail": ".item()"},
                        {"op": "aten.nonzero", "kind": "dynamic-shape", "path": "?", "line": 0}]},
                    errors=["capture failed on cuda:1"])
    document = json.loads(to_sarif(report))
    validate(document)
    run = document["runs"][0]
    [result] = run["results"]  # the event without a source line is left out
    assert result["ruleId"] == "runtime/host-read"
    assert run["tool"]["driver"]["rules"][result["ruleIndex"]]["help"]["text"]
    assert run["invocations"][0]["executionSuccessful"] is False


def test_with_a_baseline_results_say_new_or_unchanged(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.chdir(tmp_path)
    step = "import torch\n\ndef step(x: torch.Tensor):\n    a = x.max().item()\n    return a\n"
    Path("step.py").write_text(step)
    runner = CliRunner()
    assert runner.invoke(main, ["baseline", "write", "step.py", "--no-cache"]).exit_code == 0
    Path("step.py").write_text(step.replace("    return a\n", "    return x.min().tolist()\n"))
    result = runner.invoke(main, ["check", "step.py", "--no-cache", "--format", "sarif",
                                  "--baseline", "graphlint-baseline.json"])
    assert result.exit_code == 1
    document = json.loads(result.stdout)
    validate(document)
    states = {r["ruleId"]: (r["baselineState"], r.get("suppressions")) for r in document["runs"][0]["results"]}
    assert states == {"GL101": ("unchanged", [{"kind": "external", "status": "accepted", "justification": "in baseline"}]),
                      "GL102": ("new", None)}
