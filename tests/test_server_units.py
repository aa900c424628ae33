"""The language server's pure parts: positions in UTF-16 as LSP counts them, the suppression
edit (a new comment, or a code added to the `ignore[...]` already on the line), and hovers."""
from __future__ import annotations

import pytest

pytest.importorskip("lsprotocol")
from lsprotocol import types  # noqa: E402

from graphlint.report import Finding  # noqa: E402
from graphlint.server import actions, diagnostics, hover  # noqa: E402


def finding(line=1, col=1, end_line=1, end_col=1, rule="GL101", suppressed=False) -> Finding:
    return Finding(rule=rule, family="sync", severity="error", path="a.py", line=line, col=col, end_line=end_line,
                   end_col=end_col, function="f", region="captured", message="m", fix="f", name="item-call",
                   suppressed=suppressed)


def test_columns_are_utf16_code_units():
    line = "    s = '𝛼é' + x.item()"  # 𝛼 is two UTF-16 units, é one
    col = line.index("x.item()") + 1
    rng = diagnostics.finding_range(finding(col=col, end_col=col + len("x.item()")), [line])
    assert (rng.start.character, rng.end.character) == (col, col + len("x.item()"))  # one more than code points


def test_a_finding_without_a_range_marks_its_line():
    rng = diagnostics.finding_range(finding(line=2, col=1, end_line=2, end_col=1), ["x = 1", "    y = f(x)"])
    assert (rng.start.line, rng.start.character, rng.end.character) == (1, 4, 12)


def test_suppressed_findings_are_not_published():
    found = diagnostics.to_diagnostics([finding(suppressed=True), finding(rule="GL102")], "x.item()\n", lambda c: None)
    assert [d.code for d in found] == ["GL102"]
    assert found[0].severity == types.DiagnosticSeverity.Error and found[0].source == "graphlint"


def test_suppression_edit_appends_a_comment_with_a_reason_placeholder():
    edit = actions.suppression_edit("a = 1\nn = x.item()\n", 2, "GL101")
    assert (edit.range.start.line, edit.range.start.character) == (1, len("n = x.item()"))
    assert edit.new_text == "  # graphlint: ignore[GL101] -- TODO: why this is safe"


def test_suppression_edit_adds_to_an_existing_ignore():
    line = "n = int(x.item())  # graphlint: ignore[GL101] -- logged"
    edit = actions.suppression_edit(line + "\n", 1, "GL104")
    assert edit.new_text == ", GL104" and edit.range.start.character == line.index("]")


def test_an_ignore_inside_a_string_is_not_extended():
    line = 'n = x.item(), "# graphlint: ignore[GL102]"'
    edit = actions.suppression_edit(line + "\n", 1, "GL101")
    assert edit.new_text.startswith("  # graphlint: ignore[GL101]") and edit.range.start.character == len(line)


def test_hover_only_on_a_flagged_range():
    [diagnostic] = diagnostics.to_diagnostics([finding(col=5, end_col=13)], "n = x.item()\n", lambda c: None)
    assert hover.hover([diagnostic], types.Position(0, 6)) is not None
    assert hover.hover([diagnostic], types.Position(0, 1)) is None
