"""Analyse the files of a run: each from the cache when its entry is current, the rest in
worker processes (largest first), results in input order whatever the number of jobs.

Every file is analysed in a worker process, with --jobs 1 too, on a large stack: a file that
crashes the parser (a stack overflow in libcst's native code cannot be caught in-process), runs
past the per-file time budget or hits a limit becomes a GL903 finding on that file, the worker
is replaced, and every other file is still checked. Workers die with the run (Ctrl-C, SIGTERM).
"""
from __future__ import annotations

import gc
import multiprocessing
import os
import signal
import stat
import sys
import time
from collections import deque
from contextlib import contextmanager
from dataclasses import asdict, dataclass, fields, is_dataclass
from multiprocessing.connection import Connection, wait
from typing import Any, Iterator, Sequence

from graphlint.analysis.text import suppressions
from graphlint.analysis.text.source import NotSource, SourceError, TooLarge, decode, read_source
from graphlint.analysis.walk.file import FileAnalysis, analyze_source, limit_record, too_large
from graphlint.analysis.walk.stack import run_deep
from graphlint.config import DEFAULT_FILE_TIMEOUT, DEFAULT_MAX_FILE_SIZE, DEFAULT_WORKER_MEMORY
from graphlint.engine.cache import Cache, content_digest, valid_analysis
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


def analyse_file(task: tuple, facts: dict | None = None) -> dict[str, Any]:
    """Read and analyse one file. `task`: (path relative to the root, full path[, parse it even
    if it never mentions torch[, max-file-size]]). `facts`: what the rest of the project says
    about its functions (an interprocedural round: the call facts of the first analysis are
    kept, so none are gathered). Never raises for bad input: an unreadable or undecodable file
    becomes a parse error finding.

    The digest of the bytes analysed is returned with the analysis (`content_digest`): the file
    may have changed since the run looked it up in the cache, and the entry must be stored under
    what was analysed, never under what was looked up."""
    rel, full = task[0], task[1]
    force = task[2] if len(task) > 2 else False
    max_size = task[3] if len(task) > 3 else DEFAULT_MAX_FILE_SIZE
    try:
        data = read_source(full, max_size)  # a regular file, re-checked now it is open
    except TooLarge:
        return limited(rel, f"larger than max-file-size ({max_size:,} bytes)")
    except OSError as error:
        result = FileAnalysis(rel, parse_error={"line": 1, "col": 1, "message": f"could not read file: {error}"})
        return analysis_to_dict(result, {})
    try:
        text = decode(data)
    except SourceError as error:
        result = FileAnalysis(rel, parse_error={"line": 1, "col": 1, "message": f"could not read file: {error}"})
        return {**analysis_to_dict(result, {}), "content_digest": content_digest(data)}
    if facts is not None:
        result = analyze_source(rel, text, ALL_RULES, force=force, external=facts, call_graph=False,
                                max_size=max_size)
    else:
        result = analyze_source(rel, text, ALL_RULES, force=force, max_size=max_size)
    return {**finished(result, text), "content_digest": content_digest(data)}


def finished(result: FileAnalysis, text: str) -> dict[str, Any]:
    """A file's analysis as the cache stores it: with its suppressions and the source half of
    each finding's fingerprint. Made here, in the worker, and cached with the rest, so a warm
    run reads no source."""
    data = analysis_to_dict(result, suppressions.scan(text) if result.findings or result.functions else {})
    if result.findings:
        # Findings in one statement share its text: stored once, each finding holds its index
        # (20,000 findings in one long statement would otherwise store it 20,000 times).
        unique: dict[str, int] = {}
        data["fingerprint_texts"] = [[unique.setdefault(statement, len(unique)), flagged]
                                     for statement, flagged in finding_texts(text, result.findings)]
        data["statement_texts"] = list(unique)
    return data


def limited(rel: str, reason: str) -> dict[str, Any]:
    """The analysis of a file that was not analysed (GL903 with `reason`); never cached."""
    return analysis_to_dict(FileAnalysis(rel, limit=limit_record(reason)), {})


def guarded_analysis(task: tuple[str, str, bool, int], facts: dict | None = None) -> dict[str, Any]:
    """`analyse_file` on a large stack; an exception on this one file (a bug in a rule, memory)
    becomes a GL903 finding that names it, so the run goes on with the others."""
    try:
        # One argument for a first analysis (what tests put in its place take one too).
        return run_deep(analyse_file, task) if facts is None else run_deep(analyse_file, task, facts)
    except MemoryError:
        return limited(task[0], _OUT_OF_MEMORY)
    except RecursionError:
        return limited(task[0], "nested too deeply to analyse")
    except Exception as error:  # noqa: BLE001 - one file's failure must not lose the run
        return limited(task[0], f"internal error while analysing it: {type(error).__name__}: {error} "
                                "(please report this file)")


