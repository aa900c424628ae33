"""Join the report's two halves: which static findings the runtime confirmed, and what it saw that no rule flagged.

A runtime record (a sync event or a replay hazard) and a finding match when they sit on the same
statement of the same file and the finding's rule family is one that describes that record
(`FAMILIES`). Findings are then `confirmed`, `not_confirmed` (the step ran the statement and the
runtime saw nothing there) or `not_exercised` (the step never ran it); runtime records no finding
matched are `missed_by_static`, with the family a rule for them would belong to, when the static half
analysed their line as captured code, and `not_linted`, with the reason, when it did not.
"""
from __future__ import annotations

import ast
import os
from pathlib import Path
from typing import Any, Iterable

# (source, kind) -> the rule families that describe it; the first is where a new rule would go.
FAMILIES: dict[tuple[str, str], tuple[str, ...]] = {
    ("sync", "host-read"): ("GL1", "GL2", "GL3"),
    ("sync", "sync"): ("GL1", "GL5"),
    ("sync", "dynamic-shape"): ("GL3",),
    ("sync", "d2h-copy"): ("GL1",),
    ("sync", "h2d-copy"): ("GL4", "GL5"),
    ("replay", "frozen-scalar"): ("GL5", "GL4", "GL2"),
    ("replay", "control-flow"): ("GL2", "GL5"),
    ("replay", "shape-varies"): ("GL4", "GL3", "GL5"),
    # A tensor made in the step from host data (GL402) is captured with its source frozen: the
    # same mechanism as an input the step reads but prepare() did not refresh.
    ("replay", "stale-input"): ("GL5", "GL4"),
    ("replay", "dynamic-output-shape"): ("GL3",),
    ("replay", "other-device"): ("GL5",),
}
# Python-level ops whose family is narrower than their kind's (bool(t) is host control flow).
OP_FAMILY = {"Tensor.__bool__": "GL2", "Tensor.__index__": "GL2"}
FAMILY_NAMES = {"GL1": "sync", "GL2": "control flow", "GL3": "data-dependent shape", "GL4": "allocation",
                "GL5": "capture/replay"}
# Allocation sites the runtime saw confirm allocation findings; they never count as misses (every
# intermediate allocates, and inside a graph that comes from the private pool).
ALLOCATION_RULES = ("GL401", "GL403")
MAX_LISTED = 200


class _Statements:
    """Line -> (first, last) line of the innermost statement holding it; a compound statement
    (if, for, while, with, def) is its header only, so `if t:` and its body are apart."""

    def __init__(self, source: str | None):
        self.span: dict[int, tuple[int, int]] = {}
        # line -> header spans of the if/while/for statements whose body holds it, innermost first
        self.enclosing: dict[int, list[tuple[int, int]]] = {}
        if source is None:
            return
        try:
            tree = ast.parse(source)
        except (SyntaxError, ValueError):
            return
        spans = []
        for node in ast.walk(tree):
            if not isinstance(node, ast.stmt):
                continue
            first, last = node.lineno, node.end_lineno or node.lineno
            body = getattr(node, "body", None)
            if isinstance(body, list) and body and isinstance(body[0], ast.stmt):
                decorators = getattr(node, "decorator_list", None) or []
                first = min([first] + [d.lineno for d in decorators])
                last = max(first, body[0].lineno - 1) if body[0].lineno > node.lineno else node.lineno
                if isinstance(node, _BRANCHES):
                    for line in range(last + 1, (node.end_lineno or last) + 1):
                        self.enclosing.setdefault(line, []).append((first, last))
            spans.append((first, last))
        for headers in self.enclosing.values():
            headers.sort(key=lambda span: -span[0])  # innermost (latest header) first
        for first, last in sorted(spans, key=lambda s: s[0] - s[1]):  # largest first, innermost wins
            for line in range(first, last + 1):
                self.span[line] = (first, last)

    def of(self, line: int) -> tuple[int, int]:
        return self.span.get(line, (line, line))

    def branches_around(self, line: int) -> list[tuple[int, int]]:
        return self.enclosing.get(line, [])


_BRANCHES = (ast.If, ast.While, ast.For, ast.AsyncFor)


def _family_of(source: str, record: dict) -> tuple[str, ...]:
    families = FAMILIES.get((source, str(record.get("kind"))), ("GL1",))
    narrow = OP_FAMILY.get(str(record.get("op")))
    return (narrow, *[f for f in families if f != narrow]) if narrow else families


