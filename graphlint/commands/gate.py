"""`graphlint gate`: pass or fail on a report written earlier (optionally against a baseline)."""
from __future__ import annotations

import sys
from pathlib import Path

import click

from graphlint.commands.common.options import FORMATS
from graphlint.commands.common.static import apply_baseline
from graphlint.io.exits import fail
from graphlint.views.output import render_report


@click.command()
@click.argument("report_file", metavar="REPORT.json", type=click.Path(dir_okay=False))
@click.option("--baseline", "baseline_file", type=click.Path(dir_okay=False),
              help="Fail only on static findings not in this baseline (by the fingerprints in the report).")
@click.option("--format", "fmt", type=click.Choice(FORMATS), default="text", show_default=True)
@click.option("--output", "-o", type=click.Path(dir_okay=False), help="Write the gated report here (atomically).")
@click.option("--quiet", "-q", is_flag=True, help="Only the summary line.")
@click.option("--exit-zero", is_flag=True, help="Only render the report: exit 0 even when it fails (2 still "
              "means unreadable).")
def gate(report_file: str, baseline_file: str | None, fmt: str, output: str | None, quiet: bool,
         exit_zero: bool) -> None:
    """Pass (exit 0) or fail (exit 1) on a report written earlier; exit 2 if it cannot be read."""
    from graphlint.gating import verdict as gating

    try:
        report = gating.load_report(report_file)
    except gating.GateError as error:
        fail(str(error))
        return
    root = Path.cwd()
    outcome = None
    if baseline_file and report.static is not None:
        outcome = apply_baseline(report.static, baseline_file, root)
    render_report(report, fmt, output, root, quiet=quiet)
    if outcome is not None and not quiet:
        from graphlint.gating.accepted_findings import describe

        click.echo("\n".join(describe(outcome)), err=True)
    sys.exit(gating.PASS if exit_zero else gating.verdict(report))

