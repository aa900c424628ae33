"""The `graphlint` command: check, rules, explain (and runtime, from graphlint.runtime).

Exit codes, as ruff: 0 no unsuppressed error; 1 violations; 2 usage, config or internal
error. The CLI only wires options to the engine and a report to a writer.
"""
from __future__ import annotations

import io
import json
import signal
import sys
import threading
import traceback
from pathlib import Path
from typing import Any, Sequence

import click

from graphlint import __version__
from graphlint.config import Config, ConfigError
from graphlint.exits import EXIT_ERROR, EXIT_OK, EXIT_VIOLATIONS, fail, load_config, split_list
from graphlint.report import Report
from graphlint.views.output import render_report, silence_stdout, write_output

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


# As a shell reports a command ended by SIGINT / SIGTERM.
EXIT_INTERRUPTED, EXIT_TERMINATED = 128 + signal.SIGINT, 128 + signal.SIGTERM


class _Terminated(BaseException):
    """SIGTERM, raised where the run is, so every `finally` (the worker pool's) runs."""


def _terminated(signum: int, frame: Any) -> None:
    signal.signal(signal.SIGTERM, signal.SIG_DFL)  # a second SIGTERM ends the process at once
    raise _Terminated()


class GraphlintGroup(click.Group):
    """Turns any unexpected exception into a one-line message and exit code 2."""

    def invoke(self, ctx: click.Context):  # type: ignore[override]
        # SIGTERM unwinds like Ctrl-C, so worker processes are stopped on the way out.
        previous = None
        if threading.current_thread() is threading.main_thread():
            previous = signal.signal(signal.SIGTERM, _terminated)
        try:
            return super().invoke(ctx)
        except KeyboardInterrupt:  # click would say "Aborted!" and exit 1, which reads as violations
            click.echo("graphlint: interrupted", err=True)
            sys.exit(EXIT_INTERRUPTED)
        except _Terminated:
            click.echo("graphlint: terminated", err=True)
            sys.exit(EXIT_TERMINATED)
        except (click.exceptions.Exit, click.exceptions.Abort, click.ClickException, SystemExit):
            raise
        except BrokenPipeError:  # stdout closed by its reader: nothing more to say to anyone
            silence_stdout()
            sys.exit(EXIT_OK)
        except ConfigError as error:  # e.g. an entry point that names no linted function
            fail(str(error))
        except Exception as error:  # noqa: BLE001 - the promise is: never a traceback
            click.echo(f"graphlint: internal error: {type(error).__name__}: {error}", err=True)
            if "GRAPHLINT_DEBUG" in __import__("os").environ:
                traceback.print_exc()
            sys.exit(EXIT_ERROR)
        finally:
            if previous is not None:  # embedded (tests, another program): give SIGTERM back
                signal.signal(signal.SIGTERM, previous)


@click.group(cls=GraphlintGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="graphlint")
def main() -> None:
    """Find every reason a PyTorch decode step cannot be captured in a CUDA graph."""


