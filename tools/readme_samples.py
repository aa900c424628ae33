"""The README's command-output samples, each produced by the command it shows.

A sample is a fenced block right after a marker line naming its command:

    <!-- sample: graphlint check dsv4_model/reference.py --select GL101,GL305 -->

The command runs in the repository root through bash (a pipeline may cut the output to the
part shown) with this Python's `graphlint` first on PATH and colours off. `check` compares
every sample with a fresh run, paths and timings masked; `--update` rewrites the samples.

    python tools/readme_samples.py            # exit 1 and a diff when a sample is stale
    python tools/readme_samples.py --update   # regenerate every sample in place
"""
from __future__ import annotations

import argparse
import difflib
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
MARKER = re.compile(r"^<!-- sample: (?P<command>.+?) -->\s*$")
FENCE = re.compile(r"^```")
# Timings (`6.2 s`, `0.34 ms`, `in 1.5s`) and absolute paths differ from run to run.
_TIMING = re.compile(r"\b\d+(?:\.\d+)?\s?(?:ms|s)\b")
_TRAILING = re.compile(r"[ \t]+$", re.MULTILINE)


@dataclass
class Sample:
    command: str
    start: int  # index of the first line inside the fence
    end: int  # index of the closing fence
    text: str  # the sample as the README has it


def samples(text: str) -> list[Sample]:
    """Every marked sample; a marker not followed by a fenced block is an error."""
    lines = text.splitlines()
    found = []
    for index, line in enumerate(lines):
        match = MARKER.match(line)
        if not match:
            continue
        if index + 1 >= len(lines) or not FENCE.match(lines[index + 1]):
            raise ValueError(f"README.md:{index + 1}: sample marker not followed by a ``` block")
        end = next((i for i in range(index + 2, len(lines)) if FENCE.match(lines[i])), None)
        if end is None:
            raise ValueError(f"README.md:{index + 2}: sample block never closed")
        found.append(Sample(match.group("command"), index + 2, end, "\n".join(lines[index + 2:end])))
    return found


def run(command: str) -> str:
    """The command's output (stdout) as the README shows it: trailing spaces and blank lines cut."""
    env = {**os.environ, "NO_COLOR": "1", "TERM": "dumb", "COLUMNS": "200",
           "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    env.pop("FORCE_COLOR", None)
    result = subprocess.run(["bash", "-c", command], cwd=ROOT, env=env, capture_output=True, text=True,
                            timeout=600, stdin=subprocess.DEVNULL)
    if not result.stdout.strip():
        raise RuntimeError(f"`{command}` printed nothing (exit {result.returncode}): {result.stderr.strip()}")
    return _TRAILING.sub("", result.stdout).strip("\n")


def masked(text: str) -> str:
    """The text with what differs between runs replaced: timings, and this checkout's path."""
    text = text.replace(str(ROOT), "<root>")
    return _TRAILING.sub("", _TIMING.sub("<time>", text)).strip("\n")


def stale(sample: Sample) -> str | None:
    """A diff of the sample against a fresh run of its command (masked), or None when it matches."""
    fresh = masked(run(sample.command))
    kept = masked(sample.text)
    if fresh == kept:
        return None
    return "\n".join(difflib.unified_diff(kept.splitlines(), fresh.splitlines(), "README.md", sample.command,
                                          lineterm=""))


def update(path: Path = README) -> int:
    """Rewrite every sample with a fresh run; returns how many changed."""
    lines = path.read_text("utf-8").splitlines()
    changed = 0
    for sample in reversed(samples("\n".join(lines))):  # from the end, so indices stay valid
        fresh = run(sample.command)
        if masked(fresh) != masked(sample.text):  # a sample differing in timings only is kept
            changed += 1
            lines[sample.start:sample.end] = fresh.splitlines()
    path.write_text("\n".join(lines) + "\n", "utf-8")
    return changed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--update", action="store_true", help="rewrite the samples from fresh runs")
    args = parser.parse_args(argv)
    if args.update:
        print(f"readme samples: {update()} rewritten")
        return 0
    failed = 0
    for sample in samples(README.read_text("utf-8")):
        diff = stale(sample)
        if diff:
            failed += 1
            print(diff)
    print(f"readme samples: {failed} stale" if failed else "readme samples: all match their commands")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
