"""Find the Python files to check: given paths (files or folders), minus excluded globs,
`.git`, virtual environments, caches and build folders."""
from __future__ import annotations

import fnmatch
import os
from pathlib import Path
from typing import Iterable, Iterator

SKIP_DIRS = frozenset({
    ".git", ".hg", ".svn", "__pycache__", ".venv", "venv", ".env", "env", ".tox", ".nox",
    "build", "dist", ".eggs", "node_modules", ".mypy_cache", ".pytest_cache", ".ruff_cache",
    ".graphlint_cache", "site-packages", ".whl", ".site",
})


def relative_posix(path: Path, root: Path) -> str:
    try:
        return path.resolve().relative_to(root).as_posix()
    except ValueError:
        return path.as_posix()


def is_excluded(rel: str, patterns: Iterable[str]) -> bool:
    for pattern in patterns:
        pattern = pattern.rstrip("/")
        if fnmatch.fnmatch(rel, pattern) or fnmatch.fnmatch(rel, pattern + "/*"):
            return True
        if "/" not in pattern and any(fnmatch.fnmatch(part, pattern) for part in rel.split("/")):
            return True
    return False


def _is_venv(folder: Path) -> bool:
    return (folder / "pyvenv.cfg").is_file()


def discover(paths: Iterable[str | Path], root: Path, exclude: Iterable[str] = ()) -> Iterator[Path]:
    """Yield .py files in a stable order. An explicitly named file is always checked (as in
    ruff, `exclude` applies to what a folder walk finds); an explicitly named folder is walked."""
    patterns = tuple(exclude)
    seen: set[Path] = set()
    for given in paths:
        path = Path(given)
        if path.is_file():
            resolved = path.resolve()
            if resolved not in seen:
                seen.add(resolved)
                yield path
            continue
        if not path.is_dir():
            raise FileNotFoundError(str(given))
        for folder, dirs, files in os.walk(path):
            here = Path(folder)
            dirs[:] = sorted(d for d in dirs if d not in SKIP_DIRS and not d.endswith(".egg-info")
                             and not _is_venv(here / d)
                             and not is_excluded(relative_posix(here / d, root), patterns))
            for name in sorted(files):
                if not name.endswith(".py"):
                    continue
                file = here / name
                resolved = file.resolve()
                if resolved in seen or is_excluded(relative_posix(file, root), patterns):
                    continue
                seen.add(resolved)
                yield file
