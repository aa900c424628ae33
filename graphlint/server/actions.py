"""Code actions on a finding: insert a suppression comment with a reason placeholder on the
flagged line (added to a `# graphlint: ignore[...]` already there), and open the rule's docs."""
from __future__ import annotations

import re

from lsprotocol import types

from graphlint.analysis.text import suppressions
from graphlint.analysis.text.source import split_lines
from graphlint.server.diagnostics import utf16_column

SHOW_DOCS = "graphlint.showRuleDocs"
REASON_PLACEHOLDER = "TODO: why this is safe"
_IGNORE = re.compile(r"#\s*graphlint:\s*ignore\[(?P<codes>[^\]]*)\]")


def _overlaps(diagnostic: types.Diagnostic, span: types.Range) -> bool:
    start, end = diagnostic.range.start, diagnostic.range.end
    return (start.line, start.character) <= (span.end.line, span.end.character) and \
        (span.start.line, span.start.character) <= (end.line, end.character)


def suppression_edit(text: str, line_number: int, code: str) -> types.TextEdit:
    """The edit that suppresses `code` on 1-based `line_number`."""
    lines = split_lines(text)
    line = lines[line_number - 1] if 0 < line_number <= len(lines) else ""
    existing = _IGNORE.search(line)
    comments = {item.col for item in suppressions.scan(text).get(line_number, [])}
    if existing is not None and existing.start() + 1 in comments:  # a comment, not text in a string
        codes = [c.strip() for c in existing.group("codes").split(",") if c.strip()]
        column = existing.end("codes")
        insert = f", {code}" if codes else code
        position = types.Position(line_number - 1, utf16_column(line, column))
        return types.TextEdit(types.Range(position, position), insert)
    end = types.Position(line_number - 1, utf16_column(line, len(line)))
    return types.TextEdit(types.Range(end, end), f"  # graphlint: ignore[{code}] -- {REASON_PLACEHOLDER}")


def code_actions(uri: str, text: str, diagnostics: list[types.Diagnostic],
                 span: types.Range) -> list[types.CodeAction | types.Command]:
    actions: list[types.CodeAction | types.Command] = []
    seen_docs: set[str] = set()
    for diagnostic in diagnostics:
        if not diagnostic.code or not _overlaps(diagnostic, span):
            continue
        code = str(diagnostic.code)
        data = diagnostic.data if isinstance(diagnostic.data, dict) else {}
        line = int(data.get("line") or diagnostic.range.start.line + 1)
        actions.append(types.CodeAction(
            title=f"Suppress {code} ({data.get('name', code)}) on this line",
            kind=types.CodeActionKind.QuickFix, diagnostics=[diagnostic],
            edit=types.WorkspaceEdit(changes={uri: [suppression_edit(text, line, code)]})))
        if code not in seen_docs:
            seen_docs.add(code)
            # A bare Command, which LSP allows among code actions: a CodeAction that carries a
            # command is read back as a Command by lsprotocol-based clients anyway.
            actions.append(types.Command(title=f"Show documentation for {code}", command=SHOW_DOCS, arguments=[code]))
    return actions
