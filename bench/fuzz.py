"""Fuzz `graphlint check` with mutated real files plus deep and huge generated cases: every run
must end with exit 0 or 1 (never 2, a signal or a traceback), within its time limit, and leave a
JSON report that lists every file it was given. The corpus is generated here, never stored.

    python bench/fuzz.py --files 2000                  # dsv4_model + lmdeploy, if unpacked
    python bench/fuzz.py --files 200 --source DIR ...  # your own code as the seed corpus
    python bench/fuzz.py --shapes                      # pathological shapes at growing sizes

Exit status 0 when every run passed; the summary line gives files, runs, crashes and hangs.
--shapes prints the time and peak memory of one `graphlint check` per shape and size, and
fails a case that exceeds the per-file time budget or the worker memory limit.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DEFAULT_SOURCES = [REPO / "dsv4_model", Path("/tmp/trees/lmdeploy/pytorch")]
HEAD = "import torch\n\n\ndef step(x: torch.Tensor, a: int, c: bool):\n"

# Fragments a mutation splices in: odd line ends, encodings, markers, nesting, control bytes.
FRAGMENTS = [
    b"\x0c", "\u2028".encode(), b"\x1c", b"\r", b"\r\n", b"\x00", b"\xff\xfe", b"\xef\xbb\xbf", b"\t",
    b"# -*- coding: latin-1 -*-\n", b"# coding: unknown-codec\n", b"# graphlint: ignore[", b"# noqa: GL",
    b"# graphlint: entry\n", b"# graphlint: ignore[GL1O1] -- reason\n", b"(" * 300, b")" * 50, b"[" * 120,
    b"lambda: " * 40, b"x.item()", b".item()" * 30, b"if x:\n", b"\n    ", b"\\\n", b'"""', b"'", b"f'{", b"}",
    b"async ", b"await ", b"yield ", b"match x:\n    case 1:\n        pass\n", b"def f(:\n", b"class C(", b"@",
    b"\x1b[31m", b"torch.cuda.graph(g)", b"with torch.cuda.graph(g):\n    step()\n",
]


def deep_and_huge() -> dict[str, bytes]:
    """The generated cases of the reliability issue, each valid Python or a known bad input."""
    cases = {
        "deep_elif.py": HEAD + "    if a == 0:\n        pass\n" + "".join(f"    elif a == {i}:\n        pass\n" for i in range(1, 480)),
        "deep_plus.py": HEAD + "    y = " + " + ".join(["x"] * 490) + "\n",
        "deep_ternary.py": HEAD + "    y = " + " if c else ".join(["x"] * 480) + "\n",
        "deep_abs.py": HEAD + "    y = x" + ".abs()" * 325 + "\n",
        "deep_index.py": HEAD + "    y = x" + "[0]" * 325 + "\n",
        "deep_abs_1300.py": HEAD + "    y = x" + ".abs()" * 1300 + "\n",
        "deep_unary.py": HEAD + "    y = " + "-" * 3000 + "x\n",
        "deep_not.py": HEAD + "    y = " + "not " * 2000 + "x\n",
        "deep_lambda.py": HEAD + "    y = " + "lambda: " * 1000 + "x\n",
        "deep_power.py": HEAD + "    y = " + " ** ".join(["x"] * 1300) + "\n",
        "deep_parens.py": HEAD + "    y = " + "(" * 1300 + "x" + ")" * 1300 + "\n",
        "deep_brackets.py": HEAD + "    y = " + "[" * 20000 + "x" + "]" * 20000 + "\n",
        "deep_fstring.py": HEAD + "    y = f'{" + "(" * 1300 + "x" + ")" * 1300 + "}'\n",
        "deep_indent.py": "import torch\n" + "".join("    " * i + "if x:\n" for i in range(99)) + "    " * 99 + "pass\n",
        "many_findings.py": HEAD + "".join("    x.item()\n" for _ in range(20000)),
        "one_line_findings.py": HEAD + "    " + "; ".join(["x.item()"] * 20000) + "\n",
        "wide_statement.py": HEAD + "    y = (" + ", ".join(["x.item()"] * 20000) + ")\n",
        "huge_5mb.py": "import torch\n" + "y = [" + "1.0, " * 1_250_000 + "]\n",
        "just_under_limit.py": "import torch\n" + "# " + "x" * 1_000_000 + "\n",
        "nul.py": "import torch\n\x00\x00\n",
        "empty.py": "",
        "only_bom.py": "\ufeff",
    }
    return {name: text.encode("utf-8", "surrogatepass") for name, text in cases.items()}


