"""Paths of the planted runtime targets and the lines their hazards are planted on."""
from __future__ import annotations

from pathlib import Path

TARGETS = Path(__file__).parent / "targets"
REPO = Path(__file__).resolve().parents[2]


def target(name: str, factory: str = "make") -> str:
    """`tests/runtime/targets/<name>.py:<factory>`, relative to the repository root."""
    return f"{(TARGETS / f'{name}.py').relative_to(REPO).as_posix()}:{factory}"


def marked_line(name: str, marker: str) -> tuple[str, int]:
    """(path relative to the repo, line) of the `# PLANTED: <marker>` line in a target file."""
    path = TARGETS / f"{name}.py"
    for number, text in enumerate(path.read_text().splitlines(), start=1):
        if f"# PLANTED: {marker}" in text:
            return path.relative_to(REPO).as_posix(), number
    raise AssertionError(f"no PLANTED: {marker} in {path}")
