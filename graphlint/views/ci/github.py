"""The GitHub Actions view: one workflow command per unsuppressed finding, which GitHub shows
as an annotation on that line of the pull request's diff.

    ::error file=pkg/step.py,line=12,col=5,endLine=12,endColumn=17,title=GL101 item-call::message

Paths are relative to the project root, which should be the repository root for the
annotations to land on the right file. Runtime events with a source line and errors recorded
in the report are annotated too.
"""
from __future__ import annotations

from graphlint.report import Report
from graphlint.crosscheck import confirmation, describe, marks
from graphlint.views.ci.sarif import located_runtime_events


def _data(text: str) -> str:
    # GitHub's escaping for the message part of a workflow command.
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _property(text: str) -> str:
    # Property values additionally must not contain the separators `:` and `,`.
    return _data(text).replace(":", "%3A").replace(",", "%2C")


def _command(level: str, message: str, title: str, **where: object) -> str:
    props = [f"{key}={_property(str(value))}" for key, value in where.items() if value not in (None, "")]
    props.append(f"title={_property(title)}")
    return f"::{level} {','.join(props)}::{_data(message)}"


def to_annotations(report: Report) -> str:
    lines: list[str] = []
    findings = report.static.findings if report.static is not None else []
    marked = marks(report.crosscheck)
    for f in findings:
        if f.suppressed:
            continue
        level = "error" if f.severity == "error" else "warning"
        message = f"{f.message}\nfix: {f.fix}" if f.fix else f.message
        if f.reached_via:
            message += "\nreached via: " + " -> ".join(f.reached_via)
        title = f"{f.rule} {f.name}".strip()
        seen = confirmation(marked, f)
        if seen:
            message += f"\nconfirmed at runtime: {describe(seen)}"
            title += " (confirmed at runtime)"
        lines.append(_command(level, message, title, file=f.path, line=f.line, col=f.col,
                              endLine=f.end_line, endColumn=f.end_col))
    for event in located_runtime_events(report.runtime):
        kind = str(event.get("kind") or "sync")
        detail = event.get("detail")
        message = f"the runtime harness saw {kind}: {event.get('op', '?')}"
        if isinstance(detail, str) and detail:
            message += f" ({detail})"
        lines.append(_command("error", message, f"runtime {kind}", file=event["path"], line=event["line"]))
    for error in report.errors:
        lines.append(_command("error", error, "graphlint"))
    return "".join(line + "\n" for line in lines)
