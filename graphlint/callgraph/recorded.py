"""Region files: the functions a real run of the step executed (`graphlint runtime --record-regions`),
read back by the static check as captured roots, and checked for staleness against the source.

Both halves hash a function the same way (`function_spans` + `source_hash`, from the file text alone),
so an entry whose function is gone or whose source changed is stale (GL904) instead of silently wrong.
"""
from __future__ import annotations

import ast
import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Sequence

from graphlint.config import Config, ConfigError

SCHEMA = "graphlint-regions/1"
DEFAULT_PATH = ".graphlint/regions.json"
REASON_PREFIX = "ran inside the captured step of "
REFRESH = "graphlint runtime TARGET --record-regions"
_BODIES = ("body", "orelse", "finalbody", "handlers", "cases")


class RegionFileError(ConfigError):
    """A region file that cannot be read or is not one (exit code 2 in the CLI)."""


# ----- the function hash both halves compute ----------------------------------------------------

@dataclass(frozen=True)
class Span:
    """A def in a file: its qualified name as the static analysis writes it (`Class.method`,
    `outer.inner`), its first line (the first decorator's, as CPython's `co_firstlineno`) and last."""

    qualname: str
    name: str
    first: int
    last: int


def function_spans(text: str) -> list[Span]:
    """Every def of `text` (nested ones too) in source order; [] when it does not parse."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return []
    found: list[Span] = []

    def walk(statements: Iterable[Any], prefix: str) -> None:
        for node in statements:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                first = min([node.lineno] + [d.lineno for d in node.decorator_list])
                qualname = prefix + node.name
                found.append(Span(qualname, node.name, first, node.end_lineno or node.lineno))
                walk(node.body, qualname + ".")
            elif isinstance(node, ast.ClassDef):
                walk(node.body, f"{prefix}{node.name}.")
            else:
                # Defs under if/try/with/for/match bodies keep the enclosing prefix.
                for field in _BODIES:
                    children = getattr(node, field, None)
                    if isinstance(children, list):
                        walk(children, prefix)

    walk(tree.body, "")
    return found


def source_hash(lines: Sequence[str], first: int, last: int) -> str:
    """Hash of lines `first`..`last` (1-based, inclusive) with the def's indentation removed and
    trailing whitespace dropped: moving a function or re-indenting its class keeps the hash."""
    chunk = [line.rstrip("\r\n").rstrip() for line in lines[first - 1:last]]
    indent = len(chunk[0]) - len(chunk[0].lstrip()) if chunk else 0
    body = "\n".join(line[indent:] if line[:indent].strip() == "" else line.lstrip() for line in chunk)
    return hashlib.blake2b(body.encode("utf-8", "surrogatepass"), digest_size=8).hexdigest()


def hashes(text: str) -> dict[str, set[str]]:
    """qualname -> the hashes of the defs of that name in `text` (two when a def is conditional)."""
    lines = text.splitlines()
    out: dict[str, set[str]] = {}
    for span in function_spans(text):
        out.setdefault(span.qualname, set()).add(source_hash(lines, span.first, span.last))
    return out


# ----- reading a region file ---------------------------------------------------------------------

@dataclass(frozen=True)
class Entry:
    path: str  # relative to the project root, or to its sys.path folder for third-party code
    qualname: str
    hash: str
    package: str | None = None  # the distribution's top-level package for third-party code


@dataclass(frozen=True)
class RegionFile:
    path: Path
    shown: str  # as findings name it: relative to the root where possible
    target: str
    recorded: str
    entries: tuple[Entry, ...]
    digest: str

    @property
    def reason(self) -> str:
        return f"{REASON_PREFIX}{self.target} (recorded {self.recorded})"


def path_of(config: Config) -> tuple[Path | None, bool]:
    """(the region file in force, whether the config names it): the configured `region-file`,
    else `.graphlint/regions.json` under the root when it exists."""
    root = Path(config.root)
    named = getattr(config, "region_file", None)
    if named:
        path = Path(named)
        return (path if path.is_absolute() else root / path), True
    default = root / DEFAULT_PATH
    return (default if default.is_file() else None), False


_LOADED: dict[tuple, RegionFile | None] = {}


def load(config: Config) -> RegionFile | None:
    """The region file in force, or None. Raises RegionFileError for a configured file that is
    missing, and for any file that is not a region file."""
    path, named = path_of(config)
    if path is None:
        return None
    try:
        stat = path.stat()
    except OSError:
        if named:
            raise RegionFileError(f"{path}: region file (region-file in config) not found; record it with "
                                  f"`{REFRESH}` or remove the key") from None
        return None
    key = (str(path.resolve()), stat.st_size, stat.st_mtime_ns, str(Path(config.root).resolve()))
    if key not in _LOADED:
        _LOADED[key] = _parse(path, Path(config.root))
    return _LOADED[key]


def _parse(path: Path, root: Path) -> RegionFile:
    try:
        raw = path.read_bytes()
        data = json.loads(raw.decode("utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as error:
        raise RegionFileError(f"{path}: not a readable region file: {error}") from None
    if not isinstance(data, dict) or data.get("schema") != SCHEMA or not isinstance(data.get("functions"), list):
        raise RegionFileError(f"{path}: not a region file (expected schema {SCHEMA!r} and a list of functions); "
                              f"record one with `{REFRESH}`")
    entries = []
    for n, item in enumerate(data["functions"]):
        if not (isinstance(item, dict) and all(isinstance(item.get(k), str) for k in ("path", "qualname", "hash"))):
            raise RegionFileError(f"{path}: functions[{n}] needs string path, qualname and hash")
        package = item.get("package")
        entries.append(Entry(item["path"], item["qualname"], item["hash"], package if isinstance(package, str) else None))
    try:
        shown = path.resolve().relative_to(root.resolve()).as_posix()
    except ValueError:
        shown = path.as_posix()
    return RegionFile(path, shown, str(data.get("target") or "?"), str(data.get("recorded") or "?"),
                      tuple(entries), hashlib.blake2b(raw, digest_size=16).hexdigest())


def cache_token(config: Config) -> str:
    """What the call graph's cache key needs of the region file: its digest ('' when none)."""
    found = load(config)
    return found.digest if found else ""


