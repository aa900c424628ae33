"""Decide pass or fail from a report written earlier (`graphlint gate REPORT.json`), so a report
made in one CI job (a runtime run on a GPU runner) can gate a later one.

Exit codes: 0 pass, 1 fail (unsuppressed errors, a failed runtime phase, or an error recorded in
the report), 2 the report cannot be read or cannot be trusted. The gate fails closed: a report
with neither a static nor a runtime half, another schema, an unknown severity or verdict, or a
field of the wrong type exits 2 naming the field. A baseline, when given, is applied to the
static findings by the fingerprints recorded in the report.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from graphlint.report import SCHEMA, Report, read_json

PASS, FAIL, UNREADABLE = 0, 1, 2

SEVERITIES = ("error", "warning")
RUNTIME_VERDICTS = ("pass", "fail", "skipped", "error")
# Finding field -> the types it may hold (what views and the baseline read).
_FINDING_FIELDS: dict[str, tuple[type, ...]] = {
    "rule": (str,), "severity": (str,), "path": (str,), "line": (int,), "col": (int,), "end_line": (int,),
    "end_col": (int,), "message": (str,),
}
_OPTIONAL_FIELDS: dict[str, tuple[type, ...]] = {
    "family": (str,), "function": (str, type(None)), "region": (str,), "fix": (str,), "name": (str,),
    "suppressed": (bool,), "suppression_reason": (str, type(None)), "reached_via": (list,),
    "fingerprint": (str, type(None)),
}


class GateError(Exception):
    """The report is missing, not JSON, not a graphlint report, or malformed; the message names
    the file and the field."""


def _type_name(types: tuple[type, ...]) -> str:
    names = {str: "a string", int: "an integer", bool: "true or false", list: "a list", dict: "an object",
             type(None): "null"}
    return " or ".join(names.get(t, t.__name__) for t in types)


def _check(value: Any, types: tuple[type, ...], where: str) -> None:
    # bool is an int in Python; a line number of `true` is still wrong.
    ok = isinstance(value, types) and not (isinstance(value, bool) and bool not in types)
    if not ok:
        raise GateError(f"{where} must be {_type_name(types)}, got {type(value).__name__} {value!r:.60}")


def validate(data: Any) -> None:
    """Raise GateError (without the file name) for anything the gate cannot trust."""
    if not isinstance(data, dict):
        raise GateError(f"not a graphlint report (a JSON {type(data).__name__})")
    if data.get("schema") != SCHEMA:
        raise GateError(f"not a graphlint report (schema {data.get('schema')!r:.60}, expected {SCHEMA!r})")
    static, runtime = data.get("static"), data.get("runtime")
    if static is None and runtime is None:
        raise GateError("the report has neither a static nor a runtime half: nothing to gate")
    if static is not None:
        _check(static, (dict,), "static")
        files = static.get("files", [])
        _check(files, (list,), "static.files")
        for index, name in enumerate(files):
            _check(name, (str,), f"static.files[{index}]")
        findings = static.get("findings", [])
        _check(findings, (list,), "static.findings")
        for index, finding in enumerate(findings):
            where = f"static.findings[{index}]"
            _check(finding, (dict,), where)
            for name, types in _FINDING_FIELDS.items():
                if name not in finding:
                    raise GateError(f"{where} has no '{name}'")
                _check(finding[name], types, f"{where}.{name}")
            for name, types in _OPTIONAL_FIELDS.items():
                if name in finding:
                    _check(finding[name], types, f"{where}.{name}")
            for step, item in enumerate(finding.get("reached_via") or []):
                _check(item, (str,), f"{where}.reached_via[{step}]")
            if finding["severity"] not in SEVERITIES:
                raise GateError(f"{where}.severity is {finding['severity']!r:.40}, not one of {', '.join(SEVERITIES)}")
        if "unresolved_calls" in static:
            _check(static["unresolved_calls"], (list,), "static.unresolved_calls")
    if runtime is not None:
        _check(runtime, (dict,), "runtime")
        verdict = runtime.get("verdict")
        if verdict not in RUNTIME_VERDICTS:
            raise GateError(f"runtime.verdict is {verdict!r:.40}, not one of {', '.join(RUNTIME_VERDICTS)}")
    errors = data.get("errors", [])
    _check(errors, (list,), "errors")
    for index, error in enumerate(errors):
        _check(error, (str,), f"errors[{index}]")
    for name in ("tool", "config"):
        if name in data:
            _check(data[name], (dict,), name)


def load_report(path: str | Path) -> Report:
    data = read_json(path, GateError, "report")
    try:
        validate(data)
    except GateError as error:
        kind = "" if str(error).startswith("not a graphlint report") else "malformed graphlint report: "
        raise GateError(f"{path}: {kind}{error}") from None
    try:
        return Report.from_dict(data)
    except ValueError as error:
        raise GateError(f"{path}: {error}") from None
    except (KeyError, TypeError, AttributeError) as error:
        raise GateError(f"{path}: malformed graphlint report: {type(error).__name__}: {error}") from None


def verdict(report: Report) -> int:
    """PASS or FAIL for a report that was read; a runtime verdict other than pass or skipped fails."""
    if report.runtime is not None and report.runtime.get("verdict") not in ("pass", "skipped"):
        return FAIL
    return FAIL if report.summary()["verdict"] == "fail" else PASS
