"""Progress of a long static check on stderr: a rich status line on a terminal, plain phase
lines otherwise (a CI log), nothing for short runs, with -q, or when stderr is captured in
process (a caller collecting the report). stdout stays the report's."""
from __future__ import annotations

import sys

from graphlint.io.terminal import real_stderr  # noqa: F401 - the views and the runtime ask it
import time
from contextlib import contextmanager
from typing import Callable, Iterator

# Below this many files a check takes about a second: no progress to show.
LONG_CHECK_FILES = 200


@contextmanager
def static_progress(quiet: bool = False) -> Iterator[Callable[[str, int], None]]:
    """A callback `progress(phase, files)` for engine.check, shown as described above."""
    if quiet or not real_stderr():
        yield lambda phase, files: None
        return
    from rich.console import Console

    console = Console(stderr=True, highlight=False)
    started = time.monotonic()
    status = None
    shown = False

    def progress(phase: str, files: int) -> None:
        nonlocal status, shown
        if files < LONG_CHECK_FILES:
            return
        shown = True
        line = f"graphlint: {phase} ({files} files, {time.monotonic() - started:.1f} s)"
        if console.is_terminal:
            if status is None:
                status = console.status(line)
                status.start()
            else:
                status.update(line)
        else:
            print(line, file=sys.stderr, flush=True)

    try:
        yield progress
    finally:
        if status is not None:
            status.stop()
        if shown and not console.is_terminal:
            print(f"graphlint: checked in {time.monotonic() - started:.1f} s", file=sys.stderr, flush=True)
