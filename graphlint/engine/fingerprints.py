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
from bisect import bisect_right
from dataclasses import replace
from itertools import accumulate
from pathlib import Path
from typing import Any, Sequence

from graphlint.analysis.text.source import SourceError, decode, split_lines
from graphlint.report import Finding, read_regular

# Child statement lists of a compound statement: a finding in an `if` test is fingerprinted by
# the `if` header alone, so edits inside its body do not move it.
_BODIES = ("body", "orelse", "finalbody", "handlers", "cases")

# (line, col, end_line, end_col, node): a statement's range in characters, 1-based lines.
_Statement = tuple[int, int, int, int, ast.stmt]


class _Source:
    """One file's lines and statements, parsed once, for every finding in that file. Each
    finding's statement is found by one sweep over statements and findings in source order and
    each statement is unparsed once, so the cost grows with the file plus the findings, not with
    their product."""

    def __init__(self, text: str | None, parse: bool = True):
        self.lines = split_lines(text) if text is not None else []
        self.statements: list[_Statement] = []  # in source order, a parent before its children
        self._offsets: dict[int, list[int]] = {}
        self._unparsed: dict[int, str | None] = {}
        if text is None or not parse:
            return
        try:
            self._collect(ast.parse(text))
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            self.statements = []

    def _char_col(self, line: int, byte_col: int) -> int:
        # ast counts UTF-8 bytes; findings count characters (libcst).
        if not 0 < line <= len(self.lines) or self.lines[line - 1].isascii():
            return byte_col
        offsets = self._offsets.get(line)
        if offsets is None:  # once per line: the byte offset after each character
            offsets = self._offsets[line] = list(accumulate(len(ch.encode("utf-8", "surrogatepass"))
                                                            for ch in self.lines[line - 1]))
        return bisect_right(offsets, byte_col)

    def _collect(self, node: ast.AST) -> None:
        # Statements live only in statement lists (bodies, handlers, match cases): no need to
        # walk expressions.
        for name in _BODIES:
            for child in getattr(node, name, None) or ():
                if isinstance(child, (ast.excepthandler, ast.match_case)):
                    self._collect(child)
                    continue
                end_line = child.end_lineno or child.lineno
                self.statements.append((child.lineno, self._char_col(child.lineno, child.col_offset), end_line,
                                        self._char_col(end_line, child.end_col_offset or 0), child))
                self._collect(child)

    def statement_texts(self, findings: Sequence[Any]) -> list[str]:
        """The normalised text of the innermost statement holding each finding's whole range
        (the flagged line's text where none does)."""
        order = sorted(range(len(findings)), key=lambda k: (findings[k].line, findings[k].col))
        texts = [""] * len(findings)
        around: list[_Statement] = []  # the statements open at the sweep position, outermost first
        following = 0
        for k in order:
            finding = findings[k]
            start, end = (finding.line, finding.col - 1), (finding.end_line, finding.end_col - 1)
            while following < len(self.statements) and self.statements[following][:2] <= start:
                statement = self.statements[following]
                while around and around[-1][2:4] < statement[:2]:
                    around.pop()  # ended before this one began
                around.append(statement)
                following += 1
            while around and around[-1][2:4] < start:
                around.pop()
            best = next((st for st in reversed(around) if end <= st[2:4]), None)
            text = self._unparse(best[4]) if best is not None else None
            texts[k] = text if text is not None else _squash(self.line(finding.line))
        return texts

    def _unparse(self, node: ast.stmt) -> str | None:
        key = id(node)
        if key not in self._unparsed:
            header = copy.copy(node)
            for name in _BODIES:
                if getattr(header, name, None):
                    setattr(header, name, [ast.Pass()] if name == "body" else [])
            try:
                self._unparsed[key] = ast.unparse(header)
            except (ValueError, TypeError, AttributeError, RecursionError):
                self._unparsed[key] = None
        return self._unparsed[key]

    def flagged_text(self, finding: Any) -> str:
        if not 0 < finding.line <= finding.end_line <= len(self.lines):
            return ""
        if finding.line == finding.end_line:  # slice the range alone, never copy a long line
            text = self.lines[finding.line - 1][max(0, finding.col - 1):max(0, finding.end_col - 1)]
        else:
            chunk = self.lines[finding.line - 1:finding.end_line]
            chunk[-1] = chunk[-1][:max(0, finding.end_col - 1)]
            chunk[0] = chunk[0][max(0, finding.col - 1):]
            text = "\n".join(chunk)
        try:
            return ast.unparse(ast.parse(text.strip(), mode="eval"))
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            return _squash(text)

    def line(self, number: int) -> str:
        return self.lines[number - 1] if 0 < number <= len(self.lines) else ""

    def texts(self, findings: Sequence[Any]) -> list[tuple[str, str]]:
        """(statement text, flagged text) per finding; graphlint's own findings (parse errors,
        bad suppressions) have no statement."""
        out: list[tuple[str, str]] = [("", "")] * len(findings)
        theirs = []
        for index, finding in enumerate(findings):
            if finding.rule.startswith("GL9"):
                out[index] = (_squash(self.line(finding.line)), "")
            else:
                theirs.append(index)
        for index, statement in zip(theirs, self.statement_texts([findings[i] for i in theirs])):
            out[index] = (statement, self.flagged_text(findings[index]))
        return out


