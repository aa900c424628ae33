"""Decide pass or fail from a report written earlier (`graphlint gate REPORT.json`), so a report
made in one CI job (a runtime run on a GPU runner) can gate a later one.

Exit codes: 0 pass, 1 fail (unsuppressed errors, a failed runtime phase, or an error recorded in
the report), 2 the report cannot be read. A baseline, when given, is applied to the static
findings by the fingerprints recorded in the report.
"""
from __future__ import annotations

import json
from pathlib import Path

from graphlint.report import Report

PASS, FAIL, UNREADABLE = 0, 1, 2


class GateError(Exception):
    """The report is missing, not JSON, or not a graphlint report; the message names the file."""


def load_report(path: str | Path) -> Report:
    try:
        data = json.loads(Path(path).read_text("utf-8"))
    except FileNotFoundError:
        raise GateError(f"{path}: report not found") from None
    except (OSError, UnicodeDecodeError) as error:
        raise GateError(f"{path}: cannot read report: {error}") from None
    except json.JSONDecodeError as error:
        raise GateError(f"{path}: not valid JSON (a truncated report?): {error}") from None
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
