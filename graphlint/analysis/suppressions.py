"""Inline suppressions: `# graphlint: ignore[GL101]`, `# graphlint: ignore[item-call] -- reason`
and `# noqa: GL101`, on the flagged line or on the first line of its statement."""
from __future__ import annotations

import re
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


def scan(text: str) -> dict[int, list[Suppression]]:
    """Suppressions by line number (1-based). A regex over comment-bearing lines is enough:
    a false hit would need the marker inside a string on a flagged line."""
    found: dict[int, list[Suppression]] = {}
    for number, line in enumerate(split_lines(text), start=1):  # numbered as the tokenizer does
        if "#" not in line:
            continue
        for match in _GRAPHLINT.finditer(line):
            codes = tuple(c.strip() for c in (match.group("codes") or "").split(",") if c.strip())
            reason = (match.group("reason") or "").strip() or None
            found.setdefault(number, []).append(Suppression(number, codes, reason, match.start() + 1))
        for match in _NOQA.finditer(line):
            raw = match.group("codes")
            if raw is None:
                continue  # a bare `# noqa` belongs to other linters; graphlint needs a code
            codes = tuple(c.strip() for c in re.split(r"[,\s]+", raw) if c.strip().upper().startswith("GL"))
            if codes:
                found.setdefault(number, []).append(Suppression(number, codes, None, match.start() + 1))
    return found


def matches(suppression: Suppression, code: str, name: str) -> bool:
    if not suppression.codes:
        return True
    return any(c.upper() == code or c == name or (len(c) < len(code) and code.startswith(c.upper()))
               for c in suppression.codes)
