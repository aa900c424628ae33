"""`graphlint audit` (every function reachable from the entry points, with its region and
class) and `graphlint clean` (remove the cache)."""
from __future__ import annotations

import io
import json
import sys
from pathlib import Path
from typing import Any, Sequence

import click

from graphlint.config import ConfigError
from graphlint.commands.common.options import cache_dir_option, config_option, jobs_option, no_cache_option
from graphlint.io.exits import EXIT_OK, EXIT_VIOLATIONS, fail, load_config, split_list
from graphlint.views.output import write_output


@click.command()
@click.option("--cache-dir", type=click.Path(file_okay=False), default=None)
def clean(cache_dir: str | None) -> None:
    """Remove the cache folder."""
    from graphlint.engine.cache import remove_folder

    config = load_config(None)
    folder = Path(cache_dir) if cache_dir else config.root / ".graphlint_cache"
    if remove_folder(folder):  # only a folder with graphlint's CACHEDIR.TAG (else exit 2, naming it)
        click.echo(f"removed {folder}")


@click.command("audit")
@click.argument("paths", nargs=-1, type=click.Path())
@click.option("--entry-point", "-e", "entry_points", multiple=True, metavar="MODULE:QUALNAME",
              help="Root of the captured region (repeatable); replaces [tool.graphlint] entry-points.")
@click.option("--eager", "eager", multiple=True, metavar="MODULE:QUALNAME", help="An eager break inside the step (repeatable).")
@click.option("--host", "host", multiple=True, metavar="MODULE:QUALNAME", help="Host code outside the graph (repeatable).")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
@click.option("--output", "-o", type=click.Path(dir_okay=False), help="Write the audit here (atomically).")
@config_option
@jobs_option
@no_cache_option
@cache_dir_option
@click.option("--fail-on", type=click.Choice(["error", "warning"]), default="error", show_default=True,
              help="warning: a captured function with warnings only fails the audit too (as check --fail-on).")
def audit_command(paths: tuple[str, ...], entry_points: tuple[str, ...], eager: tuple[str, ...], host: tuple[str, ...],
                  fmt: str, output: str | None, config_file: str | None, jobs: int | None, no_cache: bool,
                  cache_dir: str | None, fail_on: str = "error") -> None:
    """List every function reachable from the entry points with its region and class.

    Exit codes as check's: 0 when no reachable captured function has an error (warnings count
    with --fail-on warning), 1 otherwise, 2 on errors.
    """
    import dataclasses

    from graphlint.region_audit import AuditError, run as run_audit

    config = load_config(config_file)
    changes: dict[str, Any] = {}
    if entry_points:
        changes["entry_points"] = split_list(entry_points)
    if eager:
        changes["eager"] = config.eager + split_list(eager)
    if host:
        changes["host"] = config.host + split_list(host)
    config = dataclasses.replace(config, **changes)
    targets: Sequence[str | Path] = paths or [str(config.root / p) for p in config.paths] or (".",)
    cache_folder = None if no_cache else Path(cache_dir) if cache_dir else config.root / ".graphlint_cache"
    from graphlint.discovery import PathProblem

    try:
        result = run_audit(targets, config, jobs=jobs, cache_dir=cache_folder, fail_on=fail_on)
    except PathProblem as error:
        fail(str(error))
        return
    except (AuditError, ConfigError) as error:
        fail(str(error))
        return
    if fmt == "json":
        text = json.dumps(result.to_dict(), indent=2) + "\n"
    else:
        from graphlint.views.audit_text import render

        stream = io.StringIO() if output else sys.stdout
        render(result, stream, color=False if output else None)
        text = stream.getvalue() if output else ""
    if output:
        write_output(output, text)
        click.echo(f"graphlint: wrote {output} ({result.verdict()}: {len(result.rows)} reachable functions)", err=True)
    elif text:
        sys.stdout.write(text)
    sys.exit(EXIT_OK if result.verdict() == "pass" else EXIT_VIOLATIONS)  # INCOMPLETE never passes

