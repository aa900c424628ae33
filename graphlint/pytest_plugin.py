"""pytest plugin (entry point `pytest11: graphlint`): gate a project's own tests on "this step captures".

The `graphlint_runtime` fixture runs the runtime harness on a target, as `graphlint runtime` does,
and returns the report; `assert_graph_safe(report)` fails with each cause as the text view words
it (path:line, kind, op, fix). Without CUDA the harness runs its CPU emulation and the test output
says so; with CUDA it captures and replays. `--graphlint-report-dir` writes each report for
`graphlint gate`.
"""
from __future__ import annotations

import inspect
import re
from pathlib import Path
from typing import Any, Callable

import pytest

EMULATED_NOTE = "CPU emulation (no CUDA): capture and replay were predicted from traces, not run"


class RuntimeReport:
    """A harness run's report (`report`: graphlint.report.Report) with the helpers a test needs."""

    def __init__(self, report):
        self.report = report

    @property
    def runtime(self) -> dict:
        return self.report.runtime or {}

    @property
    def crosscheck(self) -> dict | None:
        return self.report.crosscheck

    @property
    def verdict(self) -> str:
        return self.report.summary()["verdict"]

    @property
    def emulated(self) -> bool:
        return self.runtime.get("mode") == "cpu-emulation"

    def causes(self) -> list[str]:
        """Why the step is not graph-safe, one line each: `path:line  kind op: detail` + fix."""
        return runtime_causes(self.runtime)

    def assert_graph_safe(self) -> None:
        assert_graph_safe(self)


def runtime_causes(runtime: dict) -> list[str]:
    from graphlint.runtime.tracing.kinds import KINDS

    def fix(kind: str) -> str:
        entry = KINDS.get(kind)
        return f"\n      fix: {entry.fix}" if entry else ""

    lines = []
    if runtime.get("verdict") == "error":
        return [f"runtime harness error: {runtime.get('error')}"]
    for event in runtime.get("sync_events") or []:
        lines.append(f"{event.get('path')}:{event.get('line')}  {event.get('kind')} {event.get('op')}"
                     f" in {event.get('function')}: {event.get('detail', '')}{fix(str(event.get('kind')))}")
    for hazard in (runtime.get("replay") or {}).get("hazards") or []:
        lines.append(f"{hazard.get('path')}:{hazard.get('line')}  {hazard.get('hazard')} {hazard.get('op')}"
                     f" in {hazard.get('function')}: {hazard.get('detail', '')}{fix(str(hazard.get('hazard')))}")
    explained = bool(lines)
    for name, phase in (runtime.get("phases") or {}).items():
        if phase.get("verdict") != "fail":
            continue
        if phase.get("error"):
            lines.append(f"{name} phase failed: {phase['error']}")
        elif not explained and name in ("capture", "replay"):
            lines.append(f"{name} phase failed ({_phase_detail(runtime, name)})")
    for capture in runtime.get("captures") or []:
        cause = capture.get("cause")
        if capture.get("verdict") == "fail" and cause:
            lines.append(f"{cause.get('path')}:{cause.get('line')}  capture on {capture.get('device')} failed: "
                         f"{capture.get('error')}")
    for error in runtime.get("errors") or []:
        if not any(error.endswith(line.split(": ", 1)[-1]) for line in lines):
            lines.append(f"error: {error}")
    return lines


def _phase_detail(runtime: dict, name: str) -> str:
    if name == "replay":
        problems = [p for d in (runtime.get("replay") or {}).get("devices") or [] for p in d.get("problems") or []]
        return "; ".join(problems) or "see the report"
    return "; ".join(str(c.get("error")) for c in runtime.get("captures") or [] if c.get("error")) or "see the report"


def assert_graph_safe(report: Any) -> None:
    """Fail the test unless every runtime phase passed (or was skipped), naming each cause.

    `report` is what `graphlint_runtime(...)` returned (or a `graphlint.report.Report`).
    """
    __tracebackhide__ = True  # pytest shows the test's line, not this helper's
    wrapped = report if isinstance(report, RuntimeReport) else RuntimeReport(report)
    if wrapped.runtime.get("verdict") == "pass":
        return
    target = (wrapped.runtime.get("target") or {}).get("spec", "the target")
    mode = EMULATED_NOTE if wrapped.emulated else f"on {', '.join(wrapped.runtime.get('devices') or [])}"
    causes = wrapped.causes() or ["the runtime verdict is not pass (see the report)"]
    message = f"graphlint: {target} is not graph-safe [{mode}]\n" + "\n".join(f"  {c}" for c in causes)
    raise AssertionError(message)


