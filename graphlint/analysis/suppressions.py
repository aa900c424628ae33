"""Inline suppressions: `# graphlint: ignore[GL101]`, `# graphlint: ignore[item-call] -- reason`
and `# noqa: GL101`, on the flagged line or on the first line of its statement. Read from the
tokenizer's comments (as ruff reads noqa comments), never from inside string literals."""
from __future__ import annotations

import io
import re
import tokenize
from dataclasses import dataclass

from graphlint.analysis.source import split_lines

_GRAPHLINT = re.compile(r"#\s*graphlint:\s*ignore(?:\[(?P<codes>[^\]]*)\])?(?:\s*--\s*(?P<reason>.*))?")
_NOQA = re.compile(r"#\s*noqa(?::\s*(?P<codes>[A-Za-z0-9_,\s-]+))?", re.IGNORECASE)


@dataclass(frozen=True)
class Suppression:
    line: int
    codes: tuple[str, ...]  # empty = every rule (bare `# graphlint: ignore`)
    reason: str | None
    col: int


def _from_comment(comment: str, number: int, offset: int) -> list[Suppression]:
    """The suppressions in one comment token starting at 0-based column `offset`."""
    found = []
    for match in _GRAPHLINT.finditer(comment):
        codes = tuple(c.strip() for c in (match.group("codes") or "").split(",") if c.strip())
        reason = (match.group("reason") or "").strip() or None
        found.append(Suppression(number, codes, reason, offset + match.start() + 1))
    for match in _NOQA.finditer(comment):
        raw = match.group("codes")
        if raw is None:
            continue  # a bare `# noqa` belongs to other linters; graphlint needs a code
        codes = tuple(c.strip() for c in re.split(r"[,\s]+", raw) if c.strip().upper().startswith("GL"))
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
    try:
        for token in tokenize.generate_tokens(io.StringIO(text).readline):
            if token.type == tokenize.COMMENT and ("graphlint" in token.string or "noqa" in token.string.lower()):
                number, column = token.start
                for item in _from_comment(token.string, number, column):
                    found.setdefault(number, []).append(item)
    except (tokenize.TokenError, SyntaxError):
        pass
    return found


def matches(suppression: Suppression, code: str, name: str) -> bool:
    if not suppression.codes:
        return True
    return any(c.upper() == code or c == name or (len(c) < len(code) and code.startswith(c.upper()))
               for c in suppression.codes)
