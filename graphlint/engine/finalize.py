"""Turn per-file analyses into report findings under the config: regions, rule selection
(codes, prefixes and names, the longest prefix winning as in ruff), per-file ignores,
severities and inline suppressions. Pure and ordered, so the report is identical for any --jobs.
"""
from __future__ import annotations

from typing import Any, Sequence

from graphlint.analysis.arm_guards import CONDITION, HOLDS, contradicts
from graphlint.analysis.argument_records import is_literal, literal_value
from graphlint.analysis.text import suppressions
from graphlint.analysis.capture_sites import CAPTURE_BLOCK, NOT_CAPTURED_KINDS
from graphlint.analysis.walk.file import FileFinding
from graphlint.callgraph.regions import CAPTURED, EAGER, HOST, UNREACHED, Placement, default_placements
from graphlint.config import Config
from graphlint.discovery import is_excluded
from graphlint.report import Finding
from graphlint.rules import BY_CODE, BY_NAME

INTERMEDIATE = "GL405"  # where GL401's returned allocations go below the region's root


def _selected(code: str, select: Sequence[str], ignore: Sequence[str]) -> bool:
    def hit(patterns: Sequence[str]) -> int:
        # The longest matching prefix wins, as in ruff: --select GL1 --ignore GL101.
        best = -1
        for pattern in patterns:
            pattern = pattern.upper()
            if pattern == "ALL" or code.startswith(pattern):
                best = max(best, 0 if pattern == "ALL" else len(pattern))
        return best

    # Without --select / select, the default set: every rule but the ones off by default (GL902).
    chosen = hit(select) if select else (0 if BY_CODE[code].default_enabled else -1)
    dropped = hit(ignore)
    return chosen >= 0 and chosen >= dropped if dropped >= 0 else chosen >= 0


def _by_region(raw: dict, placement: Placement) -> dict:
    """A finding whose verdict depends on where its function sits: an allocation the function
    returns outlives the step only when the function is its region's root (the captured
    callable, an entry point, a sweep's function); returned to a caller inside the step it is an
    intermediate (GL401 -> GL405, off by default)."""
    # A forward taken as a root only because nothing resolved says where its output goes: its
    # caller is unknown, most likely the model's own forward inside the step.
    fallback_root = placement.reason.startswith("forward of nn.Module")
    if raw.get("escape") != "returned" or (len(placement.reached_via) <= 1 and not fallback_root):
        return raw
    rule = BY_CODE[INTERMEDIATE]
    caller = placement.reached_via[-2] if len(placement.reached_via) > 1 else "its caller"
    return {**raw, "rule": rule.code, "message": f"{rule.message} (returned to `{caller}`, inside the step)",
            "fix": rule.fix}


def _contradicted(guards: Sequence, known: Sequence[tuple[str, str]]) -> str | None:
    """Why code under these tests (None tests, flags, comparisons with a literal, configuration
    tests) never runs in the step, or None when it may."""
    states = dict(known)
    for name, state in guards:
        passed = states.get(name)
        if passed is None or passed == state:
            continue
        if name.startswith(CONDITION):
            said = "holds" if passed == HOLDS else "fails"
            return f"dead arm: the step is captured only where `{name[len(CONDITION):]}` {said}"
        if not contradicts(state, passed):
            continue
        said = "None" if passed == "N" else repr(literal_value(passed)) if is_literal(passed) else "never None"
        return f"dead arm: `{name}` is {said} at every call that reaches it in the step"
    return None


def selected(code: str, select: Sequence[str], ignore: Sequence[str]) -> bool:
    """Whether rule `code` is in force under this selection (the longest matching prefix wins)."""
    return _selected(code, select, ignore)


def _resolve_code(token: str) -> str | None:
    upper = token.upper()
    if upper in BY_CODE:
        return upper
    if token in BY_NAME:
        return BY_NAME[token].code
    if upper.startswith("GL") and any(code.startswith(upper) for code in BY_CODE):
        return upper
    return None


def _did_you_mean(token: str) -> str:
    """`; did you mean 'item-call'?` for a near miss of a code or name, else nothing."""
    import difflib

    pool = [*BY_CODE, *BY_NAME] if not token.upper().startswith("GL") else list(BY_CODE)
    close = difflib.get_close_matches(token.upper() if token.upper().startswith("GL") else token, pool, n=1)
    return f"; did you mean '{close[0]}'?" if close else ""


