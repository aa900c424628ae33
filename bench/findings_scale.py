"""CPU time of `graphlint check` on files with many findings: 20,000 findings on 20,000 lines,
on one line, and in one statement. Work must grow with the file plus its findings, not with
their product. `--against TREE` runs another graphlint source tree (e.g. an older commit,
unpacked with `git archive`) on the same files for a ratio.

    python bench/findings_scale.py [--findings 20000] [--against /tmp/graphlint-main]
"""
from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
from pathlib import Path

HEAD = "import torch\n\n\ndef step(x: torch.Tensor):\n"


def cases(count: int) -> dict[str, str]:
    return {
        "many_lines.py": HEAD + "".join("    x.item()\n" for _ in range(count)),
        "one_line.py": HEAD + "    " + "; ".join(["x.item()"] * count) + "\n",
        "one_statement.py": HEAD + "    y = (" + ", ".join(["x.item()"] * count) + ")\n",
    }


def cpu_seconds(path: Path, tree: str | None) -> tuple[float, float]:
    """(user + system CPU seconds of the run and its workers, peak memory in MB of any of them)."""
    env = dict(os.environ)
    if tree:
        env["PYTHONPATH"] = tree
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run([sys.executable, "-m", "graphlint", "check", path.name, "--no-cache", "-q", "-j", "1"],
                   cwd=path.parent, env=env, capture_output=True, check=False)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime, after.ru_maxrss / 1024)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--findings", type=int, default=20000)
    parser.add_argument("--against", help="another graphlint source tree to compare with")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        for name, text in cases(args.findings).items():
            path = Path(folder) / name
            path.write_text(text)
            seconds, memory = cpu_seconds(path, None)
            line = f"{name:<18} {args.findings} findings: {seconds:6.1f} s CPU, peak {memory:,.0f} MB"
            if args.against:
                other, other_memory = cpu_seconds(path, args.against)
                line += f" | against: {other:6.1f} s CPU, peak {other_memory:,.0f} MB ({other / seconds:.1f}x)"
            print(line, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