def _records(runtime: dict) -> Iterable[tuple[str, dict]]:
    for event in runtime.get("sync_events") or []:
        yield "sync", {**event, "kind": event.get("kind")}
    for hazard in (runtime.get("replay") or {}).get("hazards") or []:
        yield "replay", {**hazard, "kind": hazard.get("hazard")}


def join(findings: list, runtime: dict, static_root: str | os.PathLike[str] = ".",
         runtime_root: str | os.PathLike[str] = ".", linted: Iterable[str] = (),
         analysed: dict[str, list[tuple]] | None = None) -> dict[str, Any]:
    """The `crosscheck` section from static `findings` (Finding objects or dicts, paths relative to
    `static_root`) and a runtime dict (paths relative to `runtime_root`); `linted` are the static
    half's files, to tell a miss in linted code from one in code the linter never read.

    `analysed` (absolute path -> the defs the static half analysed, `(first, last, region,
    function, reason)`): a record no finding matched is `missed_by_static` only when its line lies
    in a def placed in the captured (or eager) region; otherwise it is `not_linted`, with why."""
    static_root, runtime_root = Path(static_root).resolve(), Path(runtime_root).resolve()

    def absolute(root: Path, path: str) -> str:
        return str((root / path).resolve()) if not os.path.isabs(path) else str(Path(path).resolve())

    statements: dict[str, _Statements] = {}

    def parsed(abs_path: str) -> _Statements:
        if abs_path not in statements:
            try:
                statements[abs_path] = _Statements(Path(abs_path).read_text("utf-8"))
            except (OSError, UnicodeDecodeError):
                statements[abs_path] = _Statements(None)
        return statements[abs_path]

    def statement(abs_path: str, line: int) -> tuple[int, int]:
        return parsed(abs_path).of(line)

    rows = [f if isinstance(f, dict) else f.to_dict() for f in findings]
    rows = [f for f in rows if not str(f.get("rule", "")).startswith("GL9")]
    by_statement: dict[tuple[str, tuple[int, int]], list[int]] = {}
    for n, f in enumerate(rows):
        where = absolute(static_root, f["path"])
        by_statement.setdefault((where, statement(where, int(f["line"]))), []).append(n)
    linted_abs = {absolute(static_root, p) for p in linted}

    matched: dict[int, list[dict]] = {}
    missed: list[dict] = []
    unseen: list[dict] = []
    for source, record in _records(runtime):
        path, line = record.get("path"), record.get("line")
        if not isinstance(path, str) or path in ("", "?") or not isinstance(line, int) or line <= 0:
            continue
        where = absolute(runtime_root, path)
        families = _family_of(source, record)
        spans = [statement(where, line)]
        if record["kind"] == "control-flow":
            # The ops differ from the first op of the branch that ran: the test is in its header.
            spans += parsed(where).branches_around(line)
        hits = next(([n for n in by_statement.get((where, span), []) if rows[n]["rule"][:3] in families]
                     for span in spans if any(rows[n]["rule"][:3] in families
                                              for n in by_statement.get((where, span), []))), [])
        seen = {"source": source, "kind": record["kind"], "op": record.get("op"), "line": line,
                "count": record.get("count", 1)}
        if hits:
            for n in hits:
                matched.setdefault(n, []).append(seen)
            continue
        entry = {
            "source": source, "kind": record["kind"], "op": record.get("op"), "path": _shown(where, static_root, path),
            "line": line, "function": record.get("function"), "family": families[0],
            "family_name": FAMILY_NAMES.get(families[0], ""), "linted": where in linted_abs,
            "count": record.get("count", 1), "detail": record.get("detail", ""),
        }
        why = None if analysed is None else _not_analysed(analysed, where, line, where in linted_abs)
        if why is None:
            missed.append(entry)
        else:
            unseen.append({**entry, "reason": why})
    allocated = _allocation_sites(runtime, runtime_root, statement)
    executed = _executed(runtime, runtime_root, statement)
    confirmed, not_confirmed, not_exercised = [], [], []
    for n, f in enumerate(rows):
        where = absolute(static_root, f["path"])
        span = statement(where, int(f["line"]))
        entry = {k: f.get(k) for k in ("rule", "name", "severity", "path", "line", "col", "function", "region",
                                       "message", "fingerprint", "suppressed", "reached_via")}
        seen = matched.get(n)
        if seen is None and f["rule"] in ALLOCATION_RULES and (where, span) in allocated:
            seen = [{"source": "allocation", "kind": "allocation", "op": ", ".join(allocated[(where, span)][:3]),
                     "line": span[0], "count": 1}]
        if seen:
            confirmed.append({**entry, "runtime": seen})
        elif any(line in executed.get(where, ()) for line in range(span[0], span[1] + 1)):
            not_confirmed.append(entry)
        else:
            not_exercised.append(entry)
    sections = {"missed_by_static": missed, "not_linted": unseen, "confirmed": confirmed,
                "not_confirmed": not_confirmed, "not_exercised": not_exercised}
    out: dict[str, Any] = {"counts": {name: len(items) for name, items in sections.items()}}
    for name, items in sections.items():
        out[name] = items[:MAX_LISTED]
        if len(items) > MAX_LISTED:
            out[f"{name}_omitted"] = len(items) - MAX_LISTED
    out["executed_files"] = len(executed)
    return out


