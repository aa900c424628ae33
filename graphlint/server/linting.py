"""One document checked as `check` checks the project: the config found from the document's
folder (re-read every run, so edits to it apply at once), the project analysed for regions
with the document's unsaved text in place of its file, and the cache shared with the CLI."""
from __future__ import annotations

import dataclasses
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from graphlint.commands.common.options import combine_selection
from graphlint.config import Config, ConfigError, load
from graphlint.discovery import PathProblem, is_excluded, relative_posix, DEFAULT_EXCLUDES
from graphlint.report import Finding


@dataclass
class DocumentResult:
    """The findings of one document (report paths relative to `config.root`), or why none."""
    path: Path
    config: Config
    rel: str = ""
    findings: list[Finding] = field(default_factory=list)
    error: str | None = None  # a broken config or selector: shown to the user, no findings


def config_for(path: Path, workspace_root: Path | None) -> Config:
    """The config discovered from the document's folder upwards; with none, the workspace
    folder that holds the document is the project root."""
    config = load(None, start=path.parent)
    if config.source is None and workspace_root is not None:
        config = dataclasses.replace(config, root=workspace_root.resolve())
    return config


def _excluded(rel: str, config: Config) -> bool:
    patterns = (*(DEFAULT_EXCLUDES if config.exclude is None else config.exclude), *config.extend_exclude)
    return config.force_exclude and is_excluded(rel, patterns)


def lint_document(path: Path, text: str, workspace_root: Path | None = None, jobs: int | None = None) -> DocumentResult:
    """Check the project the document belongs to with `text` as the document's content and
    return the document's findings (suppressed ones included, flagged as such)."""
    from graphlint.engine import check, collect_tasks

    path = path.absolute()
    try:
        config = config_for(path, workspace_root)
        select, ignore = combine_selection(config, (), (), ())
    except ConfigError as error:
        return DocumentResult(path, Config(root=path.parent), error=str(error))
    root = config.root.resolve()
    rel = relative_posix(path, root)
    result = DocumentResult(path, config, rel)
    if _excluded(rel, config):  # as the pre-commit hook: force-exclude keeps excluded files quiet
        return result
    project = [str(root / p) for p in config.paths] or [str(root)]
    fd, scratch = tempfile.mkstemp(suffix=".py", prefix="graphlint-lsp-")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        try:
            tasks = [task for task in collect_tasks([p for p in project if Path(p).exists()], config) if task[0] != rel]
        except PathProblem:
            tasks = []
        cache = None if os.environ.get("GRAPHLINT_NO_CACHE") else root / ".graphlint_cache"
        static = check([scratch], config, select, ignore, jobs=jobs, cache_dir=cache, tasks=[*tasks, (rel, scratch)])
    except ConfigError as error:
        result.error = str(error)
        return result
    finally:
        os.unlink(scratch)
    result.findings = [finding for finding in static.findings if finding.path == rel]
    return result
