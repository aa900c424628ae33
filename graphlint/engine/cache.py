"""The on-disk cache of per-file analyses (.graphlint_cache/): keyed by a file's content and
path and by graphlint's own fingerprint (its version and the source of graphlint and its rules),
so an entry never outlives the code that made it. Each entry's checksum covers its key too, so
an entry moved or copied under another key is never read as that key's.
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import time
from pathlib import Path
from typing import Any, Callable

from graphlint import __version__
from graphlint.config import ConfigError
from graphlint.report import read_regular
from graphlint.rules import BY_CODE

# 2: per-file fingerprint texts; 3: checksummed, statement texts once, no lines; 4: the key in
# the checksum, keys from the digest of the bytes the worker analysed
_CACHE_FORMAT = 4

# Far above any entry graphlint writes for a file within max-file-size.
MAX_ENTRY_BYTES = 512 * 1024 * 1024


def _checksum(key: str, text: bytes) -> str:
    return hashlib.blake2b(key.encode("ascii") + b"\n" + text, digest_size=16).hexdigest()


def content_digest(data: bytes) -> str:
    """The digest of a file's bytes that its cache key is made from."""
    return hashlib.blake2b(data, digest_size=16).hexdigest()


_FINDING_KEYS = frozenset({"rule", "function", "line", "col", "end_line", "end_col", "statement_line",
                           "message", "fix"})
_ANALYSIS_KEYS = frozenset({"path", "findings", "functions", "parse_error", "limit", "skipped", "extra",
                            "suppressions"})


def valid_analysis(value: dict[str, Any]) -> bool:
    """A per-file entry has the shape finalize and the call graph read (what a checksum cannot
    tell: an entry written by another graphlint build with the same version)."""
    try:
        if not _ANALYSIS_KEYS <= value.keys() or not isinstance(value["path"], str):
            return False
        if not (isinstance(value["findings"], list) and isinstance(value["functions"], list)
                and isinstance(value["extra"], dict) and isinstance(value["suppressions"], dict)):
            return False
        for finding in value["findings"]:
            if not (isinstance(finding, dict) and _FINDING_KEYS <= finding.keys() and finding["rule"] in BY_CODE
                    and all(type(finding[k]) is int for k in ("line", "col", "end_line", "end_col", "statement_line"))):
                return False
        texts = value.get("fingerprint_texts")
        if texts is not None:
            statements = value["statement_texts"]
            if len(texts) != len(value["findings"]) or not all(
                    type(pair[0]) is int and 0 <= pair[0] < len(statements) for pair in texts):
                return False
        return all(isinstance(f, dict) and isinstance(f.get("qualname"), str) for f in value["functions"])
    except (KeyError, TypeError, IndexError):
        return False

# The folder says what it is, as ruff's cache does: backup tools skip a tagged cache folder
# (https://bford.info/cachedir/) and git ignores everything in it without a .gitignore entry.
CACHEDIR_TAG = ("Signature: 8a477f597d28d172789f06886806bc55\n"
                "# This file is a cache directory tag created by graphlint.\n"
                "# For information about cache directory tags see https://bford.info/cachedir/\n")
# An entry not read for this long is removed (its file was edited or deleted, or graphlint
# changed): keys hold the content, so such an entry can never be a hit again.
MAX_AGE_SECONDS = 30 * 24 * 3600
_EVICT_EVERY_SECONDS = 24 * 3600
# A temporary file this old was left by a write that failed (a full disk, a killed run).
MAX_TMP_AGE_SECONDS = 3600
_STAMP = ".last-eviction"


