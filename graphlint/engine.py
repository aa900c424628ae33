"""Run the static check: discover files -> analyse each (in parallel, cached by content) ->
place functions in regions -> filter by rule selection, regions and suppressions -> findings.

The per-file analysis depends only on the file's text and graphlint's version, so it is
cached (.graphlint_cache/, keyed by content, path and graphlint's fingerprint) and computed in
any order by a pool of worker processes; everything that depends on the config happens after,
in `finalize`, which is cheap and deterministic (output is identical for any --jobs). With entry
points the call graph over all files is cached as a whole too. bench/README.md has the figures.
"""
from __future__ import annotations

import gc
import hashlib
import json
import multiprocessing
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from contextlib import contextmanager
from dataclasses import asdict, fields, is_dataclass
from pathlib import Path
from typing import Any, Iterable, Iterator, Sequence

from graphlint import __version__, suppressions
from graphlint.analysis import FileAnalysis, FileFinding, analyze_source
from graphlint.baseline import SPAN_FIELDS, finding_texts, fingerprint_findings
from graphlint.config import Config
from graphlint.discovery import discover, is_excluded, relative_posix
from graphlint.report import Finding, StaticResult
from graphlint.rules import ALL_RULES, BY_CODE, BY_NAME

_CACHE_FORMAT = 2  # 2: per-file fingerprint texts


def rules_fingerprint() -> str:
    """Changes whenever graphlint or any rule module changes, so stale cache entries miss."""
    digest = hashlib.blake2b(digest_size=8)
    digest.update(f"{__version__}:{_CACHE_FORMAT}".encode())
    import graphlint
    import graphlint.rules as rules_pkg

    for package in (graphlint, rules_pkg):
        folder = Path(package.__file__).parent
        for file in sorted(folder.rglob("*.py")) + sorted(folder.rglob("*.toml")):
            stat = file.stat()
            digest.update(f"{file.name}:{stat.st_size}:{stat.st_mtime_ns}".encode())
    return digest.hexdigest()


def _flat(item: Any) -> Any:
    """A flat dataclass (a finding) as a dict; anything else as it is."""
    return {f.name: getattr(item, f.name) for f in fields(item)} if is_dataclass(item) else item


def _analysis_to_dict(result: FileAnalysis, suppressions_found: dict) -> dict[str, Any]:
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
        return _analysis_to_dict(result, {})
    result = analyze_source(rel, text, ALL_RULES)
    data = _analysis_to_dict(result, suppressions.scan(text) if result.findings or result.functions else {})
    if result.findings:
        # The source half of each finding's fingerprint needs the text and a parse of it: made
        # here, in the worker, it is cached with the rest and a warm run reads no source.
        data["fingerprint_texts"] = [list(texts) for texts in finding_texts(text, result.findings)]
    return data


class Cache:
    """Per-file analysis results in `folder`, keyed by the file's content and path and by the
    graphlint fingerprint (version + source of graphlint and its rules). The config is not
    part of the key: the per-file analysis never reads it (`finalize` applies it after)."""

    def __init__(self, folder: Path | None):
        self.folder = folder
        self.fingerprint = rules_fingerprint() if folder else ""
        self.hits = 0
        self.file_keys: list[str] = []  # of the last analyse_all, in task order ("" = uncached)

    def key(self, data: bytes, rel: str) -> str:
        return hashlib.blake2b(data + b"\0" + rel.encode() + self.fingerprint.encode(), digest_size=16).hexdigest()

    def get(self, key: str) -> dict[str, Any] | None:
        if self.folder is None:
            return None
        path = self.folder / key[:2] / f"{key}.json"
        try:
            with open(path, encoding="utf-8") as handle:
                value = json.load(handle)
        except (OSError, ValueError):
            return None  # missing or damaged: analyse again
        self.hits += 1
        return value

    def put(self, key: str, value: dict[str, Any]) -> bool:
        """Store `value`; False when it could not be (no folder, not JSON, not writable)."""
        if self.folder is None:
            return False
        path = self.folder / key[:2] / f"{key}.json"
        try:
            text = json.dumps(value)
        except (TypeError, ValueError):
            return False  # not JSON (a bug upstream); the run stays correct, only uncached
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(f".{os.getpid()}.tmp")
            tmp.write_text(text, encoding="utf-8")
            os.replace(tmp, path)
        except OSError:
            return False  # a read-only tree still lints, just without a cache
        return True


def default_jobs() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:
        return max(1, os.cpu_count() or 1)


# Below this much source, starting worker processes costs more than it saves.
_PARALLEL_MIN_BYTES = 200_000


@contextmanager
def _gc_paused() -> Iterator[None]:
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

    with _gc_paused():
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


def _selected(code: str, select: Sequence[str], ignore: Sequence[str]) -> bool:
    def hit(patterns: Sequence[str]) -> int:
        # The longest matching prefix wins, as in ruff: --select GL1 --ignore GL101.
        best = -1
        for pattern in patterns:
            pattern = pattern.upper()
            if pattern == "ALL" or code.startswith(pattern):
                best = max(best, 0 if pattern == "ALL" else len(pattern))
        return best

    chosen = hit(select) if select else 0
    dropped = hit(ignore)
    return chosen >= 0 and chosen >= dropped if dropped >= 0 else chosen >= 0


def _resolve_code(token: str) -> str | None:
    upper = token.upper()
    if upper in BY_CODE:
        return upper
    if token in BY_NAME:
        return BY_NAME[token].code
    if upper.startswith("GL") and any(code.startswith(upper) for code in BY_CODE):
        return upper
    return None


