"""Lint the code a runtime target's step ran, so that `graphlint runtime --lint` has both halves to join.

The captured region is what ran: the functions the traced steps executed are read as a region file
(graphlint.callgraph.recorded), so an adapter's indirection (`self.inner.run()` on an object the
linter cannot type) no longer hides the model; step() stays an entry point. Project files are the
report's static half; third-party files the step ran (site-packages) are linted into a section of
their own (`static.third_party`), which gates only when asked.
"""
from __future__ import annotations

import dataclasses
import tempfile
from pathlib import Path
from typing import Any

from graphlint.config import Config
from graphlint.callgraph.graph import EntryPointError
from graphlint.callgraph.recorded import function_spans
from graphlint.callgraph.regions import CAPTURED, module_name
from graphlint.report import StaticResult
from graphlint.runtime.tracing import record


def target_files(runtime: dict, root: Path) -> list[str]:
    """Project files (relative to `root`) that the step executed, the step's own file and the
    files of the target's classes."""
    cwd = Path.cwd().resolve()
    found: set[str] = set()
    entry = (runtime.get("target") or {}).get("entry") or {}
    for path in [*(runtime.get("executed") or {}), entry.get("path"), *(entry.get("files") or [])]:
        if not isinstance(path, str) or not path.endswith(".py"):
            continue
        where = record.locate(str(cwd / path), root)
        if where is not None and where[1] is None:
            found.add(where[0])
    return sorted(p for p in found if (root / p).is_file())


def third_party_files(runtime: dict, root: Path) -> dict[str, list[str]]:
    """Package folder (site-packages or another sys.path entry) -> the files under it, relative to
    it, that the step ran a function of."""
    groups: dict[str, set[str]] = {}
    for function in runtime.get("functions") or []:
        where = record.locate(function["path"], root)
        if where is not None and where[1] is not None:
            groups.setdefault(where[2], set()).add(where[0])
    return {base: sorted(p for p in files if (Path(base) / p).is_file()) for base, files in sorted(groups.items())}


def entry_point(runtime: dict, root: Path) -> str | None:
    """`module:Class.step` of the target's step, in the linter's module naming."""
    entry = (runtime.get("target") or {}).get("entry") or {}
    path, qualname = entry.get("path"), entry.get("qualname")
    if not path or not qualname or "<" in qualname:
        return None
    try:
        rel = (Path.cwd().resolve() / path).resolve().relative_to(root).as_posix()
    except ValueError:
        return None
    return f"{module_name(rel)}:{qualname}"


def _region_file(runtime: dict, root: Path, folder: str, third_party: bool, name: str) -> str:
    """A region file of the functions the step ran, in the project (or, `third_party`, outside it)."""
    import json

    text, _ = record.region_text(runtime, root)
    data = json.loads(text)
    data["functions"] = [f for f in data["functions"] if ("package" in f) == third_party]
    path = Path(folder) / name
    path.write_text(json.dumps(data), "utf-8")
    return str(path)


def lint(runtime: dict, config: Config, jobs: int | None = None, cache_dir: Path | None = None) -> StaticResult:
    """The static half for the target's project files, with what the step ran as the captured region.
    The config's `exclude` does not apply (these files were named by running them); its rule
    selection, severities and markers do."""
    from graphlint.engine import check

    root = config.root.resolve()
    files = target_files(runtime, root)
    if not files:
        return StaticResult()
    entry = entry_point(runtime, root)
    entries = tuple(config.entry_points) + ((entry,) if entry and entry not in config.entry_points else ())
    with tempfile.TemporaryDirectory(prefix="graphlint-regions-") as folder:
        regions = _region_file(runtime, root, folder, False, "project.json")
        scoped = dataclasses.replace(config, root=root, exclude=(), entry_points=entries, region_file=regions)
        try:
            return check([str(root / f) for f in files], scoped, jobs=jobs, cache_dir=cache_dir)
        except EntryPointError:
            if entries == tuple(config.entry_points):
                raise
            # step() not among the functions analysed (its file did not parse, or hit a limit):
            # what the step ran is the region without it.
            scoped = dataclasses.replace(scoped, entry_points=tuple(config.entry_points))
            return check([str(root / f) for f in files], scoped, jobs=jobs, cache_dir=cache_dir)


def lint_third_party(runtime: dict, config: Config, jobs: int | None = None,
                     cache_dir: Path | None = None) -> list[tuple[Path, StaticResult]]:
    """(package folder, the static result of the files under it) for the third-party code the step
    ran; paths are relative to the folder (`transformers/models/llama/modeling_llama.py`)."""
    from graphlint.engine import check

    out = []
    groups = third_party_files(runtime, config.root.resolve())
    with tempfile.TemporaryDirectory(prefix="graphlint-regions-") as folder:
        regions = _region_file(runtime, config.root.resolve(), folder, True, "third_party.json") if groups else ""
        for base, files in groups.items():
            if not files:
                continue
            scoped = dataclasses.replace(config, root=Path(base), exclude=(), extend_exclude=(), entry_points=(),
                                         per_file_ignores={}, respect_gitignore=False, region_file=regions,
                                         regions="discover")
            out.append((Path(base), check([str(Path(base) / f) for f in files], scoped, jobs=jobs,
                                          cache_dir=cache_dir)))
    return out


