"""Write a finished report in the chosen format (text, JSON, SARIF, GitHub annotations, GitLab
code quality, JUnit), to stdout or atomically to a file: the one place every command hands its
report to a view. A closed stdout (a pager or `head` that quit) ends the output quietly.
"""
from __future__ import annotations

import io
import os
import sys
from pathlib import Path
from typing import Sequence

import click

from graphlint.io.exits import fail
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


def target_source(spec: str | None) -> list[Path]:
    """The file a runtime target names (`path/to/file.py:callable`); none for a module path."""
    if not spec or ":" not in spec:
        return []
    path = spec.rpartition(":")[0]
    return [Path(path)] if path.endswith(".py") else []


def runtime_sources(runtime: dict | None) -> list[Path]:
    """The files a runtime half ran: the target's file, its step's file and every file it
    executed (relative ones from the current folder, as the harness records them)."""
    if not isinstance(runtime, dict):
        return []
    target = runtime.get("target") if isinstance(runtime.get("target"), dict) else {}
    entry = target.get("entry") if isinstance(target.get("entry"), dict) else {}
    spec = target.get("spec")
    names = [entry.get("path"), *(entry.get("files") or []), *(runtime.get("executed") or {})]
    return [*target_source(spec if isinstance(spec, str) else None),
            *(Path(name) for name in names if isinstance(name, str) and name.endswith(".py"))]


def protected_files(report: Report, root: Path) -> list[Path]:
    """Every source a report was made from: an output path never replaces one of them."""
    return [*linted_files(report, root), *runtime_sources(report.runtime)]


def refuse_output(output: str | None, protect: Sequence[str | Path]) -> None:
    """Exit 2 before any work when `output` is (or links to) one of the files in `protect`,
    so a long runtime run never ends by overwriting its own target."""
    if not output:
        return
    target = os.path.realpath(output)
    for source in protect:
        try:
            same = os.path.samefile(target, source)
        except OSError:
            same = False
        if same:
            fail(f"{output}: refusing to overwrite a source file ({source}) with the report")


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
        from graphlint.views.ci.sarif import to_sarif

        text = to_sarif(report)
    elif fmt == "github":
        from graphlint.views.ci.github import to_annotations

        text = to_annotations(report)
    elif fmt == "gitlab":
        from graphlint.views.ci.gitlab import to_code_quality

        text = to_code_quality(report)
    elif fmt == "junit":
        from graphlint.views.ci.junit import to_junit

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
        write_output(output, text, protected_files(report, root))
        summary = report.summary()
        click.echo(f"graphlint: wrote {output} ({summary['verdict']}: {summary['errors']} errors, "
                   f"{summary['warnings']} warnings)", err=True)
    else:
        sys.stdout.write(text)
