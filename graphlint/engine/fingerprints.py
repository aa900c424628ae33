"""Fingerprints of findings, so a finding is recognised across edits (baselines, `--diff`).

A fingerprint is the rule, the path, the enclosing function, the normalised text of the flagged
statement and of the flagged expression, and an occurrence index among findings that share all
of those. Line numbers are not part of it, so moving code around, adding lines above it or
reformatting it (`ast.unparse` drops comments, whitespace and redundant parentheses) keeps it.
"""
from __future__ import annotations

import ast
import copy
import hashlib
from dataclasses import replace
from pathlib import Path
from typing import Any, Iterable, Sequence

from graphlint.report import Finding

# Child statement lists of a compound statement: a finding in an `if` test is fingerprinted by
# the `if` header alone, so edits inside its body do not move it.
_BODIES = ("body", "orelse", "finalbody", "handlers", "cases")



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
