"""`check --statistics`: the count of unsuppressed findings per rule and nothing else, as ruff's
`--statistics` prints it (text: count, code, name; json: a list of objects)."""
from __future__ import annotations

import json
from collections import Counter

from graphlint.report import Report


def statistics(report: Report) -> list[dict]:
    """{code, name, severity, count} per rule with a finding, most frequent first, then by code."""
    findings = report.static.findings if report.static is not None else []
    counts = Counter((f.rule, f.name, f.severity) for f in findings if not f.suppressed)
    return [{"code": code, "name": name, "severity": severity, "count": count}
            for (code, name, severity), count in sorted(counts.items(), key=lambda item: (-item[1], item[0]))]


def to_text(report: Report) -> str:
    rows = statistics(report)
    width = max((len(str(row["count"])) for row in rows), default=1)
    lines = [f"{row['count']:>{width}}\t{row['code']}\t{row['name']}" for row in rows]
    lines += [f"error: {error}" for error in report.errors]
    return "".join(line + "\n" for line in lines)


def to_json(report: Report) -> str:
    return json.dumps(statistics(report), indent=2) + "\n"


def render_statistics(report: Report, fmt: str, output: str | None) -> None:
    """To a file (atomically) or stdout."""
    import sys

    from graphlint.views.output import silence_stdout, write_output

    text = to_json(report) if fmt == "json" else to_text(report)
    if output:
        write_output(output, text)
        return
    try:
        sys.stdout.write(text)
        sys.stdout.flush()
    except BrokenPipeError:
        silence_stdout()
