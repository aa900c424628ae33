"""Options and helpers shared by several commands: the report formats, the colour choice,
the config/jobs/cache options, the selection in force, and the exit code a report gives."""
from __future__ import annotations

from typing import Callable, Sequence

import click

from graphlint.config import Config
from graphlint.io.exits import EXIT_ERROR, EXIT_OK, EXIT_VIOLATIONS, fail, split_list
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
    """combine_selection, or exit 2 naming the option or key of a selector that names no rule."""
    from graphlint.engine.selectors import SelectorError

    try:
        return combine_selection(config, select, extend_select, ignore)
    except SelectorError as error:
        fail(str(error))


def combine_selection(config: Config, select: Sequence[str], extend_select: Sequence[str],
                      ignore: Sequence[str]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(select, ignore) for the engine, as ruff combines them: --select replaces `select`,
    `extend-select` (config) and --extend-select add to what is selected (the default set when
    nothing is), --ignore adds to `ignore`; the longest matching selector still wins. Raises
    SelectorError naming the option or key for a selector that names no rule."""
    from graphlint.engine.selectors import normalise_tokens
    from graphlint.rules import ALL_RULES

    chosen = normalise_tokens(split_list(select), "--select")
    dropped = normalise_tokens(split_list(ignore), "--ignore")
    extra = (*normalise_tokens(config.extend_select, f"{config.source or 'config'}: key 'extend-select'"),
             *normalise_tokens(split_list(extend_select), "--extend-select"))
    if not extra:
        return chosen, dropped
    base = chosen or normalise_tokens(config.select, f"{config.source or 'config'}: key 'select'")
    if base:
        return (*base, *extra), dropped
    # The default set is every rule but the default-off ones: ALL, less those no extension names.
    extended = [rule.code for rule in ALL_RULES if not rule.default_enabled
                and not any(pattern == "ALL" or rule.code.startswith(pattern) for pattern in extra)]
    return ("ALL", *extra), (*dropped, *extended)
