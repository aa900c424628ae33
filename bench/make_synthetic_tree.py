"""Build a large tree for scale measurements from copies of real files: the .py files of SRC
are copied, in sorted order and round after round (copy_000/, copy_001/, ...), into DEST
until DEST holds at least --lines lines. Each copy is a distinct path, so nothing is shared
through graphlint's cache.

    python bench/make_synthetic_tree.py /tmp/trees/lmdeploy/pytorch /tmp/trees/synthetic-1m --lines 1000000
"""
from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path


def build(source: Path, dest: Path, lines: int) -> tuple[int, int]:
    files = sorted(p for p in source.rglob("*.py") if p.is_file())
    if not files:
        raise SystemExit(f"no .py files under {source}")
    counts = [p.read_bytes().count(b"\n") for p in files]
    if sum(counts) == 0:
        raise SystemExit(f"the .py files under {source} are empty")
    if dest.exists():
        shutil.rmtree(dest)
    written = total = copy = 0
    while total < lines:
        for path, count in zip(files, counts):
            target = dest / f"copy_{copy:03d}" / path.relative_to(source)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, target)
            written += 1
            total += count
            if total >= lines:
                break
        copy += 1
    return written, total


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("source", type=Path)
    parser.add_argument("dest", type=Path)
    parser.add_argument("--lines", type=int, default=1_000_000)
    args = parser.parse_args(argv)
    if not args.source.is_dir():
        parser.error(f"{args.source} is not a folder")
    if args.dest.resolve() == args.source.resolve() or args.source.resolve() in args.dest.resolve().parents:
        parser.error("DEST must not be SRC or inside it")
    files, lines = build(args.source, args.dest, args.lines)
    print(f"{args.dest}: {files} files, {lines:,} lines")
    return 0


if __name__ == "__main__":
    sys.exit(main())