def finalize(files: list[dict[str, Any]], config: Config, select: Sequence[str], ignore: Sequence[str],
             placements: dict | None = None, warmed_up: set | frozenset = frozenset(),
             incomplete: Sequence[dict[str, Any]] = ()) -> list[Finding]:
    """Turn per-file analyses into report findings under the config (pure and ordered).
    `warmed_up`: (path, qualname) of capture functions whose caller runs the warm-up (GL510).
    `incomplete`: capture sites whose region the call graph could not follow (GL905)."""
    if placements is None:
        placements = default_placements(files, config.host, config.eager)
    findings: list[Finding] = []
    incomplete_by_path: dict[str, list[dict[str, Any]]] = {}
    for site in incomplete:
        incomplete_by_path.setdefault(site["path"], []).append(site)
    for file in files:
        path = file["path"]
        file_ignores = [code for pattern, codes in config.per_file_ignores.items()
                        if is_excluded(path, [pattern]) for code in codes]
        sup_by_line = {int(k): [suppressions.Suppression(**{**s, "codes": tuple(s["codes"])}) for s in v]
                       for k, v in file.get("suppressions", {}).items()}
        file_wide = [item for items in sup_by_line.values() for item in items if item.file_level]
        candidates: list[tuple[FileFinding | None, dict]] = []
        for key, code in (("parse_error", "GL900"), ("limit", "GL903")):
            error = file.get(key)
            if error:
                candidates.append((None, {"rule": code, "function": None, "line": error["line"], "col": error["col"],
                                          "end_line": error["line"], "end_col": error["col"],
                                          "statement_line": error["line"],
                                          "message": f"{BY_CODE[code].message}: {error['message']}",
                                          "fix": BY_CODE[code].fix, "region": "module", "reached_via": ()}))
        for site in incomplete_by_path.get(path, ()):
            candidates.append((None, {"rule": "GL905", "function": site["function"], "line": site["line"],
                                      "col": site.get("col", 1), "end_line": site["line"],
                                      "end_col": site.get("col", 1), "statement_line": site["line"],
                                      "message": site["message"], "fix": BY_CODE["GL905"].fix, "region": "host",
                                      "reached_via": (), "region_reason": site.get("reason", "")}))
        for raw in file.get("findings", []):
            placed = _placed_finding(raw, placements.get((path, raw["function"]), Placement(CAPTURED)),
                                     (path, raw["function"]) in warmed_up)
            if placed is not None:
                candidates.append((None, placed))
        for line, items in sup_by_line.items():
            for item in items:
                for token in item.codes:
                    if _resolve_code(token) is None:
                        candidates.append((None, {"rule": "GL901", "function": None, "line": line, "col": item.col,
                                                  "end_line": line, "end_col": item.col, "statement_line": line,
                                                  "message": f"suppression names unknown rule '{token}'"
                                                             + _did_you_mean(token),
                                                  "fix": BY_CODE["GL901"].fix, "region": "module", "reached_via": ()}))
        used: set[tuple[int, int, str]] = set()  # (line, col, token) of suppressions that matched
        for _, raw in candidates:
            code = raw["rule"]
            rule = BY_CODE[code]
            if not _selected(code, select, ignore) or (file_ignores and not _selected(code, (), file_ignores)):
                continue
            severity = config.severity.get(code) or next(
                (v for k, v in sorted(config.severity.items(), key=lambda kv: -len(kv[0])) if code.startswith(k)),
                rule.severity)
            if severity == "off":
                continue
            suppressed, reason = False, None
            for line in {raw["line"], raw.get("statement_line", raw["line"])}:
                # The line's own suppressions, then the file-level ones (`# graphlint: noqa`).
                for item in [*(s for s in sup_by_line.get(line, []) if not s.file_level), *file_wide]:
                    if code != "GL901" and suppressions.matches(item, code, rule.name):
                        suppressed, reason = True, item.reason
                        for token in item.codes or ("",):  # "": a blanket `# graphlint: ignore`
                            single = suppressions.Suppression(item.line, (token,) if token else (), None, item.col)
                            if suppressions.matches(single, code, rule.name):
                                used.add((item.line, item.col, token))
            findings.append(Finding(
                rule=code, family=rule.family(), severity=severity, path=path,
                line=raw["line"], col=raw["col"], end_line=raw["end_line"], end_col=raw["end_col"],
                function=raw["function"], region=raw["region"], message=raw["message"], fix=raw["fix"],
                name=rule.name, suppressed=suppressed, suppression_reason=reason,
                reached_via=tuple(raw["reached_via"]), region_reason=raw.get("region_reason", ""),
            ))
        findings.extend(_unused_suppressions(path, sup_by_line, used, select, ignore, file_ignores, config))
    findings.sort(key=Finding.sort_key)
    return findings


