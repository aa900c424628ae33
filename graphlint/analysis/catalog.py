"""The torch catalogues (graphlint/data/*.toml) loaded once: torch_catalog.toml as frozen sets,
cuda_sync_ops.toml (ops that sync on CUDA only) as records.

Rules, the inference and the runtime ask this module "is this a factory / a sync / a
data-dependent shape op?" instead of carrying their own lists.
"""
from __future__ import annotations

import sys
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10: the same parser, from PyPI
    import tomli as tomllib


@lru_cache(maxsize=None)
def _load(filename: str) -> dict[str, Any]:
    text = resources.files("graphlint").joinpath(f"data/{filename}").read_text("utf-8")
    return tomllib.loads(text)


def _raw() -> dict[str, Any]:
    return _load("torch_catalog.toml")


def names(section: str, key: str) -> frozenset[str]:
    """One list of the catalogue as a frozenset; a missing key is a programming error."""
    return frozenset(_raw()[section][key])


@lru_cache(maxsize=None)
def call_graph(section: str, key: str) -> Any:
    """One entry of graphlint/data/call_graph.toml (what library calls return, for the call graph)."""
    value = _load("call_graph.toml")[section][key]
    return frozenset(value) if isinstance(value, list) else value


@lru_cache(maxsize=None)
def zones(section: str, key: str) -> Any:
    """One entry of graphlint/data/zones.toml (the flags that name a branch's step kind)."""
    value = _load("zones.toml")[section][key]
    return frozenset(value) if isinstance(value, list) and key.endswith(("words", "calls")) else value


def reason(section: str) -> str:
    return _raw()[section].get("reason", "")


def checked_on() -> str:
    return _raw()["checked"]["torch"]


@dataclass(frozen=True)
class SyncOp:
    """One entry of graphlint/data/cuda_sync_ops.toml: an op that syncs on CUDA only."""

    op: str
    python: tuple[str, ...]
    kind: str
    reason: str
    fix: str
    torch: str
    device: str
    dtypes: tuple[str, ...] = ()  # empty: any dtype
    seen_in: str = ""
    not_seen: str = ""
    capture_error: str = ""

    @property
    def seen_on(self) -> str:
        return f"seen on {self.device}, torch {self.torch}"


@lru_cache(maxsize=1)
def cuda_sync_ops() -> tuple[SyncOp, ...]:
    """The ops that synchronize or cannot be captured on CUDA while their CPU run shows nothing."""
    entries = _load("cuda_sync_ops.toml").get("op", [])
    return tuple(SyncOp(**{**entry, "python": tuple(entry.get("python", ())), "dtypes": tuple(entry.get("dtypes", ()))})
                 for entry in entries)
