"""Suppressions as ruff has them: rule names in `# noqa:`, a bare `# noqa`, the file-level
`# graphlint: noqa` (every rule or listed ones), and GL901 only for graphlint's own namespace."""
from __future__ import annotations

import pytest

from graphlint.analysis.text import suppressions
from graphlint.testing import lint_snippet

STEP = ("def decode_step(x: torch.Tensor, y: torch.Tensor):\n"
        "    a = x.max().item(){a}\n"
        "    b = y.tolist(){b}\n"
        "    return a, b\n")


def rules(code: str, select: tuple[str, ...] = ("ALL",)) -> list[tuple[str, bool]]:
    """(rule, suppressed) of every finding, in order."""
    return [(f.rule, f.suppressed) for f in lint_snippet(code, select=select)]


def step(a: str = "", b: str = "", head: str = "") -> str:
    return head + STEP.format(a=a, b=b)


def test_rule_name_in_noqa_suppresses_and_is_not_unknown():
    found = rules(step(a="  # noqa: item-call"))
    assert ("GL101", True) in found and ("GL102", False) in found
    assert not any(rule in ("GL901", "GL902") for rule, _ in found), found


def test_misspelt_rule_name_in_noqa_is_gl901_and_suppresses_nothing():
    found = lint_snippet(step(a="  # noqa: item-cal"), select=("ALL",))
    assert [(f.rule, f.suppressed) for f in found if f.rule != "GL102"] == [("GL101", False), ("GL901", False)]
    assert "'item-cal'; did you mean 'item-call'?" in next(f.message for f in found if f.rule == "GL901")


@pytest.mark.parametrize("comment", ["  # noqa: E501", "  # noqa: BLE001, F401", "  # noqa: E501 - long-lines URL",
                                     "  # noqa:E501,W291"])
def test_other_tools_codes_are_theirs(comment):
    found = rules(step(a=comment))
    assert ("GL101", False) in found  # not suppressed: the noqa names no graphlint rule
    assert not any(rule in ("GL901", "GL902") for rule, _ in found), found


def test_unknown_gl_code_among_other_codes_is_gl901():
    found = rules(step(a="  # noqa: E501, GL1O1"))
    assert ("GL901", False) in found and ("GL101", False) in found


def test_bare_noqa_suppresses_every_rule_on_its_line():
    found = rules(step(a="  # noqa"), select=())
    assert found == [("GL101", True), ("GL102", False)]


def test_bare_noqa_where_nothing_fired_is_unused():
    code = "def decode_step(x: torch.Tensor):\n    return x + 1  # noqa\n"
    assert rules(code, select=()) == []  # GL902 is off by default, as RUF100
    found = lint_snippet(code, select=("GL902",))
    assert [f.rule for f in found] == ["GL902"] and "blanket" in found[0].message


def test_file_level_noqa_suppresses_every_rule():
    found = rules(step(head="# graphlint: noqa\n"))
    assert found == [("GL101", True), ("GL102", True)]


def test_file_level_noqa_with_codes_suppresses_only_those():
    found = rules(step(head="# graphlint: noqa: GL101, tolist-call\n"), select=())
    assert found == [("GL101", True), ("GL102", True)]
    found = rules(step(head="# graphlint: noqa: item-call\n"), select=())
    assert found == [("GL101", True), ("GL102", False)]


def test_file_level_noqa_anywhere_on_its_own_line():
    code = step() + "\n\n# graphlint: noqa: GL1  -- a generated file\n"
    assert rules(code, select=()) == [("GL101", True), ("GL102", True)]


def test_unused_file_level_code_is_gl902():
    found = lint_snippet(step(head="# graphlint: noqa: GL101, GL305\n"), select=("GL101", "GL902"))
    assert sorted((f.rule, f.suppressed) for f in found) == [("GL101", True), ("GL902", False)]
    found = [f for f in found if f.rule == "GL902"]
    assert "file-level" in found[0].message and "GL305" in found[0].message and "GL101" not in found[0].message


def test_trailing_graphlint_noqa_is_the_lines_own():
    found = rules(step(a="  # graphlint: noqa"), select=())
    assert found == [("GL101", True), ("GL102", False)]


def test_noqa_text_inside_a_string_is_no_file_level_suppression():
    code = 'NOTE = """\n# graphlint: noqa\n"""\n' + step()
    assert rules(code, select=()) == [("GL101", False), ("GL102", False)]


def test_scan_reads_the_forms():
    found = suppressions.scan("x = 1  # noqa\ny = 2  # NOQA: item-call, E501\n# graphlint: noqa: GL1 -- why\n"
                              "z = 3  # noqa_not\n# graphlint: noqa -- generated\n")
    assert [(s.line, s.codes, s.file_level, s.reason) for items in found.values() for s in items] == [
        (1, (), False, None), (2, ("item-call",), False, None), (3, ("GL1",), True, "why"), (5, (), True, "generated")]


def test_namespace():
    assert suppressions.in_own_namespace("GL101") and suppressions.in_own_namespace("gl1o1")
    assert suppressions.in_own_namespace("item-call")
    assert not any(suppressions.in_own_namespace(code) for code in ("E501", "BLE001", "F401", "GLOBAL", "reason"))
