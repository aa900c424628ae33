"""Findings as LSP diagnostics: 1-based code-point columns to 0-based UTF-16 positions (what
LSP counts by default), severities mapped, the rule code linked to its documentation, and
the finding kept in `data` for hovers and quick fixes."""
from __future__ import annotations

from lsprotocol import types

from graphlint.report import Finding

SOURCE = "graphlint"
SEVERITY = {"error": types.DiagnosticSeverity.Error, "warning": types.DiagnosticSeverity.Warning}


def utf16_column(line: str, column: int) -> int:
    """The UTF-16 offset of code-point offset `column` in `line` (clamped to the line)."""
    return len(line[:max(0, column)].encode("utf-16-le")) // 2


def finding_range(finding: Finding, lines: list[str]) -> types.Range:
    """The flagged range; a finding without one (a file-level finding) covers its whole line."""
    def text(number: int) -> str:
        return lines[number - 1] if 0 < number <= len(lines) else ""

    start_line = max(finding.line, 1)
    end_line = max(finding.end_line or start_line, start_line)
    start = utf16_column(text(start_line), (finding.col or 1) - 1)
    end = utf16_column(text(end_line), (finding.end_col or 1) - 1)
    if (end_line, end) <= (start_line, start):  # zero width: mark the line's code
        line = text(start_line)
        start, end = utf16_column(line, len(line) - len(line.lstrip())), utf16_column(line, len(line))
    return types.Range(types.Position(start_line - 1, start), types.Position(end_line - 1, end))


def to_diagnostic(finding: Finding, lines: list[str], docs_uri: str | None) -> types.Diagnostic:
    return types.Diagnostic(
        range=finding_range(finding, lines),
        message=f"{finding.message} [{finding.name}]",
        severity=SEVERITY.get(finding.severity, types.DiagnosticSeverity.Warning),
        code=finding.rule,
        code_description=types.CodeDescription(href=docs_uri) if docs_uri else None,
        source=SOURCE,
        data={"rule": finding.rule, "name": finding.name, "fix": finding.fix, "line": finding.line,
              "region": finding.region},
    )


def to_diagnostics(findings: list[Finding], text: str, docs_uri) -> list[types.Diagnostic]:
    """Unsuppressed findings only, as `check` reports them; `docs_uri(code)` links each rule."""
    from graphlint.analysis.text.source import split_lines

    lines = split_lines(text)
    return [to_diagnostic(finding, lines, docs_uri(finding.rule)) for finding in findings if not finding.suppressed]


def error_diagnostic(message: str) -> types.Diagnostic:
    """A config that cannot be read: said on the first line, since nothing was checked."""
    return types.Diagnostic(range=types.Range(types.Position(0, 0), types.Position(0, 0)),
                            message=f"graphlint: {message}", severity=types.DiagnosticSeverity.Error, source=SOURCE)
