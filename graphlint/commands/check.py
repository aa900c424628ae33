"""`graphlint check`: the static half (and, with --runtime, the runtime half) into one report,
rendered in the chosen format; the exit code says whether it passed. --show-settings and
--show-files answer without checking; --watch checks again on every change."""
from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click

from graphlint import __version__
from graphlint.commands.common.options import (COLOR, FORMATS, cache_dir_option, config_option, exit_code,
                                               jobs_option, no_cache_option, selection_in_force)
from graphlint.commands.common.static import apply_baseline, static_check
from graphlint.io.exits import fail, load_config, split_list
from graphlint.report import Report
from graphlint.views.output import render_report

RUNTIME_HINT = "install it with pip install 'graphlint-cuda[runtime]'"


@click.command()
@click.argument("paths", nargs=-1, type=click.Path())
@click.option("--select", multiple=True, help="Rule codes or prefixes to enable (GL1, GL101); comma-separated.")
@click.option("--extend-select", multiple=True,
              help="Rule codes or prefixes to enable on top of the selection (as ruff's); comma-separated.")
@click.option("--ignore", multiple=True, help="Rule codes or prefixes to disable; comma-separated.")
@click.option("--format", "--output-format", "fmt", type=click.Choice(FORMATS), default="text", show_default=True,
              help="Report format (--output-format: ruff's spelling).")
@click.option("--output", "-o", type=click.Path(dir_okay=False), help="Write the report here (atomically).")
@config_option
@click.option("--quiet", "-q", is_flag=True, help="Only the summary line.")
@click.option("--statistics", is_flag=True, help="Only the count of findings per rule (text or json), as ruff's.")
@click.option("--show-settings", is_flag=True, help="Print the settings in force (config file, root, selection) and exit.")
@click.option("--show-files", is_flag=True, help="Print the files that would be checked and exit.")
@click.option("--watch", "-w", is_flag=True, help="Check again whenever a checked file or the config changes.")
@click.option("--show-suppressed", is_flag=True, help="List suppressed findings too (text view).")
@jobs_option
@no_cache_option
@cache_dir_option
@click.option("--runtime", "runtime", is_flag=True,
              help="Also run the runtime harness (on --runtime-target, else `runtime-target` from config) "
                   "into the same report.")
@click.option("--runtime-target", "runtime_target", metavar="TARGET", default=None,
              help="The target for --runtime: module:callable, path/to/file.py:callable, or `default` "
                   "for the bundled DSV4 step. Implies --runtime.")
@click.option("--runtime-compile", is_flag=True,
              help='With --runtime: also run the step through torch.compile(mode="reduce-overhead") (runtime --compile).')
@click.option("--baseline", "baseline_file", type=click.Path(dir_okay=False),
              help="Fail only on findings not in this baseline (see `graphlint baseline write`).")
@click.option("--diff", "diff_rev", metavar="REV",
              help="Report only on .py files changed since git revision REV (plus untracked files).")
@click.option("--exit-zero", is_flag=True, help="Exit 0 even when there are violations (2 still means an error).")
@click.option("--fail-on", type=click.Choice(["error", "warning"]), default="error", show_default=True,
              help="warning: warnings fail the run too (exit 1).")
@click.option("--force-exclude", is_flag=True,
              help="Apply exclude, extend-exclude and .gitignore to files named on the command line too "
                   "(as pre-commit names them).")
@click.option("--stdin-filename", metavar="PATH",
              help="Read the source from stdin (also with PATHS `-`) and report it as PATH.")
@click.option("--color", type=click.Choice(list(COLOR)), default="auto", show_default=True,
              help="Colours in the text view; auto honours NO_COLOR, FORCE_COLOR and TERM=dumb.")
@click.option("--sweep", is_flag=True,
              help="Treat every function as per-step (a grep-like sweep) instead of finding the captured region.")
def check(paths: tuple[str, ...], **options: Any) -> None:
    """Check PATHS (default: `paths` from config, else the current folder) for CUDA-graph hazards."""
    if options["watch"]:
        from graphlint.commands.watch import watch

        if "-" in paths or options["stdin_filename"] is not None:
            fail("--watch checks files on disk, not stdin")
        sys.exit(watch(lambda: run_check(paths, options), paths, options["config_file"]))
    sys.exit(run_check(paths, options))


