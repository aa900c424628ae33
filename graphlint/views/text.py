"""The text view: findings grouped by file (`path:line:col CODE message`), the source line
with a marker under the flagged range, the fix, then counts. Rich colours on a terminal,
plain text otherwise."""
from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import TextIO

from rich.console import Console
from rich.markup import escape

from graphlint.report import Finding, Report


def _source_line(root: Path, finding: Finding, cache: dict[str, list[str]]) -> str | None:
    if finding.path not in cache:
        try:
            cache[finding.path] = (root / finding.path).read_text("utf-8").splitlines()
        except (OSError, UnicodeDecodeError):
            cache[finding.path] = []
    lines = cache[finding.path]
    return lines[finding.line - 1] if 0 < finding.line <= len(lines) else None


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
                    console.print(f"  [dim]{finding.line:>5} |[/] {escape(line)}")
                    console.print(f"  [dim]      |[/] {' ' * (finding.col - 1)}[{style}]{'^' * max(1, width)}[/]")
                if finding.reached_via:
                    console.print(f"  [dim]reached via:[/] {escape(' -> '.join(finding.reached_via))}")
                console.print(f"  [green]fix:[/] {escape(finding.fix)}")
            if shown:
                console.print()
        unresolved = getattr(static, "unresolved_calls", None) or []
        if unresolved and not quiet:
            # Reachable calls the call graph could not follow: the code behind them is not checked.
            console.print(f"[bold]unresolved reachable calls ({len(unresolved)}):[/] not followed, the code they "
                          "reach is not checked")
            for item in unresolved:
                console.print(f"  {escape(item['path'])}: {escape(item['caller'])}: [bold]{escape(item['call'])}[/]"
                              f" - {escape(item['reason'])}")
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
        parts.append(f"{files} file{'s' if files != 1 else ''} checked")
        parts.append(f"{summary['errors']} error{'s' if summary['errors'] != 1 else ''}")
        parts.append(f"{summary['warnings']} warning{'s' if summary['warnings'] != 1 else ''}")
        parts.append(f"{summary['suppressed']} suppressed")
    if summary.get("runtime_verdict"):
        parts.append(f"runtime {summary['runtime_verdict']}")
    console.print(f"[bold {verdict_style}]{summary['verdict'].upper()}[/]: " + ", ".join(parts))
