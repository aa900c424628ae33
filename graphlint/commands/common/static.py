"""The static half as the commands run it: selection checked, files discovered (named files,
stdin, --diff), the engine run with a progress display, and a baseline applied."""
from __future__ import annotations

from pathlib import Path
from typing import Sequence

from graphlint.config import Config
from graphlint.io.exits import fail, split_list


def static_check(paths: tuple[str, ...], config: Config, select: tuple[str, ...], ignore: tuple[str, ...],
                  jobs: int | None, no_cache: bool, cache_dir: str | None, diff_rev: str | None = None,
                  force_exclude: bool = False, stdin_source: dict[str, str] | None = None, quiet: bool = False):
    """Run the static half with fingerprinted findings; with `diff_rev`, report only changed files.

    The regions of a file depend on the whole project: files named on the command line (as
    pre-commit names the staged ones) are analysed with the configured project and only the
    named ones are reported (graphlint.engine.run.check_in_project), as --diff does."""
    from graphlint.discovery import PathProblem
    from graphlint.engine import check as run_check, collect_tasks
    from graphlint.engine.selectors import SelectorError, validate_cli

    try:
        select, ignore = validate_cli(split_list(select), split_list(ignore))
    except SelectorError as error:
        fail(str(error))
    project = [str(config.root / p) for p in config.paths] or [str(config.root)]
    if stdin_source is not None:
        paths = ()
    targets: Sequence[str | Path] = paths or project
    cache_folder = None if no_cache else Path(cache_dir) if cache_dir else config.root / ".graphlint_cache"
    changed: list[str] | None = None
    analysed = targets
    tasks = None
    try:
        if stdin_source is not None:
            tasks, changed = stdin_tasks(stdin_source, config, project, force_exclude)
        elif paths and diff_rev is None:
            # Regions belong to the project: the named files are reported, the project analysed.
            from graphlint.engine.run import check_in_project
            from graphlint.views.progress import static_progress

            with static_progress(quiet) as progress:
                return paths, check_in_project(paths, config, select, ignore, jobs=jobs, cache_dir=cache_folder,
                                               force_exclude=force_exclude, progress=progress)
        if diff_rev is not None:
            from graphlint.gating import diff
            from graphlint.discovery import relative_posix

            try:
                changed_paths = diff.changed_files(diff_rev, config.root)
            except diff.DiffError as error:
                fail(str(error))
                raise  # unreachable
            changed = [relative_posix(p, config.root.resolve()) for p in changed_paths]
            if config.regions == "sweep":
                # In a sweep a file's regions do not depend on other files: analyse only these.
                wanted = set(changed)
                analysed = [full for rel, full in collect_tasks(targets, config) if rel in wanted]
        from graphlint.views.progress import static_progress

        with static_progress(quiet) as progress:
            static = run_check(analysed, config, select, ignore, jobs=jobs, cache_dir=cache_folder,
                               force_exclude=force_exclude, tasks=tasks, progress=progress)
    except PathProblem as error:
        fail(str(error))
        raise  # unreachable
    except SelectorError as error:
        fail(str(error))
        raise  # unreachable
    if changed is not None:
        from graphlint.gating import diff

        if diff_rev is not None:
            diff.narrow(static, changed, diff_rev)
        else:  # named files or stdin: reported alone, the project analysed for their regions
            wanted = set(changed)
            static.files = [path for path in static.files if path in wanted]
            static.findings = [f for f in static.findings if f.path in wanted]
    return targets, static


def stdin_tasks(stdin_source: dict[str, str], config: Config, project: list[str], force_exclude: bool):
    """Tasks for a source read from stdin: written to a private temporary file that is analysed
    under the name given (--stdin-filename, else `-`), with the project for its regions when
    entry points are configured. Returns (tasks, [the name])."""
    import atexit
    import os
    import tempfile

    from graphlint.discovery import DEFAULT_EXCLUDES, is_excluded, relative_posix
    from graphlint.engine import collect_tasks

    [(name, text)] = stdin_source.items()
    rel = relative_posix(Path(name), config.root.resolve()) if name != "-" else "-"
    excluded = DEFAULT_EXCLUDES if config.exclude is None else config.exclude
    if force_exclude and is_excluded(rel, (*excluded, *config.extend_exclude)):
        return [], [rel]
    fd, tmp = tempfile.mkstemp(suffix=".py", prefix="graphlint-stdin-")
    from graphlint.analysis.text.source import encoded_as_declared

    with os.fdopen(fd, "wb") as handle:
        handle.write(encoded_as_declared(text))  # in its own encoding: the copy decodes to the same text
    atexit.register(os.unlink, tmp)
    # The project gives the source its regions, as it gives a named file its own.
    tasks = [task for task in collect_tasks(project, config) if task[0] != rel] if config.source else []
    return [*tasks, (rel, tmp)], [rel]


def apply_baseline(static, baseline_file: str, root: Path):
    from graphlint.gating import accepted_findings

    try:
        known = accepted_findings.load(baseline_file)
    except accepted_findings.BaselineError as error:
        fail(str(error))
        raise  # unreachable
    return accepted_findings.apply(static, known, root)

