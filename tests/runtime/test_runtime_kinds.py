"""Every runtime event kind and replay hazard kind has a meaning and a fix, as the rules do."""
from __future__ import annotations

from click.testing import CliRunner

from graphlint.cli import main
from graphlint.runtime.tracing import hazards, op_catalog
from graphlint import crosscheck
from graphlint.runtime.tracing.kinds import KINDS


def test_every_event_and_hazard_kind_is_documented():
    assert set(KINDS) == set(op_catalog.KINDS) | set(hazards.WHY)
    for kind in KINDS.values():
        assert kind.what and kind.why and kind.example and kind.fix
        assert kind.family in crosscheck.FAMILY_NAMES
        source = "sync" if kind.source == "sync event" else "replay"
        assert crosscheck.FAMILIES[(source, kind.name)][0] == kind.family  # one place says where a rule goes


def test_explain_prints_a_runtime_kind():
    result = CliRunner().invoke(main, ["explain", "runtime/frozen-scalar"])  # the bare name is GL508's
    assert result.exit_code == 0
    assert "frozen-scalar (runtime replay hazard, rule family GL5)" in result.output
    for heading in ("## What it is", "## Why it breaks a CUDA graph", "## Example", "## Use instead"):
        assert heading in result.output


def test_explain_still_prefers_rules_and_rejects_unknown_names():
    assert "GL508 frozen-scalar" in CliRunner().invoke(main, ["explain", "frozen-scalar"]).output
    assert "stale-input (runtime replay hazard" in CliRunner().invoke(main, ["explain", "stale-input"]).output
    result = CliRunner().invoke(main, ["explain", "no-such-kind"])
    assert result.exit_code == 2
    assert "unknown rule or runtime kind" in result.output
