"""Per project, after the per-file analysis: the module name each linted file imports as
(`module_names`), symbolic values of names and calls (`values`), the cross-module call graph
from the entry points (`graph`) and the region every function lands in (`regions`).
"""
from graphlint.callgraph.graph import CallGraph, EntryPointError, build

__all__ = ["CallGraph", "EntryPointError", "build"]
