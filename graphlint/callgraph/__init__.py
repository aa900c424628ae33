"""Per project, after the per-file analysis: the module name each linted file imports as
(`module_names`), symbolic values of names and calls (`values`, with `lookups` and `calls`), the
roots of the regions (`roots`), what calls pass (`arguments`), the cross-module call graph from
the roots (`graph`) and the region every function lands in (`regions`).
"""
from graphlint.callgraph.graph import CallGraph, EntryPointError, build

__all__ = ["CallGraph", "EntryPointError", "build"]
