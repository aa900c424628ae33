"""The text view: findings grouped by file (`path:line:col CODE message`), the source line
with a marker under the flagged range, the fix, then counts. Rich colours on a terminal,
plain text otherwise."""
from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import TextIO

from rich.console import Console
from rich.markup import escape

from graphlint.analysis.source import SourceError, decode, split_lines
from graphlint.report import Finding, Report, read_regular


# A longer source line is shown as a window around the flagged range.
MAX_SHOWN = 160


def _source_line(root: Path, finding: Finding, cache: dict[str, list[str]]) -> str | None:
    if finding.path not in cache:
        try:
            # Decoded and numbered as Python does, so the caret is under the flagged line.
            cache[finding.path] = split_lines(decode(read_regular(root / finding.path)))
        except (OSError, SourceError):
            cache[finding.path] = []
    lines = cache[finding.path]
    return lines[finding.line - 1] if 0 < finding.line <= len(lines) else None


def _window(line: str, col: int, width: int) -> tuple[str, int, int]:
    """(shown text, caret column, caret width): a long line cut to MAX_SHOWN characters around
    the flagged range, so 20,000 findings on one long line do not print it 20,000 times."""
    if len(line) <= MAX_SHOWN:
        return line, col, width
    width = min(width, MAX_SHOWN - 8)
    start = max(0, min(col - 1 - (MAX_SHOWN - width) // 2, len(line) - MAX_SHOWN))
    shown = line[start:start + MAX_SHOWN]
    prefix = "..." if start else ""
    suffix = "..." if start + MAX_SHOWN < len(line) else ""
    return prefix + shown + suffix, col - start + len(prefix), width


def render(report: Report, stream: TextIO, root: Path, quiet: bool = False, statistics: bool = False,
           show_suppressed: bool = False, color: bool | None = None) -> None:
    console = Console(file=stream, highlight=False, soft_wrap=True,
                      force_terminal=color, no_color=color is False, width=200 if not stream.isatty() else None)
    static = report.static
    if static is not None:
        shown = [f for f in static.findings if show_suppressed or not f.suppressed]
        sources: dict[str, list[str]] = {}
        current = None
        if not quiet:
            for finding in shown:
                if finding.path != current:
                    if current is not None:
                        console.print()
                    console.print(f"[bold underline]{escape(finding.path)}[/]")
                    current = finding.path
                style = "red" if finding.severity == "error" else "yellow"
                tag = " [dim](suppressed)[/]" if finding.suppressed else ""
                console.print(f"{escape(finding.path)}:{finding.line}:{finding.col} "
                              f"[bold {style}]{finding.rule}[/] {escape(finding.message)} "
                              f"[dim]\\[{finding.name}][/]{tag}")
                line = _source_line(root, finding, sources)
                if line is not None:
                    width = (finding.end_col - finding.col) if finding.end_line == finding.line else len(line) - finding.col + 1
                    line, col, width = _window(line, finding.col, max(1, width))
                    console.print(f"  [dim]{finding.line:>5} |[/] {escape(line)}")
                    console.print(f"  [dim]      |[/] {' ' * (col - 1)}[{style}]{'^' * width}[/]")
                if finding.reached_via:
                    console.print(f"  [dim]reached via:[/] {escape(' -> '.join(finding.reached_via))}")
                console.print(f"  [green]fix:[/] {escape(finding.fix)}")
            if shown:
                console.print()
        if statistics:
            counts = Counter((f.rule, f.name) for f in static.findings if not f.suppressed)
            for (code, name), count in sorted(counts.items()):
                console.print(f"{count:>6}  {code}  {name}")
    if report.runtime is not None:
        from graphlint.runtime.render import render_runtime

        render_runtime(report.runtime, console)
    for error in report.errors:
        console.print(f"[bold red]error:[/] {escape(error)}")
    summary = report.summary()
    files = len(static.files) if static is not None else 0
    verdict_style = "green" if summary["verdict"] == "pass" else "red"
    parts = []
    if static is not None:
        skipped = static.extra.get("skipped_unparsed")
        unparsed = ""
        if isinstance(skipped, dict) and isinstance(skipped.get("files"), int) and skipped["files"]:
            unparsed = f" ({skipped['files']} skipped unparsed: {escape(str(skipped.get('reason', '')))})"
        parts.append(f"{files} file{'s' if files != 1 else ''} checked{unparsed}")
        parts.append(f"{summary['errors']} error{'s' if summary['errors'] != 1 else ''}")
        parts.append(f"{summary['warnings']} warning{'s' if summary['warnings'] != 1 else ''}")
        parts.append(f"{summary['suppressed']} suppressed")
    if summary.get("runtime_verdict"):
        parts.append(f"runtime {summary['runtime_verdict']}")
    console.print(f"[bold {verdict_style}]{summary['verdict'].upper()}[/]: " + ", ".join(parts))
