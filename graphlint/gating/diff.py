"""The Python files changed since a git revision, for `graphlint check --diff REV`.

Changed means: tracked files that differ between REV and the working tree (committed since
REV, staged or not), plus untracked files that git does not ignore (a new module is a change
even before `git add`). Deleted files are left out: there is nothing to check.
"""
from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Iterable

from graphlint.report import StaticResult


class DiffError(Exception):
    """git is missing, the folder is not a repository, or REV does not name a commit."""


def _git(args: list[str], cwd: Path) -> str:
    try:
        done = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=False)
    except FileNotFoundError:
        raise DiffError("--diff needs git, which is not on PATH") from None
    if done.returncode != 0:
        message = done.stderr.strip().splitlines()
        raise DiffError(f"git {' '.join(args)}: {message[-1] if message else 'failed'}")
    return done.stdout


def changed_files(rev: str, cwd: Path) -> list[Path]:
    """Absolute paths of the .py files changed since `rev` (see the module docstring)."""
    if rev.startswith("-"):
        raise DiffError(f"--diff takes a revision, not an option: {rev!r}")
    top = Path(_git(["rev-parse", "--show-toplevel"], cwd).strip())
    try:
        _git(["rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}"], top)
    except DiffError:
        raise DiffError(f"--diff {rev}: not a commit in this repository") from None
    tracked = _git(["diff", "--name-only", "-z", "--diff-filter=d", rev, "--"], top).split("\0")
    untracked = _git(["ls-files", "--others", "--exclude-standard", "-z"], top).split("\0")
    names = sorted({name for name in tracked + untracked if name.endswith(".py")})
    return [(top / name).resolve() for name in names if (top / name).is_file()]



def narrow(static: StaticResult, changed: Iterable[str], rev: str) -> None:
    """Keep only findings in the changed files (relative paths), in place. The files analysed
    for regions stay counted under `extra["diff"]`; `files` becomes the files reported on."""
    wanted = set(changed)
    analysed = len(static.files)
    static.files = [path for path in static.files if path in wanted]
    static.findings = [f for f in static.findings if f.path in wanted]
    static.extra["diff"] = {"rev": rev, "changed": sorted(wanted), "analysed_files": analysed}