# ----- matching entries to the linted functions --------------------------------------------------

def _matches(entry: Entry, path: str) -> bool:
    """Project entries name the linted path; third-party ones the end of it (site-packages may be
    linted from the project, named absolutely, or as the root itself)."""
    return path == entry.path or (entry.package is not None and path.endswith("/" + entry.path))


def matched(entries: Iterable[Entry], paths: Iterable[str]) -> dict[Entry, str]:
    """entry -> the linted path it names, for the entries whose file is linted."""
    by_path: dict[str, str] = {}
    suffixes: dict[str, str] = {}
    for path in paths:
        by_path[path] = path
        parts = path.split("/")
        for i in range(1, len(parts)):
            suffixes.setdefault("/".join(parts[i:]), path)
    out: dict[Entry, str] = {}
    for entry in entries:
        found = by_path.get(entry.path) or (suffixes.get(entry.path) if entry.package is not None else None)
        if found is not None:
            out[entry] = found
    return out


def roots(project: Any, config: Config) -> list[tuple[tuple, str]]:
    """Call-graph roots (as graph.build's entries) for the recorded functions the linted files
    define; stale entries are roots too when their function still exists (GL904 says so)."""
    from graphlint.callgraph.values import FN

    found = load(config)
    if found is None:
        return []
    paths = {key[0] for key in project.functions}
    out = []
    for entry, path in matched(found.entries, paths).items():
        key = (path, entry.qualname)
        function = project.functions.get(key)
        if function is not None:
            owner = (path, function["class"]) if function["class"] else None
            out.append(((FN, key, owner), found.reason))
    return sorted(out, key=lambda root: root[0][1])