def default_jobs() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:
        return max(1, os.cpu_count() or 1)


# More workers than this many per core only add memory (each holds a parser and its stack).
JOBS_PER_CORE = 4


def max_jobs() -> int:
    return JOBS_PER_CORE * default_jobs()


def capped_jobs(jobs: int) -> int:
    """`jobs` (from -j), at most JOBS_PER_CORE per core, with a note on stderr when it is cut."""
    cap = max_jobs()
    if jobs > cap:
        sys.stderr.write(f"graphlint: note: -j {jobs} capped at {cap} ({JOBS_PER_CORE} per core, "
                         f"{default_jobs()} cores)\n")
        return cap
    return jobs


# Below this much source, more than one worker process costs more than it saves.
_PARALLEL_MIN_BYTES = 200_000


@contextmanager
def gc_paused() -> Iterator[None]:
    """Cached results and findings are many small containers without cycles: collecting
    while they are built, or after, only rescans them (a third of a warm run)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        # What was built stays alive to the end of the run: moved to the permanent generation,
        # the next collection does not scan it again (that scan was a sixth of a warm run).
        # Reference counting still frees it, and nothing built here holds a cycle.
        gc.freeze()
        if was_enabled:
            gc.enable()


def _die_with_parent() -> None:
    """Linux: the kernel kills this worker when the run's process dies, however it dies."""
    if not sys.platform.startswith("linux"):
        return
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass
    if os.getppid() == 1:  # the parent died before prctl took effect
        os._exit(1)


_OUT_OF_MEMORY = "its analysis ran out of memory (worker-memory); the worker was replaced"


def _out_of_memory(value: dict[str, Any]) -> bool:
    return (value.get("limit") or {}).get("message") == _OUT_OF_MEMORY