def _squash(text: str) -> str:
    return "".join(text.split())


# The fallback reads a file only to fingerprint findings the cache did not give texts for; a
# file larger than this (one over max-file-size) or not a regular file is not read.
_MAX_READ = 16 * 1024 * 1024


def _read(root: Path, rel: str) -> str | None:
    try:
        return decode(read_regular(root / rel, _MAX_READ))
    except (OSError, SourceError):
        return None


# What the source half of a fingerprint depends on besides the file's text.
SPAN_FIELDS = ("rule", "line", "col", "end_line", "end_col")


def span(finding: Any) -> tuple:
    return tuple(getattr(finding, name) for name in SPAN_FIELDS)


def finding_texts(text: str | None, findings: Sequence[Any]) -> list[tuple[str, str]]:
    """The source half of each finding's fingerprint (its statement's and its own normalised
    text), for findings of one file with this text. The engine computes these along with the
    file's analysis, in its workers, and caches them with it."""
    return _Source(text).texts(list(findings))


def fingerprint_findings(findings: Sequence[Finding], root: Path,
                         texts: dict[str, dict[tuple, tuple[str, str]]] | None = None) -> list[Finding]:
    """The same findings, in the same order, each with `fingerprint` set from the source under
    `root`. A file that cannot be read or parsed falls back to its flagged line's text.
    `texts` (path -> span -> texts, from `finding_texts`) saves reading and parsing files."""
    found: list[tuple[str, str] | None] = [(texts or {}).get(f.path, {}).get(span(f)) for f in findings]
    missing: dict[str, list[int]] = {}
    for index, text in enumerate(found):
        if text is None:
            missing.setdefault(findings[index].path, []).append(index)
    for path, indices in missing.items():  # each file read and parsed once
        group = [findings[i] for i in indices]
        # graphlint's own findings need a line, not a parse (the file may not parse, or be huge).
        source = _Source(_read(root, path), parse=any(not f.rule.startswith("GL9") for f in group))
        for index, text in zip(indices, source.texts(group)):
            found[index] = text
    # A key is (rule, path, function, statement text, flagged text); the digest is the SHA-256 of
    # those joined by NULs, then the occurrence. The hash state after the statement is shared by
    # the findings of one statement, so a long statement is hashed once, not once per finding.
    keys = [(f.rule, f.path, f.function or "", *text) for f, text in zip(findings, found)]  # type: ignore[misc]
    # Occurrence index: identical keys are numbered in source order.
    order = sorted(range(len(findings)), key=lambda i: (findings[i].path, findings[i].line, findings[i].col))
    seen: dict[tuple, int] = {}
    states: dict[tuple, Any] = {}
    prints: list[str] = [""] * len(findings)
    for index in order:
        key = keys[index]
        occurrence = seen.get(key, 0)
        seen[key] = occurrence + 1
        state = states.get(key[:4])
        if state is None:
            state = states[key[:4]] = hashlib.sha256(("\0".join(key[:4]) + "\0").encode("utf-8"))
        digest = state.copy()
        digest.update(f"{key[4]}\0{occurrence}".encode("utf-8"))
        prints[index] = digest.hexdigest()[:20]
    return [replace(finding, fingerprint=fp) for finding, fp in zip(findings, prints)]


def ensure_fingerprints(findings: Sequence[Finding], root: Path) -> list[Finding]:
    """Fingerprint findings that lack one (a report written by an older graphlint)."""
    if all(f.fingerprint for f in findings):
        return list(findings)
    return fingerprint_findings(findings, root)