@main.command()
@click.argument("paths", nargs=-1, type=click.Path())
@click.option("--select", multiple=True, help="Rule codes or prefixes to enable (GL1, GL101); comma-separated.")
@click.option("--ignore", multiple=True, help="Rule codes or prefixes to disable; comma-separated.")
@click.option("--format", "fmt", type=click.Choice(FORMATS), default="text", show_default=True)
@click.option("--output", "-o", type=click.Path(dir_okay=False), help="Write the report here (atomically).")
@click.option("--config", "config_file", type=click.Path(), help="pyproject.toml (or a TOML file) to read settings from.")
@click.option("--quiet", "-q", is_flag=True, help="Only the summary line.")
@click.option("--statistics", is_flag=True, help="Counts per rule.")
@click.option("--show-suppressed", is_flag=True, help="List suppressed findings too (text view).")
@click.option("--jobs", "-j", type=click.IntRange(min=1), default=None, help="Worker processes (default: all cores).")
@click.option("--no-cache", is_flag=True, help="Do not read or write .graphlint_cache/.")
@click.option("--cache-dir", type=click.Path(file_okay=False), default=None, help="Cache folder (default .graphlint_cache).")
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
def check(paths: tuple[str, ...], select: tuple[str, ...], ignore: tuple[str, ...], fmt: str, output: str | None,
          config_file: str | None, quiet: bool, statistics: bool, show_suppressed: bool, jobs: int | None,
          no_cache: bool, cache_dir: str | None, runtime: bool, runtime_target: str | None,
          baseline_file: str | None, diff_rev: str | None, exit_zero: bool, fail_on: str, force_exclude: bool,
          stdin_filename: str | None, color: str, runtime_compile: bool = False, sweep: bool = False) -> None:
    """Check PATHS (default: `paths` from config, else the current folder) for CUDA-graph hazards."""
    config = load_config(config_file)
    if sweep:
        import dataclasses

        config = dataclasses.replace(config, regions="sweep")
    stdin_source: dict[str, str] | None = None
    if stdin_filename is not None or "-" in paths:
        if [p for p in paths if p != "-"]:
            fail("read from stdin (`-` or --stdin-filename) or check PATHS, not both")
        stdin_source = {stdin_filename or "-": sys.stdin.read()}
    targets, static = _static_check(paths, config, select, ignore, jobs, no_cache, cache_dir, diff_rev,
                                    force_exclude=force_exclude, stdin_source=stdin_source, quiet=quiet)
    outcome = _apply_baseline(static, baseline_file, config.root) if baseline_file else None
    report = Report(tool_version=__version__, config={**config.to_dict(), "checked": [str(t) for t in targets]},
                    static=static)
    report.errors.extend(f"skipped {problem}" for problem in static.extra.get("skipped", []))
    if runtime or runtime_target is not None:
        target = runtime_target or config.runtime_target
        if target is None:  # the bundled demo step would PASS in any project: say so instead
            fail("--runtime needs a target: set `runtime-target` in [tool.graphlint], pass --runtime-target "
                 "module:callable, or --runtime-target default for the bundled DSV4 demo step")
        from graphlint.runtime.command import run_harness, runtime_progress
        from graphlint.runtime.targets import DEFAULT_TARGET, UsageError

        if target in ("default", "graph-safe", "graph_safe"):
            target = DEFAULT_TARGET
        try:
            with runtime_progress(target, quiet):
                report.runtime = run_harness(target, None, None)
            if runtime_compile:
                from graphlint.runtime.compile_report import run_phase

                run_phase(report.runtime)
        except UsageError as error:  # a target that cannot be loaded: exit 2, the static half still reported
            click.echo(f"graphlint: error: {error}", err=True)
            report.runtime = {"verdict": "error", "error": str(error)}
            report.errors.append(f"runtime: {error}")
        else:
            from graphlint.runtime.lint_target import join_for_check

            report.crosscheck = join_for_check(static, report.runtime, config)  # on what the step ran
    sources = None
    if stdin_source is not None:
        [(shown, text)] = stdin_source.items()
        sources = {static.files[0] if static.files else shown: text}
    render_report(report, fmt, output, config.root, quiet=quiet, statistics=statistics,
                  show_suppressed=show_suppressed, color=COLOR[color], sources=sources)
    if outcome is not None and not quiet:
        from graphlint.gating.baseline import describe

        click.echo("\n".join(describe(outcome)), err=True)
    sys.exit(exit_code(report, fail_on, exit_zero))


