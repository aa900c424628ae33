"""Decide pass or fail from a report written earlier (`graphlint gate REPORT.json`), so a report
made in one CI job (a runtime run on a GPU runner) can gate a later one.

Exit codes: 0 pass, 1 fail (unsuppressed errors, a failed runtime phase, or an error recorded in
the report), 2 the report cannot be read. A baseline, when given, is applied to the static
findings by the fingerprints recorded in the report.
"""
from __future__ import annotations

from pathlib import Path

from graphlint.report import Report, read_json

PASS, FAIL, UNREADABLE = 0, 1, 2


class GateError(Exception):
    """The report is missing, not JSON, or not a graphlint report; the message names the file."""


def load_report(path: str | Path) -> Report:
    data = read_json(path, GateError, "report")
    if not isinstance(data, dict):
        raise GateError(f"{path}: not a graphlint report (a JSON {type(data).__name__})")
    try:
        return Report.from_dict(data)
    except ValueError as error:
        raise GateError(f"{path}: {error}") from None
    except (KeyError, TypeError, AttributeError) as error:
        raise GateError(f"{path}: malformed graphlint report: {type(error).__name__}: {error}") from None


def verdict(report: Report) -> int:
    """PASS or FAIL for a report that was read."""
    return FAIL if report.summary()["verdict"] == "fail" else PASS
