"""Run the static check: discover files -> the project's analysis (pipeline.py: per-file
analyses, facts across functions, regions) -> findings (finalize.py) -> fingerprints
(fingerprints.py) -> the static half of a report.
"""
from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Callable, Collection, Iterable, Sequence

from graphlint.callgraph import recorded
from graphlint.config import Config
from graphlint.discovery import discover, relative_posix
from graphlint.engine import selectors
from graphlint.engine.cache import Cache
from graphlint.engine.finalize import finalize, selected
from graphlint.engine.fingerprints import SPAN_FIELDS, fingerprint_findings
from graphlint.engine.pipeline import analyse_project
from graphlint.engine.pool import capped_jobs, default_jobs, gc_paused
from graphlint.analysis.walk.file import SKIP_REASON
from graphlint.report import Finding, StaticResult


def collect_tasks(paths: Iterable[str | Path], config: Config, problems: list[str] | None = None,
                  force_exclude: bool = False) -> list[tuple[str, str]]:
    """(path relative to the root, path to open) of every file to analyse. Raises PathProblem
    for a named path that cannot be checked; what a walk cannot read goes to `problems`."""
    root = config.root.resolve()
    files = discover(paths, root, config.exclude, config.extend_exclude, problems=problems,
                     force_exclude=force_exclude or config.force_exclude, respect_gitignore=config.respect_gitignore)
    return [(relative_posix(file, root), str(file)) for file in files]


def named_files(paths: Iterable[str | Path]) -> frozenset[str]:
    """The paths given as files (not folders): always parsed, even if they never mention torch."""
    return frozenset(str(Path(p)) for p in paths if Path(p).is_file())


def check(paths: Sequence[str | Path], config: Config, select: Sequence[str] = (), ignore: Sequence[str] = (),
          jobs: int | None = None, cache_dir: Path | None = None, force_exclude: bool = False,
          tasks: list[tuple[str, str]] | None = None,
          progress: Callable[[str, int], None] | None = None,
          report_only: Collection[str] | None = None) -> StaticResult:
    """The static half of a report, findings fingerprinted. Raises PathProblem for a named path
    that cannot be checked; paths a folder walk could not read are listed in `skipped`.

    `report_only`: the paths (relative to the root) to report; the rest of `paths` is analysed
    for the regions and facts it gives those files (files named on the command line, staged by
    pre-commit, changed since a revision or read from stdin, inside their project)."""
    started = time.perf_counter()
    stats: dict[str, Any] = {}
    problems: list[str] = []
    # `tasks` given: (name to report, file to read) pairs, e.g. a source read from stdin.
    tasks = collect_tasks(paths, config, problems, force_exclude) if tasks is None else tasks
    config, select, ignore = selectors.validate_config(config, select, ignore)
    progress = progress or (lambda phase, files: None)  # (phase, number of files): a long check shows it
    cache = Cache(cache_dir)
    project = analyse_project(tasks, config, cache, capped_jobs(jobs or default_jobs()), named=named_files(paths), progress=progress)
    files = project.files
    stats.update(project.stats)
    select = tuple(select) or config.select
    ignore = tuple(ignore) + config.ignore
    texts = {file["path"]: {tuple(raw[name] for name in SPAN_FIELDS): (file["statement_texts"][statement], flagged)
                            for raw, (statement, flagged) in zip(file["findings"], file["fingerprint_texts"])}
             for file in files if file.get("fingerprint_texts")}
    progress("findings", len(files))
    with gc_paused():
        found = finalize(files, config, select, ignore, project.placements, project.warmed_up, project.incomplete)
        if config.regions != "sweep":  # region file: one GL904 when recorded functions no longer match the code
            found = sorted(found + recorded.stale_findings(files, config, lambda code: selected(code, select, ignore), cache), key=Finding.sort_key)
        findings = fingerprint_findings(found, config.root, texts)
    if report_only is not None:
        wanted = set(report_only)
        files = [f for f in files if f["path"] in wanted]
        findings = [f for f in findings if f.path in wanted]
    result = StaticResult(files=[f["path"] for f in files], findings=findings)
    result.regions = project.placements or {}  # region file: the cross-check asks what was analysed as captured
    skipped = sum(1 for f in files if f.get("skipped"))
    if skipped:
        # Counted among the files checked, so the report says they were not parsed, and why.
        result.extra["skipped_unparsed"] = {"files": skipped, "reason": SKIP_REASON}
    result.unresolved_calls = [u for u in project.unresolved
                               if report_only is None or u.get("path") in set(report_only)]
    if problems:
        result.extra["skipped"] = problems
    result.stats = {**stats, "seconds": round(time.perf_counter() - started, 3)}
    return result


def project_paths(config: Config) -> list[str]:
    """The project a config describes: its `paths`, else the folder it lives in; none without a
    config file (then the files named are the project)."""
    if config.source is None:
        return []
    return [str(config.root / p) for p in config.paths] or [str(config.root)]


def check_in_project(paths: Sequence[str | Path], config: Config, select: Sequence[str] = (),
                     ignore: Sequence[str] = (), jobs: int | None = None, cache_dir: Path | None = None,
                     force_exclude: bool = False,
                     progress: Callable[[str, int], None] | None = None) -> StaticResult:
    """`check` of the paths named on a command line (or staged by pre-commit), with regions and
    facts computed over the whole project (the cache serves the files not named), reporting the
    named files only: a file gets the same findings checked alone, staged alone or with the tree.

    A file outside the project (outside its `paths`, or named although the config excludes it,
    as the known-bad reference of a project is) is analysed with the other such files alone."""
    project = project_paths(config)
    if not project or not paths:
        return check(paths or project, config, select, ignore, jobs, cache_dir, force_exclude, progress=progress)
    problems: list[str] = []  # what the walks of the named paths could not read: the run reports them
    named = collect_tasks(paths, config, problems, force_exclude=force_exclude)
    project_tasks = collect_tasks(project, config)
    members = {rel for rel, _ in project_tasks}
    alone = [(rel, full) for rel, full in named if rel not in members]
    together = [rel for rel, _ in named if rel in members]
    parts: list[StaticResult] = []
    if together:
        parts.append(check(paths, config, select, ignore, jobs, cache_dir, force_exclude, tasks=project_tasks,
                           progress=progress, report_only=together))
    if alone:  # named files, so parsed even without a torch import; walked once already
        parts.append(check([full for _, full in alone], config, select, ignore, jobs, cache_dir, force_exclude,
                           tasks=alone, progress=progress))
    result = _combined(parts) if parts else StaticResult()
    if problems:
        result.extra["skipped"] = list(dict.fromkeys([*result.extra.get("skipped", []), *problems]))
    return result


def _combined(parts: list[StaticResult]) -> StaticResult:
    if len(parts) == 1:
        return parts[0]
    result = StaticResult()
    for part in parts:
        result.files.extend(f for f in part.files if f not in result.files)
        result.findings.extend(part.findings)
        result.unresolved_calls.extend(part.unresolved_calls)
        for key, value in part.extra.items():
            if isinstance(value, list):
                result.extra.setdefault(key, []).extend(value)
            elif key == "skipped_unparsed" and key in result.extra:
                result.extra[key] = {**value, "files": result.extra[key]["files"] + value["files"]}
            else:
                result.extra.setdefault(key, value)
    result.findings.sort(key=lambda f: f.sort_key())
    result.stats = {"seconds": round(sum(part.stats.get("seconds", 0) for part in parts), 3)}
    return result

