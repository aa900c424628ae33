"""The baseline file: the findings accepted at one point in time, by fingerprint, and the
outcome of checking against it (new findings fail; findings fixed since are listed).

Fingerprints themselves (rule, path, function, normalised statement text, occurrence) are made
in `graphlint.engine.fingerprints`.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Iterable

from graphlint.engine.fingerprints import ensure_fingerprints
from graphlint.report import Finding, StaticResult, read_json, write_atomic

SCHEMA = "graphlint-baseline/1"
DEFAULT_FILE = "graphlint-baseline.json"
BASELINE_REASON = "in baseline"


class BaselineError(Exception):
    """An unreadable or malformed baseline file; the message names the file."""


@dataclass
class Baseline:
    """The findings accepted at one point in time, by fingerprint."""

    entries: dict[str, dict[str, Any]] = field(default_factory=dict)
    source: str = ""

    @classmethod
    def from_findings(cls, findings: Iterable[Finding]) -> "Baseline":
        entries = {}
        for f in findings:
            if f.suppressed or not f.fingerprint:
                continue
            entries[f.fingerprint] = {"fingerprint": f.fingerprint, "rule": f.rule, "name": f.name, "path": f.path,
                                      "function": f.function, "line": f.line, "message": f.message}
        return cls(entries)

    def to_json(self, tool_version: str) -> str:
        ordered = sorted(self.entries.values(), key=lambda e: (e["path"], e["line"], e["rule"], e["fingerprint"]))
        data = {"schema": SCHEMA, "tool": {"name": "graphlint", "version": tool_version},
                "comment": "Findings accepted when this file was written; `graphlint check --baseline` "
                           "fails only on findings not listed here. Regenerate with `graphlint baseline write`.",
                "findings": ordered}
        return json.dumps(data, indent=2) + "\n"


def write(path: str | Path, findings: Iterable[Finding], tool_version: str) -> Baseline:
    baseline = Baseline.from_findings(findings)
    write_atomic(path, baseline.to_json(tool_version))
    return baseline


def load(path: str | Path) -> Baseline:
    """Read a baseline file; raises BaselineError with the file name for anything wrong."""
    data = read_json(path, BaselineError, "baseline file", " (write one with `graphlint baseline write`)")
    if not isinstance(data, dict) or data.get("schema") != SCHEMA:
        found = data.get("schema") if isinstance(data, dict) else type(data).__name__
        raise BaselineError(f"{path}: not a graphlint baseline (schema {found!r}, expected {SCHEMA!r})")
    items = data.get("findings")
    if not isinstance(items, list) or not all(isinstance(e, dict) and isinstance(e.get("fingerprint"), str)
                                              for e in items):
        raise BaselineError(f"{path}: 'findings' must be a list of objects with a 'fingerprint'")
    for index, entry in enumerate(items):
        # What `describe` prints and sorts by: a wrong type would fail there, far from the file.
        for name, types in (("path", (str,)), ("rule", (str,)), ("function", (str,)), ("message", (str,)),
                            ("name", (str,)), ("line", (int,))):
            value = entry.get(name)
            if value is not None and (not isinstance(value, types) or isinstance(value, bool)):
                raise BaselineError(f"{path}: findings[{index}].{name} must be "
                                    f"{'an integer' if types == (int,) else 'a string'}, got {value!r:.60}")
    return Baseline({e["fingerprint"]: e for e in items}, source=str(path))


# ---------------------------------------------------------------------------------------------
# applying a baseline


@dataclass
class Outcome:
    """What a baseline did to one report: how many findings were new or already known, and
    which known ones are gone (fixed, or now suppressed inline) so the file can shrink."""

    file: str
    new: int
    unchanged: int
    fixed: list[dict[str, Any]]

    def to_dict(self) -> dict[str, Any]:
        return {"file": self.file, "new": self.new, "unchanged": self.unchanged, "fixed": self.fixed}


def apply(static: StaticResult, baseline: Baseline, root: Path) -> Outcome:
    """Mark findings listed in the baseline as suppressed (reason: in baseline), in place, and
    record the outcome under `static.extra["baseline"]`. Entries count as fixed only for files
    that this report checked, so a check of a few files does not call the rest fixed."""
    findings = ensure_fingerprints(static.findings, root)
    matched: set[str] = set()
    new = 0
    updated: list[Finding] = []
    for finding in findings:
        if not finding.suppressed and finding.fingerprint in baseline.entries:
            matched.add(finding.fingerprint)
            finding = replace(finding, suppressed=True, suppression_reason=BASELINE_REASON)
        elif not finding.suppressed:
            new += 1
        updated.append(finding)
    static.findings = updated
    checked = set(static.files)
    fixed = [entry for fp, entry in baseline.entries.items()
             if fp not in matched and entry.get("path") in checked]
    fixed.sort(key=lambda e: (str(e.get("path")), e.get("line") or 0, str(e.get("rule"))))
    outcome = Outcome(file=baseline.source, new=new, unchanged=len(matched), fixed=fixed)
    static.extra["baseline"] = outcome.to_dict()
    return outcome


def describe(outcome: Outcome) -> list[str]:
    """Lines for the terminal: the counts, then each fixed entry."""
    lines = [f"baseline {outcome.file}: {outcome.new} new, {outcome.unchanged} unchanged, "
             f"{len(outcome.fixed)} fixed"]
    for entry in outcome.fixed:
        where = f"{entry.get('path')}:{entry.get('line')}"
        lines.append(f"  fixed: {where} {entry.get('rule')} in {entry.get('function') or '<module>'}: "
                     f"{entry.get('message', '')}")
    if outcome.fixed:
        lines.append("  (run `graphlint baseline write` to shrink the baseline)")
    return lines
