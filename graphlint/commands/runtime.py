"""`graphlint runtime [TARGET]`: the click command around `run_harness`.

Exit codes: 0 every phase passed or was skipped, 1 a phase failed (or, with --lint, a static error),
2 the target could not be loaded (or another usage or internal error). The JSON report is written
even on exit 2, with the error in it. `--lint` adds the static half and the cross-check.
"""
from __future__ import annotations

import sys
import time
import traceback
from contextlib import contextmanager
from typing import Iterator

from pathlib import Path

import click

from graphlint.runtime.harness import run_harness
from graphlint.runtime.isolation.worker import DEFAULT_STEP_TIMEOUT_S
from graphlint.runtime.targets.loader import REFERENCE_TARGET, UsageError, parse_option
from graphlint.io.terminal import heartbeat, real_stderr

__all__ = ["runtime_command", "run_harness", "runtime_progress"]

HEARTBEAT_SECONDS = 30  # off a terminal, a "still running" line this often


@contextmanager
def runtime_progress(target: str | None, quiet: bool = False) -> Iterator[None]:
    """Say on stderr, at once, what runs, and that it is still running: a rich spinner on a
    terminal, plain start and end lines otherwise (CI logs); nothing with `quiet` or when stderr
    is captured in process. stdout stays the report's."""
    if quiet or not real_stderr():
        yield
        return
    from rich.console import Console

    console = Console(stderr=True, highlight=False)
    what = f"graphlint runtime: running {target or 'the default target'}"
    started = time.monotonic()
    if console.is_terminal:
        with console.status(f"{what} (sync detection, trial capture, replay, bench)"):
            yield
    else:
        click.echo(f"{what}: sync detection, trial capture, replay, bench ...", err=True)
        with heartbeat(lambda elapsed: f"graphlint runtime: still running ({elapsed:.0f} s)", HEARTBEAT_SECONDS):
            yield
    click.echo(f"graphlint runtime: done in {time.monotonic() - started:.1f} s", err=True)


def _report(runtime: dict | None, errors: list[str]):
    import graphlint
    from graphlint.report import Report

    return Report(tool_version=graphlint.__version__, runtime=runtime, errors=errors)


def _emit(report, fmt: str, output: str | None) -> None:
    from graphlint.report import dumps
    from graphlint.views.output import protected_files, write_output

    if report.static is not None or fmt in ("sarif", "github"):
        # Both halves (--lint): the views of `graphlint check`.
        from graphlint.views.output import render_report

        if output and fmt != "json":
            # -o is the JSON report; the view goes to stdout
            write_output(output, dumps(report), protected_files(report, Path.cwd()))
            output = None
        render_report(report, fmt, output, Path.cwd())
        return
    text = dumps(report)
    if output:
        write_output(output, text, protected_files(report, Path.cwd()))
    if fmt == "json" and not output:
        click.echo(text, nl=False)
    elif fmt == "text" and report.runtime is not None:
        from rich.console import Console

        from graphlint.views.sections.runtime_text import render_runtime

        render_runtime(report.runtime, Console(highlight=False, soft_wrap=True))


@click.command("runtime")
@click.argument("target", required=False)
@click.option("--device", "devices", metavar="DEVICES",
              help="cpu, cuda:0, cuda:0,cuda:1 or all (default: cuda:0 with CUDA, else the CPU emulation).")
@click.option("--steps", type=click.IntRange(min=1), default=None,
              help="Steps to replay and compare (default 300 on CUDA; 8 traced steps on the CPU emulation).")
@click.option("--sync-mode", type=click.Choice(["warn", "error"]), default="warn", show_default=True,
              help="warn: record every sync; error: stop at the first one and name it.")
@click.option("--format", "fmt", type=click.Choice(["text", "json", "sarif", "github"]), default="text",
              show_default=True)
@click.option("--output", "-o", type=click.Path(dir_okay=False), help="Write the JSON report here (atomically).")
@click.option("--option", "raw_options", multiple=True, metavar="KEY=VALUE",
              help="Passed to the target's factory; repeatable. Numbers and true/false are parsed.")
@click.option("--atol", type=float, default=0.0, show_default=True, help="Absolute tolerance of replay vs eager.")
@click.option("--rtol", type=float, default=0.0, show_default=True, help="Relative tolerance (0 and 0: bit-exact).")
@click.option("--reference", is_flag=True, help=f"Run the known-bad reference port ({REFERENCE_TARGET}).")
@click.option("--no-bench", is_flag=True, help="Skip the eager vs replay benchmark.")
@click.option("--timeout", "step_timeout", type=click.FloatRange(min=0), default=DEFAULT_STEP_TIMEOUT_S,
              show_default=True, metavar="SECONDS",
              help="Longest one call into the target (factory, reset, prepare, step) may run; 0: no limit.")
@click.option("--lint", "lint_sources", is_flag=True,
              help="Also lint the target's own source files (step() as the entry point) and cross-check both halves.")
@click.option("--compile", "compile_step", is_flag=True,
              help='Also run the step through torch.compile(mode="reduce-overhead"): graph breaks, recompiles, '
                   "CUDA-graph skips and outputs vs eager, at the user's lines.")
@click.option("--compile-backend", type=click.Choice(["inductor", "aot_eager", "eager"]), default="inductor",
              show_default=True, help="inductor = mode reduce-overhead; aot_eager/eager check dynamo only (faster).")
@click.option("--record-regions", "record_regions", is_flag=False, flag_value="", default=None, metavar="[FILE]",
              help="Also write the functions the step ran as a region file for later static checks (default: "
                   "`region-file` from config, else .graphlint/regions.json). Put TARGET before this option.")
