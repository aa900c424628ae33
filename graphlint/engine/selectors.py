"""Rule selectors (`--select`, `--ignore`, `select`, `ignore`, `per-file-ignores`, `severity`):
a code, a code prefix (GL1, GL10), ALL, or a rule name (item-call), normalised to codes and
prefixes. Anything else is an error (exit 2), as ruff answers an unknown selector."""
from __future__ import annotations

import dataclasses
from typing import Sequence

from graphlint.config import Config, ConfigError
from graphlint.rules import BY_CODE, BY_NAME


class SelectorError(ConfigError):
    """A selector that names no rule; the message names the option or the file and key."""


def resolve(token: str) -> str | None:
    """The code or prefix `token` stands for, or None when it names no rule."""
    upper = token.strip().upper()
    if upper == "ALL" or upper in BY_CODE:
        return upper
    named = BY_NAME.get(token.strip().lower())
    if named is not None:
        return named.code
    if upper.startswith("GL") and any(code.startswith(upper) for code in BY_CODE):
        return upper
    return None


def _normalise(tokens: Sequence[str], where: str) -> tuple[str, ...]:
    out = []
    for token in tokens:
        code = resolve(token)
        if code is None:
            raise SelectorError(f"{where}: unknown rule selector '{token}' (a code such as GL101, a prefix such as "
                                f"GL1, a rule name such as item-call, or ALL; see `graphlint rules`)")
        out.append(code)
    return tuple(out)


def normalise_tokens(tokens: Sequence[str], where: str) -> tuple[str, ...]:
    """Selectors as codes or prefixes; SelectorError names `where` (an option or a file and key)."""
    return _normalise(tokens, where)


def validate_cli(select: Sequence[str], ignore: Sequence[str]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    return _normalise(select, "--select"), _normalise(ignore, "--ignore")


def normalise_config(config: Config) -> Config:
    """The config with every selector as a code or prefix; SelectorError names file and key."""
    source = config.source or "config"
    per_file = {pattern: _normalise(codes, f"{source}: key 'per-file-ignores' ({pattern})")
                for pattern, codes in config.per_file_ignores.items()}
    severity = {}
    for token, level in config.severity.items():
        [code] = _normalise([token], f"{source}: key 'severity'")
        if code == "ALL":
            code = "GL"  # every code starts with it; the longest key still wins
        severity[code] = level
    return dataclasses.replace(config, select=_normalise(config.select, f"{source}: key 'select'"),
                               ignore=_normalise(config.ignore, f"{source}: key 'ignore'"),
                               per_file_ignores=per_file, severity=severity)


def validate_config(config: Config, select: Sequence[str], ignore: Sequence[str]) -> tuple[Config, tuple[str, ...],
                                                                                           tuple[str, ...]]:
    """(normalised config, selection in force, ignores in force): the command line's --select
    replaces the config's `select`, its --ignore adds to `ignore`."""
    config = normalise_config(config)
    cli_select, cli_ignore = validate_cli(select, ignore)
    return config, cli_select or config.select, cli_ignore + config.ignore
