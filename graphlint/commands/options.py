"""Options and helpers shared by several commands: the report formats, the colour choice,
the select/ignore/config/jobs/cache options, and the exit code a report gives."""
from __future__ import annotations

from pathlib import Path
from typing import Callable, Sequence

import click

from graphlint.config import Config
from graphlint.exits import EXIT_ERROR, EXIT_OK, EXIT_VIOLATIONS, fail, split_list
from graphlint.report import Report

FORMATS = ["text", "json", "sarif", "github", "gitlab", "junit"]
COLOR = {"auto": None, "always": True, "never": False}


def exit_code(report: Report, fail_on: str = "error", exit_zero: bool = False) -> int:
    """2 when the run recorded errors; else 1 on violations (warnings count with
    `fail_on="warning"`), 0 otherwise or with `exit_zero`."""
    if report.errors:
        return EXIT_ERROR
    summary = report.summary()
    failed = summary["verdict"] == "fail" or (fail_on == "warning" and summary["warnings"] > 0)
    return EXIT_VIOLATIONS if failed and not exit_zero else EXIT_OK


def cache_folder(config: Config, no_cache: bool, cache_dir: str | None) -> Path | None:
    """Where the cache lives for this run (None: no cache)."""
    return None if no_cache else Path(cache_dir) if cache_dir else config.root / ".graphlint_cache"


def selection(func: Callable) -> Callable:
    """--select and --ignore."""
    func = click.option("--ignore", multiple=True, help="Rule codes or prefixes to disable; comma-separated.")(func)
    return click.option("--select", multiple=True,
                        help="Rule codes or prefixes to enable (GL1, GL101); comma-separated.")(func)


def config_option(func: Callable) -> Callable:
    return click.option("--config", "config_file", type=click.Path(),
                        help="pyproject.toml (or a TOML file) to read settings from.")(func)


def jobs_option(func: Callable) -> Callable:
    return click.option("--jobs", "-j", type=click.IntRange(min=1), default=None,
                        help="Worker processes (default: all cores).")(func)


def no_cache_option(func: Callable) -> Callable:
    return click.option("--no-cache", is_flag=True, help="Do not read or write .graphlint_cache/.")(func)


def cache_dir_option(func: Callable) -> Callable:
    return click.option("--cache-dir", type=click.Path(file_okay=False), default=None,
                        help="Cache folder (default .graphlint_cache).")(func)


def selection_in_force(config: Config, select: Sequence[str], extend_select: Sequence[str],
                       ignore: Sequence[str]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(select, ignore) for the engine, as ruff combines them: --select replaces `select`,
    `extend-select` (config) and --extend-select add to what is selected (the default set when
    nothing is), --ignore adds to `ignore`; the longest matching selector still wins. Exits 2
    naming the option or key for a selector that names no rule."""
    from graphlint.engine.selectors import SelectorError, normalise_tokens
    from graphlint.rules import ALL_RULES

    try:
        chosen = normalise_tokens(split_list(select), "--select")
        dropped = normalise_tokens(split_list(ignore), "--ignore")
        extra = (*normalise_tokens(config.extend_select, f"{config.source or 'config'}: key 'extend-select'"),
                 *normalise_tokens(split_list(extend_select), "--extend-select"))
    except SelectorError as error:
        fail(str(error))
    if not extra:
        return chosen, dropped
    base = chosen or normalise_tokens(config.select, f"{config.source or 'config'}: key 'select'")
    if base:
        return (*base, *extra), dropped
    # The default set is every rule but the default-off ones: ALL, less those no extension names.
    extended = [rule.code for rule in ALL_RULES if not rule.default_enabled
                and not any(pattern == "ALL" or rule.code.startswith(pattern) for pattern in extra)]
    return ("ALL", *extra), (*dropped, *extended)
