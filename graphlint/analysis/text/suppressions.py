"""Inline suppressions, as ruff has them: `# graphlint: ignore[GL101]`, `# graphlint: ignore[item-call]
-- reason`, `# noqa: GL101` or `# noqa: item-call` (on the flagged line or on the first line of its
statement), a bare `# noqa` (every rule on the line), and the file-level `# graphlint: noqa` (every
rule) or `# graphlint: noqa: GL101,item-call` on a line of its own, as ruff's `# ruff: noqa`.
Read from the tokenizer's comments (as ruff reads noqa comments), never from inside string literals."""
from __future__ import annotations

import io
import re
import tokenize
from dataclasses import dataclass

from graphlint.analysis.text.source import split_lines

_GRAPHLINT = re.compile(r"#\s*graphlint:\s*ignore(?:\[(?P<codes>[^\]]*)\])?(?:\s*--\s*(?P<reason>.*))?")
# `\b`: `# noqa_x` is not a noqa; the code list is ruff's (commas or spaces) plus rule names.
_NOQA = re.compile(r"#\s*noqa\b(?::(?P<codes>[^#]*))?", re.IGNORECASE)
_FILE_NOQA = re.compile(r"#\s*graphlint:\s*noqa\b(?::(?P<codes>[^#]*))?", re.IGNORECASE)
# A token of a noqa list: a code as ruff writes them (E501, BLE001, GL101) or a name (item-call).
_CODE_SHAPE = re.compile(r"[A-Za-z]+[0-9]+[A-Za-z0-9]*")
_NAME_SHAPE = re.compile(r"[a-z][a-z0-9]*(?:-[a-z0-9]+)+")
_OWN_CODE = re.compile(r"GL[0-9][A-Z0-9]*", re.IGNORECASE)
# Every marker holds one of these words: where none appears after a point, no comment after it
# can suppress anything, and tokenizing (the cost of a scan) stops there.
_MARKER_WORD = re.compile(r"graphlint|noqa", re.IGNORECASE)


@dataclass(frozen=True)
class Suppression:
    line: int
    codes: tuple[str, ...]  # empty = every rule (bare `# graphlint: ignore`, bare `# noqa`)
    reason: str | None
    col: int
    file_level: bool = False  # `# graphlint: noqa`: every line of the file


def in_own_namespace(token: str) -> bool:
    """Whether a noqa token is graphlint's to judge: a GLnnn code or a rule-name-shaped token
    (lower-case words joined by hyphens). Other tools' codes (E501, BLE001) are theirs."""
    return bool(_OWN_CODE.fullmatch(token) or _NAME_SHAPE.fullmatch(token))


def _noqa_tokens(raw: str) -> list[str]:
    """The codes of a noqa list, as ruff reads it: the list ends at the first word that is
    neither a code nor a name (`# noqa: E501 - a long URL` lists E501 only)."""
    tokens = []
    for token in re.split(r"[,\s]+", raw.strip()):
        if not token:
            continue
        if not (_CODE_SHAPE.fullmatch(token) or _NAME_SHAPE.fullmatch(token)):
            break
        tokens.append(token)
    return tokens


def _from_comment(comment: str, number: int, offset: int, own_line: bool) -> list[Suppression]:
    """The suppressions in one comment token starting at 0-based column `offset`."""
    found = []
    for match in _GRAPHLINT.finditer(comment):
        codes = tuple(c.strip() for c in (match.group("codes") or "").split(",") if c.strip())
        reason = (match.group("reason") or "").strip() or None
        found.append(Suppression(number, codes, reason, offset + match.start() + 1))
    for match in _FILE_NOQA.finditer(comment):
        raw, _, reason = (match.group("codes") or "").partition("--")
        codes = tuple(_noqa_tokens(raw))
        if match.group("codes") is not None and not codes:
            continue  # `# graphlint: noqa: -- x` names nothing: not a blanket by accident
        if match.group("codes") is None:  # `# graphlint: noqa -- reason`
            reason = comment[match.end():].partition("--")[2]
        reason = reason.strip() or None
        # Trailing a statement it is that line's, as any noqa; on its own line, the file's.
        found.append(Suppression(number, codes, reason, offset + match.start() + 1, file_level=own_line))
    for match in _NOQA.finditer(comment):
        if comment[:match.start()].rstrip().lower().endswith("graphlint:"):
            continue  # the `noqa` of `# graphlint: noqa`, read above
        raw = match.group("codes")
        if raw is None:  # a bare `# noqa`: every rule on the line, as in ruff
            found.append(Suppression(number, (), None, offset + match.start() + 1))
            continue
        # Only graphlint's own codes and names: `# noqa: E501` is another linter's business.
        codes = tuple(token for token in _noqa_tokens(raw) if in_own_namespace(token))
        if codes:
            found.append(Suppression(number, codes, None, offset + match.start() + 1))
    return found


def scan(text: str) -> dict[int, list[Suppression]]:
    """Suppressions by line number (1-based), read from the comment tokens only, so a marker
    inside a string literal (`return x.item(), "# noqa: GL101"`) suppresses nothing. A file
    the tokenizer stops on keeps the suppressions found before that point (it is GL900 anyway)."""
    found: dict[int, list[Suppression]] = {}
    if "#" not in text:
        return found
    last = None
    for last in _MARKER_WORD.finditer(text):
        pass
    if last is None:
        return found  # most files: no marker word anywhere, so nothing to tokenize
    # The tokenizer numbers lines as readline splits them, at "\n"; a comment never spans lines.
    last_line = text.count("\n", 0, last.start()) + 1
    lines = split_lines(text)
    try:
        for token in tokenize.generate_tokens(io.StringIO(text).readline):
            if token.start[0] > last_line:
                break
            if token.type == tokenize.COMMENT and ("graphlint" in token.string or "noqa" in token.string.lower()):
                number, column = token.start
                line = lines[number - 1] if number <= len(lines) else ""
                own_line = not line[:column].strip()
                for item in _from_comment(token.string, number, column, own_line):
                    found.setdefault(number, []).append(item)
    except (tokenize.TokenError, SyntaxError):
        pass
    return found


def matches(suppression: Suppression, code: str, name: str) -> bool:
    if not suppression.codes:
        return True
    return any(c.upper() == code or c == name or (len(c) < len(code) and code.startswith(c.upper()))
               for c in suppression.codes)
