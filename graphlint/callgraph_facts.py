"""Per-file facts for the cross-module call graph, gathered from the parse the rules use.

Placeholder until the regions work lands: it records nothing, so every function keeps the
default region (per-step unless constructor, host-marked or configured as host).
"""
from __future__ import annotations

from typing import Any


def callgraph_facts(module: Any, imports: Any, functions: Any, facts: Any) -> dict[str, Any]:
    return {}