def _target_spec(target: str | Callable[..., Any]) -> str:
    """A factory passed as a callable -> `path/to/file.py:qualname`, which the worker process imports."""
    if isinstance(target, str):
        return target
    qualname = getattr(target, "__qualname__", "")
    path = inspect.getsourcefile(target) if callable(target) else None
    if not path or not qualname or "<locals>" in qualname:
        raise TypeError("graphlint_runtime: pass a target as 'module:callable' or a module-level factory function")
    return f"{path}:{qualname}"


class _Runner:
    """The `graphlint_runtime` fixture's value: call it with a target to run the harness."""

    def __init__(self, request):
        self.request = request
        self.runs: list[RuntimeReport] = []

    def __call__(self, target: str | Callable[..., Any], *, device: str | None = None, steps: int | None = None,
                 options: dict[str, Any] | None = None, sync_mode: str = "warn", atol: float = 0.0,
                 rtol: float = 0.0, bench: bool = False, timeout: float | None = None,
                 lint: bool = False) -> RuntimeReport:
        """Run the harness on `target` (`module:callable`, `file.py:callable`, a shorthand, or a
        module-level factory) with the CLI's options; `lint=True` also lints the target's own files
        and adds the cross-check. The device comes from the argument, else the test's
        `@pytest.mark.graphlint(device=...)`, else `--graphlint-device`, else cuda:0 or the CPU
        emulation."""
        import graphlint
        from graphlint.report import Report
        from graphlint.runtime.harness import run_harness

        try:  # without torch: the install hint, as the command line gives it
            import torch  # noqa: F401
        except ImportError as error:
            pytest.fail(f"graphlint_runtime needs torch ({error}); install it with pip install "
                        "'graphlint-cuda[runtime]'", pytrace=False)
        from graphlint.runtime.isolation.worker import DEFAULT_STEP_TIMEOUT_S

        config = self.request.config
        marker = self.request.node.get_closest_marker("graphlint")
        marked = dict(marker.kwargs) if marker else {}
        device = device or marked.get("device") or config.getoption("graphlint_device")
        if timeout is None:
            timeout = marked.get("timeout") or config.getoption("graphlint_timeout") or DEFAULT_STEP_TIMEOUT_S
        runtime = run_harness(_target_spec(target), device, steps, sync_mode, options or {}, atol=atol, rtol=rtol,
                              bench=bench, step_timeout=timeout)
        report = Report(tool_version=graphlint.__version__, runtime=runtime)
        if lint or marked.get("lint"):
            from graphlint.commands.runtime import lint_and_join

            lint_and_join(report)
        result = RuntimeReport(report)
        self.runs.append(result)
        if result.emulated:
            config.stash.setdefault(_EMULATED, []).append(self.request.node.nodeid)
            print(f"graphlint: {runtime.get('target', {}).get('spec')}: {EMULATED_NOTE}")
        self._write(report)
        return result

    def _write(self, report) -> None:
        folder = self.request.config.getoption("graphlint_report_dir")
        if not folder:
            return
        from graphlint.report import dumps, write_atomic

        name = re.sub(r"[^A-Za-z0-9_.-]+", "_", self.request.node.nodeid).strip("_")
        suffix = f".{len(self.runs)}" if len(self.runs) > 1 else ""
        write_atomic(Path(folder) / f"{name}{suffix}.json", dumps(report))


_EMULATED = pytest.StashKey[list]()


def pytest_addoption(parser) -> None:
    group = parser.getgroup("graphlint", "graphlint runtime harness")
    group.addoption("--graphlint-device", default=None, metavar="DEVICE",
                    help="device for graphlint_runtime: cpu (the emulation), cuda:0, cuda:0,cuda:1, all "
                         "(default: cuda:0 with CUDA, else cpu)")
    group.addoption("--graphlint-report-dir", default=None, metavar="DIR",
                    help="write each graphlint_runtime report here as JSON (for `graphlint gate`)")
    group.addoption("--graphlint-timeout", type=float, default=None, metavar="SECONDS",
                    help="longest one call into the target may run (default: graphlint runtime's)")


def pytest_configure(config) -> None:
    config.addinivalue_line("markers", "graphlint(device=None, timeout=None, lint=False): options for the "
                                       "graphlint_runtime fixture in this test")


@pytest.fixture
def graphlint_runtime(request) -> _Runner:
    """Run graphlint's runtime harness on a target: `report = graphlint_runtime("pkg.mod:make")`,
    then `assert_graph_safe(report)`."""
    return _Runner(request)


def pytest_terminal_summary(terminalreporter, exitstatus, config) -> None:
    emulated = config.stash.get(_EMULATED, [])
    if emulated:
        terminalreporter.write_line(f"graphlint: {len(emulated)} runtime check(s) ran on the {EMULATED_NOTE}")
