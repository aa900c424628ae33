"""Lint a runtime target's own code, so that `graphlint runtime --lint` has both halves to join.

The files are the ones the traced steps ran (inside the project) plus the file that defines
`step()`; the entry point is that `step()`, so the linter's regions start where the harness's do.
"""
from __future__ import annotations

import dataclasses
from pathlib import Path

from graphlint.config import Config
from graphlint.callgraph.regions import module_name
from graphlint.report import StaticResult


def target_files(runtime: dict, root: Path) -> list[str]:
    """Project files (relative to `root`) that the step executed, the step's own file and the
    files of the target's classes."""
    cwd = Path.cwd().resolve()
    found: set[str] = set()
    entry = (runtime.get("target") or {}).get("entry") or {}
    for path in [*(runtime.get("executed") or {}), entry.get("path"), *(entry.get("files") or [])]:
        if not isinstance(path, str) or not path.endswith(".py"):
            continue
        full = (cwd / path).resolve()
        try:
            found.add(full.relative_to(root).as_posix())
        except ValueError:
            continue  # outside the project (site-packages): not the target's own code
    return sorted(p for p in found if (root / p).is_file())


def entry_point(runtime: dict, root: Path) -> str | None:
    """`module:Class.step` of the target's step, in the linter's module naming."""
    entry = (runtime.get("target") or {}).get("entry") or {}
    path, qualname = entry.get("path"), entry.get("qualname")
    if not path or not qualname or "<" in qualname:
        return None
    try:
        rel = (Path.cwd().resolve() / path).resolve().relative_to(root).as_posix()
    except ValueError:
        return None
    return f"{module_name(rel)}:{qualname}"


def lint(runtime: dict, config: Config, jobs: int | None = None, cache_dir: Path | None = None) -> StaticResult:
    """The static half for the target's files. The config's `exclude` does not apply (these files
    were named by running them); its rule selection, severities and regions do."""
    from graphlint.engine import check

    root = config.root.resolve()
    files = target_files(runtime, root)
    entry = entry_point(runtime, root)
    entries = tuple(config.entry_points) + ((entry,) if entry and entry not in config.entry_points else ())
    scoped = dataclasses.replace(config, root=root, exclude=(), entry_points=entries)
    if not files:
        return StaticResult()
    return check([str(root / f) for f in files], scoped, jobs=jobs, cache_dir=cache_dir)