def _static_check(paths: tuple[str, ...], config: Config, select: tuple[str, ...], ignore: tuple[str, ...],
                  jobs: int | None, no_cache: bool, cache_dir: str | None, diff_rev: str | None = None,
                  force_exclude: bool = False, stdin_source: dict[str, str] | None = None, quiet: bool = False):
    """Run the static half with fingerprinted findings; with `diff_rev`, report only changed files.

    With entry points configured, the regions of a file depend on the whole package: files named
    on the command line (as pre-commit names the staged ones) are analysed together with the
    configured paths and only the named ones are reported, as --diff does."""
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
            tasks, changed = _stdin_tasks(stdin_source, config, project, force_exclude)
        elif paths and config.entry_points and diff_rev is None:
            changed = [rel for rel, _ in collect_tasks(paths, config, force_exclude=force_exclude)]
            analysed = [*project, *paths]
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


def _stdin_tasks(stdin_source: dict[str, str], config: Config, project: list[str], force_exclude: bool):
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
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(text)
    atexit.register(os.unlink, tmp)
    tasks = [task for task in collect_tasks(project, config) if task[0] != rel] if config.entry_points else []
    return [*tasks, (rel, tmp)], [rel]


def _apply_baseline(static, baseline_file: str, root: Path):
    from graphlint.gating import baseline

    try:
        known = baseline.load(baseline_file)
    except baseline.BaselineError as error:
        fail(str(error))
        raise  # unreachable
    return baseline.apply(static, known, root)


@main.group("baseline")
def baseline_group() -> None:
    """Record today's findings so that `check --baseline` fails only on new ones."""


@baseline_group.command("write")
@click.argument("paths", nargs=-1, type=click.Path())
@click.option("--output", "-o", type=click.Path(dir_okay=False), default="graphlint-baseline.json",
              show_default=True, help="The baseline file to write.")
@click.option("--select", multiple=True, help="Rule codes or prefixes to enable; comma-separated.")
@click.option("--ignore", multiple=True, help="Rule codes or prefixes to disable; comma-separated.")
@click.option("--config", "config_file", type=click.Path(), help="pyproject.toml (or a TOML file) to read settings from.")
@click.option("--jobs", "-j", type=click.IntRange(min=1), default=None, help="Worker processes (default: all cores).")
@click.option("--no-cache", is_flag=True, help="Do not read or write .graphlint_cache/.")
def baseline_write(paths: tuple[str, ...], output: str, select: tuple[str, ...], ignore: tuple[str, ...],
                   config_file: str | None, jobs: int | None, no_cache: bool) -> None:
    """Check PATHS as `check` does and record every unsuppressed finding in the baseline file."""
    from graphlint.gating import baseline

    config = load_config(config_file)
    _, static = _static_check(paths, config, select, ignore, jobs, no_cache, None)
    written = baseline.Baseline.from_findings(static.findings)
    write_output(output, written.to_json(__version__), [config.root / name for name in static.files])
    click.echo(f"graphlint: wrote {output} ({len(written.entries)} findings in {len(static.files)} files)", err=True)


@main.command()
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
    from graphlint.gating import gate as gating

    try:
        report = gating.load_report(report_file)
    except gating.GateError as error:
        fail(str(error))
        return
    root = Path.cwd()
    outcome = None
    if baseline_file and report.static is not None:
        outcome = _apply_baseline(report.static, baseline_file, root)
    render_report(report, fmt, output, root, quiet=quiet)
    if outcome is not None and not quiet:
        from graphlint.gating.baseline import describe

        click.echo("\n".join(describe(outcome)), err=True)
    sys.exit(gating.PASS if exit_zero else gating.verdict(report))


@main.command("rules")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text")
def list_rules(fmt: str) -> None:
    """List every rule: code, name, severity, summary."""
    from graphlint.rules import ALL_RULES

    if fmt == "json":
        import json

        click.echo(json.dumps([{"code": r.code, "name": r.name, "family": r.family(), "severity": r.severity,
                                "summary": r.summary()} for r in ALL_RULES], indent=2))
        return
    for rule in ALL_RULES:
        click.echo(f"{rule.code}  {rule.name:<28} {rule.severity:<8} {rule.summary()}")


