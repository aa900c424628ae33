"""Run the static check: discover files -> analyse each (pool.py, cached by cache.py) -> place
functions in regions (the call graph, cached as a whole) -> findings (finalize.py) ->
fingerprints (fingerprints.py) -> the static half of a report.
"""
from __future__ import annotations

import hashlib
import json
import time
from pathlib import Path
from typing import Any, Iterable, Sequence

from graphlint import callgraph
from graphlint.callgraph.regions import Placement
from graphlint.callgraph.values import package_module
from graphlint.config import Config
from graphlint.discovery import discover, relative_posix
from graphlint.engine.cache import Cache
from graphlint.engine.finalize import finalize
from graphlint.engine.fingerprints import SPAN_FIELDS, fingerprint_findings
from graphlint.engine.pool import gc_paused, analyse_all, default_jobs
from graphlint.analysis.file import SKIP_REASON
from graphlint.report import StaticResult


def _call_graph_regions(files: list[dict[str, Any]], config: Config, cache: Cache) -> tuple[dict, list]:
    """Placements and unresolved calls from the call graph, cached as a whole. The key covers
    every file's cache key, the module name each file has on disk (package folders may lie
    outside the linted paths) and the config the graph reads, so a warm run skips the graph."""
    key = ""
    if cache.folder is not None and len(cache.file_keys) == len(files) and all(cache.file_keys):
        root = Path(config.root)
        parts = [cache.fingerprint, str(root.resolve()), repr((config.entry_points, config.host, config.eager))]
        parts += [f"{file_key}:{package_module(file['path'], root)}" for file_key, file in zip(cache.file_keys, files)]
        key = hashlib.blake2b("\n".join(parts).encode(), digest_size=16).hexdigest()
        cached = cache.get(key, _valid_graph)
        if cached is not None:
            placements = {(path, qualname): Placement(region, tuple(via))
                          for path, qualname, region, via in cached["placements"]}
            return placements, cached["unresolved"]
    graph = callgraph.build(files, config)
    unresolved = json.loads(json.dumps(graph.unresolved))  # as the cache gives it back
    if key:
        cache.put(key, {"placements": [[path, qualname, p.region, list(p.reached_via)]
                                       for (path, qualname), p in graph.placements.items()],
                        "unresolved": unresolved})
    return graph.placements, unresolved


def _valid_graph(value: dict[str, Any]) -> bool:
    placements, unresolved = value.get("placements"), value.get("unresolved")
    return (isinstance(placements, list) and isinstance(unresolved, list)
            and all(isinstance(item, list) and len(item) == 4 and all(isinstance(part, str) for part in item[:3])
                    and isinstance(item[3], list) for item in placements))


def collect_tasks(paths: Iterable[str | Path], config: Config) -> list[tuple[str, str]]:
    root = config.root.resolve()
    return [(relative_posix(file, root), str(file)) for file in discover(paths, root, config.exclude)]


def named_files(paths: Iterable[str | Path]) -> frozenset[str]:
    """The paths given as files (not folders): always parsed, even if they never mention torch."""
    return frozenset(str(Path(p)) for p in paths if Path(p).is_file())


def check(paths: Sequence[str | Path], config: Config, select: Sequence[str] = (), ignore: Sequence[str] = (),
          jobs: int | None = None, cache_dir: Path | None = None) -> StaticResult:
    """The static half of a report, findings fingerprinted. Raises FileNotFoundError for a path
    that does not exist."""
    started = time.perf_counter()
    stats: dict[str, Any] = {}
    tasks = collect_tasks(paths, config)
    cache = Cache(cache_dir)
    files = analyse_all(tasks, jobs or default_jobs(), cache, stats, lean=not config.entry_points,
                        named=named_files(paths), max_size=config.max_file_size, timeout=config.file_timeout)
    placements = None
    extra: dict[str, Any] = {}
    # `# graphlint: entry` on a def is an entry point too, with or without configured ones.
    if config.entry_points or any(f.get("marker") == "entry" for file in files for f in file.get("functions", [])):
        placements, extra["unresolved_calls"] = _call_graph_regions(files, config, cache)
    select = tuple(select) or config.select
    ignore = tuple(ignore) + config.ignore
    texts = {file["path"]: {tuple(raw[name] for name in SPAN_FIELDS): (file["statement_texts"][statement], flagged)
                            for raw, (statement, flagged) in zip(file["findings"], file["fingerprint_texts"])}
             for file in files if file.get("fingerprint_texts")}
    with gc_paused():
        findings = fingerprint_findings(finalize(files, config, select, ignore, placements), config.root, texts)
    result = StaticResult(files=[f["path"] for f in files], findings=findings)
    skipped = sum(1 for f in files if f.get("skipped"))
    if skipped:
        # Counted among the files checked, so the report says they were not parsed, and why.
        result.extra["skipped_unparsed"] = {"files": skipped, "reason": SKIP_REASON}
    result.unresolved_calls = extra.get("unresolved_calls", [])
    result.stats = {**stats, "seconds": round(time.perf_counter() - started, 3)}
    return result
