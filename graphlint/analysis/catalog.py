"""The torch catalogues (graphlint/data/*.toml) loaded once: torch_catalog.toml (the ops rules
match) and torch_values.toml (how values are classified) as frozen sets by category,
cuda_sync_ops.toml (ops that sync on CUDA only) as records.

Rules, the inference, the call graph and the runtime ask this module "is this a factory / a
sync / a tensor annotation?" by category instead of carrying their own lists.
"""
from __future__ import annotations

import re
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


# The files `names` reads sections from; a section name is defined in one of them only.
_NAME_FILES = ("torch_catalog.toml", "torch_values.toml")


@lru_cache(maxsize=1)
def _raw() -> dict[str, Any]:
    merged: dict[str, Any] = {}
    for filename in _NAME_FILES:
        for section, body in _load(filename).items():
            if section == "checked":
                continue
            if section in merged:
                raise RuntimeError(f"graphlint/data: section [{section}] is defined twice")
            merged[section] = body
    merged["checked"] = _load("torch_catalog.toml")["checked"]
    return merged


@lru_cache(maxsize=None)
def names(section: str, key: str) -> frozenset[str]:
    """One list of the catalogues as a frozenset; a missing key is a programming error."""
    return frozenset(_raw()[section][key])


@lru_cache(maxsize=None)
def ordered(section: str, key: str) -> tuple[str, ...]:
    """One list of the catalogues in file order (where the order is used)."""
    return tuple(_raw()[section][key])


def prefixes(section: str, key: str) -> tuple[str, ...]:
    """One list of prefixes, as str.startswith takes them."""
    return ordered(section, key)


def prefix(section: str, key: str) -> str:
    """A one-entry prefix list as its string (`torch.`)."""
    [only] = prefixes(section, key)
    return only


@lru_cache(maxsize=None)
def pattern(section: str, key: str) -> re.Pattern[str]:
    """A regular expression kept as data, compiled once."""
    return re.compile(_raw()[section][key])


def sections() -> dict[str, Any]:
    """Every section of the name catalogues (for the tests that check each has a reason)."""
    return {section: body for section, body in _raw().items() if section != "checked"}


def checked_versions() -> dict[str, str]:
    """Each name catalogue's file name -> the torch version its names were checked on."""
    return {filename: _load(filename)["checked"]["torch"] for filename in _NAME_FILES}


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
