"""`graphlint baseline write`: record today's findings so that `check --baseline` fails only
on new ones."""
from __future__ import annotations

import click

from graphlint import __version__
from graphlint.commands.common.static import static_check
from graphlint.commands.common.options import config_option, jobs_option, no_cache_option
from graphlint.io.exits import load_config
from graphlint.views.output import write_output


@click.group("baseline")
def baseline_group() -> None:
    """Record today's findings so that `check --baseline` fails only on new ones."""


@baseline_group.command("write")
@click.argument("paths", nargs=-1, type=click.Path())
@click.option("--output", "-o", type=click.Path(dir_okay=False), default="graphlint-baseline.json",
              show_default=True, help="The baseline file to write.")
@click.option("--select", multiple=True, help="Rule codes or prefixes to enable; comma-separated.")
@click.option("--ignore", multiple=True, help="Rule codes or prefixes to disable; comma-separated.")
@config_option
@jobs_option
@no_cache_option
def baseline_write(paths: tuple[str, ...], output: str, select: tuple[str, ...], ignore: tuple[str, ...],
                   config_file: str | None, jobs: int | None, no_cache: bool) -> None:
    """Check PATHS as `check` does and record every unsuppressed finding in the baseline file."""
    from graphlint.gating import accepted_findings

    config = load_config(config_file)
    _, static = static_check(paths, config, select, ignore, jobs, no_cache, None)
    written = accepted_findings.Baseline.from_findings(static.findings)
    write_output(output, written.to_json(__version__), [config.root / name for name in static.files])
    click.echo(f"graphlint: wrote {output} ({len(written.entries)} findings in {len(static.files)} files)", err=True)

