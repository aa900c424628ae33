"""The on-disk cache of per-file analyses (.graphlint_cache/): keyed by a file's content and
path and by graphlint's own fingerprint (its version and the source of graphlint and its rules),
so an entry never outlives the code that made it.
"""
from __future__ import annotations

import hashlib
import json
import os
import time
from pathlib import Path
from typing import Any

from graphlint import __version__

_CACHE_FORMAT = 2  # 2: per-file fingerprint texts

# The folder says what it is, as ruff's cache does: backup tools skip a tagged cache folder
# (https://bford.info/cachedir/) and git ignores everything in it without a .gitignore entry.
CACHEDIR_TAG = ("Signature: 8a477f597d28d172789f06886806bc55\n"
                "# This file is a cache directory tag created by graphlint.\n"
                "# For information about cache directory tags see https://bford.info/cachedir/\n")
# An entry not read for this long is removed (its file was edited or deleted, or graphlint
# changed): keys hold the content, so such an entry can never be a hit again.
MAX_AGE_SECONDS = 30 * 24 * 3600
_EVICT_EVERY_SECONDS = 24 * 3600
_STAMP = ".last-eviction"


def prepare_folder(folder: Path) -> None:
    """Create the cache folder with its CACHEDIR.TAG and a .gitignore of `*`."""
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in (("CACHEDIR.TAG", CACHEDIR_TAG), (".gitignore", "# Created by graphlint.\n*\n")):
        marker = folder / name
        if not marker.exists():
            tmp = folder / f".{name}.{os.getpid()}.tmp"
            tmp.write_text(text, encoding="utf-8")
            os.replace(tmp, marker)


def evict_stale(folder: Path, now: float | None = None, max_age: float = MAX_AGE_SECONDS) -> int:
    """Remove entries neither read nor written for `max_age` seconds (reads count through the
    file's access time, which relatime updates daily), at most once a day. Returns how many."""
    now = time.time() if now is None else now
    stamp = folder / _STAMP
    try:
        if now - stamp.stat().st_mtime < _EVICT_EVERY_SECONDS:
            return 0
    except OSError:
        pass  # never evicted here yet
    removed = 0
    try:
        for entry in folder.glob("??/*.json"):
            try:
                info = entry.lstat()
                if now - max(info.st_atime, info.st_mtime) > max_age:
                    entry.unlink()
                    removed += 1
            except OSError:
                continue  # taken by a concurrent run, or not ours to remove
        stamp.touch()
        os.utime(stamp, (now, now))
    except OSError:
        pass  # a read-only cache still serves hits
    return removed


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


class Cache:
    """Per-file analysis results in `folder`, keyed by the file's content and path and by the
    graphlint fingerprint (version + source of graphlint and its rules). The config is not
    part of the key: the per-file analysis never reads it (`finalize` applies it after)."""

    def __init__(self, folder: Path | None):
        self.folder = folder
        self.fingerprint = rules_fingerprint() if folder else ""
        self.hits = 0
        self.file_keys: list[str] = []  # of the last analyse_all, in task order ("" = uncached)
        self._prepared = False
        if folder is not None and folder.is_dir():
            evict_stale(folder)

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
            if not self._prepared:
                prepare_folder(self.folder)
                self._prepared = True
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(f".{os.getpid()}.tmp")
            tmp.write_text(text, encoding="utf-8")
            os.replace(tmp, path)
        except OSError:
            return False  # a read-only tree still lints, just without a cache
        return True
