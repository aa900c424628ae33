"""Write a finished report in the chosen format (text, JSON, SARIF, GitHub annotations, GitLab
code quality, JUnit), to stdout or atomically to a file: the one place every command hands its
report to a view. A closed stdout (a pager or `head` that quit) ends the output quietly.
"""
from __future__ import annotations

import io
import sys
from pathlib import Path
from typing import Sequence

import click

from graphlint.exits import fail
from graphlint.report import OutputError, Report, dumps, write_atomic


def write_output(output: str, text: str, protect: Sequence[str | Path] = ()) -> None:
    """Write a report file (atomically); exit 2 with the reason when it cannot be written."""
    try:
        write_atomic(output, text, protect)
    except OutputError as error:
        fail(str(error))
    except OSError as error:
        fail(f"{output}: cannot write the report: {error.strerror or error}")


def linted_files(report: Report, root: Path) -> list[Path]:
    """The files a report's static half read: an output path must never replace one of them."""
    return [root / name for name in report.static.files] if report.static is not None else []


def silence_stdout() -> None:
    """The reader of stdout went away (`graphlint rules | head -1`): stop writing, quietly.
    Pointing the descriptor at /dev/null keeps the interpreter's last flush from failing."""
    import os

    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass


def render_report(report: Report, fmt: str, output: str | None, root: Path, quiet: bool = False,
                  statistics: bool = False, show_suppressed: bool = False, color: bool | None = None,
                  sources: dict[str, str] | None = None) -> None:
    """Write the report in one format, to a file (atomically) or stdout; a closed stdout
    (a pager or `head` that quit) ends the output quietly."""
    try:
        _render_report(report, fmt, output, root, quiet, statistics, show_suppressed, color, sources)
    except BrokenPipeError:
        silence_stdout()


def _render_report(report: Report, fmt: str, output: str | None, root: Path, quiet: bool, statistics: bool,
                   show_suppressed: bool, color: bool | None, sources: dict[str, str] | None) -> None:
    if fmt == "json":
        text = dumps(report)
    elif fmt == "sarif":
        from graphlint.views.sarif import to_sarif

        text = to_sarif(report)
    elif fmt == "github":
        from graphlint.views.github import to_annotations

        text = to_annotations(report)
    elif fmt == "gitlab":
        from graphlint.views.gitlab import to_code_quality

        text = to_code_quality(report)
    elif fmt == "junit":
        from graphlint.views.junit import to_junit

        text = to_junit(report)
    else:
        buffer = io.StringIO() if output else sys.stdout
        from graphlint.views.text import render

        render(report, buffer, root, quiet=quiet, statistics=statistics, show_suppressed=show_suppressed,
               color=color if not output else False, sources=sources)
        if not output:
            return
        text = buffer.getvalue()
    if output:
        write_output(output, text, linted_files(report, root))
        summary = report.summary()
        click.echo(f"graphlint: wrote {output} ({summary['verdict']}: {summary['errors']} errors, "
                   f"{summary['warnings']} warnings)", err=True)
    else:
        sys.stdout.write(text)
