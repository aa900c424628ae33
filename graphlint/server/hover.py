"""Hover on a flagged range: the finding's message and fix, then its rule's documentation."""
from __future__ import annotations

from lsprotocol import types

from graphlint.server.docs import rule_markdown


def _contains(diagnostic: types.Diagnostic, position: types.Position) -> bool:
    start, end = diagnostic.range.start, diagnostic.range.end
    return (start.line, start.character) <= (position.line, position.character) <= (end.line, end.character)


def hover(diagnostics: list[types.Diagnostic], position: types.Position) -> types.Hover | None:
    """The hover for the diagnostics under `position`, or None where there is none."""
    parts = []
    hit = [d for d in diagnostics if _contains(d, position) and d.code]
    for diagnostic in hit:
        data = diagnostic.data if isinstance(diagnostic.data, dict) else {}
        docs = rule_markdown(str(diagnostic.code)) or ""
        parts.append(f"**{diagnostic.code}** {diagnostic.message}\n\nfix: {data.get('fix', '')}\n\n---\n\n{docs}")
    if not parts:
        return None
    return types.Hover(contents=types.MarkupContent(kind=types.MarkupKind.Markdown, value="\n\n".join(parts)),
                       range=hit[0].range)
