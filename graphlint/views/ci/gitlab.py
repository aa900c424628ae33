"""The GitLab code-quality view (`--format gitlab`): the JSON array GitLab reads from a
`codequality` report artifact and shows on merge requests, one entry per unsuppressed finding
(and runtime sync event with a source line), each with a stable fingerprint.

Paths are relative to the project root, which should be the repository root."""
from __future__ import annotations

import hashlib
import json
from typing import Any

from graphlint.report import Report
from graphlint.views.ci.sarif import located_runtime_events

SEVERITY = {"error": "major", "warning": "minor"}


def _fingerprint(*parts: object) -> str:
    return hashlib.sha256("\0".join(str(p) for p in parts).encode("utf-8", "backslashreplace")).hexdigest()


def to_code_quality(report: Report) -> str:
    issues: list[dict[str, Any]] = []
    findings = report.static.findings if report.static is not None else []
    for finding in findings:
        if finding.suppressed:
            continue
        issues.append({
            "type": "issue",
            "check_name": f"{finding.rule} {finding.name}".strip(),
            "description": f"{finding.rule} {finding.message}",
            "content": {"body": f"Fix: {finding.fix}"},
            "categories": ["Bug Risk"],
            "severity": SEVERITY.get(finding.severity, "major"),
            "fingerprint": finding.fingerprint or _fingerprint(finding.rule, finding.path, finding.line,
                                                               finding.col, finding.message),
            "location": {"path": finding.path, "lines": {"begin": finding.line, "end": finding.end_line}},
        })
    for event in located_runtime_events(report.runtime):
        kind = str(event.get("kind") or "sync")
        issues.append({
            "type": "issue",
            "check_name": f"runtime/{kind}",
            "description": f"runtime {kind}: {event.get('op', '?')}",
            "categories": ["Performance"],
            "severity": "major",
            "fingerprint": _fingerprint("runtime", kind, event["path"], event["line"], event.get("op")),
            "location": {"path": event["path"], "lines": {"begin": event["line"], "end": event["line"]}},
        })
    return json.dumps(issues, indent=2) + "\n"