def run_check(paths: tuple[str, ...], options: dict[str, Any]) -> int:
    """One check as the options ask; returns the exit code (exits 2 itself on bad input)."""
    config = load_config(options["config_file"])
    if options["sweep"]:
        import dataclasses

        config = dataclasses.replace(config, regions="sweep")
    select, ignore = selection_in_force(config, options["select"], split_list(options["extend_select"]),
                                        options["ignore"])
    if options["show_settings"] or options["show_files"]:
        from graphlint.commands.settings import show_files, show_settings

        if options["show_settings"]:
            show_settings(config, select, ignore)
        if options["show_files"]:
            show_files(paths, config, options["force_exclude"])
        return 0
    stdin_source: dict[str, str] | None = None
    if options["stdin_filename"] is not None or "-" in paths:
        if [p for p in paths if p != "-"]:
            fail("read from stdin (`-` or --stdin-filename) or check PATHS, not both")
        stdin_source = {options["stdin_filename"] or "-": stdin_source_text(config.max_file_size)}
    quiet = options["quiet"]
    if options["statistics"] and options["fmt"] not in ("text", "json"):
        fail("--statistics prints text or json (--format text|json)")
    targets, static = static_check(paths, config, select, ignore, options["jobs"], options["no_cache"],
                                   options["cache_dir"], options["diff_rev"], force_exclude=options["force_exclude"],
                                   stdin_source=stdin_source, quiet=quiet)
    baseline_file = options["baseline_file"]
    outcome = apply_baseline(static, baseline_file, config.root) if baseline_file else None
    report = Report(tool_version=__version__, config={**config.to_dict(), "checked": [str(t) for t in targets]},
                    static=static)
    report.errors.extend(f"skipped {problem}" for problem in static.extra.get("skipped", []))
    if options["runtime"] or options["runtime_target"] is not None:
        _runtime_half(report, config, options)
    if options["statistics"]:
        from graphlint.views.statistics import render_statistics

        render_statistics(report, options["fmt"], options["output"])
    else:
        sources = None
        if stdin_source is not None:
            [(shown, text)] = stdin_source.items()
            sources = {static.files[0] if static.files else shown: text}
        render_report(report, options["fmt"], options["output"], config.root, quiet=quiet,
                      show_suppressed=options["show_suppressed"], color=COLOR[options["color"]], sources=sources)
    if outcome is not None and not quiet:
        from graphlint.gating.accepted_findings import describe

        click.echo("\n".join(describe(outcome)), err=True)
    return exit_code(report, options["fail_on"], options["exit_zero"])


def _runtime_half(report: Report, config, options: dict[str, Any]) -> None:
    """The runtime harness into `report` (with --runtime); without torch, the install hint and exit 2."""
    target = options["runtime_target"] or config.runtime_target
    if target is None:  # the bundled demo step would PASS in any project: say so instead
        fail("--runtime needs a target: set `runtime-target` in [tool.graphlint], pass --runtime-target "
             "module:callable, or --runtime-target default for the bundled DSV4 demo step")
    try:  # torch missing: the same hint as `graphlint runtime`, before anything runs
        import torch  # noqa: F401
        from graphlint.commands.runtime import run_harness, runtime_progress
        from graphlint.runtime.targets.loader import DEFAULT_TARGET, UsageError
    except ImportError as error:
        fail(f"the runtime harness needs torch ({error}); {RUNTIME_HINT}")
    if target in ("default", "graph-safe", "graph_safe"):
        target = DEFAULT_TARGET
    try:
        with runtime_progress(target, options["quiet"]):
            report.runtime = run_harness(target, None, None)
        if options["runtime_compile"]:
            from graphlint.runtime.torch_compile.compile_report import run_phase

            run_phase(report.runtime)
    except UsageError as error:  # a target that cannot be loaded: exit 2, the static half still reported
        click.echo(f"graphlint: error: {error}", err=True)
        report.runtime = {"verdict": "error", "error": str(error)}
        report.errors.append(f"runtime: {error}")
    else:
        from graphlint.runtime.lint_target import join_for_check

        static = report.static
        report.crosscheck = join_for_check(static, report.runtime, config)  # on what the step ran


def stdin_source_text(max_bytes: int) -> str:
    """The source on stdin, decoded as Python would decode it (its PEP 263 cookie, else UTF-8);
    exit 2 when it is larger than `max_bytes` (max-file-size, 0: no limit) or not decodable."""
    from graphlint.analysis.text.source import SourceError, TooLarge, decode, read_stream

    try:
        return decode(read_stream(sys.stdin.buffer, max_bytes))
    except TooLarge:
        fail(f"stdin: larger than max-file-size ({max_bytes:,} bytes): not read")
    except SourceError as error:
        fail(f"stdin: not Python source: {error}")
    except OSError as error:
        fail(f"stdin: cannot read: {error.strerror or error}")
