"""The cross-check joins the two halves: each runtime record is confirmed by a finding on its
statement or listed as missed by static; each finding is confirmed, not confirmed (ran, no event)
or not exercised (never ran)."""
from __future__ import annotations

import json
import textwrap

import pytest
from click.testing import CliRunner

from graphlint.config import load
from graphlint import crosscheck
from graphlint.runtime import lint_target
from graphlint.commands.runtime import runtime_command
from graphlint.runtime.harness import run_harness

from runtime_helpers import marked_line, target

PLANTED = ["clean", "item_sync", "frozen_scalar", "dynamic_output", "missed_syncs", "multigpu", "other_device",
           "stale_input", "misbehave", "adapter"]

# What the runtime sees on the planted targets and the reference port that no rule flags, with
# why no rule should (or can, in the static half as it is): (target, source, kind, line marker or None).
KNOWN_MISSES = {
    # The frozen value comes from the `.item()` one line up (GL101, confirmed): fixing that removes it.
    ("item_sync", "replay", "frozen-scalar"): "the scale read by .item() (GL101) is then a kernel argument",
    # `self.x` and `self.w` are set in a base class in another file (_base.py); the inference does not
    # carry attribute kinds across files, so `h = self.x @ self.w` is not known to be a device tensor.
    ("dynamic_output", "sync", "dynamic-shape"): "cross-file base-class attributes are of unknown kind",
    ("dynamic_output", "replay", "dynamic-output-shape"): "the same mask read, seen as the output's shape",
    ("dynamic_output", "replay", "shape-varies"): "the same mask read, seen as a changing shape",
    # The work tensors are put on another device chosen at run time in __init__.
    ("other_device", "replay", "other-device"): "the device is a runtime choice",
    # prepare() rebinds the input; the step only reads it: no single statement is wrong.
    ("stale_input", "replay", "stale-input"): "a rebinding in prepare(), read in step(): a cross-method fact",
}
# The reference port: consequences of findings that are confirmed elsewhere in the same run.
REFERENCE_MISSES = {
    # Shapes downstream of the growing compressed entries (GL403, line 147) and of the top-k width
    # taken from the position (GL508, lines 168-169), one record per op they flow through.
    "shape-varies",
    # The per-expert loop runs other experts at each step (GL201 `if` on counts, GL301 where):
    # aligned op by op, the loop index looks like a frozen scalar.
    "frozen-scalar",
    # The first op that differs is inside apply_rotary_emb, called under the compressor's
    # `if not should_compress: return None` (GL511) in another function.
    "control-flow",
    # The step rebinds its own token input (`set_tokens(....tolist())`, GL102 and GL508 at the
    # call); the stale read is reported where the tokens are used. Seen only when the new
    # tensor lands at another address than the old one, so not in every run.
    "stale-input",
}


def _both(name: str) -> tuple[dict, object, dict]:
    runtime = run_harness(name if name == "reference" else target(name), "cpu", None, bench=False)
    static, joined = lint_target.lint_and_join(runtime, load(None), jobs=1)
    return runtime, static, joined


@pytest.fixture(scope="module")
def planted():
    return {name: _both(name) for name in PLANTED}


def _records(runtime: dict) -> int:
    return len(runtime["sync_events"]) + len(runtime["replay"]["hazards"])


def test_every_runtime_record_is_confirmed_or_missed(planted):
    for name, (runtime, _static, joined) in planted.items():
        counted = sum(len(c["runtime"]) for c in joined["confirmed"] if c["runtime"][0]["source"] != "allocation")
        # a record confirmed by two findings on one statement counts once per finding
        seen = {(r["source"], r["kind"], r["op"], r["line"]) for c in joined["confirmed"] for r in c["runtime"]
                if r["source"] != "allocation"}
        assert len(seen) + len(joined["missed_by_static"]) + len(joined["not_linted"]) == _records(runtime), name
        # what the step ran was linted as captured code: nothing it saw is outside the static half's view
        assert joined["not_linted"] == [], (name, joined["not_linted"])
        assert counted >= len(seen)


def test_misses_on_the_planted_targets_are_the_named_gaps(planted):
    for name, (_runtime, _static, joined) in planted.items():
        for miss in joined["missed_by_static"]:
            assert (name, miss["source"], miss["kind"]) in KNOWN_MISSES, (name, miss)


