"""Find the Python files to check, with ruff's semantics: named files are checked (unless
`force_exclude`), folders are walked minus `exclude` (default: ruff's list of tool and
environment folders), `extend-exclude` and what .gitignore files ignore (read with pathspec).

Only regular files are ever opened: FIFOs, devices, sockets, symlink loops, names that are not
UTF-8 and paths the system cannot resolve become a message naming the path, never a hang.
"""
from __future__ import annotations

import errno
import fnmatch
import functools
import re
import os
import stat
from pathlib import Path
from typing import Iterable, Iterator

import pathspec

# ruff's default `exclude` (settings.rs), plus graphlint's own cache. Like ruff's, a pattern
# without a slash matches a folder of that name at any depth; setting `exclude` replaces the
# list, `extend-exclude` adds to it.
DEFAULT_EXCLUDES = (
    ".bzr", ".direnv", ".eggs", ".git", ".git-rewrite", ".hg", ".ipynb_checkpoints", ".mypy_cache", ".nox",
    ".pants.d", ".pyenv", ".pytest_cache", ".pytype", ".ruff_cache", ".svn", ".tox", ".venv", ".vscode",
    "__pypackages__", "_build", "buck-out", "dist", "node_modules", "site-packages", "venv", ".graphlint_cache",
)
# Version-control internals hold no code to check even when `exclude` replaces the defaults.
ALWAYS_SKIPPED = frozenset({".git", ".hg", ".svn"})


class PathProblem(Exception):
    """A path named on the command line that cannot be checked; the message names it."""


def display(path: str | os.PathLike[str]) -> str:
    """A path for a message: bytes that are not UTF-8 shown as \\x.. escapes."""
    return os.fsencode(path).decode("utf-8", "backslashreplace")


def _valid_name(path: str | os.PathLike[str]) -> bool:
    try:
        os.fspath(path).encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


# Paths resolved during one walk (a walk asks for each file's resolution several times: its
# relative name for the excludes, its identity, its name in the report); cleared when a walk
# starts, so a long-lived process (the language server, --watch) sees links that changed.
_RESOLVED: dict[str, Path] = {}


def resolved(path: Path) -> Path:
    """`path` with its links resolved; as it is (made absolute) when it cannot be, e.g. a file
    that became a symlink loop while the run looked at it: that file's read then fails, and the
    failure is a finding on it, never the run's end."""
    key = os.fspath(path)
    found = _RESOLVED.get(key)
    if found is None:
        try:
            found = path.resolve()
        except (OSError, RuntimeError):
            return path.absolute()
        if len(_RESOLVED) < 1_000_000:
            _RESOLVED[key] = found
    return found


def relative_posix(path: Path, root: Path) -> str:
    try:
        return resolved(path).relative_to(root).as_posix()
    except ValueError:
        return path.as_posix()


def is_excluded(rel: str, patterns: Iterable[str]) -> bool:
    """Whether `rel` matches a pattern as a whole (or lies below a match), or, for a pattern
    without `/`, whether one of its parts does (`build` excludes `a/build/x.py`)."""
    whole, part = _matcher(tuple(patterns))
    if whole is not None and whole.match(rel):
        return True
    return part is not None and any(part.match(name) for name in rel.split("/"))


@functools.lru_cache(maxsize=64)
def _matcher(patterns: tuple[str, ...]) -> tuple[re.Pattern | None, re.Pattern | None]:
    # fnmatch's own translation, compiled once into one regex per kind: a walk asks this for
    # every file and folder, and the default excludes are dozens of patterns.
    whole: list[str] = []
    parts: list[str] = []
    for pattern in patterns:
        pattern = pattern.rstrip("/")
        whole += [fnmatch.translate(pattern), fnmatch.translate(pattern + "/*")]
        if "/" not in pattern:
            parts.append(fnmatch.translate(pattern))

    def join(regexes: list[str]) -> re.Pattern | None:
        return re.compile("|".join(f"(?:{r})" for r in regexes)) if regexes else None

    return join(whole), join(parts)


def _kind(mode: int) -> str | None:
    """What a non-regular file is, for the message; None for a regular file."""
    if stat.S_ISREG(mode):
        return None
    for test, name in ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"), (stat.S_ISDIR, "a folder")):
        if test(mode):
            return name
    return "not a regular file"


def _os_reason(error: OSError) -> str:
    if error.errno == errno.ELOOP:
        return "symlink loop"
    if error.errno == errno.ENAMETOOLONG:
        return "path too long for the system (PATH_MAX)"
    if error.errno == errno.ENOENT:
        return "not found (a broken symlink?)"
    if error.errno in (errno.EACCES, errno.EPERM):
        return "permission denied"
    return error.strerror or str(error)