def _placement(raw: dict, placement: Placement) -> Placement:
    """Where the code of a raw finding runs: its function's placement, narrowed by the branch
    it lies in (a one-time or not-capturing branch, a dead arm) or widened by a capture block."""
    zone = raw.get("zone")
    if zone in NOT_CAPTURED_KINDS and placement.region in (CAPTURED, EAGER):
        # Code of a per-step function that the captured step does not run: the warm-up
        # runs one-time code before capture, prefill, debug switches and the not-capturing arm run eagerly,
        # another backend's arm never runs where graphs are captured.
        return Placement(HOST, placement.reached_via, f"{zone} branch in {placement.region} code")
    if zone == CAPTURE_BLOCK and placement.region in (HOST, UNREACHED):
        return Placement(CAPTURED, placement.reached_via,
                         f"inside the `with torch.cuda.graph` block of {raw['function']}")
    if placement.known and raw.get("guards") and placement.region in (CAPTURED, EAGER):
        dead = _contradicted(raw["guards"], placement.known)
        if dead is not None:
            # `if mask is not None:` where every call in the step passes no mask: an arm
            # the step never runs.
            return Placement(HOST, placement.reached_via, dead)
    return placement


def _placed_finding(raw: dict, placement: Placement, warmed_up: bool) -> dict | None:
    """The raw finding with its region, or None where its rule does not hold there."""
    placement = _placement(raw, placement)
    rule = BY_CODE[raw["rule"]]
    if raw["rule"] == "GL510" and warmed_up:
        return None  # the caller warms the step up before calling the capture function
    # Capture orchestration rules (GL5xx) judge the code that captures and replays,
    # which is host code by design, so they hold in every region; a `host_code_only`
    # one leaves per-step regions to the sync rule that reports the same node (GL106).
    orchestration = getattr(rule, "applies_in_host_code", False)
    if placement.region in (HOST, UNREACHED) and not orchestration:
        return None
    if orchestration and getattr(rule, "host_code_only", False) and placement.region in (CAPTURED, EAGER):
        return None
    if placement.region == EAGER and rule.capture_only:
        return None
    if placement.compiled and getattr(rule, "stream_capture_only", False):
        return None  # Inductor traces it: torch.compile alone captures this function
    return {**_by_region(raw, placement), "region": placement.region,
            "reached_via": placement.reached_via, "region_reason": placement.reason}


def _unused_suppressions(path: str, sup_by_line: dict[int, list[suppressions.Suppression]],
                         used: set[tuple[int, int, str]], select: Sequence[str], ignore: Sequence[str],
                         file_ignores: list[str], config: Config) -> list[Finding]:
    """GL902 for each suppression, or code in one, that suppressed no finding of this run
    (codes no rule has are GL901's)."""
    rule = BY_CODE["GL902"]
    if not _selected(rule.code, select, ignore) or (file_ignores and not _selected(rule.code, (), file_ignores)):
        return []
    severity = next((v for k, v in sorted(config.severity.items(), key=lambda kv: -len(kv[0]))
                     if rule.code.startswith(k)), rule.severity)  # the longest key wins, as above
    if severity == "off":
        return []
    out = []
    for line, items in sorted(sup_by_line.items()):
        for item in items:
            tokens = item.codes or ("",)
            unused = [token for token in tokens if (item.line, item.col, token) not in used
                      and (token == "" or _resolve_code(token) is not None)]
            if not unused:
                continue
            what = "blanket suppression" if unused == [""] else "suppression of " + ", ".join(unused)
            where = "in this file" if item.file_level else "on this line or its statement"
            out.append(Finding(
                rule=rule.code, family=rule.family(), severity=severity, path=path, line=line, col=item.col,
                end_line=line, end_col=item.col, function=None, region="module",
                message=f"unused {'file-level ' if item.file_level else ''}{what}: no such finding {where}", fix=rule.fix,
                name=rule.name))
    return out