def test_planted_hazards_are_confirmed_on_their_lines(planted):
    def confirmed(name):
        return {(c["rule"], c["line"]) for c in planted[name][2]["confirmed"]}

    assert ("GL101", marked_line("item_sync", "item")[1]) in confirmed("item_sync")
    assert {("GL508", marked_line("frozen_scalar", "fill")[1]),
            ("GL508", marked_line("frozen_scalar", "slice")[1])} <= confirmed("frozen_scalar")
    assert ("GL106", marked_line("missed_syncs", "device-sync")[1]) in confirmed("missed_syncs")
    # Event.synchronize sits under `if self.on_cuda:`, which the CPU emulation never runs.
    exercised = {(e["rule"], e["line"]) for e in planted["missed_syncs"][2]["not_exercised"]}
    assert ("GL106", marked_line("missed_syncs", "event-sync")[1]) in exercised
    assert planted["clean"][2]["counts"] == {"missed_by_static": 0, "not_linted": 0, "confirmed": 0,
                                            "not_confirmed": 0, "not_exercised": 0}


def test_the_adapter_is_linted_through_its_indirection(planted):
    """step() calls a runner the linter cannot type: the functions that ran are the static region,
    so every cause is confirmed by a finding on its line; with step() as the only root, none is."""
    runtime, _static, joined = planted["adapter"]
    confirmed = {(c["rule"], c["line"]) for c in joined["confirmed"]}
    assert {("GL101", marked_line("adapter_runner", "item")[1]), ("GL301", marked_line("adapter_runner", "nonzero")[1]),
            ("GL201", marked_line("adapter_runner", "branch")[1])} <= confirmed
    assert joined["missed_by_static"] == [] and joined["not_linted"] == []
    # With step() as the only root, the runner is reached only as a candidate (the one linted
    # class with a `run` method), and the chain says so: the recorded functions make it exact.
    _static, blind = lint_target.lint_and_join({**runtime, "functions": []}, load(None), jobs=1)
    assert blind["missed_by_static"] == []
    assert blind["confirmed"] and all(any("[candidate for" in step for step in c["reached_via"])
                                      for c in blind["confirmed"])


def test_a_record_in_code_the_static_half_placed_outside_the_region_is_not_linted(tmp_path):
    src = tmp_path / "m.py"
    src.write_text("def f(x):\n    return x.item()\n\nX = 1\n")
    runtime = {"sync_events": [{"kind": "host-read", "op": "Tensor.item", "path": str(src), "line": 2, "function": "f"},
                               {"kind": "host-read", "op": "Tensor.item", "path": str(src), "line": 4, "function": "?"},
                               {"kind": "host-read", "op": "Tensor.item", "path": "/elsewhere/g.py", "line": 3}],
               "replay": {"hazards": []}, "executed": {}}
    analysed = {str(src.resolve()): [(1, 2, "host", "f", "`# graphlint: host` marker")]}
    joined = crosscheck.join([], runtime, tmp_path, tmp_path, ["m.py"], analysed=analysed)
    assert joined["missed_by_static"] == []
    reasons = [entry["reason"] for entry in joined["not_linted"]]
    assert reasons == ["f was placed in the host region by the static half: `# graphlint: host` marker",
                       "module-level code, outside any function",
                       "the file was not linted (outside the project and every package folder)"]
    analysed[str(src.resolve())] = [(1, 2, "captured", "f", "capture site")]
    again = crosscheck.join([], runtime, tmp_path, tmp_path, ["m.py"], analysed=analysed)
    assert [(m["line"], m["linted"]) for m in again["missed_by_static"]] == [(2, True)]


def test_the_reference_port():
    runtime, static, joined = _both("reference")
    unexplained = [m for m in joined["missed_by_static"] if m["kind"] not in REFERENCE_MISSES]
    assert not unexplained, unexplained
    assert all(m["source"] == "replay" for m in joined["missed_by_static"])  # every sync event is confirmed
    assert not [e for e in runtime["sync_events"]
                if not any(r["source"] == "sync" and r["line"] == e["line"] for c in joined["confirmed"]
                           for r in c["runtime"])]
    rules = {(c["rule"], c["line"]) for c in joined["confirmed"]}
    # The compressor boundary branch: the runtime saw the ops change, GL511 flags the `if`.
    assert ("GL511", 132) in rules
    assert {"GL101", "GL102", "GL201", "GL301", "GL303", "GL305", "GL403", "GL404", "GL508"} <= {r for r, _ in rules}


# ----------------------------------------------------------------- the join itself, on small inputs
def _finding(rule, path, line, col=1, fp=None):
    return {"rule": rule, "name": rule.lower(), "severity": "error", "path": path, "line": line, "col": col,
            "function": "f", "region": "captured", "message": "m", "fingerprint": fp, "suppressed": False}