@click.option("--gate-third-party", is_flag=True,
              help="With --lint: findings in third-party code the step ran (site-packages) fail the run too.")
@click.option("--quiet", "-q", is_flag=True, help="No progress lines on stderr.")
def runtime_command(target: str | None, devices: str | None, steps: int | None, sync_mode: str, fmt: str,
                    output: str | None, raw_options: tuple[str, ...], atol: float, rtol: float, reference: bool,
                    no_bench: bool, step_timeout: float, lint_sources: bool, compile_step: bool = False,
                    compile_backend: str = "inductor", quiet: bool = False, record_regions: str | None = None,
                    gate_third_party: bool = False) -> None:
    """Run a decode step under sync detection, trial-capture it, replay it against eager, time it.

    TARGET is module:callable or path/to/file.py:callable, called as factory(device, **options);
    default: `runtime-target` from [tool.graphlint]. Shorthands: `default` or `graph-safe` (the
    bundled graph-safe DSV4 demo step) and `reference` (the known-bad port, same as --reference).
    Without CUDA every phase is emulated on the CPU.
    """
    try:
        if record_regions and not record_regions.endswith(".json"):
            raise UsageError(f"--record-regions {record_regions!r}: expected a .json file "
                             "(give TARGET before the option, or --record-regions=FILE)")
        if reference and target:
            raise UsageError("give either TARGET or --reference, not both")
        if target is None and not reference:
            target = _configured_target()
        from graphlint.views.output import refuse_output, target_source

        refuse_output(output, target_source(target))  # before the run, not after it
        options = dict(parse_option(text) for text in raw_options)
        try:
            import torch  # noqa: F401
        except ImportError as exc:
            raise UsageError(f"the runtime harness needs torch ({exc}); pip install 'graphlint-cuda[runtime]'") from None
        with runtime_progress("reference" if reference else target, quiet):
            runtime = run_harness("reference" if reference else target, devices, steps, sync_mode, options,
                                  atol=atol, rtol=rtol, bench=not no_bench, step_timeout=step_timeout or None)
        if compile_step:
            from graphlint.runtime.torch_compile.compile_report import run_phase

            run_phase(runtime, compile_backend, steps, atol=atol, rtol=rtol, bench=not no_bench, quiet=quiet)
        report = _report(runtime, [])
        if record_regions is not None:
            _record(runtime, record_regions, quiet)
        if lint_sources:
            lint_and_join(report, gate_third_party)
    except UsageError as exc:
        _fail(str(exc), output, verdict=getattr(exc, "verdict", "error"))  # `unsupported` for an unsupported target
    except Exception as exc:  # an internal error: still leave a report behind
        detail = "".join(traceback.format_exception_only(type(exc), exc)).strip()
        _fail(f"internal error: {detail}", output, trace=traceback.format_exc())
    _emit(report, fmt, output)
    sys.exit(1 if report.summary()["verdict"] == "fail" else 0)


def lint_and_join(report, gate_third_party: bool = False) -> None:
    """`--lint`: the static half for the code the step ran (its functions as the captured region,
    third-party files in a section of their own), and the cross-check of both."""
    from graphlint.runtime import lint_target

    config = _config()
    report.config = {**config.to_dict(), "checked": lint_target.target_files(report.runtime, config.root.resolve())}
    report.static, report.crosscheck = lint_target.lint_and_join(report.runtime, config,
                                                                 gate_third_party=gate_third_party)


def _config():
    from graphlint.config import ConfigError, load

    try:
        return load(None)
    except ConfigError as exc:
        raise UsageError(str(exc)) from None


def _record(runtime: dict, requested: str, quiet: bool) -> None:
    """`--record-regions`: write the region file (atomically), or say why not; the runtime dict
    says which (`region_file`)."""
    from graphlint.report import write_atomic
    from graphlint.runtime.tracing import record

    config = _config()
    path = Path(requested) if requested else record.default_path(config)
    why = record.incomplete(runtime)
    if why is not None:
        runtime["region_file"] = {"path": str(path), "written": False, "reason": why}
        click.echo(f"graphlint runtime: region file not written: {why}", err=True)
        return
    text, unplaced = record.region_text(runtime, config.root)
    try:
        write_atomic(path, text)
    except OSError as exc:
        raise UsageError(f"--record-regions {path}: cannot write: {exc}") from None
    runtime["region_file"] = {"path": str(path), "written": True, "functions": len(runtime["functions"]) - unplaced,
                              "unplaced": unplaced}
    if not quiet:
        click.echo(f"graphlint runtime: recorded {len(runtime['functions']) - unplaced} functions in {path}", err=True)


def _configured_target() -> str:
    """`runtime-target` from the config in force; without one, a usage error: running the
    bundled demo model in someone else's project would report a PASS about nothing of theirs."""
    from graphlint.config import ConfigError, load

    try:
        configured = load().runtime_target
    except ConfigError as error:
        raise UsageError(str(error)) from None
    if configured is None:
        raise UsageError("no target: pass TARGET (module:callable or path/to/file.py:callable), set "
                         "`runtime-target` in [tool.graphlint], or pass `default` for the bundled DSV4 demo step")
    return configured


def _fail(message: str, output: str | None, trace: str | None = None, verdict: str = "error") -> None:
    runtime = {"verdict": verdict, "error": message}
    if output:
        from graphlint.report import dumps, write_atomic

        write_atomic(output, dumps(_report(runtime, [f"runtime: {message}"])))
    click.echo(f"graphlint runtime: error: {message}", err=True)
    if trace:
        click.echo(trace, err=True)
    sys.exit(2)
