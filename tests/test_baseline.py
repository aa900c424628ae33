"""The baseline: `graphlint baseline write` records today's findings of the bundled reference port,
`check --baseline` then fails only on new ones; fingerprints survive moving code around and
reformatting, and a finding fixed since the baseline is reported as fixed."""
from __future__ import annotations

import ast
import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from graphlint.engine.fingerprints import fingerprint_findings
from graphlint.gating.accepted_findings import BASELINE_REASON
from graphlint.cli import main
from graphlint.config import Config
from graphlint.engine import check as run_check

REFERENCE = Path(__file__).resolve().parents[1] / "dsv4_model" / "reference.py"
# Marked: beside the port's forwards, a loose function is per-step only when something says so.
NEW_VIOLATION = "\n\ndef planted_step(x: torch.Tensor):  # graphlint: entry\n    return x.sum().item()\n"


@pytest.fixture
def port(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A copy of the reference port in a folder of its own (no pyproject: nothing excluded)."""
    shutil.copy(REFERENCE, tmp_path / "reference.py")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def cli(*args: str):
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


def check_json(*extra: str):
    # The cache lives in the temporary folder: repeated checks of unchanged text are cheap.
    result = cli("check", "reference.py", "--format", "json", *extra)
    return result, json.loads(result.stdout)


def unsuppressed(report: dict) -> list[dict]:
    return [f for f in report["static"]["findings"] if not f["suppressed"]]


def write_baseline() -> dict:
    result = cli("baseline", "write", "reference.py")
    assert result.exit_code == 0, result.output
    return json.loads(Path("graphlint-baseline.json").read_text())


def test_baseline_makes_the_reference_port_pass(port: Path):
    before, report = check_json()
    assert before.exit_code == 1 and len(unsuppressed(report)) > 5  # the known-bad port
    baseline = write_baseline()
    assert len(baseline["findings"]) == len(unsuppressed(report))
    result, report = check_json("--baseline", "graphlint-baseline.json")
    assert result.exit_code == 0, result.output
    assert unsuppressed(report) == []
    assert {f["suppression_reason"] for f in report["static"]["findings"]} == {BASELINE_REASON}
    assert report["static"]["baseline"]["new"] == 0
    assert report["static"]["baseline"]["fixed"] == []


def test_one_new_violation_fails_with_exactly_that_one(port: Path):
    write_baseline()
    with open("reference.py", "a", encoding="utf-8") as handle:
        handle.write(NEW_VIOLATION)
    result, report = check_json("--baseline", "graphlint-baseline.json")
    assert result.exit_code == 1
    [new] = unsuppressed(report)
    assert (new["rule"], new["function"]) == ("GL101", "planted_step")
    assert report["static"]["baseline"]["new"] == 1
    assert "1 new" in result.stderr


def _reorder_top_level(source: str) -> str:
    """Move code around: top-level definitions in reverse order, imports first, blank lines and a
    comment block added above everything."""
    tree = ast.parse(source)
    lines = source.splitlines(keepends=True)
    starts = [min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])]) for node in tree.body]
    spans = [(start, (starts[i + 1] if i + 1 < len(starts) else len(lines) + 1)) for i, start in enumerate(starts)]
    blocks = ["".join(lines[a - 1:b - 1]).rstrip("\n") + "\n" for a, b in spans]
    head = "".join(lines[:starts[0] - 1])
    imports = [b for b, node in zip(blocks, tree.body) if isinstance(node, (ast.Import, ast.ImportFrom))]
    rest = [b for b, node in zip(blocks, tree.body) if not isinstance(node, (ast.Import, ast.ImportFrom))]
    assert len(rest) > 3, "the reference port should have several top-level definitions"
    return head + "".join(imports) + "\n# moved around\n\n\n" + "\n\n".join(reversed(rest))


def test_moving_code_around_creates_no_new_findings(port: Path):
    write_baseline()
    original = Path("reference.py").read_text()
    Path("reference.py").write_text(_reorder_top_level(original))
    result, report = check_json("--baseline", "graphlint-baseline.json")
    assert result.exit_code == 0, result.output
    lines_before = {(f["rule"], f["line"]) for f in json.loads(Path("graphlint-baseline.json").read_text())["findings"]}
    lines_after = {(f["rule"], f["line"]) for f in report["static"]["findings"]}
    assert lines_before != lines_after  # the findings really moved
    assert report["static"]["baseline"] == {**report["static"]["baseline"], "new": 0, "fixed": []}


def _single_line_finding(report: dict, source: str) -> dict:
    """A finding whose whole statement is one simple line, so replacing it by `pass` fixes it."""
    simple = {node.lineno for node in ast.walk(ast.parse(source))
              if isinstance(node, (ast.Assign, ast.Expr, ast.AugAssign)) and node.lineno == node.end_lineno}
    for finding in unsuppressed(report):
        if finding["line"] in simple and finding["rule"].startswith("GL1"):
            return finding
    pytest.fail("the reference port has no one-line sync finding to fix")


def test_a_fixed_finding_is_reported_as_fixed(port: Path):
    write_baseline()
    _, report = check_json()
    source = Path("reference.py").read_text()
    target = _single_line_finding(report, source)
    lines = source.splitlines(keepends=True)
    flagged = lines[target["line"] - 1]
    lines[target["line"] - 1] = flagged[:len(flagged) - len(flagged.lstrip())] + "pass\n"
    Path("reference.py").write_text("".join(lines))
    result, report = check_json("--baseline", "graphlint-baseline.json")
    assert result.exit_code == 0, result.output
    [fixed] = report["static"]["baseline"]["fixed"]
    assert (fixed["rule"], fixed["line"], fixed["function"]) == (target["rule"], target["line"], target["function"])
    assert report["static"]["baseline"]["new"] == 0
    assert f"fixed: reference.py:{target['line']} {target['rule']}" in result.stderr


def test_baseline_write_skips_suppressed_findings(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.chdir(tmp_path)
    Path("step.py").write_text("import torch\n\ndef step(x: torch.Tensor):\n"
                               "    a = x.max().item()  # graphlint: ignore[GL101] -- logged once\n"
                               "    return x.min().item()\n")
    assert cli("baseline", "write", "step.py", "--no-cache", "-o", "b.json").exit_code == 0
    [entry] = json.loads(Path("b.json").read_text())["findings"]
    assert entry["line"] == 5


# --- fingerprints --------------------------------------------------------------------------

def _prints(tmp_path: Path, source: str) -> list[tuple[str, int, str]]:
    (tmp_path / "m.py").write_text(source)
    config = Config(root=tmp_path)
    findings = fingerprint_findings(run_check([tmp_path / "m.py"], config).findings, tmp_path)
    return [(f.rule, f.line, f.fingerprint or "") for f in findings]


STEP = ("import torch\n\n"
        "def step(x: torch.Tensor):\n"
        "    a = x.max().item()\n"
        "    return a\n")


def test_fingerprint_ignores_line_shifts_and_reformatting(tmp_path: Path):
    [(_, line, base)] = _prints(tmp_path, STEP)
    shifted = STEP.replace("import torch\n", "import torch\n\n\n# a comment\nimport os\n")
    [(_, moved_line, moved)] = _prints(tmp_path, shifted)
    assert moved_line != line and moved == base
    reformatted = STEP.replace("a = x.max().item()", "a = (\n        x.max()\n        .item()  # why\n    )")
    [(_, _, same)] = _prints(tmp_path, reformatted)
    assert same == base


def test_fingerprint_changes_with_the_statement_function_or_rule(tmp_path: Path):
    [(_, _, base)] = _prints(tmp_path, STEP)
    [(_, _, other_statement)] = _prints(tmp_path, STEP.replace("a = x.max()", "a = x.min()"))
    [(_, _, other_function)] = _prints(tmp_path, STEP.replace("def step", "def other_step"))
    assert len({base, other_statement, other_function}) == 3


def test_identical_statements_get_distinct_fingerprints_by_occurrence(tmp_path: Path):
    twice = STEP.replace("    return a\n", "    a = x.max().item()\n    return a\n")
    prints = _prints(tmp_path, twice)
    assert len(prints) == 2 and prints[0][2] != prints[1][2]
    # The first of the two keeps the fingerprint the single statement had.
    assert prints[0][2] == _prints(tmp_path, STEP)[0][2]


def test_a_finding_in_an_if_test_ignores_edits_in_its_body(tmp_path: Path):
    source = ("import torch\n\ndef step(x: torch.Tensor):\n"
              "    if x.max().item() > 1:\n        print('big')\n")
    [(_, _, base)] = _prints(tmp_path, source)
    [(_, _, edited)] = _prints(tmp_path, source.replace("print('big')", "print('large')\n        x = x * 2"))
    assert edited == base


# --- bad input -----------------------------------------------------------------------------

@pytest.mark.parametrize("content, message", [
    (None, "baseline file not found"),
    ("{not json", "not valid JSON"),
    ('{"schema": "something-else"}', "not a graphlint baseline"),
    ('{"schema": "graphlint-baseline/1", "findings": [1]}', "'findings' must be a list"),
])
def test_a_broken_baseline_is_a_usage_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, content, message):
    monkeypatch.chdir(tmp_path)
    Path("step.py").write_text(STEP)
    if content is not None:
        Path("b.json").write_text(content)
    result = cli("check", "step.py", "--no-cache", "--baseline", "b.json")
    assert result.exit_code == 2
    assert message in result.stderr and "Traceback" not in result.output