def finalize(files: list[dict[str, Any]], config: Config, select: Sequence[str], ignore: Sequence[str],
             placements: dict | None = None) -> list[Finding]:
    """Turn per-file analyses into report findings under the config (pure and ordered)."""
    from graphlint.regions import CAPTURED, EAGER, HOST, UNREACHED, Placement, default_placements

    if placements is None:
        placements = default_placements(files, config.host, config.eager)
    findings: list[Finding] = []
    for file in files:
        path = file["path"]
        file_ignores = [code for pattern, codes in config.per_file_ignores.items()
                        if is_excluded(path, [pattern]) for code in codes]
        sup_by_line = {int(k): [suppressions.Suppression(**{**s, "codes": tuple(s["codes"])}) for s in v]
                       for k, v in file.get("suppressions", {}).items()}
        candidates: list[tuple[FileFinding | None, dict]] = []
        if file.get("parse_error"):
            error = file["parse_error"]
            candidates.append((None, {"rule": "GL900", "function": None, "line": error["line"], "col": error["col"],
                                      "end_line": error["line"], "end_col": error["col"], "statement_line": error["line"],
                                      "message": f"{BY_CODE['GL900'].message}: {error['message']}",
                                      "fix": BY_CODE["GL900"].fix, "region": "module", "reached_via": ()}))
        for raw in file.get("findings", []):
            placement = placements.get((path, raw["function"]), Placement(CAPTURED))
            rule = BY_CODE[raw["rule"]]
            # Capture orchestration rules (GL5xx) judge the code that captures and replays,
            # which is host code by design, so they hold in every region; a `host_code_only`
            # one leaves per-step regions to the sync rule that reports the same node (GL106).
            orchestration = getattr(rule, "applies_in_host_code", False)
            if placement.region in (HOST, UNREACHED) and not orchestration:
                continue
            if orchestration and getattr(rule, "host_code_only", False) and placement.region in (CAPTURED, EAGER):
                continue
            if placement.region == EAGER and rule.capture_only:
                continue
            candidates.append((None, {**raw, "region": placement.region, "reached_via": placement.reached_via}))
        for line, items in sup_by_line.items():
            for item in items:
                for token in item.codes:
                    if _resolve_code(token) is None:
                        candidates.append((None, {"rule": "GL901", "function": None, "line": line, "col": item.col,
                                                  "end_line": line, "end_col": item.col, "statement_line": line,
                                                  "message": f"suppression names unknown rule '{token}'",
                                                  "fix": BY_CODE["GL901"].fix, "region": "module", "reached_via": ()}))
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
                for item in sup_by_line.get(line, []):
                    if code != "GL901" and suppressions.matches(item, code, rule.name):
                        suppressed, reason = True, item.reason
            findings.append(Finding(
                rule=code, family=rule.family(), severity=severity, path=path,
                line=raw["line"], col=raw["col"], end_line=raw["end_line"], end_col=raw["end_col"],
                function=raw["function"], region=raw["region"], message=raw["message"], fix=raw["fix"],
                name=rule.name, suppressed=suppressed, suppression_reason=reason,
                reached_via=tuple(raw["reached_via"]),
            ))
    findings.sort(key=Finding.sort_key)
    return findings


def _call_graph_regions(files: list[dict[str, Any]], config: Config, cache: Cache) -> tuple[dict, list]:
    """Placements and unresolved calls from the call graph, cached as a whole. The key covers
    every file's cache key, the module name each file has on disk (package folders may lie
    outside the linted paths) and the config the graph reads, so a warm run skips the graph."""
    from graphlint import callgraph
    from graphlint.callgraph_values import package_module
    from graphlint.regions import Placement

    key = ""
    if cache.folder is not None and len(cache.file_keys) == len(files) and all(cache.file_keys):
        root = Path(config.root)
        parts = [cache.fingerprint, str(root.resolve()), repr((config.entry_points, config.host, config.eager))]
        parts += [f"{file_key}:{package_module(file['path'], root)}" for file_key, file in zip(cache.file_keys, files)]
        key = hashlib.blake2b("\n".join(parts).encode(), digest_size=16).hexdigest()
        cached = cache.get(key)
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


def collect_tasks(paths: Iterable[str | Path], config: Config) -> list[tuple[str, str]]:
    root = config.root.resolve()
    return [(relative_posix(file, root), str(file)) for file in discover(paths, root, config.exclude)]


def check(paths: Sequence[str | Path], config: Config, select: Sequence[str] = (), ignore: Sequence[str] = (),
          jobs: int | None = None, cache_dir: Path | None = None) -> StaticResult:
    """The static half of a report, findings fingerprinted. Raises FileNotFoundError for a path
    that does not exist."""
    started = time.perf_counter()
    stats: dict[str, Any] = {}
    tasks = collect_tasks(paths, config)
    cache = Cache(cache_dir)
    files = analyse_all(tasks, jobs or default_jobs(), cache, stats, lean=not config.entry_points)
    placements = None
    extra: dict[str, Any] = {}
    # `# graphlint: entry` on a def is an entry point too, with or without configured ones.
    if config.entry_points or any(f.get("marker") == "entry" for file in files for f in file.get("functions", [])):
        placements, extra["unresolved_calls"] = _call_graph_regions(files, config, cache)
    select = tuple(select) or config.select
    ignore = tuple(ignore) + config.ignore
    texts = {file["path"]: {tuple(raw[name] for name in SPAN_FIELDS): tuple(pair)
                            for raw, pair in zip(file["findings"], file["fingerprint_texts"])}
             for file in files if file.get("fingerprint_texts")}
    with _gc_paused():
        findings = fingerprint_findings(finalize(files, config, select, ignore, placements), config.root, texts)
    result = StaticResult(files=[f["path"] for f in files], findings=findings)
    result.unresolved_calls = extra.get("unresolved_calls", [])
    result.stats = {**stats, "seconds": round(time.perf_counter() - started, 3)}
    return result