def third_party_section(results: list[tuple[Path, StaticResult]], gates: bool) -> dict[str, Any]:
    """`static.third_party` of the report: the files and findings, paths relative to their package
    folder, and whether they gate."""
    files = [f for _, result in results for f in result.files]
    findings = [f for _, result in results for f in result.findings]
    counts: dict[str, int] = {}
    for finding in findings:
        if not finding.suppressed:
            counts[finding.rule] = counts.get(finding.rule, 0) + 1
    return {"gates": gates, "packages": sorted({f.split("/", 1)[0] for f in files}), "files": files,
            "findings": [f.to_dict() for f in findings], "counts": dict(sorted(counts.items())),
            "unresolved_calls": [u for _, result in results for u in result.unresolved_calls]}


def analysed_spans(results: list[tuple[Path, StaticResult]], sweep: bool = False) -> dict[str, list[tuple]]:
    """Absolute path -> (first, last, region, function, reason) of every def the static half
    analysed, innermost last, for telling a miss from code it never placed in the captured region."""
    out: dict[str, list[tuple]] = {}
    for root, result in results:
        unparsed = {f.path for f in result.findings if f.rule in ("GL900", "GL903")}
        for path in result.files:
            if path in unparsed:
                continue
            full = Path(path) if Path(path).is_absolute() else root / path
            try:
                text = full.read_text("utf-8")
            except (OSError, UnicodeDecodeError):
                continue
            spans = []
            for span in function_spans(text):
                placement = result.regions.get((path, span.qualname))
                region = placement.region if placement is not None else (CAPTURED if sweep else "unplaced")
                spans.append((span.first, span.last, region, span.qualname, placement.reason if placement else ""))
            out[str(full.resolve())] = spans
    return out


def lint_and_join(runtime: dict, config: Config, gate_third_party: bool = False, jobs: int | None = None,
                  cache_dir: Path | None = None, checked: StaticResult | None = None) -> tuple[StaticResult, dict]:
    """The static half of `runtime --lint` (third-party section included) and the cross-check.
    `checked`: a static result of the project made before (`check --runtime`); its findings are
    joined too, and the regions of the files the step never ran are its."""
    from graphlint import crosscheck

    root = config.root.resolve()
    static = lint(runtime, config, jobs=jobs, cache_dir=cache_dir)
    outside = lint_third_party(runtime, config, jobs=jobs, cache_dir=cache_dir)
    if outside:
        static.extra["third_party"] = third_party_section(outside, gate_third_party)
    everything = ([(root, checked)] if checked is not None else []) + [(root, static)] + outside
    own = {(f.rule, f.path, f.line, f.col): f for f in static.findings}
    if checked is not None:
        own = {**{(f.rule, f.path, f.line, f.col): f for f in checked.findings}, **own}
    findings = [f.to_dict() for f in own.values()] + [
        {**f.to_dict(), "path": str(base / f.path)} for base, result in outside for f in result.findings]
    linted = sorted(set(static.files) | set(checked.files if checked is not None else ())) + [
        str(base / f) for base, result in outside for f in result.files]
    joined = crosscheck.join(findings, runtime, root, Path.cwd(), linted,
                             analysed=analysed_spans(everything, sweep=config.regions == "sweep"))
    _package_paths(joined, root)
    return static, joined


def _package_paths(joined: dict, root: Path) -> None:
    """Third-party paths in the cross-check as the third-party section writes them (relative to
    their package folder), with the package named."""
    for name in crosscheck_sections:
        for entry in joined.get(name) or []:
            path = entry.get("path")
            if isinstance(path, str) and Path(path).is_absolute():
                where = record.locate(path, root)
                if where is not None and where[1] is not None:
                    entry["path"], entry["package"] = where[0], where[1]


crosscheck_sections = ("missed_by_static", "not_linted", "confirmed", "not_confirmed", "not_exercised")


def join_for_check(static: StaticResult, runtime: dict, config: Config) -> dict:
    """`check --runtime`: the cross-check on what the step ran (as `runtime --lint`), joined with the
    check's own findings; the third-party section goes into the check's static half (not gating)."""
    executed, joined = lint_and_join(runtime, config, checked=static)
    if "third_party" in executed.extra:
        static.extra["third_party"] = executed.extra["third_party"]
    return joined