def test_join_matches_on_the_statement_and_the_family(tmp_path):
    src = tmp_path / "m.py"
    src.write_text(textwrap.dedent("""\
        def f(x, pos):
            y = (x.max()
                 .item())
            if pos % 4 == 3:
                x = x.cat(x)
            z = x.nonzero()
            return z
        def g(x):
            return x.tolist()
        """))
    findings = [_finding("GL101", "m.py", 2, fp="a"), _finding("GL511", "m.py", 4), _finding("GL401", "m.py", 6),
                _finding("GL102", "m.py", 9)]
    runtime = {
        "sync_events": [
            {"kind": "host-read", "op": "Tensor.item", "path": str(src), "line": 3, "function": "f"},  # same statement
            {"kind": "dynamic-shape", "op": "aten.nonzero", "path": str(src), "line": 6, "function": "f"},  # GL4 != GL3
        ],
        "replay": {"hazards": [{"hazard": "control-flow", "op": "aten.cat", "path": str(src), "line": 5,
                                "function": "f"}]},
        "executed": {str(src): [2, 3, 4, 5, 6, 7]},
    }
    joined = crosscheck.join(findings, runtime, tmp_path, tmp_path, ["m.py"])
    assert [(c["rule"], c["line"]) for c in joined["confirmed"]] == [("GL101", 2), ("GL511", 4)]
    assert [(m["kind"], m["line"], m["family"], m["linted"]) for m in joined["missed_by_static"]] == [
        ("dynamic-shape", 6, "GL3", True)]
    assert [(f["rule"], f["line"]) for f in joined["not_confirmed"]] == [("GL401", 6)]
    assert [(f["rule"], f["line"]) for f in joined["not_exercised"]] == [("GL102", 9)]
    marked = crosscheck.marks(joined)
    assert ("fp", "a") in marked


def test_allocation_sites_confirm_allocation_findings_and_are_never_misses(tmp_path):
    (tmp_path / "m.py").write_text("def f(x):\n    buf = x.new_zeros(4)\n    return buf\n")
    runtime = {"sync_events": [], "replay": {"hazards": []}, "executed": {"m.py": [2, 3]},
               "allocations": {"sites": [{"path": "m.py", "line": 2, "ops": ["aten.new_zeros"]}]}}
    joined = crosscheck.join([_finding("GL401", "m.py", 2)], runtime, tmp_path, tmp_path, ["m.py"])
    assert joined["counts"] == {"missed_by_static": 0, "not_linted": 0, "confirmed": 1, "not_confirmed": 0,
                                "not_exercised": 0}
    assert joined["confirmed"][0]["runtime"][0]["source"] == "allocation"


def test_runtime_lint_writes_the_section_and_the_text_lists_misses_first(tmp_path):
    out = tmp_path / "r.json"
    result = CliRunner().invoke(runtime_command, [target("item_sync"), "--lint", "--no-bench", "-o", str(out)])
    assert result.exit_code == 1
    report = json.loads(out.read_text())
    assert report["crosscheck"]["counts"]["confirmed"] == 1
    assert report["static"]["files"] == ["tests/runtime/targets/_base.py", "tests/runtime/targets/item_sync.py"]
    text = result.output
    section = text[text.index("cross-check (static x runtime)"):]
    assert section.index("missed by static") < section.index("confirmed (a finding")
    path, line = marked_line("item_sync", "item")
    assert f"(confirmed at runtime: host-read Tensor.item)" in text
    assert f"{path}:{line}  GL101 item-call  <- host-read Tensor.item" in section


def test_sarif_and_github_mark_confirmed_findings(tmp_path):
    out = tmp_path / "r.json"
    CliRunner().invoke(runtime_command, [target("item_sync"), "--lint", "--no-bench", "-o", str(out)])
    from graphlint.report import Report
    from graphlint.views.ci.github import to_annotations
    from graphlint.views.ci.sarif import to_sarif

    report = Report.from_dict(json.loads(out.read_text()))
    results = json.loads(to_sarif(report))["runs"][0]["results"]
    (gl101,) = [r for r in results if r["ruleId"] == "GL101"]
    assert gl101["properties"]["confirmedAtRuntime"] is True
    assert gl101["message"]["text"].endswith("(confirmed at runtime: host-read Tensor.item)")
    annotations = to_annotations(report)
    assert "title=GL101 item-call (confirmed at runtime)::" in annotations
