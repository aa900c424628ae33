"""The SARIF 2.1.0 view, for GitHub code scanning and other SARIF consumers.

One run: the tool driver lists every rule with its documentation as help text; each result has
a physical location relative to the project root (`%SRCROOT%`), the finding's fingerprint as a
partial fingerprint (so code scanning follows an alert across edits), and a `suppressions` entry
when it was suppressed inline or by the baseline. Runtime sync events with a source line become
results of `runtime/<kind>` rules.
"""
from __future__ import annotations

import json
from typing import Any

from graphlint.gating.accepted_findings import BASELINE_REASON
from graphlint.report import Finding, Report
from graphlint.crosscheck import confirmation, describe, marks

SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
FINGERPRINT_KEY = "graphlintFingerprint/v1"
SRCROOT = "%SRCROOT%"

# The runtime harness's event kinds (graphlint/runtime/tracing/op_catalog.py), as rules a result can cite.
RUNTIME_KINDS = {
    "sync": "a synchronisation inside the step: the host waits for the device, and capture fails",
    "host-read": "a device value read on the host (.item(), bool(), `if tensor:`): a sync, and an error "
                 "during capture",
    "dynamic-shape": "an op whose output shape depends on the data (nonzero, boolean-mask indexing, unique, "
                     "bincount): the host must learn the size, so the step syncs and cannot be captured",
    "d2h-copy": "a device-to-host copy (.cpu(), .tolist(), .numpy()) inside the step: it blocks and "
                "cannot be replayed",
    "h2d-copy": "a host-to-device copy of host data inside the step: a replay would reuse the "
                "capture-time data",
}


def _level(severity: str) -> str:
    return "error" if severity == "error" else "warning"


def _static_rules() -> list[dict[str, Any]]:
    from graphlint.rules import ALL_RULES

    rules = []
    for rule in ALL_RULES:
        docs = rule.docs() or rule.message
        help_text = f"{docs}\n\nFix: {rule.fix}"
        rules.append({
            "id": rule.code,
            "name": rule.name,
            "shortDescription": {"text": rule.summary()},
            "fullDescription": {"text": rule.message},
            "help": {"text": help_text, "markdown": help_text},
            "defaultConfiguration": {"level": _level(rule.severity)},
            "properties": {"tags": ["cuda-graph", rule.family()]},
        })
    return rules


def _runtime_rule(kind: str) -> dict[str, Any]:
    text = RUNTIME_KINDS.get(kind, f"a runtime event of kind {kind!r} inside the step")
    help_text = (f"The runtime harness ran one decode step and saw {text}.\n\n"
                 "Run `graphlint runtime` to reproduce it; the static rules and `graphlint explain` "
                 "describe the fix for each kind of call.")
    return {
        "id": f"runtime/{kind}",
        "name": f"runtime-{kind}",
        "shortDescription": {"text": f"runtime: {text.split(':')[0]}"},
        "fullDescription": {"text": text},
        "help": {"text": help_text, "markdown": help_text},
        "defaultConfiguration": {"level": "error"},
        "properties": {"tags": ["cuda-graph", "runtime"]},
    }


def _region(line: int, col: int | None = None, end_line: int | None = None, end_col: int | None = None) -> dict:
    region: dict[str, int] = {"startLine": max(1, line)}
    if col:
        region["startColumn"] = max(1, col)
    if end_line:
        region["endLine"] = max(region["startLine"], end_line)
    if end_col and col:
        region["endColumn"] = max(1, end_col)
        if region.get("endLine", region["startLine"]) == region["startLine"] and region["endColumn"] <= region["startColumn"]:
            region["endColumn"] = region["startColumn"] + 1
    return region


THIRD_PARTY_ROOT = "PACKAGES"  # the site-packages folder of the run: third-party paths are relative to it


def _location(path: str, region: dict, function: str | None) -> dict[str, Any]:
    location: dict[str, Any] = {"physicalLocation": {
        "artifactLocation": {"uri": path, "uriBaseId": SRCROOT},
        "region": region,
    }}
    if function:
        location["logicalLocations"] = [{"fullyQualifiedName": function, "kind": "function"}]
    return location


