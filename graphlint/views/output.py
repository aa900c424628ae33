"""Write a finished report in the chosen format (text, JSON, SARIF, GitHub annotations), to
stdout or atomically to a file: the one place every command hands its report to a view.
"""
from __future__ import annotations

import io
import sys
from pathlib import Path

import click

from graphlint.report import Report, dumps, write_atomic


def render_report(report: Report, fmt: str, output: str | None, root: Path, quiet: bool = False,
                  statistics: bool = False, show_suppressed: bool = False) -> None:
    """Write the report in one format, to a file (atomically) or stdout."""
    if fmt == "json":
        text = dumps(report)
    elif fmt == "sarif":
        from graphlint.views.sarif import to_sarif

        text = to_sarif(report)
    elif fmt == "github":
        from graphlint.views.github import to_annotations

        text = to_annotations(report)
    else:
        buffer = io.StringIO() if output else sys.stdout
        from graphlint.views.text import render

        render(report, buffer, root, quiet=quiet, statistics=statistics, show_suppressed=show_suppressed,
               color=None if not output else False)
        if not output:
            return
        text = buffer.getvalue()
    if output:
        write_atomic(output, text)
        summary = report.summary()
        click.echo(f"graphlint: wrote {output} ({summary['verdict']}: {summary['errors']} errors, "
                   f"{summary['warnings']} warnings)", err=True)
    else:
        sys.stdout.write(text)
