"""`graphlint audit`: every function reachable from the roots of the captured region (capture
sites, nn.Module forwards where needed, entry points and markers), with its region, the reason
for it, and a class modelled on the seeds' audit of a decode path (green / red-scalar / structural):

  capturable     no finding                 sync           a GL1 finding (device-to-host read)
  host-branch    a GL2 finding               dynamic-shape  a GL3 finding
  frozen-scalar  a per-step Python scalar    allocates      a GL4 finding (per-step allocation)
                 frozen into the capture     cross-device   a copy to another device
                 (GL508, GL509, GL404, GL511) capture-hygiene  a capture/replay orchestration finding
  eager          an eager break (by design)  host           outside the graph by design

The verdict, as `check` gives it: FAIL (exit 1) when a reachable `captured` function has an
error-severity finding (with `fail_on="warning"` warnings block too); INCOMPLETE (exit 1) when
nothing is captured or a capture site's region could not be followed (GL905): a region nobody
could read never passes; PASS (exit 0) otherwise.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Sequence

from graphlint import __version__
from graphlint.callgraph.recorded import REASON_PREFIX
from graphlint.analysis.text.source import split_lines
from graphlint.config import Config
from graphlint.engine import Cache, collect_tasks, finalize
from graphlint.engine.pipeline import analyse_project
from graphlint.engine.run import named_files
from graphlint.engine.selectors import normalise_config

SCHEMA = "graphlint-audit/1"
CAPTURABLE = "capturable"
# When a function has findings of several classes, the first in this order names it.
CLASS_ORDER = ["sync", "host-branch", "dynamic-shape", "frozen-scalar", "cross-device", "allocates",
               "capture-hygiene"]
ALL_CLASSES = [CAPTURABLE, *CLASS_ORDER, "eager", "host"]
_BY_FAMILY = {"1": "sync", "2": "host-branch", "3": "dynamic-shape", "4": "allocates", "5": "capture-hygiene"}
_BY_RULE = {"GL404": "frozen-scalar", "GL508": "frozen-scalar", "GL509": "frozen-scalar",
            "GL506": "cross-device", "GL507": "cross-device", "GL511": "frozen-scalar"}


class AuditError(Exception):
    """Nothing to audit (no root at all); the CLI turns it into exit code 2."""


def finding_class(rule: str) -> str | None:
    if rule in _BY_RULE:
        return _BY_RULE[rule]
    return _BY_FAMILY.get(rule[2:3])


@dataclass
class AuditRow:
    function: str
    path: str
    line: int
    region: str
    cls: str
    classes: list[str]
    findings: dict[str, int]  # rule -> count (unsuppressed, in force for the region)
    reached_via: tuple[str, ...]
    reason: str = ""  # why the function is in its region (the root's capture site, forward, config)
    errors: int = 0  # how many of its findings are errors (the rest are warnings)
    recorded: bool = False  # a root from the region file: the step ran it (graphlint.callgraph.recorded)

    def to_dict(self) -> dict[str, Any]:
        return {"function": self.function, "path": self.path, "line": self.line, "region": self.region,
                "region_reason": self.reason, "from_region_file": self.recorded, "class": self.cls, "classes": self.classes, "findings": self.findings,
                "reached_via": list(self.reached_via)}


@dataclass
class AuditResult:
    entry_points: list[str]
    rows: list[AuditRow] = field(default_factory=list)
    unresolved: list[dict[str, Any]] = field(default_factory=list)
    files: int = 0
    config: dict[str, Any] = field(default_factory=dict)
    # Capture sites whose region the graph could not follow (GL905): the audit is INCOMPLETE.
    incomplete: list[dict[str, Any]] = field(default_factory=list)
    fail_on: str = "error"  # "warning": a warning-only function blocks too, as check --fail-on warning

    def counts(self) -> dict[str, int]:
        counts = {name: 0 for name in ALL_CLASSES}
        for row in self.rows:
            counts[row.cls] += 1
        return {k: v for k, v in counts.items() if v}

    def blocking(self) -> list[AuditRow]:
        """Captured functions that fail the audit: with an error (or, with fail_on warning, any finding)."""
        return [row for row in self.rows if row.region == "captured" and row.cls != CAPTURABLE
                and (row.errors or self.fail_on == "warning")]

    def warning_only(self) -> list[AuditRow]:
        """Captured functions with findings that are all warnings and do not block."""
        return [row for row in self.rows if row.region == "captured" and row.cls != CAPTURABLE
                and row not in self.blocking()]

    def verdict(self) -> str:
        """fail (a captured function is not capturable), incomplete (no hazard found, but a
        capture's region could not be followed, or is empty), or pass."""
        if self.blocking():
            return "fail"
        if self.incomplete or not any(row.region == "captured" for row in self.rows):
            return "incomplete"
        return "pass"

    def to_dict(self) -> dict[str, Any]:
        captured = [r for r in self.rows if r.region == "captured"]
        return {
            "schema": SCHEMA,
            "tool": {"name": "graphlint", "version": __version__},
            "config": self.config,
            "entry_points": self.entry_points,
            "files": self.files,
            "functions": [row.to_dict() for row in self.rows],
            "counts": self.counts(),
            "unresolved_calls": self.unresolved,
            "incomplete_captures": self.incomplete,
            "summary": {"reachable": len(self.rows), "captured": len(captured),
                        "capturable": sum(r.cls == CAPTURABLE for r in captured),
                        "not_capturable": len(self.blocking()), "unresolved_calls": len(self.unresolved),
                        "verdict": self.verdict()},
        }


_DEF = re.compile(r"^(\s*)(?:async\s+def|def|class)\s+(\w+)")


def def_lines(text: str) -> dict[str, int]:
    """qualname -> line of its `def`, from indentation alone (functions analysed without
    positions have line 0 in the per-file analysis)."""
    lines: dict[str, int] = {}
    stack: list[tuple[int, str]] = []
    for number, line in enumerate(split_lines(text), 1):
        match = _DEF.match(line)
        if not match:
            continue
        indent = len(match.group(1).expandtabs())
        while stack and stack[-1][0] >= indent:
            stack.pop()
        qualname = ".".join([name for _, name in stack] + [match.group(2)])
        lines.setdefault(qualname, number)
        stack.append((indent, match.group(2)))
    return lines


def _source(root: Path, path: str) -> str:
    full = Path(path) if Path(path).is_absolute() else root / path
    try:
        return full.read_text("utf-8")
    except (OSError, UnicodeDecodeError):
        return ""


def is_recorded_root(placement) -> bool:
    """A function the region file names (a root with its reason), not one reached from it."""
    return placement.reason.startswith(REASON_PREFIX) and len(placement.reached_via) <= 1


def run(paths: Sequence[str | Path], config: Config, jobs: int | None = None,
        cache_dir: Path | None = None, fail_on: str = "error") -> AuditResult:
    """Analyse the project as `check` does (graphlint.engine.pipeline), then classify every
    function the call graph reaches. Raises AuditError when nothing is a root,
    callgraph.EntryPointError for one that names nothing, and FileNotFoundError for a missing path."""
    tasks = collect_tasks(paths, config)
    project = analyse_project(tasks, replace(config, regions="discover"), Cache(cache_dir), jobs,
                              named=named_files(paths), full_graph=True)
    graph, files = project.graph, project.files
    assert graph is not None
    if not graph.order and not graph.incomplete:
        raise AuditError("nothing to audit: no capture site, nn.Module forward or entry point in the linted files "
                         "(give one with --entry-point module:Qualified.name, [tool.graphlint] entry-points, "
                         "or a `# graphlint: entry` comment on a def)")
    config = normalise_config(config)  # rule names in select, ignore, severity -> codes
    findings = finalize(files, config, config.select, config.ignore, graph.placements, project.warmed_up,
                        project.incomplete)
    by_function: dict[tuple[str, str], dict[str, int]] = {}
    errors: dict[tuple[str, str], int] = {}
    for finding in findings:
        if finding.suppressed or finding.function is None or finding.rule == "GL905":
            continue
        counts = by_function.setdefault((finding.path, finding.function), {})
        counts[finding.rule] = counts.get(finding.rule, 0) + 1
        if finding.severity == "error":
            errors[(finding.path, finding.function)] = errors.get((finding.path, finding.function), 0) + 1
    known_lines = {(file["path"], f["qualname"]): f.get("line", 0) for file in files for f in file["functions"]}
    scanned: dict[str, dict[str, int]] = {}
    result = AuditResult(entry_points=list(config.entry_points), unresolved=graph.unresolved, files=len(files),
                         config=config.to_dict(), incomplete=project.incomplete, fail_on=fail_on)
    names = graph.names
    for key in graph.order:
        placement = graph.placements[key]
        path, qualname = key
        line = known_lines.get(key, 0)
        if not line:
            if path not in scanned:
                scanned[path] = def_lines(_source(Path(config.root), path))
            line = scanned[path].get(qualname, 0)
        rules = dict(sorted(by_function.get(key, {}).items()))
        classes = sorted({c for c in (finding_class(r) for r in rules) if c}, key=CLASS_ORDER.index)
        if placement.region in ("eager", "host"):
            cls = placement.region
        else:
            cls = classes[0] if classes else CAPTURABLE
        result.rows.append(AuditRow(names.get(key, qualname), path, line, placement.region, cls, classes, rules,
                                    placement.reached_via, placement.reason, errors.get(key, 0),
                                    recorded=is_recorded_root(placement)))  # region file
    # Every root of the run: configured entry points, markers, capture sites, the region file, fallbacks.
    result.entry_points = [names.get(key, key[1]) for key in graph.entries]
    return result
