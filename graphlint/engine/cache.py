"""The on-disk cache of per-file analyses (.graphlint_cache/): keyed by a file's content and
path and by graphlint's own fingerprint (its version and the source of graphlint and its rules),
so an entry never outlives the code that made it.
"""
from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

from graphlint import __version__

_CACHE_FORMAT = 3  # 2: per-file fingerprint texts; 3: statement texts stored once, no source lines


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
