"""The functions a traced step ran, from the code objects the line recorder saw, and the region file
written from them (`graphlint runtime --record-regions`) for later static checks to read.

Each function is named as the static analysis names it (`Class.method`, `outer.inner`) and hashed
as it hashes it (graphlint.callgraph.recorded), so a check can tell a stale entry from a valid one.
"""
from __future__ import annotations

import datetime
import json
import linecache
import os
import sys
from pathlib import Path
from typing import Any, Iterable

from graphlint.callgraph.recorded import DEFAULT_PATH, SCHEMA, Span, function_spans, source_hash

_SPANS: dict[tuple[str, int], dict[tuple[int, str], Span]] = {}
_PACKAGE_DIRS = ("site-packages", "dist-packages")


def _spans_of(filename: str, lines: list[str]) -> dict[tuple[int, str], Span]:
    key = (filename, len(lines))
    if key not in _SPANS:
        _SPANS[key] = {(s.first, s.name): s for s in function_spans("".join(lines))}
    return _SPANS[key]


def qualname_of(code: Any, span: Span) -> str:
    """`co_qualname` without its `<locals>` parts (3.11+), else the name the def's nesting gives."""
    qualname = getattr(code, "co_qualname", None)
    if not qualname:
        return span.qualname
    return qualname.replace(".<locals>", "")


def functions_of(codes: Iterable[Any], phase: str) -> list[dict]:
    """One record per def that ran: `{file (absolute), qualname, first, last, hash, phases}`.
    Lambdas, comprehensions and module bodies are not functions of the static analysis and are
    left out; so is code whose source is not on disk (exec'd or generated)."""
    out: dict[tuple[str, int, str], dict] = {}
    for code in codes:
        if code.co_name.startswith("<"):
            continue
        lines = linecache.getlines(code.co_filename)
        span = _spans_of(code.co_filename, lines).get((code.co_firstlineno, code.co_name)) if lines else None
        if span is None:
            continue
        filename = os.path.abspath(code.co_filename)
        out.setdefault((filename, span.first, code.co_name), {
            "file": filename, "qualname": qualname_of(code, span), "first": span.first, "last": span.last,
            "hash": source_hash(lines, span.first, span.last), "phases": [phase]})
    return sorted(out.values(), key=lambda f: (f["file"], f["first"]))


def merge(results: list[dict]) -> list[dict]:
    """The devices' records as one list for `Report.runtime["functions"]`: paths as the other
    runtime records write them, with the devices and phases each function ran on."""
    from graphlint.runtime import user_frames

    merged: dict[tuple[str, int, str], dict] = {}
    for result in results:
        for record in result.get("functions") or []:
            key = (record["file"], record["first"], record["qualname"])
            entry = merged.setdefault(key, {
                "path": user_frames.relative_path(record["file"]), "qualname": record["qualname"],
                "first": record["first"], "last": record["last"], "hash": record["hash"], "devices": [], "phases": []})
            if result.get("device") not in entry["devices"]:
                entry["devices"].append(result.get("device"))
            entry["phases"] = sorted(set(entry["phases"]) | set(record.get("phases") or ()))
    return sorted(merged.values(), key=lambda f: (f["path"], f["first"]))


# ----- where a file lives: the project, or a package folder ------------------------------------

def locate(path: str, root: Path) -> tuple[str, str | None, str | None] | None:
    """(path relative to its base, top-level package for third-party code or None, the base folder
    for third-party code) of a file the step ran; None when it is neither in the project nor under
    a sys.path folder. site-packages inside the project (a virtualenv) is third-party."""
    full = Path(path if os.path.isabs(path) else os.path.join(os.getcwd(), path)).resolve()
    parts = full.parts
    for i in range(len(parts) - 1, 0, -1):
        if parts[i] in _PACKAGE_DIRS:
            rel = Path(*parts[i + 1:]).as_posix()
            return rel, _package(rel), str(Path(*parts[:i + 1]))
    try:
        return full.relative_to(root.resolve()).as_posix(), None, None
    except ValueError:
        pass
    bases = sorted((Path(p).resolve() for p in sys.path if p), key=lambda p: -len(p.parts))
    for base in bases:
        try:
            rel = full.relative_to(base).as_posix()
        except ValueError:
            continue
        return rel, _package(rel), str(base)
    return None


def _package(rel: str) -> str:
    first = rel.split("/", 1)[0]
    return first[:-3] if first.endswith(".py") else first


def region_entries(functions: list[dict], root: Path) -> tuple[list[dict], int]:
    """The region file's functions (sorted, no absolute paths) and how many could not be placed."""
    entries: dict[tuple, dict] = {}
    unplaced = 0
    for record in functions:
        where = locate(record["path"], root)
        if where is None:
            unplaced += 1
            continue
        rel, package, _base = where
        entry = {"path": rel, "qualname": record["qualname"], "first": record["first"], "last": record["last"],
                 "hash": record["hash"], "devices": sorted(set(record.get("devices") or ())),
                 "phases": sorted(set(record.get("phases") or ()))}
        if package is not None:
            entry = {"package": package, **entry}
        entries[(package or "", rel, record["qualname"], record["first"])] = entry
    return [entries[key] for key in sorted(entries)], unplaced


def _version(distribution: str) -> str | None:
    from importlib import metadata

    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return None


def region_text(runtime: dict, root: Path, today: datetime.date | None = None) -> tuple[str, int]:
    """The region file for a runtime dict, and how many functions could not be placed. One function
    a line, so a refresh reads as a small diff."""
    import graphlint

    entries, unplaced = region_entries(runtime.get("functions") or [], root)
    target = runtime.get("target") or {}
    header = {
        "schema": SCHEMA,
        "tool": f"graphlint {graphlint.__version__}",
        "target": target.get("spec"),
        "options": target.get("options") or {},
        "mode": runtime.get("mode"),
        "devices": runtime.get("devices") or [],
        "torch": runtime.get("torch"),
        "transformers": _version("transformers"),
        "recorded": (today or datetime.datetime.now(datetime.timezone.utc).date()).isoformat(),
    }
    head = json.dumps(header, indent=2, sort_keys=True)[:-2]  # reopen the object for the functions
    body = ",\n".join("    " + json.dumps(e, sort_keys=True) for e in entries)
    return f'{head},\n  "functions": [\n{body}\n  ]\n}}\n' if entries else f'{head},\n  "functions": []\n}}\n', unplaced


def incomplete(runtime: dict) -> str | None:
    """Why the traced steps are not a whole record of the step (a step that stopped early), or None."""
    stopped = ((runtime.get("phases") or {}).get("sync") or {}).get("stopped")
    if stopped:
        return f"the traced steps stopped early ({stopped.get('error')}); only what ran before that is known"
    if not runtime.get("functions"):
        return "no function of the step was recorded"
    return None


def default_path(config: Any) -> Path:
    """`region-file` from the config, else .graphlint/regions.json under the config's root."""
    named = getattr(config, "region_file", None)
    path = Path(named or DEFAULT_PATH)
    return path if path.is_absolute() else Path(config.root) / path
