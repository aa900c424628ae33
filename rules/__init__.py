"""graphlint's rules, one module per family (GL1 sync, GL2 host control flow, GL3 dynamic
shapes, GL4 allocation, GL9 graphlint itself) and one package for GL5, capture and replay
hygiene (`capture/`); what the families share is in `shared/`. Installed as `graphlint.rules`."""
from __future__ import annotations

import importlib

# Each family module defines RULES; the order here is the order of `graphlint rules`.
_FAMILY_MODULES = ["sync", "control_flow", "shapes", "allocation", "capture", "meta", "completeness"]


def _load() -> list:
    rules = []
    package = __name__
    for name in _FAMILY_MODULES:
        try:
            module = importlib.import_module(f"{package}.{name}")
        except ModuleNotFoundError as error:
            if error.name == f"{package}.{name}":
                continue  # a family not written yet
            raise
        rules.extend(module.RULES)
    return rules


ALL_RULES = _load()
BY_CODE = {rule.code: rule for rule in ALL_RULES}
BY_NAME = {rule.name: rule for rule in ALL_RULES}
