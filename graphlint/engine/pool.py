"""Analyse the files of a run: each from the cache when its entry is current, the rest in a
pool of worker processes (largest first), results in input order whatever the number of jobs.
A worker reads and analyses one file and returns plain data, which the cache stores as it is.
"""
from __future__ import annotations

import gc
import multiprocessing
import os
import sys
from concurrent.futures import ProcessPoolExecutor, as_completed
from contextlib import contextmanager
from dataclasses import asdict, fields, is_dataclass
from pathlib import Path
from typing import Any, Iterator, Sequence

from graphlint.analysis import suppressions
from graphlint.analysis.file import FileAnalysis, analyze_source
from graphlint.engine.cache import Cache
from graphlint.engine.fingerprints import finding_texts
from graphlint.rules import ALL_RULES


def _flat(item: Any) -> Any:
    """A flat dataclass (a finding) as a dict; anything else as it is."""
    return {f.name: getattr(item, f.name) for f in fields(item)} if is_dataclass(item) else item


def analysis_to_dict(result: FileAnalysis, suppressions_found: dict) -> dict[str, Any]:
    # dataclasses.asdict would deep-copy every nested list and dict (the call facts are large);
    # the analysis is not used after this, so converting one level down is the same dict.
    data = {f.name: getattr(result, f.name) for f in fields(result)}
    data["findings"] = [_flat(item) for item in result.findings]
    data["suppressions"] = {str(line): [asdict(s) for s in items] for line, items in suppressions_found.items()}
    return data


def analyse_file(task: tuple[str, str]) -> dict[str, Any]:
    """Worker: read and analyse one file. Never raises for bad input: a read error becomes a
    parse error finding."""
    rel, full = task
    try:
        text = Path(full).read_bytes().decode("utf-8")
    except (OSError, UnicodeDecodeError) as error:
        result = FileAnalysis(rel, parse_error={"line": 1, "col": 1, "message": f"could not read file: {error}"})
        return analysis_to_dict(result, {})
    result = analyze_source(rel, text, ALL_RULES)
    data = analysis_to_dict(result, suppressions.scan(text) if result.findings or result.functions else {})
    if result.findings:
        # The source half of each finding's fingerprint needs the text and a parse of it: made
        # here, in the worker, it is cached with the rest and a warm run reads no source.
        data["fingerprint_texts"] = [list(texts) for texts in finding_texts(text, result.findings)]
    return data


def default_jobs() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:
        return max(1, os.cpu_count() or 1)


# Below this much source, starting worker processes costs more than it saves.
_PARALLEL_MIN_BYTES = 200_000


@contextmanager
def gc_paused() -> Iterator[None]:
    """Cached results and findings are many small containers without cycles: collecting
    while they are built only rescans them (a third of a warm run)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def _worker_init() -> None:
    # Everything imported so far lives as long as the worker: keep the cyclic GC off it.
    gc.freeze()


def _analyse_indexed(task: tuple[int, str, str]) -> tuple[int, dict[str, Any]]:
    index, rel, full = task
    return index, analyse_file((rel, full))


def _workers(todo: list[tuple[int, str, str, int]], jobs: int) -> int:
    if jobs > 1 and len(todo) > 1 and sum(size for *_, size in todo) >= _PARALLEL_MIN_BYTES:
        return min(jobs, len(todo))
    return 1


def _analyse_misses(todo: list[tuple[int, str, str, int]], workers: int) -> Iterator[tuple[int, dict[str, Any]]]:
    """(index, analysis) for each task, in completion order. Workers take the largest files
    first, so no core is left with one big file at the end."""
    if workers > 1:
        ordered = [task[:3] for task in sorted(todo, key=lambda task: (-task[3], task[0]))]
        # On Linux, fork: workers start in milliseconds with graphlint and the rules imported.
        context = multiprocessing.get_context("fork") if sys.platform.startswith("linux") else None
        with ProcessPoolExecutor(max_workers=workers, mp_context=context,
                                 initializer=_worker_init) as pool:
            futures = [pool.submit(_analyse_indexed, task) for task in ordered]
            try:
                for future in as_completed(futures):
                    yield future.result()
            except BaseException:
                for future in futures:
                    future.cancel()  # an internal error: do not wait for the rest of the tree
                raise
        return
    for index, rel, full, _ in todo:
        yield index, analyse_file((rel, full))


def _has_entry_marker(result: dict[str, Any]) -> bool:
    return any(f.get("marker") == "entry" for f in result.get("functions", ()))


def analyse_all(tasks: Sequence[tuple[str, str]], jobs: int, cache: Cache,
                stats: dict[str, Any] | None = None, lean: bool = False) -> list[dict[str, Any]]:
    """Analyse files, reusing cached results; output order is the input order whatever the
    number of jobs. `stats` (if given) receives the counts of cached and analysed files.

    `lean`: the call facts (most of a result) stay only in the cache, not in memory, unless a
    file has an entry marker, in which case the call graph needs them and they are read back;
    so memory grows with the findings, not with the tree."""
    results: list[dict[str, Any] | None] = [None] * len(tasks)
    keys: list[str] = [""] * len(tasks)
    todo: list[tuple[int, str, str, int]] = []
    lean_files: list[int] = []  # results whose call facts were left in the cache

    def keep(index: int, value: dict[str, Any], in_cache: bool) -> None:
        if lean and in_cache and "calls" in value.get("extra", {}):
            value["extra"] = {k: v for k, v in value["extra"].items() if k != "calls"}
            lean_files.append(index)
        results[index] = value

    with gc_paused():
        for index, (rel, full) in enumerate(tasks):
            try:
                data: bytes | None = Path(full).read_bytes()
            except OSError:
                data = None  # the worker reports the read error as a finding
            if cache.folder is not None and data is not None:
                keys[index] = cache.key(data, rel)
                cached = cache.get(keys[index])
                if cached is not None:
                    keep(index, cached, True)
                    continue
            todo.append((index, rel, full, len(data or b"")))
    workers = _workers(todo, jobs)
    for index, value in _analyse_misses(todo, workers):
        keep(index, value, bool(keys[index]) and cache.put(keys[index], value))
    if lean_files and any(_has_entry_marker(r) for r in results if r is not None):
        for index in lean_files:
            stored = cache.get(keys[index])
            source = stored if stored is not None else analyse_file(tasks[index])
            results[index]["extra"]["calls"] = source.get("extra", {}).get("calls", {})  # type: ignore[index]
    cache.file_keys = keys
    if stats is not None:
        stats.update(files=len(tasks), cache_hits=len(tasks) - len(todo), analysed=len(todo), workers=workers)
    return [r for r in results if r is not None]