def _static_result(finding: Finding, index: int, baselined: bool) -> dict[str, Any]:
    result: dict[str, Any] = {
        "ruleId": finding.rule,
        "ruleIndex": index,
        "level": _level(finding.severity),
        "message": {"text": f"{finding.message}. Fix: {finding.fix}" if finding.fix else finding.message},
        "locations": [_location(finding.path, _region(finding.line, finding.col, finding.end_line, finding.end_col),
                                finding.function)],
        "properties": {"region": finding.region},
    }
    if finding.fingerprint:
        result["partialFingerprints"] = {FINGERPRINT_KEY: finding.fingerprint}
    if finding.reached_via:
        result["properties"]["reachedVia"] = list(finding.reached_via)
    if finding.suppressed:
        external = finding.suppression_reason == BASELINE_REASON
        suppression: dict[str, Any] = {"kind": "external" if external else "inSource", "status": "accepted"}
        if finding.suppression_reason:
            suppression["justification"] = finding.suppression_reason
        result["suppressions"] = [suppression]
    if baselined:
        # With a baseline every result says whether it is in it (SARIF's baselineState).
        result["baselineState"] = "unchanged" if finding.suppression_reason == BASELINE_REASON else "new"
    return result


def located_runtime_events(runtime: dict[str, Any] | None) -> list[dict[str, Any]]:
    """Runtime events that name a source line; the harness owns their shape, so read it loosely."""
    events = (runtime or {}).get("sync_events") or []
    usable = []
    for event in events if isinstance(events, list) else []:
        if not isinstance(event, dict):
            continue
        path, line = event.get("path"), event.get("line")
        if isinstance(path, str) and path not in ("", "?") and isinstance(line, int) and line > 0:
            usable.append(event)
    return usable


def to_sarif(report: Report) -> str:
    rules = _static_rules()
    index = {rule["id"]: i for i, rule in enumerate(rules)}
    results: list[dict[str, Any]] = []
    findings = report.static.findings if report.static is not None else []
    baselined = report.static is not None and "baseline" in report.static.extra
    marked = marks(report.crosscheck)
    for finding in findings:
        if finding.rule not in index:  # a rule from a newer graphlint than the one writing
            index[finding.rule] = len(rules)
            rules.append({"id": finding.rule, "name": finding.name or finding.rule,
                          "shortDescription": {"text": finding.message},
                          "help": {"text": f"{finding.message}\n\nFix: {finding.fix}"}})
        result = _static_result(finding, index[finding.rule], baselined)
        seen = confirmation(marked, finding)
        if seen:
            # Both halves saw it: the runtime records it matched, and the message says so.
            result["properties"]["confirmedAtRuntime"] = True
            result["properties"]["runtime"] = seen
            result["message"]["text"] += f" (confirmed at runtime: {describe(seen)})"
        results.append(result)
    third_party = report.static.extra.get("third_party") if report.static is not None else None
    for finding in report.static.third_party() if report.static is not None else []:
        # Third-party code the step ran (runtime --lint): marked, relative to its package folder,
        # and a note unless the run gates on it.
        if finding.rule not in index:
            index[finding.rule] = len(rules)
            rules.append({"id": finding.rule, "name": finding.name or finding.rule,
                          "shortDescription": {"text": finding.message}})
        result = _static_result(finding, index[finding.rule], False)
        result["locations"][0]["physicalLocation"]["artifactLocation"]["uriBaseId"] = THIRD_PARTY_ROOT
        result["properties"]["thirdParty"] = True
        if not third_party.get("gates"):
            result["level"] = "note"
        seen = confirmation(marked, finding)
        if seen:
            result["properties"]["confirmedAtRuntime"] = True
            result["message"]["text"] += f" (confirmed at runtime: {describe(seen)})"
        results.append(result)
    for event in located_runtime_events(report.runtime):
        kind = str(event.get("kind") or "sync")
        rule_id = f"runtime/{kind}"
        if rule_id not in index:
            index[rule_id] = len(rules)
            rules.append(_runtime_rule(kind))
        detail = event.get("detail")
        message = f"runtime {kind}: {event.get('op', '?')}" + (f" ({detail})" if isinstance(detail, str) and detail else "")
        results.append({
            "ruleId": rule_id,
            "ruleIndex": index[rule_id],
            "level": "error",
            "message": {"text": message},
            "locations": [_location(event["path"], _region(event["line"]), event.get("function")
                                    if isinstance(event.get("function"), str) else None)],
        })
    summary = report.summary()
    invocation: dict[str, Any] = {"executionSuccessful": not report.errors}
    if report.errors:
        invocation["toolExecutionNotifications"] = [{"level": "error", "message": {"text": error}}
                                                   for error in report.errors]
    run = {
        "tool": {"driver": {"name": "graphlint", "version": report.tool_version,
                            "rules": rules}},
        "results": results,
        "invocations": [invocation],
        "columnKind": "unicodeCodePoints",
        "properties": {"summary": summary},
    }
    return json.dumps({"$schema": SARIF_SCHEMA, "version": "2.1.0", "runs": [run]}, indent=2) + "\n"
