"""Every rule's VALID examples yield none of its findings; every INVALID example yields some.

The examples live on the rule classes (the rule is its own spec); this file only runs them.
"""
from __future__ import annotations

import pytest

from graphlint.analysis.walk.rule import Example
from graphlint.rules import ALL_RULES
from graphlint.testing import lint_snippet

def _selection(rule) -> tuple[str, ...]:
    """The default selection, plus the rule itself when it is off by default (GL902)."""
    return () if rule.default_enabled else ("ALL",)


VALID = [(rule, i, code) for rule in ALL_RULES for i, code in enumerate(rule.VALID)]
INVALID = [(rule, i, ex) for rule in ALL_RULES for i, ex in enumerate(rule.INVALID)]


@pytest.mark.parametrize("rule,index,code", VALID, ids=[f"{r.code}-valid-{i}" for r, i, _ in VALID])
def test_valid_example_is_not_flagged(rule, index, code):
    found = [f for f in lint_snippet(code, select=_selection(rule)) if f.rule == rule.code]
    assert found == [], f"{rule.code} flagged valid example {index}:\n{code}\n{found}"


@pytest.mark.parametrize("rule,index,example", INVALID, ids=[f"{r.code}-invalid-{i}" for r, i, _ in INVALID])
def test_invalid_example_is_flagged(rule, index, example):
    code, expect = (example.code, example.expect) if isinstance(example, Example) else (example, None)
    found = [f for f in lint_snippet(code, select=_selection(rule)) if f.rule == rule.code]
    if expect is None:
        assert found, f"{rule.code} missed invalid example {index}:\n{code}"
    else:
        assert len(found) == expect, f"{rule.code}: expected {expect} findings, got {found}"


def test_every_rule_has_docs_in_four_parts_and_examples():
    for rule in ALL_RULES:
        docs = rule.docs()
        for heading in ("## Why it breaks a CUDA graph", "## Example", "## Use instead"):
            assert heading in docs, f"{rule.code} docs lack {heading!r}"
        assert rule.message and rule.fix
        if not rule.code.startswith("GL9"):
            assert rule.VALID and rule.INVALID, f"{rule.code} needs valid and invalid examples"


def test_codes_and_names_are_unique():
    assert len({r.code for r in ALL_RULES}) == len(ALL_RULES)
    assert len({r.name for r in ALL_RULES}) == len(ALL_RULES)
