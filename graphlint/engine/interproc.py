"""Interprocedural rounds of the static check: after every file is analysed on its own (cached
by content), join the summaries over the project (graphlint.callgraph.project_summaries) and analyse
again only the files the rest of the code says something new about, with those facts. A
re-analysis is cached by the file's content key plus the facts it consumed, so a warm run
reads every round from the cache and stays as fast as before.
"""
from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any, Callable, Sequence

from graphlint.callgraph.project_summaries import solve
from graphlint.config import DEFAULT_FILE_TIMEOUT, DEFAULT_MAX_FILE_SIZE, DEFAULT_WORKER_MEMORY
from graphlint.engine.cache import Cache
from graphlint.engine.pool import gc_paused, supervise

# New facts can enable more facts (a return that becomes known makes a caller's argument
# known); each round re-analyses only the files whose facts changed.
MAX_ROUNDS = 2
# Below this much source to re-analyse, starting worker processes costs more than it saves.
_PARALLEL_MIN_BYTES = 200_000

# (index, path to report, file to read, facts) -> index -> the re-analysis.
Reanalyse = Callable[[list[tuple[int, str, str, dict]]], dict[int, dict[str, Any]]]


def _facts_key(file_key: str, facts: dict) -> str:
    blob = file_key + "\0interproc\0" + json.dumps(facts, sort_keys=True)
    return hashlib.blake2b(blob.encode(), digest_size=16).hexdigest()


def pooled(jobs: int, timeout: float = DEFAULT_FILE_TIMEOUT, max_size: int = DEFAULT_MAX_FILE_SIZE,
           memory: int = DEFAULT_WORKER_MEMORY) -> Reanalyse:
    """Re-analysis in the supervised worker pool the first analysis used: the same per-file time
    budget, the same crash isolation (a file that fails is GL903, the run goes on)."""
    def run(todo: list[tuple[int, str, str, dict]]) -> dict[int, dict[str, Any]]:
        sizes = {}
        for index, _, full, _ in todo:
            try:
                sizes[index] = Path(full).stat().st_size
            except OSError:
                sizes[index] = 0
        workers = min(jobs, len(todo)) if jobs > 1 and sum(sizes.values()) >= _PARALLEL_MIN_BYTES else 1
        ordered = sorted(todo, key=lambda item: (-sizes.get(item[0], 0), item[0]))
        tasks = [(index, rel, full, False, facts) for index, rel, full, facts in ordered]
        # With the digest of what each re-analysis read: refine caches it only if that is what the
        # first analysis read (the file may have been edited in between).
        return dict(supervise(tasks, workers, timeout, max_size, memory))
    return run


def refine(files: list[dict[str, Any]], tasks: Sequence[tuple[str, str]], root: Path, cache: Cache,
           jobs: int, stats: dict[str, Any] | None = None, again: Reanalyse | None = None,
           timeout: float = DEFAULT_FILE_TIMEOUT, max_size: int = DEFAULT_MAX_FILE_SIZE,
           memory: int = DEFAULT_WORKER_MEMORY) -> list[dict[str, Any]]:
    """`files`: the per-file analyses of `tasks` (same order). Returns them with the files
    that other functions' facts change analysed again (by `again`, else in the worker pool);
    the call facts of the first analysis are kept for the call graph."""
    again = again or pooled(jobs, timeout, max_size, memory)
    if len(files) != len(tasks):
        return files  # a file could not be read: keep the per-file results as they are
    current = list(files)
    used: list[dict] = [{} for _ in files]
    keys = cache.file_keys if len(cache.file_keys) == len(files) else [""] * len(files)
    rounds = reanalysed = 0
    # A warm run: the same files give the same facts; read them and the re-analyses back.
    project_key = _project_key(cache, keys, files, root)
    stored = cache.get(project_key) if project_key else None
    if stored is not None and len(stored.get("facts", ())) == len(files):
        warm = _from_cache(files, stored["facts"], keys, cache)
        if warm is not None:
            if stats is not None:
                stats["interprocedural"] = {"rounds": 0, "reanalysed": 0}
            return warm
    for _ in range(MAX_ROUNDS):
        with gc_paused():
            wanted = solve(current, root)
        changed = [i for i, facts in enumerate(wanted) if facts != used[i] and not files[i].get("parse_error")
                   and not files[i].get("skipped")]
        if not changed:
            break
        rounds += 1
        todo = []
        for i in changed:
            used[i] = wanted[i]
            if not wanted[i]:
                current[i] = files[i]  # back to what the file says on its own
                continue
            key = _facts_key(keys[i], wanted[i]) if keys[i] else ""
            cached = cache.get(key) if key else None
            if cached is not None:
                current[i] = _with_calls(cached, files[i])
            else:
                todo.append((i, (tasks[i][0], tasks[i][1], wanted[i]), key))
        keys_of = {i: key for i, _, key in todo}
        for i, result in again([(i, rel, full, facts) for i, (rel, full, facts), _ in todo]).items():
            key = keys_of[i]
            digest = result.pop("content_digest", None)
            edited = digest is not None and len(cache.file_digests) == len(files) and digest != cache.file_digests[i]
            # A re-analysis that hit a limit (time, crash) or read other bytes is never cached.
            if key and not result.get("limit") and not edited:
                cache.put(key, result)
            current[i] = _with_calls(result, files[i])
            reanalysed += 1
    if stats is not None:
        stats["interprocedural"] = {"rounds": rounds, "reanalysed": reanalysed}
    if project_key:
        cache.put(project_key, {"facts": used})
    return current


def _project_key(cache: Cache, keys: Sequence[str], files: Sequence[dict[str, Any]], root: Path) -> str:
    """Every file's content key and path under one root: the facts depend on nothing else."""
    if cache.folder is None or not all(keys):
        return ""
    parts = [cache.fingerprint, "interproc-facts", str(root.resolve())]
    parts += [f"{key}:{file['path']}" for key, file in zip(keys, files)]
    return hashlib.blake2b("\n".join(parts).encode(), digest_size=16).hexdigest()


def _from_cache(files: Sequence[dict[str, Any]], facts: Sequence[dict], keys: Sequence[str],
                cache: Cache) -> list[dict[str, Any]] | None:
    current = list(files)
    for i, file_facts in enumerate(facts):
        if file_facts:
            cached = cache.get(_facts_key(keys[i], file_facts))
            if cached is None:
                return None
            current[i] = _with_calls(cached, files[i])
    return current


# Summary fields that say where facts are wanted: read from the file alone, whatever facts
# a later round filled in (else the second round would take back what the first gave).
_OWN = ("sinks", "unknown_calls", "unknown_attrs", "wanted")


def _with_calls(result: dict[str, Any], first: dict[str, Any]) -> dict[str, Any]:
    """The re-analysis, with the call-graph facts of the first analysis (if it kept any)."""
    merged = dict(result)
    merged["extra"] = dict(result.get("extra") or {})
    if "calls" in (first.get("extra") or {}):
        merged["extra"]["calls"] = first["extra"]["calls"]
    # Which functions facts may change is what the file says on its own (with facts, the
    # places they fill in are no longer unknown).
    own = {f["q"]: {k: f[k] for k in _OWN if k in f}
           for f in ((first.get("extra") or {}).get("summary") or {}).get("functions", ())}
    summary = merged["extra"].get("summary")
    if summary:
        merged["extra"]["summary"] = {**summary, "functions": [{**f, **own.get(f["q"], {})}
                                                               for f in summary["functions"]]}
    return merged