# The shapes that grow libcst's parser with the square of their length, and huge literals;
# each generator takes a size (links or elements) and returns a statement.
SHAPES = {
    "unary": lambda n: "y = " + "-" * n + "x\n",
    "not": lambda n: "y = " + "not " * n + "x\n",
    "lambda": lambda n: "y = " + "lambda: " * n + "x\n",
    "ternary": lambda n: "y = " + " if c else ".join(["x"] * n) + "\n",
    "power": lambda n: "y = " + " ** ".join(["x"] * n) + "\n",
    "call": lambda n: "y = f" + "()" * n + "\n",
    "attribute": lambda n: "y = f" + ".a" * n + "\n",
    "method": lambda n: "y = x" + ".abs()" * n + "\n",
    "subscript": lambda n: "y = x" + "[0]" * n + "\n",
    "plus": lambda n: "y = " + " + ".join(["x"] * n) + "\n",
    "list literal": lambda n: "y = [" + "0, " * n + "]\n",
    "dict literal": lambda n: "y = {" + "".join(f"{i}: {i}, " for i in range(n)) + "}\n",
    "string literal": lambda n: "y = '" + "a" * n + "'\n",
    "many statements": lambda n: "x.item()\n" * n,
    # Chains of 900 links (under the limit of 1,000) until n links in all: the slowest input the
    # chain budget lets through is about 12 of them.
    "long chains": lambda n: ("y = x" + ".abs()" * 450 + "\n") * max(1, n // 900),
}
SHAPE_SIZES = (10, 100, 1_000, 10_000, 100_000, 300_000)
LONG_CHAIN_SIZES = (900, 5_400, 10_800, 11_700, 20_000)  # 1, 6, 12, 13 and 22 chains of 900 links


def shape_case(kind: str, size: int) -> bytes:
    return ("import torch\nx = torch.ones(1)\nc = True\n" + SHAPES[kind](size)).encode()


_MEASURE = ("import resource, subprocess, sys, time\n"
            "started = time.monotonic()\n"
            "done = subprocess.run(sys.argv[1:], capture_output=True, text=True)\n"
            "print(done.returncode, time.monotonic() - started,"
            " resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n")


def run_shapes(work: Path, max_size: int, budget_s: float, memory_mib: int, timeout: float,
               kinds: list[str] | None = None) -> list[str]:
    """One check per shape and size, in a fresh process whose children's peak memory is its own;
    returns the problems (a crash, no report, past the time budget or the memory limit)."""
    problems = []
    print(f"{'shape':<16} {'size':>8} {'bytes':>9} {'seconds':>8} {'peak MiB':>9}  outcome")
    for kind in kinds or SHAPES:
        for size in LONG_CHAIN_SIZES if kind == "long chains" else SHAPE_SIZES:
            data = shape_case(kind, size)
            if len(data) > 4 * max_size:
                continue  # far past max-file-size: refused by size alone, as the 5 MB case shows
            folder = work / f"shape_{kind.replace(' ', '_')}_{size}"
            folder.mkdir()
            (folder / "case.py").write_bytes(data)
            report = folder / "report.json"
            command = [sys.executable, "-c", _MEASURE, sys.executable, "-m", "graphlint", "check", "case.py",
                       "--no-cache", "-j", "1", "--format", "json", "-o", str(report)]
            try:
                done = subprocess.run(command, cwd=folder, capture_output=True, text=True, timeout=timeout)
                code, seconds, peak_kib = done.stdout.split()
            except (subprocess.TimeoutExpired, ValueError):
                problems.append(f"{kind} {size}: no result within {timeout:.0f} s")
                print(f"{kind:<16} {size:>8} {len(data):>9} {'-':>8} {'-':>9}  HANG")
                continue
            peak = int(peak_kib) / 1024
            try:
                findings = json.loads(report.read_text("utf-8"))["static"]["findings"]
                outcome = ", ".join(sorted({f["rule"] for f in findings if f["rule"].startswith("GL9")})) or "analysed"
            except (OSError, ValueError, KeyError, TypeError):
                outcome = f"no report (exit {code})"
                problems.append(f"{kind} {size}: {outcome}")
            if float(seconds) > budget_s:
                problems.append(f"{kind} {size}: {float(seconds):.1f} s, past the {budget_s:g} s budget")
            if peak > memory_mib:
                problems.append(f"{kind} {size}: {peak:.0f} MiB, past the {memory_mib} MiB limit")
            print(f"{kind:<16} {size:>8} {len(data):>9} {float(seconds):>8.2f} {peak:>9.0f}  {outcome}", flush=True)
    return problems


def mutate(data: bytes, rng: random.Random) -> bytes:
    """One to four random edits of a real file's bytes."""
    for _ in range(rng.randint(1, 4)):
        lines = data.split(b"\n")
        choice = rng.randrange(8)
        if choice == 0 and len(lines) > 2:  # delete a range of lines
            start = rng.randrange(len(lines))
            del lines[start:start + rng.randint(1, 20)]
        elif choice == 1 and lines:  # duplicate a range of lines
            start = rng.randrange(len(lines))
            lines[start:start] = lines[start:start + rng.randint(1, 30)] * rng.randint(1, 5)
        elif choice == 2 and len(lines) > 2:  # swap two lines
            i, j = rng.randrange(len(lines)), rng.randrange(len(lines))
            lines[i], lines[j] = lines[j], lines[i]
        elif choice == 3 and data:  # truncate
            return data[:rng.randrange(len(data))]
        elif choice == 4 and data:  # flip bytes
            buffer = bytearray(data)
            for _ in range(rng.randint(1, 10)):
                buffer[rng.randrange(len(buffer))] = rng.randrange(256)
            data = bytes(buffer)
            continue
        elif choice == 5 and lines:  # change indentation
            index = rng.randrange(len(lines))
            lines[index] = b" " * rng.choice([0, 1, 3, 8, 40]) + lines[index].lstrip()
        elif choice in (6, 7):  # splice a fragment in
            at = rng.randrange(len(data) + 1)
            data = data[:at] + rng.choice(FRAGMENTS) * rng.choice([1, 1, 2, 10]) + data[at:]
            continue
        data = b"\n".join(lines)
    return data


def seed_files(sources: list[Path]) -> list[Path]:
    files: list[Path] = []
    for source in sources:
        if source.is_dir():
            files.extend(sorted(p for p in source.rglob("*.py") if p.is_file()))
        elif source.is_file():
            files.append(source)
    return files


def run_check(folder: Path, jobs: int, timeout: float, extra: list[str]) -> dict:
    """One `graphlint check` of `folder`; what went wrong, if anything."""
    report = folder.parent / f"{folder.name}.report.json"
    expected = sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*.py"))
    command = [sys.executable, "-m", "graphlint", "check", ".", "--format", "json", "-o", str(report),
               "-j", str(jobs), *extra]
    started = time.monotonic()
    try:
        done = subprocess.run(command, cwd=folder, capture_output=True, text=True, timeout=timeout,
                              start_new_session=True)
    except subprocess.TimeoutExpired:
        return {"problem": "hang", "seconds": timeout}
    seconds = time.monotonic() - started
    problem = None
    if done.returncode not in (0, 1):
        problem = f"crash (exit {done.returncode}): {done.stderr.strip()[-300:]}"
    elif "Traceback" in done.stderr or "internal error" in done.stderr:
        problem = f"traceback: {done.stderr.strip()[-300:]}"
    else:
        try:
            data = json.loads(report.read_text("utf-8"))
            listed = sorted(data["static"]["files"])
        except (OSError, ValueError, KeyError, TypeError) as error:
            problem = f"no report: {error}"
        else:
            if listed != expected:
                problem = f"report lists {len(listed)} files, {len(expected)} given"
    findings = 0
    if problem is None:
        findings = len(data["static"]["findings"])
    return {"problem": problem, "seconds": seconds, "findings": findings}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=2000, help="mutated files to generate (default 2000)")
    parser.add_argument("--batch", type=int, default=100, help="mutated files per graphlint run")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--timeout", type=float, default=600, help="seconds before a run counts as a hang")
    parser.add_argument("--source", action="append", type=Path, help="seed files or folders (repeatable)")
    parser.add_argument("--no-generated", action="store_true", help="skip the deep and huge cases")
    parser.add_argument("--keep", type=Path, help="write the corpus here and keep it")
    parser.add_argument("--shapes", action="store_true",
                        help="only the pathological shapes at growing sizes: time and peak memory of each")
    parser.add_argument("--shape", action="append", choices=sorted(SHAPES), help="with --shapes: only these")
    args = parser.parse_args()
    if args.shapes:
        from graphlint.config import DEFAULT_FILE_TIMEOUT, DEFAULT_MAX_FILE_SIZE, DEFAULT_WORKER_MEMORY

        work = args.keep or Path(tempfile.mkdtemp(prefix="graphlint-shapes-"))
        work.mkdir(parents=True, exist_ok=True)
        try:
            problems = run_shapes(work, DEFAULT_MAX_FILE_SIZE, DEFAULT_FILE_TIMEOUT, DEFAULT_WORKER_MEMORY,
                                  args.timeout, args.shape)
        finally:
            if args.keep is None:
                shutil.rmtree(work, ignore_errors=True)
        print(f"shapes: {len(problems)} cases past the {DEFAULT_FILE_TIMEOUT:g} s budget or the "
              f"{DEFAULT_WORKER_MEMORY} MiB limit, or without a report")
        for problem in problems:
            print(f"  {problem}")
        return 1 if problems else 0
    seeds = seed_files(args.source or DEFAULT_SOURCES)
    if not seeds:
        parser.error("no seed files found; give --source")
    rng = random.Random(args.seed)
    work = args.keep or Path(tempfile.mkdtemp(prefix="graphlint-fuzz-"))
    work.mkdir(parents=True, exist_ok=True)
    runs: list[tuple[str, dict]] = []
    started = time.monotonic()
    try:
        batches = (args.files + args.batch - 1) // args.batch
        for number in range(batches):
            folder = work / f"batch{number:03}"
            folder.mkdir()
            for index in range(min(args.batch, args.files - number * args.batch)):
                seed = rng.choice(seeds)
                (folder / f"m{index:03}_{seed.name}").write_bytes(mutate(seed.read_bytes(), rng))
            outcome = run_check(folder, jobs=1 + number % 2, timeout=args.timeout,
                                extra=["--no-cache"] if number % 3 else ["--cache-dir", str(work / "cache")])
            runs.append((folder.name, outcome))
            print(f"{folder.name}: {outcome['problem'] or 'ok'} ({outcome['seconds']:.1f} s, "
                  f"{outcome.get('findings', 0)} findings)", flush=True)
        if not args.no_generated:
            cases = deep_and_huge()
            for name, data in cases.items():
                folder = work / f"case_{Path(name).stem}"
                folder.mkdir()
                (folder / name).write_bytes(data)
                for jobs in (1, 2):
                    outcome = run_check(folder, jobs, args.timeout, ["--no-cache"])
                    runs.append((f"{name} -j{jobs}", outcome))
                    print(f"{name} -j{jobs}: {outcome['problem'] or 'ok'} ({outcome['seconds']:.1f} s)", flush=True)
            folder = work / "all_cases"
            folder.mkdir()
            for name, data in cases.items():
                (folder / name).write_bytes(data)
            outcome = run_check(folder, 2, args.timeout, ["--no-cache"])
            runs.append(("all cases together -j2", outcome))
            print(f"all cases together -j2: {outcome['problem'] or 'ok'} ({outcome['seconds']:.1f} s)", flush=True)
    finally:
        if args.keep is None:
            shutil.rmtree(work, ignore_errors=True)
    problems = [(name, o["problem"]) for name, o in runs if o["problem"]]
    hangs = sum(1 for _, p in problems if p == "hang")
    crashes = sum(1 for _, p in problems if p.startswith(("crash", "traceback")))
    missing = sum(1 for _, p in problems if p.startswith(("no report", "report lists")))
    generated = 0 if args.no_generated else len(deep_and_huge())
    print(f"fuzz: {args.files} mutated files from {len(seeds)} seeds + {generated} deep/huge cases, "
          f"{len(runs)} runs, {crashes} crashes, {hangs} hangs, {missing} runs without a full report, "
          f"{time.monotonic() - started:.0f} s")
    for name, problem in problems:
        print(f"  {name}: {problem}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
