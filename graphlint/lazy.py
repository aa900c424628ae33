"""libcst, loaded on first use: a warm check serves every file from the cache and never touches
a syntax tree, and loading libcst is a quarter of its time.

Modules that parse or walk code take `cst` from here instead of `import libcst as cst`. The
module object comes from the standard library's LazyLoader recipe; an `import libcst`
statement would load it at once (the import system reads the module's `__spec__`, and any
attribute read loads a lazy module), so nothing on the warm path may say it. Names read at
import time (`cst.If` in a module-level tuple) would load it too: such constants are built on
first use or hold type names.
"""
from __future__ import annotations

import importlib.util
import sys
import types


def lazy_module(name: str) -> types.ModuleType:
    """`name`, imported on first attribute access (or the module itself if already imported)."""
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.find_spec(name)
    if spec is None or spec.loader is None:
        raise ModuleNotFoundError(f"No module named {name!r}", name=name)
    loader = importlib.util.LazyLoader(spec.loader)
    spec.loader = loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    loader.exec_module(module)
    return module


cst = lazy_module("libcst")