def check_file(path: Path) -> str | None:
    """Why `path` cannot be read as a source (None: it can). Only stats it, never opens it."""
    if not _valid_name(path):
        return "file name is not valid UTF-8"
    try:
        mode = os.stat(path).st_mode
    except OSError as error:
        return _os_reason(error)
    except RuntimeError:  # Python < 3.13 reports some symlink loops this way
        return "symlink loop"
    kind = _kind(mode)
    return None if kind is None else f"{kind}, not a regular file: refused without opening it"


class _Ignores:
    """The .gitignore files that apply below `root`, each matched relative to its own folder."""

    def __init__(self, root: Path, problems: list[str]):
        self.root = root
        self.problems = problems
        self.specs: dict[Path, pathspec.PathSpec | None] = {}

    def _spec(self, folder: Path) -> pathspec.PathSpec | None:
        if folder not in self.specs:
            spec = None
            file = folder / ".gitignore"
            try:
                if file.is_file():
                    spec = pathspec.GitIgnoreSpec.from_lines(file.read_text("utf-8", "replace").splitlines())
            except OSError as error:
                self.problems.append(f"{display(file)}: cannot read: {_os_reason(error)}")
            self.specs[folder] = spec
        return self.specs[folder]

    def ignored(self, path: Path, is_dir: bool) -> bool:
        absolute = path.absolute()
        try:
            absolute.relative_to(self.root)
        except ValueError:
            return False  # outside the project: its .gitignore files are not ours to read
        # From the project root down to the path's folder; a later file can re-include (!pattern).
        folders = [folder for folder in reversed(absolute.parents) if folder == self.root or self.root in folder.parents]
        verdict = False
        for folder in folders:
            spec = self._spec(folder)
            if spec is None:
                continue
            rel = absolute.relative_to(folder).as_posix() + ("/" if is_dir else "")
            result = spec.check_file(rel)
            if result.include is not None:
                verdict = result.include
        return verdict


def discover(paths: Iterable[str | Path], root: Path, exclude: Iterable[str] | None = None,
             extend_exclude: Iterable[str] = (), *, force_exclude: bool = False, respect_gitignore: bool = True,
             problems: list[str] | None = None) -> Iterator[Path]:
    """Yield .py files in a stable order. A named file is always checked unless `force_exclude`
    (as in ruff, `exclude` applies to what a folder walk finds); a named folder is walked.

    A named path that cannot be checked raises PathProblem; one found in a walk (unreadable
    folder, FIFO, symlink loop, ...) is skipped and described in `problems`."""
    patterns = tuple(DEFAULT_EXCLUDES if exclude is None else exclude) + tuple(extend_exclude)
    problems = [] if problems is None else problems
    _RESOLVED.clear()
    root = Path(root).absolute()
    ignores = _Ignores(root, problems) if respect_gitignore else None
    seen: set[Path] = set()
    for given in paths:
        path = Path(given)
        if not _valid_name(path):
            raise PathProblem(f"{display(path)}: path is not valid UTF-8")
        try:
            mode = os.stat(path).st_mode
        except OSError as error:
            if error.errno == errno.ENOENT and not os.path.lexists(path):
                raise PathProblem(f"{display(path)}: path not found") from None
            raise PathProblem(f"{display(path)}: {_os_reason(error)}") from None
        except RuntimeError:
            raise PathProblem(f"{display(path)}: symlink loop") from None
        if stat.S_ISREG(mode):
            if force_exclude and (is_excluded(relative_posix(path, root), patterns)
                                  or (ignores is not None and ignores.ignored(path, False))):
                continue
            identity = resolved(path)
            if identity not in seen:
                seen.add(identity)
                yield path
            continue
        if not stat.S_ISDIR(mode):
            raise PathProblem(f"{display(path)}: {_kind(mode)}, not a file or folder: refused without opening it")
        if force_exclude and path.absolute() != root and is_excluded(relative_posix(path, root), patterns):
            continue

        def walk_error(error: OSError) -> None:
            problems.append(f"{display(error.filename or path)}: cannot read folder: {_os_reason(error)}")

        for folder, dirs, files in os.walk(path, onerror=walk_error):
            here = Path(folder)
            kept = []
            for name in sorted(dirs):
                sub = here / name
                if not _valid_name(sub):
                    problems.append(f"{display(sub)}: folder name is not valid UTF-8: skipped")
                    continue
                if name in ALWAYS_SKIPPED or is_excluded(relative_posix(sub, root), patterns):
                    continue
                if ignores is not None and ignores.ignored(sub, True):
                    continue
                kept.append(name)
            dirs[:] = kept
            for name in sorted(files):
                if not name.endswith(".py"):
                    continue
                file = here / name
                reason = check_file(file)
                if reason is not None:
                    problems.append(f"{display(file)}: {reason}: skipped")
                    continue
                if is_excluded(relative_posix(file, root), patterns):
                    continue
                if ignores is not None and ignores.ignored(file, False):
                    continue
                identity = resolved(file)
                if identity in seen:
                    continue
                seen.add(identity)
                yield file