ANALYSED_REGIONS = ("captured", "eager")


def _not_analysed(analysed: dict[str, list[tuple]], where: str, line: int, linted: bool) -> str | None:
    """Why the static half never judged `line` of `where` as captured code (None: it did)."""
    spans = analysed.get(where)
    if spans is None:
        return ("the file was linted but not analysed (parse error, a limit, or it never mentions torch)"
                if linted else "the file was not linted (outside the project and every package folder)")
    inner = None
    for span in spans:
        if span[0] <= line <= span[1] and (inner is None or span[0] >= inner[0]):
            inner = span
    if inner is None:
        return "module-level code, outside any function"
    first, _last, region, function, reason = inner
    if region in ANALYSED_REGIONS:
        return None
    because = f": {reason}" if reason else ""
    return f"{function} was placed in the {region} region by the static half{because}"


def _shown(abs_path: str, static_root: Path, fallback: str) -> str:
    """A path as the static half writes it (relative to its root) where possible."""
    try:
        return Path(abs_path).relative_to(static_root).as_posix()
    except ValueError:
        return fallback


def _executed(runtime: dict, root: Path, statement) -> dict[str, set[int]]:
    out: dict[str, set[int]] = {}
    for path, lines in (runtime.get("executed") or {}).items():
        where = str((root / path).resolve()) if not os.path.isabs(path) else path
        out.setdefault(where, set()).update(int(n) for n in lines if isinstance(n, int))
    return out


def _allocation_sites(runtime: dict, root: Path, statement) -> dict[tuple[str, tuple[int, int]], list[str]]:
    out: dict[tuple[str, tuple[int, int]], list[str]] = {}
    alloc = runtime.get("allocations") or {}
    for site in list(alloc.get("sites") or []) + list(alloc.get("held_sites") or []):
        path, line = site.get("path"), site.get("line")
        if not isinstance(path, str) or not isinstance(line, int) or line <= 0:
            continue
        where = str((root / path).resolve()) if not os.path.isabs(path) else path
        out.setdefault((where, statement(where, line)), []).extend(site.get("ops") or [])
    return out


def marks(crosscheck: dict | None) -> dict[tuple, list[dict]]:
    """(fingerprint or (rule, path, line, col)) -> what the runtime saw, for the views that mark
    confirmed findings."""
    out: dict[tuple, list[dict]] = {}
    for entry in (crosscheck or {}).get("confirmed") or []:
        if not isinstance(entry, dict):
            continue
        key = ("fp", entry["fingerprint"]) if entry.get("fingerprint") else (
            "at", entry.get("rule"), entry.get("path"), entry.get("line"), entry.get("col"))
        out[key] = entry.get("runtime") or []
    return out


def confirmation(marked: dict[tuple, list[dict]], finding) -> list[dict] | None:
    """What the runtime saw at `finding` (a Finding), or None when it is not confirmed."""
    if finding.fingerprint and ("fp", finding.fingerprint) in marked:
        return marked[("fp", finding.fingerprint)]
    return marked.get(("at", finding.rule, finding.path, finding.line, finding.col))


def describe(seen: list[dict]) -> str:
    """'host-read Tensor.item, frozen-scalar aten.fill_' for a confirmation."""
    return ", ".join(f"{s.get('kind')} {s.get('op')}" for s in seen[:3])
