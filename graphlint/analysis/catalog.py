"""The torch catalogue (graphlint/data/torch_catalog.toml) loaded once, as frozen sets.

Rules and the inference ask this module "is this a factory / a sync / a data-dependent
shape op?" instead of carrying their own lists.
"""
from __future__ import annotations

import sys
from functools import lru_cache
from importlib import resources
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10: the same parser, from PyPI
    import tomli as tomllib


@lru_cache(maxsize=1)
def _raw() -> dict[str, Any]:
    text = resources.files("graphlint").joinpath("data/torch_catalog.toml").read_text("utf-8")
    return tomllib.loads(text)


def names(section: str, key: str) -> frozenset[str]:
    """One list of the catalogue as a frozenset; a missing key is a programming error."""
    return frozenset(_raw()[section][key])


def reason(section: str) -> str:
    return _raw()[section].get("reason", "")


def checked_on() -> str:
    return _raw()["checked"]["torch"]
