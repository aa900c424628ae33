"""Fingerprint findings so they can be recognised across edits, and gate against a baseline file.

A fingerprint is the rule, the path, the enclosing function, the normalised text of the flagged
statement and of the flagged expression, and an occurrence index among findings that share all
of those. Line numbers are not part of it, so moving code around, adding lines above it or
reformatting it (`ast.unparse` drops comments, whitespace and redundant parentheses) keeps it.
"""
from __future__ import annotations

import ast
import copy
import hashlib
import json
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Iterable, Sequence

from graphlint.report import Finding, StaticResult, read_json, write_atomic

SCHEMA = "graphlint-baseline/1"
DEFAULT_FILE = "graphlint-baseline.json"
BASELINE_REASON = "in baseline"

# Child statement lists of a compound statement: a finding in an `if` test is fingerprinted by
# the `if` header alone, so edits inside its body do not move it.
_BODIES = ("body", "orelse", "finalbody", "handlers", "cases")


class BaselineError(Exception):
    """An unreadable or malformed baseline file; the message names the file."""


# ---------------------------------------------------------------------------------------------
# fingerprints


class _Source:
    """One file's lines and statements, parsed once, for every finding in that file."""

    def __init__(self, text: str | None):
        self.lines = text.splitlines() if text is not None else []
        self.statements: list[tuple[int, int, int, int, int, ast.stmt]] = []  # (start, col, end, end_col, depth)
        if text is None:
            return
        try:
            tree = ast.parse(text)
        except (SyntaxError, ValueError, RecursionError):
            return
        self._collect(tree, 0)

    def _char_col(self, line: int, byte_col: int) -> int:
        # ast counts UTF-8 bytes; findings count characters (libcst).
        if 0 < line <= len(self.lines) and not self.lines[line - 1].isascii():
            return len(self.lines[line - 1].encode("utf-8")[:byte_col].decode("utf-8", "replace"))
        return byte_col

    def _collect(self, node: ast.AST, depth: int) -> None:
        # Statements live only in statement lists (bodies, handlers, match cases): no need to
        # walk expressions.
        for name in _BODIES:
            for child in getattr(node, name, None) or ():
                if isinstance(child, (ast.excepthandler, ast.match_case)):
                    self._collect(child, depth)
                    continue
                end_line = child.end_lineno or child.lineno
                self.statements.append((child.lineno, self._char_col(child.lineno, child.col_offset), end_line,
                                        self._char_col(end_line, child.end_col_offset or 0), depth, child))
                self._collect(child, depth + 1)

    def statement_text(self, finding: Finding) -> str:
        start, end = (finding.line, finding.col - 1), (finding.end_line, finding.end_col - 1)
        best: tuple[int, ast.stmt] | None = None
        for line, col, end_line, end_col, depth, node in self.statements:
            if (line, col) <= start and end <= (end_line, end_col) and (best is None or depth > best[0]):
                best = (depth, node)
        if best is None:
            return _squash(self.line(finding.line))
        node = copy.copy(best[1])
        for name in _BODIES:
            if getattr(node, name, None):
                setattr(node, name, [ast.Pass()] if name == "body" else [])
        try:
            return ast.unparse(node)
        except (ValueError, TypeError, AttributeError, RecursionError):
            return _squash(self.line(finding.line))

    def flagged_text(self, finding: Finding) -> str:
        if not 0 < finding.line <= finding.end_line <= len(self.lines):
            return ""
        chunk = self.lines[finding.line - 1:finding.end_line]
        # Cut the end first: on a one-line range both cuts apply to the same line.
        chunk[-1] = chunk[-1][:max(0, finding.end_col - 1)]
        chunk[0] = chunk[0][max(0, finding.col - 1):]
        text = "\n".join(chunk)
        try:
            return ast.unparse(ast.parse(text.strip(), mode="eval"))
        except (SyntaxError, ValueError, RecursionError):
            return _squash(text)

    def line(self, number: int) -> str:
        return self.lines[number - 1] if 0 < number <= len(self.lines) else ""


def _squash(text: str) -> str:
    return "".join(text.split())


def _read(root: Path, rel: str) -> str | None:
    try:
        return (root / rel).read_bytes().decode("utf-8")
    except (OSError, UnicodeDecodeError):
        return None


def _texts(source: _Source, finding: Any) -> tuple[str, str]:
    if finding.rule.startswith("GL9"):
        # graphlint's own findings (parse errors, bad suppressions) have no statement.
        return (_squash(source.line(finding.line)), "")
    return (source.statement_text(finding), source.flagged_text(finding))


# What the source half of a fingerprint depends on besides the file's text.
SPAN_FIELDS = ("rule", "line", "col", "end_line", "end_col")


def span(finding: Any) -> tuple:
    return tuple(getattr(finding, name) for name in SPAN_FIELDS)


def finding_texts(text: str | None, findings: Iterable[Any]) -> list[tuple[str, str]]:
    """The source half of each finding's fingerprint (its statement's and its own normalised
    text), for findings of one file with this text. The engine computes these along with the
    file's analysis, in its workers, and caches them with it."""
    source = _Source(text)
    return [_texts(source, finding) for finding in findings]


def fingerprint_findings(findings: Sequence[Finding], root: Path,
                         texts: dict[str, dict[tuple, tuple[str, str]]] | None = None) -> list[Finding]:
    """The same findings, in the same order, each with `fingerprint` set from the source under
    `root`. A file that cannot be read or parsed falls back to its flagged line's text.
    `texts` (path -> span -> texts, from `finding_texts`) saves reading and parsing files."""
    sources: dict[str, _Source] = {}
    keys: list[str] = []
    for finding in findings:
        text = (texts or {}).get(finding.path, {}).get(span(finding))
        if text is None:
            source = sources.get(finding.path)
            if source is None:
                source = sources[finding.path] = _Source(_read(root, finding.path))
            text = _texts(source, finding)
        keys.append("\0".join((finding.rule, finding.path, finding.function or "", *text)))
    # Occurrence index: identical keys are numbered in source order.
    order = sorted(range(len(findings)), key=lambda i: (findings[i].path, findings[i].line, findings[i].col))
    seen: dict[str, int] = {}
    prints: list[str] = [""] * len(findings)
    for index in order:
        occurrence = seen.get(keys[index], 0)
        seen[keys[index]] = occurrence + 1
        digest = hashlib.sha256(f"{keys[index]}\0{occurrence}".encode("utf-8")).hexdigest()[:20]
        prints[index] = digest
    return [replace(finding, fingerprint=fp) for finding, fp in zip(findings, prints)]


def ensure_fingerprints(findings: Sequence[Finding], root: Path) -> list[Finding]:
    """Fingerprint findings that lack one (a report written by an older graphlint)."""
    if all(f.fingerprint for f in findings):
        return list(findings)
    return fingerprint_findings(findings, root)


# ---------------------------------------------------------------------------------------------
# the baseline file


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
