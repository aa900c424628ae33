"""Decide pass or fail from a report written earlier (`graphlint gate REPORT.json`), so a report
made in one CI job (a runtime run on a GPU runner) can gate a later one.

Exit codes: 0 pass, 1 fail (unsuppressed errors, a failed runtime phase, or an error recorded in
the report), 2 the report cannot be read or cannot be trusted. The gate fails closed: a report
with neither a static nor a runtime half, another schema, an unknown severity or verdict, or a
field of the wrong type exits 2 naming the field. The verdict is derived from the findings,
never read from the report: a report whose summary or counts disagree with its findings (an
emptied findings list under "30 errors"), or whose JSON repeats a key, exits 2 as well. A
baseline, when given, is applied to the static findings by the fingerprints recorded in the report.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import json

from graphlint.report import SCHEMA, NotRegularFile, Report, read_regular

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


# A report of every finding in a large tree is tens of MB; one past this is not read.
MAX_REPORT_BYTES = 1024 * 1024 * 1024


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    seen: dict[str, Any] = {}
    for key, value in pairs:
        if key in seen:
            # Which of two "static" halves would a reader take? Each JSON library answers differently.
            raise GateError(f"the key {key!r:.60} appears twice in one object")
        seen[key] = value
    return seen


def _read(path: str | Path) -> Any:
    try:
        text = read_regular(path, MAX_REPORT_BYTES).decode("utf-8")
    except FileNotFoundError:
        raise GateError(f"{path}: report not found") from None
    except NotRegularFile as problem:
        raise GateError(f"cannot read report: {problem}") from None
    except (OSError, UnicodeDecodeError) as problem:
        raise GateError(f"{path}: cannot read report: {problem}") from None
    try:
        return json.loads(text, object_pairs_hook=_unique_keys)
    except GateError as error:
        raise GateError(f"{path}: malformed graphlint report: {error}") from None
    except json.JSONDecodeError as problem:
        raise GateError(f"{path}: not valid JSON (a truncated report?): {problem}") from None
    except RecursionError:
        raise GateError(f"{path}: report nested too deeply to read") from None


def consistent(data: dict[str, Any], report: Report) -> None:
    """Raise GateError when the summary or the counts the report carries disagree with what its
    findings give: the gate decides from the findings, and a report edited by hand is refused."""
    derived = report.summary()
    summary = data.get("summary")
    if summary is not None:
        _check(summary, (dict,), "summary")
        for name in ("errors", "warnings", "suppressed", "verdict"):
            if name in summary and summary[name] != derived[name]:
                raise GateError(f"summary.{name} is {summary[name]!r:.40} but the findings give {derived[name]!r}: "
                                "the report was changed after it was written")
    static = data.get("static")
    if report.static is not None and isinstance(static, dict) and "counts" in static:
        counts = static["counts"]
        if counts != report.static.counts():
            raise GateError(f"static.counts is {json.dumps(counts)[:80]} but the findings give "
                            f"{json.dumps(report.static.counts())[:80]}: the report was changed after it was written")


def load_report(path: str | Path) -> Report:
    data = _read(path)
    try:
        validate(data)
    except GateError as error:
        kind = "" if str(error).startswith("not a graphlint report") else "malformed graphlint report: "
        raise GateError(f"{path}: {kind}{error}") from None
    try:
        report = Report.from_dict(data)
    except ValueError as error:
        raise GateError(f"{path}: {error}") from None
    except (KeyError, TypeError, AttributeError) as error:
        raise GateError(f"{path}: malformed graphlint report: {type(error).__name__}: {error}") from None
    try:
        consistent(data, report)
    except GateError as error:
        raise GateError(f"{path}: untrustworthy graphlint report: {error}") from None
    return report


def verdict(report: Report) -> int:
    """PASS or FAIL for a report that was read; a runtime verdict other than pass or skipped fails."""
    if report.runtime is not None and report.runtime.get("verdict") not in ("pass", "skipped"):
        return FAIL
    return FAIL if report.summary()["verdict"] == "fail" else PASS