def prepare_folder(folder: Path) -> None:
    """Create the cache folder with its CACHEDIR.TAG and a .gitignore of `*`."""
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in (("CACHEDIR.TAG", CACHEDIR_TAG), (".gitignore", "# Created by graphlint.\n*\n")):
        marker = folder / name
        if not marker.exists():
            tmp = folder / f".{name}.{os.getpid()}.tmp"
            try:
                tmp.write_text(text, encoding="utf-8")
                os.replace(tmp, marker)
            except OSError:
                tmp.unlink(missing_ok=True)  # a full disk leaves no partial file behind
                raise


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
        for entry in [*folder.glob("??/*.json"), *folder.glob("??/*.tmp"), *folder.glob(".*.tmp")]:
            try:
                info = entry.lstat()
                age = max_age if entry.suffix == ".json" else min(max_age, MAX_TMP_AGE_SECONDS)
                if now - max(info.st_atime, info.st_mtime) > age:
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


class CacheRefused(ConfigError):
    """A cache folder graphlint will not use or remove; the message names it and says why."""


def refuse_link(folder: Path) -> None:
    """A cache folder that is a symbolic link (a committed `.graphlint_cache -> ~/.ssh`) would
    have entries written, and stale ones evicted, wherever it points: refused. The folder it
    names can still be given as --cache-dir."""
    if folder.is_symlink():
        raise CacheRefused(f"{folder}: the cache folder is a symbolic link (to {os.readlink(folder)}): refused, "
                           "so nothing is written or removed through it; pass the folder it names as --cache-dir "
                           "to use it, or --no-cache")


def remove_folder(folder: Path) -> bool:
    """`graphlint clean`: remove `folder` if it is a cache graphlint made (it holds graphlint's
    CACHEDIR.TAG); False when there is nothing to remove. Any other folder, a file or a link
    raises CacheRefused and is left as it is."""
    if not folder.exists() and not folder.is_symlink():
        return False
    refuse_link(folder)
    if not folder.is_dir():
        raise CacheRefused(f"{folder}: not a folder: not removed")
    try:
        tag = read_regular(folder / "CACHEDIR.TAG", 4096, follow=False).decode("utf-8", "replace")
    except OSError:
        tag = ""
    if tag != CACHEDIR_TAG:
        raise CacheRefused(f"{folder}: not a graphlint cache (it has no CACHEDIR.TAG written by graphlint): "
                           "not removed")
    shutil.rmtree(folder)
    return True


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
        if folder is not None:
            refuse_link(folder)
        if folder is not None and folder.is_dir():
            evict_stale(folder)

    def key(self, digest: str, rel: str) -> str:
        """The key of the file at `rel` whose bytes have `digest` (content_digest)."""
        return hashlib.blake2b(f"{digest}\0{rel}\0{self.fingerprint}".encode("utf-8", "surrogatepass"),
                               digest_size=16).hexdigest()

    def get(self, key: str, valid: Callable[[Any], bool] | None = None) -> dict[str, Any] | None:
        """The entry stored under `key`, or None (analyse again) when there is none or it cannot
        be trusted: not a regular file (a FIFO would block, a link to /dev/zero never end), larger
        than any entry graphlint writes, a checksum that does not match its text (damaged, or not
        written by graphlint, or written under another key), or a value that `valid` rejects."""
        if self.folder is None:
            return None
        path = self.folder / key[:2] / f"{key}.json"
        try:
            raw = read_regular(path, MAX_ENTRY_BYTES, follow=False)
            digest, _, text = raw.partition(b"\n")
            if digest.decode("ascii") != _checksum(key, text):
                return None
            value = json.loads(text)
        except (OSError, ValueError, RecursionError):
            return None  # missing or damaged: analyse again
        if not isinstance(value, dict) or (valid is not None and not valid(value)):
            return None
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
        text = f"{_checksum(key, text.encode('utf-8'))}\n{text}"  # get() trusts only what this wrote
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        try:
            if not self._prepared:
                prepare_folder(self.folder)
                self._prepared = True
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp.write_text(text, encoding="utf-8")
            os.replace(tmp, path)
        except OSError:
            try:
                tmp.unlink()  # a full disk leaves no partial file behind
            except OSError:
                pass
            return False  # a read-only tree still lints, just without a cache
        return True
