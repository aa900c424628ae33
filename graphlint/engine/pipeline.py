"""The one static pipeline every command reads: files -> per-file analyses (worker pool and
cache) -> facts across functions (the interprocedural rounds, through the same pool) -> regions
(the call graph, or the sweep). `check`, `audit`, `lint_snippet`, `runtime --lint` and the pytest
plugin all start from `analyse_project`, so they see the same functions with the same facts.
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

from graphlint import callgraph
from graphlint.callgraph import recorded
from graphlint.callgraph.graph import CallGraph
from graphlint.callgraph.regions import Placement
from graphlint.callgraph.module_names import package_module
from graphlint.config import Config
from graphlint.engine.cache import Cache
from graphlint.engine.interproc import Reanalyse, pooled, refine
from graphlint.engine.pool import analyse_all, default_jobs, gc_paused

# (phase, number of files): a long check shows its phases on stderr.
Progress = Callable[[str, int], None]


@dataclass
class ProjectAnalysis:
    """What the static half knows about a project once every stage has run.

    `placements` is None in the sweep mode (finalize then places every function per-step);
    `graph` is the whole call graph (its reachable order, names and edges) when a command asked
    for it (the audit), else None: the placements alone may come from the cache."""

    files: list[dict[str, Any]]
    placements: dict[tuple[str, str], Placement] | None = None
    unresolved: list[dict[str, Any]] = field(default_factory=list)
    warmed_up: set = field(default_factory=set)
    incomplete: list[dict[str, Any]] = field(default_factory=list)  # capture sites with a region not followed
    graph: CallGraph | None = None
    stats: dict[str, Any] = field(default_factory=dict)


def analyse_project(tasks: Sequence[tuple[str, str]], config: Config, cache: Cache, jobs: int | None = None,
                    named: frozenset[str] = frozenset(), progress: Progress | None = None,
                    full_graph: bool = False, first: Callable[..., list] | None = None,
                    again: Reanalyse | None = None) -> ProjectAnalysis:
    """Analyse `tasks` ((path to report, file to read) pairs) as one project.

    `first` / `again` replace the worker pool (an in-memory snippet is analysed in-process):
    `first(tasks)` gives the per-file analyses, `again(todo)` the re-analyses with facts."""
    jobs = jobs or default_jobs()
    progress = progress or (lambda phase, files: None)
    stats: dict[str, Any] = {}
    sweep = config.regions == "sweep"
    progress("analysing", len(tasks))
    if first is None:
        files = analyse_all(tasks, jobs, cache, stats, lean=sweep and not full_graph, named=named,
                            max_size=config.max_file_size, timeout=config.file_timeout, memory=config.worker_memory)
    else:
        files = first(tasks)
    # Facts across functions: parameters from call sites, returns, inherited attributes.
    files = refine(files, tasks, Path(config.root), cache, jobs, stats,
                   again=again or pooled(jobs, config.file_timeout, config.max_file_size, config.worker_memory))
    project = ProjectAnalysis(files=files, stats=stats)
    if sweep and not full_graph:
        return project
    progress("call graph and regions", len(files))
    if full_graph:
        graph = callgraph.build(files, config)
        project.graph = graph
        project.unresolved = json.loads(json.dumps(graph.unresolved))
        project.warmed_up = set(graph.warmed_up)
        project.incomplete = json.loads(json.dumps(graph.incomplete))
        if not sweep:
            project.placements = graph.placements
        return project
    with gc_paused():  # the cached graph is one large acyclic entry: collecting while it loads only rescans it
        project.placements, project.unresolved, project.warmed_up, project.incomplete = _cached_regions(
            files, config, cache)
    return project


def _cached_regions(files: list[dict[str, Any]], config: Config, cache: Cache) -> tuple[dict, list, set, list]:
    """Placements, unresolved calls, the capture functions a caller warms up and the capture
    sites whose region is incomplete, from the call graph, cached as a whole. The key covers
    every file's cache key, the module name each file has on disk (package folders may lie
    outside the linted paths) and the config the graph reads, so a warm run skips the graph."""
    key = ""
    if cache.folder is not None and len(cache.file_keys) == len(files) and all(cache.file_keys):
        root = Path(config.root)
        parts = [cache.fingerprint, "regions/4", str(root.resolve()),
                 repr((config.entry_points, config.host, config.eager, config.regions)),
                 recorded.cache_token(config)]  # the region file, by its digest
        parts += [f"{file_key}:{package_module(file['path'], root)}" for file_key, file in zip(cache.file_keys, files)]
        key = hashlib.blake2b("\n".join(parts).encode(), digest_size=16).hexdigest()
        cached = cache.get(key, _valid_regions)
        if cached is not None:
            reasons = cached["reasons"]
            placements = {(path, qualname): Placement(region, tuple(via), reasons[reason],
                                                      tuple((name, state) for name, state in known), compiled)
                          for path, qualname, region, via, reason, known, compiled in cached["placements"]}
            return (placements, cached["unresolved"], {tuple(k) for k in cached["warmed_up"]},
                    cached["incomplete"])
    graph = callgraph.build(files, config)
    unresolved = json.loads(json.dumps(graph.unresolved))  # as the cache gives it back
    incomplete = json.loads(json.dumps(graph.incomplete))
    if key:
        # Reasons repeat (one per root): stored once, placements hold their index.
        reasons: dict[str, int] = {}
        cache.put(key, {"placements": [[path, qualname, p.region, list(p.reached_via),
                                        reasons.setdefault(p.reason, len(reasons)), [list(k) for k in p.known],
                                        p.compiled]
                                       for (path, qualname), p in graph.placements.items()],
                        "reasons": list(reasons), "unresolved": unresolved,
                        "warmed_up": [list(k) for k in graph.warmed_up], "incomplete": incomplete})
    return graph.placements, unresolved, set(graph.warmed_up), incomplete


def _valid_regions(value: dict[str, Any]) -> bool:
    """The shape `_cached_regions` stores: placements [path, qualname, region, via, reason
    index, known parameter states, compiled only], the reasons, the unresolved calls, the warmed-up capture functions and the
    incomplete capture sites."""
    placements, unresolved, reasons = value.get("placements"), value.get("unresolved"), value.get("reasons")
    warmed_up, incomplete = value.get("warmed_up"), value.get("incomplete")
    return (isinstance(placements, list) and isinstance(unresolved, list) and isinstance(reasons, list)
            and isinstance(warmed_up, list) and all(isinstance(k, list) for k in warmed_up)
            and isinstance(incomplete, list) and all(isinstance(i, dict) for i in incomplete)
            and all(isinstance(item, list) and len(item) == 7 and isinstance(item[6], bool) and all(isinstance(part, str) for part in item[:3])
                    and isinstance(item[3], list) and isinstance(item[4], int) and 0 <= item[4] < len(reasons)
                    and isinstance(item[5], list) and all(isinstance(k, list) and len(k) == 2 for k in item[5])
                    for item in placements))