def stale(files: Sequence[Mapping[str, Any]], config: Config, cache: Any = None) -> tuple[RegionFile | None, list[dict]]:
    """(the region file, its stale entries among the linted files): `{path, qualname, why}` where
    the function is gone or its source hash changed. Entries of files this check does not lint are
    not judged, except a project file that no longer exists. With `cache` (the engine's), the
    verdict on the linted files is kept under the region file's digest and the files' cache keys,
    so a warm check parses none of them."""
    found = load(config)
    if found is None:
        return None, []
    root = Path(config.root)
    by_path = {file["path"]: file for file in files}
    hits = matched(found.entries, by_path)
    out = [{"path": e.path, "qualname": e.qualname, "why": "its file is gone"} for e in found.entries
           if e not in hits and e.package is None and not (root / e.path).exists()]
    key = _stale_key(found, files, root, cache)
    cached = cache.get(key, _valid_stale) if key else None
    if cached is not None:
        return found, out + cached["stale"]
    judged = _judge(found, by_path, hits, root)
    if key:
        cache.put(key, {"stale": judged})
    return found, out + judged


def _judge(found: RegionFile, by_path: Mapping[str, Mapping[str, Any]], hits: Mapping[Entry, str],
           root: Path) -> list[dict]:
    names = {path: {f["qualname"] for f in file.get("functions", [])} for path, file in by_path.items()}
    texts: dict[str, dict[str, set[str]]] = {}
    out = []
    for entry in found.entries:
        path = hits.get(entry)
        if path is None:
            continue
        file = by_path[path]
        if file.get("parse_error") or file.get("limit") or file.get("skipped"):
            continue  # not analysed: GL900 / GL903 say so, or it never mentions torch
        if entry.qualname not in names[path]:
            out.append({"path": entry.path, "qualname": entry.qualname, "why": "gone"})
            continue
        if path not in texts:
            texts[path] = hashes(_read(root, path))
        if entry.hash not in texts[path].get(entry.qualname, ()):
            out.append({"path": entry.path, "qualname": entry.qualname, "why": "source changed"})
    return out


def _stale_key(found: RegionFile, files: Sequence[Mapping[str, Any]], root: Path, cache: Any) -> str:
    """The cache key of the verdict: '' without a cache or when a file was not cached (stdin)."""
    keys = getattr(cache, "file_keys", None)
    if cache is None or getattr(cache, "folder", None) is None or not keys or len(keys) != len(files) or not all(keys):
        return ""
    parts = ["region-file-stale", cache.fingerprint, found.digest, str(root.resolve())]
    parts += [f"{key}:{file['path']}" for key, file in zip(keys, files)]
    return hashlib.blake2b("\n".join(parts).encode(), digest_size=16).hexdigest()


def _valid_stale(value: dict[str, Any]) -> bool:
    items = value.get("stale")
    return isinstance(items, list) and all(
        isinstance(i, dict) and all(isinstance(i.get(k), str) for k in ("path", "qualname", "why")) for i in items)


def _read(root: Path, path: str) -> str:
    full = Path(path) if os.path.isabs(path) else root / path
    try:
        return full.read_bytes().decode("utf-8", "replace")
    except OSError:
        return ""


def stale_message(found: RegionFile, entries: list[dict], limit: int = 5) -> str:
    shown = ", ".join(f"{e['qualname']} ({e['path']}: {e['why']})" for e in entries[:limit])
    more = f" and {len(entries) - limit} more" if len(entries) > limit else ""
    return (f"{len(entries)} of {len(found.entries)} recorded functions are stale: {shown}{more}; "
            f"the regions recorded from {found.target} on {found.recorded} no longer match the code")


def stale_findings(files: Sequence[Mapping[str, Any]], config: Config, selected: Callable[[str], bool],
                   cache: Any = None) -> list:
    """One GL904 warning for a region file with stale entries (at the region file, naming them
    and the refresh), under the config's rule selection and severities."""
    from graphlint.report import Finding
    from graphlint.rules import BY_CODE

    found, entries = stale(files, config, cache)
    rule = BY_CODE["GL904"]
    if not entries or not selected(rule.code):
        return []
    severity = next((v for k, v in sorted(config.severity.items(), key=lambda kv: -len(kv[0]))
                     if rule.code.startswith(k)), rule.severity)
    if severity == "off":
        return []
    return [Finding(rule=rule.code, family=rule.family(), severity=severity, path=found.shown, line=1, col=1,
                    end_line=1, end_col=1, function=None, region="module",
                    message=f"{rule.message}: {stale_message(found, entries)}",
                    fix=f"refresh it: `{REFRESH.replace('TARGET', found.target)} {found.shown}`", name=rule.name)]
