"""`check --show-settings` and `check --show-files`: what a check would use, printed without
checking anything (as ruff's options of the same names)."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Sequence

import click

from graphlint.config import Config
from graphlint.discovery import PathProblem
from graphlint.io.exits import fail


def enabled_rules(select: Sequence[str], ignore: Sequence[str]) -> list[str]:
    """The codes a check with this selection reports (before per-file ignores and severities)."""
    from graphlint.engine.finalize import _selected  # the engine's one rule of selection
    from graphlint.rules import ALL_RULES

    return [rule.code for rule in ALL_RULES if _selected(rule.code, select, ignore)]


def show_settings(config: Config, select: Sequence[str], ignore: Sequence[str]) -> None:
    """The config file, the project root, every setting, and the rules in force."""
    from graphlint.engine.selectors import SelectorError, validate_config

    try:
        normalised, chosen, dropped = validate_config(config, select, ignore)
    except SelectorError as error:
        fail(str(error))
    click.echo(f"Settings path: {config.source or '(none: defaults)'}")
    click.echo(f"root = {json.dumps(str(config.root.resolve()))}")
    for key, value in config.to_dict().items():
        if key != "source":
            click.echo(f"{key} = {json.dumps(value)}")
    click.echo(f"runtime-target = {json.dumps(config.runtime_target)}")
    click.echo(f"max-file-size = {config.max_file_size}")
    click.echo(f"file-timeout = {config.file_timeout:g}")
    click.echo(f"rules in force = {json.dumps(enabled_rules(chosen, dropped))}")


def show_files(paths: Sequence[str], config: Config, force_exclude: bool) -> None:
    """Every file a check of PATHS would analyse, one per line, sorted, relative to the
    current folder (absolute where outside it)."""
    from graphlint.engine import collect_tasks

    targets = paths or [str(config.root / p) for p in config.paths] or [str(config.root)]
    problems: list[str] = []
    try:
        tasks = collect_tasks(targets, config, problems, force_exclude=force_exclude)
    except PathProblem as error:
        fail(str(error))
    cwd = Path.cwd().resolve()
    for _, full in sorted(tasks, key=lambda task: task[0]):
        resolved = Path(full).resolve()
        click.echo(resolved.relative_to(cwd).as_posix() if resolved.is_relative_to(cwd) else str(resolved))
    for problem in problems:
        click.echo(f"graphlint: skipped {problem}", err=True)