@main.command()
@click.argument("rule")
def explain(rule: str) -> None:
    """Print one rule's documentation (by code or name), or a runtime event or hazard kind's."""
    from graphlint.rules import BY_CODE, BY_NAME

    found = None if rule.startswith("runtime/") else BY_CODE.get(rule.upper()) or BY_NAME.get(rule)
    if found is None:
        from graphlint.runtime.kinds import explain as explain_kind

        kind = explain_kind(rule)
        if kind is not None:  # a runtime event or replay hazard kind
            click.echo(f"{kind.name} (runtime {kind.source}, rule family {kind.family})\n")
            click.echo(kind.docs())
            return
        fail(f"unknown rule or runtime kind '{rule}' (see `graphlint rules`)")
        return
    click.echo(f"{found.code} {found.name} ({found.family()}, {found.severity})\n")
    click.echo(found.docs())
    click.echo(f"\nMessage: {found.message}\nFix: {found.fix}")


@main.command()
@click.option("--cache-dir", type=click.Path(file_okay=False), default=None)
def clean(cache_dir: str | None) -> None:
    """Remove the cache folder."""
    import shutil

    config = load_config(None)
    folder = Path(cache_dir) if cache_dir else config.root / ".graphlint_cache"
    if folder.exists():
        shutil.rmtree(folder)
        click.echo(f"removed {folder}")


@main.command("audit")
@click.argument("paths", nargs=-1, type=click.Path())
@click.option("--entry-point", "-e", "entry_points", multiple=True, metavar="MODULE:QUALNAME",
              help="Root of the captured region (repeatable); replaces [tool.graphlint] entry-points.")
@click.option("--eager", "eager", multiple=True, metavar="MODULE:QUALNAME", help="An eager break inside the step (repeatable).")
@click.option("--host", "host", multiple=True, metavar="MODULE:QUALNAME", help="Host code outside the graph (repeatable).")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
@click.option("--output", "-o", type=click.Path(dir_okay=False), help="Write the audit here (atomically).")
@click.option("--config", "config_file", type=click.Path(), help="pyproject.toml (or a TOML file) to read settings from.")
@click.option("--jobs", "-j", type=click.IntRange(min=1), default=None, help="Worker processes (default: all cores).")
@click.option("--no-cache", is_flag=True, help="Do not read or write .graphlint_cache/.")
@click.option("--cache-dir", type=click.Path(file_okay=False), default=None, help="Cache folder (default .graphlint_cache).")
def audit_command(paths: tuple[str, ...], entry_points: tuple[str, ...], eager: tuple[str, ...], host: tuple[str, ...],
                  fmt: str, output: str | None, config_file: str | None, jobs: int | None, no_cache: bool,
                  cache_dir: str | None) -> None:
    """List every function reachable from the entry points with its region and class.

    Exit 0 when every reachable captured function is capturable, 1 otherwise, 2 on errors.
    """
    import dataclasses

    from graphlint.audit import AuditError, run as run_audit

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
        result = run_audit(targets, config, jobs=jobs, cache_dir=cache_folder)
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
    sys.exit(EXIT_VIOLATIONS if result.verdict() == "fail" else EXIT_OK)


def _register_optional_commands() -> None:
    """Commands whose modules may be absent in a partial install (torch for runtime)."""
    try:
        from graphlint.runtime.command import runtime_command
    except ImportError as error:  # torch missing: say how to get it when called
        missing = str(error)

        @main.command("runtime", context_settings={"ignore_unknown_options": True})
        @click.argument("args", nargs=-1, type=click.UNPROCESSED)
        def runtime_unavailable(args: tuple[str, ...]) -> None:
            """Run the runtime harness (needs torch: pip install 'graphlint-cuda[runtime]')."""
            fail(f"the runtime harness needs torch ({missing}); install it with pip install 'graphlint-cuda[runtime]'")
    else:
        main.add_command(runtime_command)


_register_optional_commands()

if __name__ == "__main__":
    main()
