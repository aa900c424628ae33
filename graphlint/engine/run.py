"""Run the static check: discover files -> analyse each (pool.py, cached by cache.py) -> place
functions in regions (the call graph, cached as a whole; every function per-step in the sweep
mode) -> findings (finalize.py) ->
fingerprints (fingerprints.py) -> the static half of a report.
"""
from __future__ import annotations

import hashlib
import json
import time
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

from graphlint import callgraph
from graphlint.callgraph import recorded
from graphlint.callgraph.regions import Placement
from graphlint.callgraph.values import package_module
from graphlint.config import Config
from graphlint.discovery import discover, relative_posix
from graphlint.engine import selectors
from graphlint.engine.cache import Cache
from graphlint.engine.finalize import _selected, finalize
from graphlint.engine.fingerprints import SPAN_FIELDS, fingerprint_findings
from graphlint.engine.interproc import refine
from graphlint.engine.pool import gc_paused, analyse_all, default_jobs
from graphlint.analysis.file import SKIP_REASON
from graphlint.report import Finding, StaticResult


def _call_graph_regions(files: list[dict[str, Any]], config: Config, cache: Cache) -> tuple[dict, list, set]:
    """Placements, unresolved calls and the capture functions a caller warms up, from the call
    graph, cached as a whole. The key covers
    every file's cache key, the module name each file has on disk (package folders may lie
    outside the linted paths) and the config the graph reads, so a warm run skips the graph."""
    key = ""
    if cache.folder is not None and len(cache.file_keys) == len(files) and all(cache.file_keys):
        root = Path(config.root)
        parts = [cache.fingerprint, str(root.resolve()), repr((config.entry_points, config.host, config.eager,
                                                                config.regions)),
                 recorded.cache_token(config)]  # region file: its digest
        parts += [f"{file_key}:{package_module(file['path'], root)}" for file_key, file in zip(cache.file_keys, files)]
        key = hashlib.blake2b("\n".join(parts).encode(), digest_size=16).hexdigest()
        cached = cache.get(key, _valid_graph)
        if cached is not None:
            reasons = cached["reasons"]
            placements = {(path, qualname): Placement(region, tuple(via), reasons[reason])
                          for path, qualname, region, via, reason in cached["placements"]}
            return placements, cached["unresolved"], {tuple(k) for k in cached.get("warmed_up", ())}
    graph = callgraph.build(files, config)
    unresolved = json.loads(json.dumps(graph.unresolved))  # as the cache gives it back
    if key:
        # Reasons repeat (one per root): stored once, placements hold their index.
        reasons: dict[str, int] = {}
        cache.put(key, {"placements": [[path, qualname, p.region, list(p.reached_via),
                                        reasons.setdefault(p.reason, len(reasons))]
                                       for (path, qualname), p in graph.placements.items()],
                        "reasons": list(reasons),
                        "unresolved": unresolved, "warmed_up": [list(k) for k in graph.warmed_up]})
    return graph.placements, unresolved, set(graph.warmed_up)


def _valid_graph(value: dict[str, Any]) -> bool:
    """The shape `_call_graph_regions` stores: placements [path, qualname, region, via, reason
    index], the reasons, the unresolved calls and the warmed-up capture functions."""
    placements, unresolved, reasons = value.get("placements"), value.get("unresolved"), value.get("reasons")
    warmed_up = value.get("warmed_up", [])
    return (isinstance(placements, list) and isinstance(unresolved, list) and isinstance(reasons, list)
            and isinstance(warmed_up, list) and all(isinstance(k, list) for k in warmed_up)
            and all(isinstance(item, list) and len(item) == 5 and all(isinstance(part, str) for part in item[:3])
                    and isinstance(item[3], list) and isinstance(item[4], int) and 0 <= item[4] < len(reasons)
                    for item in placements))


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
          progress: Callable[[str, int], None] | None = None) -> StaticResult:
    """The static half of a report, findings fingerprinted. Raises PathProblem for a named path
    that cannot be checked; paths a folder walk could not read are listed in `skipped`."""
    started = time.perf_counter()
    stats: dict[str, Any] = {}
    problems: list[str] = []
    # `tasks` given: (name to report, file to read) pairs, e.g. a source read from stdin.
    tasks = collect_tasks(paths, config, problems, force_exclude) if tasks is None else tasks
    config, select, ignore = selectors.validate_config(config, select, ignore)
    progress = progress or (lambda phase, files: None)  # (phase, number of files): a long check shows it
    progress("analysing", len(tasks))
    cache = Cache(cache_dir)
    sweep = config.regions == "sweep"
    files = analyse_all(tasks, jobs or default_jobs(), cache, stats, lean=sweep,
                        named=named_files(paths), max_size=config.max_file_size, timeout=config.file_timeout)
    # Facts across functions: parameters from call sites, returns, inherited attributes.
    files = refine(files, tasks, Path(config.root), cache, jobs or default_jobs())
    placements = None
    warmed_up: set = set()
    extra: dict[str, Any] = {}
    # Regions come from the call graph (capture sites, nn.Module forwards, entry points and
    # markers combined); the sweep mode makes every function per-step instead.
    if not sweep:
        progress("call graph and regions", len(files))
        with gc_paused():  # the cached graph is one large acyclic entry: collecting while it loads only rescans it
            placements, extra["unresolved_calls"], warmed_up = _call_graph_regions(files, config, cache)
    select = tuple(select) or config.select
    ignore = tuple(ignore) + config.ignore
    texts = {file["path"]: {tuple(raw[name] for name in SPAN_FIELDS): (file["statement_texts"][statement], flagged)
                            for raw, (statement, flagged) in zip(file["findings"], file["fingerprint_texts"])}
             for file in files if file.get("fingerprint_texts")}
    progress("findings", len(files))
    with gc_paused():
        found = finalize(files, config, select, ignore, placements, warmed_up)
        if not sweep:  # region file: one GL904 when recorded functions no longer match the code
            found = sorted(found + recorded.stale_findings(
                files, config, lambda code: _selected(code, select, ignore), cache), key=Finding.sort_key)
        findings = fingerprint_findings(found, config.root, texts)
    result = StaticResult(files=[f["path"] for f in files], findings=findings)
    result.regions = placements or {}  # region file: the cross-check asks what was analysed as captured
    skipped = sum(1 for f in files if f.get("skipped"))
    if skipped:
        # Counted among the files checked, so the report says they were not parsed, and why.
        result.extra["skipped_unparsed"] = {"files": skipped, "reason": SKIP_REASON}
    result.unresolved_calls = extra.get("unresolved_calls", [])
    if problems:
        result.extra["skipped"] = problems
    result.stats = {**stats, "seconds": round(time.perf_counter() - started, 3)}
    return result
