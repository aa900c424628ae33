"""`check --watch`: check, then check again whenever a Python file under the checked paths or
the config file changes, until Ctrl-C (as ruff's --watch). File events come from `watchfiles`
(the `watch` extra) where it is installed; without it a polling loop reads modification times
twice a second, so --watch works in any install."""
from __future__ import annotations

import os
import sys
import threading
import time
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

import click

from graphlint.io.exits import load_config

CONFIG_NAMES = ("pyproject.toml", "graphlint.toml")
POLL_SECONDS = 0.5


def _relevant(path: str) -> bool:
    return path.endswith(".py") or os.path.basename(path) in CONFIG_NAMES


def _watchfiles_changes(watchfiles: Any, roots: list[Path], stop: threading.Event,
                        since: dict[str, int]) -> Iterator[set[str]]:
    first = True
    # yield_on_timeout: the first (maybe empty) batch says the watcher is running; what changed
    # before that, while the check ran, is found by comparing with `since`.
    for batch in watchfiles.watch(*roots, watch_filter=lambda _, path: _relevant(path), stop_event=stop,
                                  debounce=300, rust_timeout=500, yield_on_timeout=True, raise_interrupt=True):
        changed = {path for _, path in batch}
        if first:
            first = False
            changed |= _differences(since, _snapshot(roots))
        if changed:
            yield changed


def _snapshot(roots: list[Path]) -> dict[str, int]:
    found: dict[str, int] = {}
    for root in roots:
        walked = [(str(root.parent), [], [root.name])] if root.is_file() else os.walk(root)
        for folder, dirs, files in walked:
            dirs[:] = [d for d in dirs if not d.startswith(".") and d != "__pycache__"]
            for name in files:
                path = os.path.join(folder, name)
                if _relevant(path):
                    try:
                        found[path] = os.stat(path).st_mtime_ns
                    except OSError:
                        continue
    return found


def _differences(before: dict[str, int], now: dict[str, int]) -> set[str]:
    return {path for path in before.keys() | now.keys() if before.get(path) != now.get(path)}


def polling_changes(roots: list[Path], stop: threading.Event, since: dict[str, int],
                    interval: float = POLL_SECONDS) -> Iterator[set[str]]:
    """Changed, added or removed files since the snapshot `since`, by modification time,
    every `interval` seconds."""
    before = since
    while not stop.wait(interval):
        now = _snapshot(roots)
        changed = _differences(before, now)
        before = now
        if changed:
            yield changed


def changes(roots: list[Path], stop: threading.Event, since: dict[str, int]) -> Iterator[set[str]]:
    """Batches of changed paths after the snapshot `since` (taken before the check ran, so an
    edit saved during the check is not missed)."""
    try:
        import watchfiles
    except ImportError:
        return polling_changes(roots, stop, since)
    return _watchfiles_changes(watchfiles, roots, stop, since)


def watched_roots(paths: Iterable[str], config_file: str | None) -> list[Path]:
    """The checked paths (default: the config's `paths`, else its root) and the config file."""
    config = load_config(config_file)
    roots = [Path(p) for p in paths] or [config.root / p for p in config.paths] or [config.root]
    if config.source:
        roots.append(Path(config.source))
    return [root.absolute() for root in roots if root.exists()]


def _run(run_once: Callable[[], int]) -> int:
    try:
        return run_once()
    except SystemExit as stop:  # bad input (exit 2) ends this run, not the watch
        return stop.code if isinstance(stop.code, int) else 2


def watch(run_once: Callable[[], int], paths: Iterable[str], config_file: str | None,
          stop: threading.Event | None = None) -> int:
    """Run `run_once` now and after every change; returns the last exit code once `stop` is
    set (Ctrl-C raises KeyboardInterrupt through, as any command's)."""
    stop = stop or threading.Event()
    changed: set[str] = set()
    while True:
        roots = watched_roots(paths, config_file)  # the config may have moved `paths`
        since = _snapshot(roots)
        if changed:
            if sys.stdout.isatty():
                click.clear()
            shown = ", ".join(sorted(os.path.relpath(path) for path in changed)[:3])
            click.echo(f"graphlint: [{time.strftime('%H:%M:%S')}] change in {shown}; checking again", err=True)
        code = _run(run_once)
        click.echo("graphlint: watching for changes (Ctrl-C to stop)", err=True)
        batches = changes(roots, stop, since)
        try:
            changed = next(batches, set())
        finally:
            batches.close()  # stops the file watcher until the next check has run
        if not changed:  # stopped
            return code
