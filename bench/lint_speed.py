"""Lint speed side by side on one tree: graphlint cold and warm, TorchFix, Fixit and a bare
`libcst.parse_module` loop, each as the median of several runs, with peak memory.

Installs nothing. TorchFix and Fixit are measured when found on PATH (or given with
--torchfix / --fixit, e.g. from a separate virtual environment, since they pin their own
libcst); otherwise their rows say how to get them. Runs are interleaved (run 1 of every
tool, then run 2, ...) so a burst of background load hits all tools alike.

Also checks that graphlint's JSON report is byte-identical with --jobs 1, with --jobs N and
from the cache (the report holds no timings), and prints the figures for bench/README.md.

    python bench/lint_speed.py /tmp/trees/lmdeploy/pytorch --runs 3
    python bench/lint_speed.py TREE --tools graphlint-cold --runs 1      # one tool only
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path

PARSE_LOOP = """
import sys, pathlib, libcst
for path in sorted(pathlib.Path(sys.argv[1]).rglob("*.py")):
    try:
        libcst.parse_module(path.read_bytes().decode("utf-8"))
    except Exception:
        pass
"""
TOOLS = ("graphlint-cold", "graphlint-warm", "graphlint-cold-1job", "torchfix", "fixit", "parse-loop")
PAGE = os.sysconf("SC_PAGE_SIZE")


@dataclass
class Run:
    seconds: float
    returncode: int
    largest_mb: float  # the largest single process, as /usr/bin/time -v reports it
    total_mb: float  # all processes of the tool together, sampled


@dataclass
class Tool:
    name: str
    label: str
    command: list[str] | None  # None: not available
    missing: str = ""
    ok_codes: tuple[int, ...] = (0, 1)
    before_each: object = None  # callable run (untimed) before each timed run
    runs: list[Run] = field(default_factory=list)


def _descendants(pid: int) -> list[int]:
    found, stack = [], [pid]
    while stack:
        current = stack.pop()
        found.append(current)
        try:
            for task in os.listdir(f"/proc/{current}/task"):
                with open(f"/proc/{current}/task/{task}/children") as handle:
                    stack.extend(int(child) for child in handle.read().split())
        except OSError:
            continue
    return found


def _tree_rss(pid: int) -> int:
    total = 0
    for member in _descendants(pid):
        try:
            with open(f"/proc/{member}/statm") as handle:
                total += int(handle.read().split()[1]) * PAGE
        except (OSError, IndexError, ValueError):
            pass
    return total


def measure(command: list[str], cwd: Path) -> Run:
    """Wall time, exit code and peak memory of one run of `command`."""
    started = time.perf_counter()
    process = subprocess.Popen(command, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    peak = [0]
    done = threading.Event()

    def sample() -> None:
        while not done.wait(0.05):
            peak[0] = max(peak[0], _tree_rss(process.pid))

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    stderr = process.stderr.read() if process.stderr else b""
    _, status, usage = os.wait4(process.pid, 0)
    seconds = time.perf_counter() - started
    done.set()
    sampler.join()
    process.returncode = os.waitstatus_to_exitcode(status)
    if process.stderr:
        process.stderr.close()
    run = Run(seconds, process.returncode, usage.ru_maxrss / 1024, max(peak[0], usage.ru_maxrss * 1024) / 2**20)
    if process.returncode not in (0, 1):
        sys.stderr.write(f"  {command[0]} exited {process.returncode}: {stderr.decode(errors='replace')[-400:]}\n")
    return run


def _version(command: list[str]) -> str:
    try:
        out = subprocess.run(command, capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return "?"
    text = (out.stdout or out.stderr).strip()
    return text.split()[-1] if text else "?"  # "fixit, version 2.2.1" -> "2.2.1"


def _package_version(name: str) -> str:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return "not installed"


def tree_size(tree: Path) -> tuple[int, int]:
    files = sorted(tree.rglob("*.py"))
    lines = 0
    for path in files:
        with open(path, "rb") as handle:
            lines += handle.read().count(b"\n")
    return len(files), lines


def machine() -> dict[str, str]:
    cpu = "?"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    try:
        memory = f"{int(Path('/proc/meminfo').read_text().split()[1]) / 2**20:.0f} GiB"
    except (OSError, ValueError, IndexError):
        memory = "?"
    return {"cpu": cpu, "cores": str(len(os.sched_getaffinity(0))), "memory": memory,
            "os": platform.platform(), "python": platform.python_version()}


def build_tools(args: argparse.Namespace, tree: Path, work: Path) -> list[Tool]:
    config = work / "graphlint.toml"
    config.write_text("# neutral: no [tool.graphlint] settings\n")
    base = [sys.executable, "-m", "graphlint", "check", str(tree), "--config", str(config), "--format", "json", "-q"]
    jobs = str(args.jobs)
    counter = iter(range(10**6))

    def fresh_cache() -> list[str]:
        folder = work / f"cache-cold-{next(counter)}"
        shutil.rmtree(folder, ignore_errors=True)
        return ["--cache-dir", str(folder)]

    tools = [
        Tool("graphlint-cold", f"graphlint cold ({jobs} jobs)", base + ["--jobs", jobs, "-o", str(work / "cold.json")]),
        Tool("graphlint-warm", "graphlint warm (nothing changed)",
             base + ["--jobs", jobs, "--cache-dir", str(work / "cache-warm"), "-o", str(work / "warm.json")]),
        Tool("graphlint-cold-1job", "graphlint cold (1 job)",
             base + ["--jobs", "1", "--no-cache", "-o", str(work / "cold-1job.json")]),
    ]
    tools[0].before_each = fresh_cache  # each cold run gets an empty cache folder
    torchfix = args.torchfix or shutil.which("torchfix")
    fixit = args.fixit or shutil.which("fixit")
    tools.append(Tool("torchfix", "TorchFix (all cores)", [torchfix, str(tree)] if torchfix else None,
                      missing="not installed: pip install torchfix (or pass --torchfix PATH)"))
    tools.append(Tool("fixit", "Fixit 2 (all cores)", [fixit, "lint", str(tree)] if fixit else None,
                      missing="not installed: pip install fixit (or pass --fixit PATH)"))
    tools.append(Tool("parse-loop", "libcst.parse_module loop (1 core)", [sys.executable, "-c", PARSE_LOOP, str(tree)]))
    wanted = set(args.tools.split(",")) if args.tools else set(TOOLS)
    unknown = wanted - set(TOOLS)
    if unknown:
        raise SystemExit(f"unknown tool(s) {sorted(unknown)}; choose from {', '.join(TOOLS)}")
    return [tool for tool in tools if tool.name in wanted]


def run_all(tools: list[Tool], runs: int, work: Path) -> None:
    warm = next((t for t in tools if t.name == "graphlint-warm"), None)
    if warm is not None:  # fill the warm cache once, untimed
        fill = [arg for arg in warm.command if arg != "-q"]
        subprocess.run(fill, cwd=work, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for index in range(runs):
        for tool in tools:
            if tool.command is None:
                continue
            command = list(tool.command)
            if callable(tool.before_each):
                command += tool.before_each()
            run = measure(command, work)
            tool.runs.append(run)
            print(f"  run {index + 1}/{runs} {tool.label:<36} {run.seconds:7.2f} s  "
                  f"{run.largest_mb:6.0f} MB largest  {run.total_mb:6.0f} MB total", flush=True)


def identical_reports(work: Path) -> dict[str, bool | None]:
    reports = {name: work / f"{name}.json" for name in ("cold", "cold-1job", "warm")}
    texts = {name: path.read_bytes() for name, path in reports.items() if path.is_file()}
    cold = texts.get("cold")
    return {f"{name} == cold": (text == cold) if cold is not None else None
            for name, text in texts.items() if name != "cold"}


def median(tool: Tool) -> float | None:
    return statistics.median(r.seconds for r in tool.runs) if tool.runs else None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("tree", type=Path, help="folder of Python files to lint")
    parser.add_argument("--runs", type=int, default=3, help="timed runs per tool (median reported)")
    parser.add_argument("--jobs", type=int, default=len(os.sched_getaffinity(0)), help="graphlint --jobs")
    parser.add_argument("--tools", help=f"comma-separated subset of {','.join(TOOLS)}")
    parser.add_argument("--torchfix", help="path of the torchfix executable")
    parser.add_argument("--fixit", help="path of the fixit executable")
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args(argv)
    tree = args.tree.resolve()
    if not tree.is_dir():
        parser.error(f"{tree} is not a folder")
    files, lines = tree_size(tree)
    env = machine()
    print(f"tree: {tree} ({files} files, {lines:,} lines)")
    print(f"date: {datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC; machine: {env['cpu']}, {env['cores']} cores, "
          f"{env['memory']}; {env['os']}; Python {env['python']}")
    with tempfile.TemporaryDirectory(prefix="graphlint-bench-") as tmp:
        work = Path(tmp)
        tools = build_tools(args, tree, work)
        versions = {"graphlint": _package_version("graphlint-cuda"), "libcst": _package_version("libcst")}
        for tool in tools:
            if tool.name in ("torchfix", "fixit") and tool.command:
                versions[tool.name] = _version([tool.command[0], "--version"])
        print("versions: " + ", ".join(f"{k} {v}" for k, v in versions.items()))
        run_all(tools, args.runs, work)
        same = identical_reports(work)
    cold = next((median(t) for t in tools if t.name == "graphlint-cold"), None)
    print(f"\n{'tool':<36} {'median s':>9} {'x cold':>7} {'lines/s':>9} {'largest MB':>11} {'total MB':>9}  runs (s)")
    rows = []
    for tool in tools:
        if tool.command is None:
            print(f"{tool.label:<36} {tool.missing}")
            rows.append({"tool": tool.name, "missing": tool.missing})
            continue
        mid = median(tool)
        ratio = f"{mid / cold:7.2f}" if cold and mid is not None else f"{'':>7}"
        largest = max(r.largest_mb for r in tool.runs)
        total = max(r.total_mb for r in tool.runs)
        failed = [r.returncode for r in tool.runs if r.returncode not in tool.ok_codes]
        print(f"{tool.label:<36} {mid:9.2f} {ratio} {lines / mid:9,.0f} {largest:11.0f} {total:9.0f}  "
              + " ".join(f"{r.seconds:.2f}" for r in tool.runs) + (f"  (exit codes {failed})" if failed else ""))
        rows.append({"tool": tool.name, "label": tool.label, "median_s": mid, "runs_s": [r.seconds for r in tool.runs],
                     "x_cold": mid / cold if cold else None, "lines_per_s": lines / mid,
                     "largest_mb": largest, "total_mb": total, "exit_codes": [r.returncode for r in tool.runs]})
    parse = next((median(t) for t in tools if t.name == "parse-loop"), None)
    if cold and parse:
        print(f"\ngraphlint cold / bare parse loop on one core: {cold / parse:.2f}")
    if same:
        print("\nJSON reports byte-identical: " + ", ".join(f"{k}: {'yes' if v else 'NO'}" for k, v in same.items()))
    if args.json:
        args.json.write_text(json.dumps({"tree": str(tree), "files": files, "lines": lines, "machine": env,
                                         "versions": versions, "jobs": args.jobs, "runs": args.runs,
                                         "results": rows, "identical": same,
                                         "date": datetime.now(timezone.utc).isoformat(timespec="minutes")}, indent=2))
    return 0 if all(v is not False for v in same.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