def _mapped_bytes() -> int:
    """This process's address space in use (Linux: /proc/self/statm), 0 where unknown."""
    try:
        with open("/proc/self/statm", "rb") as handle:
            return int(handle.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


def limit_memory(megabytes: int) -> None:
    """Cap this process's address space at `megabytes` MiB more than it maps now (0: no cap): past it, an allocation
    fails (MemoryError, or an abort in the parser's native code) instead of the machine's
    memory running out. The hard limit is left as it is; one already lower is kept."""
    if not megabytes:
        return
    try:
        import resource
    except ImportError:  # Windows: no rlimits
        return
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    # On top of what the process maps already: a worker forked from a process that imported a
    # CUDA build of torch (runtime --lint, check --runtime, the pytest plugin) starts with
    # gigabytes of address space reserved, none of it the analysis's.
    wanted = _mapped_bytes() + megabytes * 1024 * 1024
    if soft != resource.RLIM_INFINITY and soft <= wanted:
        return
    if hard != resource.RLIM_INFINITY:
        wanted = min(wanted, hard)
    try:
        resource.setrlimit(resource.RLIMIT_AS, (wanted, hard))
    except (ValueError, OSError):
        pass


def _worker_main(conn: Connection, max_size: int, memory: int = DEFAULT_WORKER_MEMORY) -> None:
    """A worker: analyse the files it is sent, one at a time, until its pipe closes."""
    # Ctrl-C reaches the whole process group: the run decides, and stops the workers itself.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    _die_with_parent()
    limit_memory(memory)
    # Everything imported so far lives as long as the worker: keep the cyclic GC off it.
    gc.freeze()
    while True:
        try:
            task = conn.recv()
        except (EOFError, OSError):
            return
        if task is None:
            return
        index, rel, full, force, *rest = task  # rest: the facts of an interprocedural round
        # No cyclic collection while a file is analysed: its tree (most of what it allocates) is
        # alive until the end and freed by reference counting then, so the collections only
        # rescanned it. Garbage in cycles, if any, goes at the first collection after the file.
        gc.disable()
        try:
            value = guarded_analysis((rel, full, force, max_size), rest[0] if rest else None)
        finally:
            gc.enable()
        try:
            conn.send((index, value))
        except (EOFError, OSError):
            return
        except Exception as error:  # noqa: BLE001 - e.g. a result too deep to pickle
            conn.send((index, limited(rel, f"its analysis could not be sent back: {type(error).__name__}")))
        if _out_of_memory(value):
            return  # a fresh worker for the next file: this one's heap may be left fragmented


@dataclass
class _Worker:
    process: Any
    conn: Connection
    task: tuple[int, str, str, bool] | None = None
    deadline: float = float("inf")

    def give(self, task: tuple[int, str, str, bool], timeout: float) -> None:
        self.task = task
        self.deadline = time.monotonic() + timeout if timeout else float("inf")
        self.conn.send(task)

    def stop(self, force: bool) -> None:
        if force and self.process.is_alive():
            self.process.kill()
        elif not force:
            # Tell an idle worker to exit: closing our end alone is no end-of-file for it, since a
            # forked worker holds a copy of this end as well.
            try:
                self.conn.send(None)
            except (OSError, ValueError):
                pass
        self.conn.close()
        self.process.join(timeout=None if force else 2)
        if self.process.is_alive():
            self.process.kill()
            self.process.join()


def _start_worker(max_size: int, memory: int = DEFAULT_WORKER_MEMORY) -> _Worker:
    # On Linux, fork: workers start in milliseconds with graphlint and the rules imported.
    context = multiprocessing.get_context("fork" if sys.platform.startswith("linux") else "spawn")
    parent_end, child_end = context.Pipe()
    process = context.Process(target=_worker_main, args=(child_end, max_size, memory), daemon=True,
                              name="graphlint-worker")
    process.start()
    child_end.close()
    return _Worker(process, parent_end)


def _death(process: Any, memory: int = 0) -> str:
    process.join(timeout=5)
    code = process.exitcode
    if code is not None and code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        if memory and -code == signal.SIGABRT:
            # The parser's native code aborts when an allocation fails: the memory cap was reached.
            return (f"the parser or the analysis stopped on it ({name}), most likely at the worker's memory "
                    f"limit (worker-memory = {memory:,} MiB); the worker was replaced")
        return f"the parser or the analysis crashed on it ({name}); the worker was replaced"
    return f"the worker analysing it exited (status {code}); it was replaced"


def supervise(todo: Sequence[tuple], workers: int, timeout: float = DEFAULT_FILE_TIMEOUT,
              max_size: int = DEFAULT_MAX_FILE_SIZE,
              memory: int = DEFAULT_WORKER_MEMORY) -> Iterator[tuple[int, dict[str, Any]]]:
    """(index, analysis) for each task (index, rel, full, force[, facts]), in completion order, from
    `workers` worker processes, each limited to `memory` MiB (0: no limit). A worker that
    crashes, runs out of memory or runs past `timeout` seconds on a file (0: no budget) is
    killed and replaced; that file gets a GL903 analysis with the reason."""
    pending = deque(todo)
    pool: list[_Worker] = []
    finished = False
    try:
        while pending or any(w.task is not None for w in pool):
            for worker in pool:
                if worker.task is None and pending:
                    worker.give(pending.popleft(), timeout)
            while pending and len(pool) < workers:
                worker = _start_worker(max_size, memory)
                pool.append(worker)
                worker.give(pending.popleft(), timeout)
            busy = [w for w in pool if w.task is not None]
            nearest = min(w.deadline for w in busy)
            wait_s = None if nearest == float("inf") else max(0.0, nearest - time.monotonic())
            ready = set(wait([w.conn for w in busy] + [w.process.sentinel for w in busy], timeout=wait_s))
            for worker in busy:
                task = worker.task
                assert task is not None
                outcome: tuple[int, dict[str, Any]] | None = None
                if worker.conn in ready:
                    try:
                        outcome = worker.conn.recv()
                    except (EOFError, OSError):
                        outcome = (task[0], limited(task[1], _death(worker.process, memory)))
                        worker.task = None
                        pool.remove(worker)
                        worker.stop(force=True)
                    else:
                        worker.task = None
                        if _out_of_memory(outcome[1]):  # that worker exits: the next file gets a fresh one
                            pool.remove(worker)
                            worker.stop(force=True)
                elif worker.process.sentinel in ready:
                    outcome = (task[0], limited(task[1], _death(worker.process, memory)))
                    worker.task = None
                    pool.remove(worker)
                    worker.stop(force=True)
                elif time.monotonic() >= worker.deadline:
                    outcome = (task[0], limited(task[1], f"its analysis ran past the per-file time budget "
                                                          f"(file-timeout = {timeout:g} s); the worker was "
                                                          "stopped"))
                    worker.task = None
                    pool.remove(worker)
                    worker.stop(force=True)
                if outcome is not None:
                    yield outcome
        finished = True
    finally:
        # Interrupted (Ctrl-C, SIGTERM, an error upstream): kill every worker, busy or not.
        for worker in pool:
            worker.stop(force=not finished)


def _workers(todo: Sequence[tuple[int, str, str, bool, int]], jobs: int) -> int:
    if jobs > 1 and len(todo) > 1 and sum(task[4] for task in todo) >= _PARALLEL_MIN_BYTES:
        return min(jobs, len(todo))
    return 1


def _cache_name(rel: str, named: bool) -> str:
    # A named file is parsed even if it never mentions torch: another analysis, another entry.
    return rel + ("\0named" if named else "")


def _has_entry_marker(result: dict[str, Any]) -> bool:
    return any(f.get("marker") == "entry" for f in result.get("functions", ()))


def analyse_all(tasks: Sequence[tuple[str, str]], jobs: int, cache: Cache,
                stats: dict[str, Any] | None = None, lean: bool = False, named: frozenset[str] = frozenset(),
                max_size: int = DEFAULT_MAX_FILE_SIZE, timeout: float = DEFAULT_FILE_TIMEOUT,
                memory: int = DEFAULT_WORKER_MEMORY) -> list[dict[str, Any]]:
    """Analyse files, reusing cached results; output order is the input order whatever the
    number of jobs. `stats` (if given) receives the counts of cached and analysed files.
    `named`: full paths named on the command line, parsed even if they never mention torch.
    `max_size` (bytes), `timeout` (seconds per file) and `memory` (MiB per worker) are the
    per-file limits (0: none).

    `lean`: the call facts (most of a result) stay only in the cache, not in memory, unless a
    file has an entry marker, in which case the call graph needs them and they are read back;
    so memory grows with the findings, not with the tree."""
    results: list[dict[str, Any] | None] = [None] * len(tasks)
    keys: list[str] = [""] * len(tasks)
    digests: list[str] = [""] * len(tasks)  # of the bytes each result describes
    todo: list[tuple[int, str, str, bool, int]] = []
    lean_files: list[int] = []  # results whose call facts were left in the cache

    def keep(index: int, value: dict[str, Any], in_cache: bool) -> None:
        if lean and in_cache and "calls" in value.get("extra", {}):
            value["extra"] = {k: v for k, v in value["extra"].items() if k != "calls"}
            lean_files.append(index)
        results[index] = value

    with gc_paused():
        for index, (rel, full) in enumerate(tasks):
            force = full in named
            try:
                info = os.stat(full)
            except OSError:
                info = None  # the worker reports the read error as a finding
            if info is not None and not stat.S_ISREG(info.st_mode):
                # Reading a FIFO blocks forever, a device may never end.
                results[index] = limited(rel, "not a regular file")
                continue
            if info is not None and max_size and info.st_size > max_size:
                results[index] = limited(rel, too_large(info.st_size, max_size))
                continue
            try:
                data: bytes | None = read_source(full, max_size)  # re-checked: it may have changed since
            except TooLarge:
                results[index] = limited(rel, f"larger than max-file-size ({max_size:,} bytes)")
                continue
            except NotSource as error:
                results[index] = limited(rel, f"not a regular source file ({error})")
                continue
            except OSError:
                data = None  # the worker reports the read error as a finding
            if cache.folder is not None and data is not None:
                digests[index] = content_digest(data)
                keys[index] = cache.key(digests[index], _cache_name(rel, force))
                cached = cache.get(keys[index], valid_analysis)
                if cached is not None:
                    keep(index, cached, True)
                    continue
            todo.append((index, rel, full, force, len(data or b"")))
    workers = _workers(todo, min(jobs, max_jobs()))
    # Workers take the largest files first, so no core is left with one big file at the end.
    ordered = [task[:4] for task in sorted(todo, key=lambda task: (-task[4], task[0]))]
    for index, value in supervise(ordered, workers, timeout, max_size, memory):
        # Stored under the bytes the worker analysed: the file may have been edited since it was
        # looked up, and the old content must never find the new content's findings.
        digest = value.pop("content_digest", None)
        digests[index] = digest or ""
        rel, full = tasks[index]
        # A worker that died on the file reports no digest: the key it was looked up under stays
        # (the result is not stored under it, but the project's cached regions are keyed by it).
        if cache.folder and digest:
            keys[index] = cache.key(digest, _cache_name(rel, full in named))
        # A file that hit a limit (time, crash) is tried again next run, never cached.
        cacheable = bool(keys[index]) and not value.get("limit")
        keep(index, value, cacheable and cache.put(keys[index], value))
    if lean_files and any(_has_entry_marker(r) for r in results if r is not None):
        missing = []
        for index in lean_files:
            stored = cache.get(keys[index], valid_analysis)
            if stored is None:
                rel, full = tasks[index]
                missing.append((index, rel, full, full in named))
            else:
                results[index]["extra"]["calls"] = stored.get("extra", {}).get("calls", {})  # type: ignore[index]
        for index, value in supervise(missing, 1, timeout, max_size, memory):
            results[index]["extra"]["calls"] = value.get("extra", {}).get("calls", {})  # type: ignore[index]
    cache.file_keys, cache.file_digests = keys, digests
    if stats is not None:
        stats.update(files=len(tasks), cache_hits=len(tasks) - len(todo), analysed=len(todo), workers=workers)
    return [r for r in results if r is not None]
