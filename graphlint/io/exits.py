"""Exit codes (as ruff: 0 no unsuppressed error, 1 violations, 2 usage, config or internal
error) and how a command stops on bad input: one line on stderr, exit 2, never a traceback.
Every command module imports these from here, below the CLI.
"""
from __future__ import annotations

import sys
from typing import NoReturn, Sequence

import click

from graphlint.config import Config, ConfigError, load

EXIT_OK, EXIT_VIOLATIONS, EXIT_ERROR = 0, 1, 2


def fail(message: str) -> NoReturn:
    click.echo(f"graphlint: error: {message}", err=True)
    sys.exit(EXIT_ERROR)


def load_config(config_file: str | None) -> Config:
    """The config in force, or exit 2 naming the file and the key that is wrong."""
    try:
        return load(config_file)
    except ConfigError as error:
        fail(str(error))


def split_list(values: Sequence[str]) -> tuple[str, ...]:
    """Repeated and comma-separated option values (`--select GL1,GL2 --select GL3`) as one tuple."""
    return tuple(item.strip() for value in values for item in value.split(",") if item.strip())
