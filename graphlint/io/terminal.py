"""The process's own terminal streams, as both halves' progress displays need them."""
from __future__ import annotations

import sys
import threading
import time
from contextlib import contextmanager
from typing import Callable, Iterator

# Off a terminal (a CI log), a "still running" line this often, so a long phase is not read as hung.
HEARTBEAT_SECONDS = 30


def real_stderr() -> bool:
    """stderr is a file descriptor (a terminal, a pipe, a CI log), not a stream captured in
    process (a caller collecting the report), which gets no progress lines."""
    try:
        sys.stderr.fileno()
    except (AttributeError, OSError, ValueError):
        return False
    return True


@contextmanager
def heartbeat(line: Callable[[float], str], seconds: float = HEARTBEAT_SECONDS) -> Iterator[float]:
    """While the block runs, print `line(elapsed seconds)` on stderr every `seconds`, from a daemon
    thread stopped on the way out (it never keeps graphlint alive after its report). Yields the
    start time (time.monotonic)."""
    started = time.monotonic()
    done = threading.Event()

    def beat() -> None:
        while not done.wait(seconds):
            print(line(time.monotonic() - started), file=sys.stderr, flush=True)

    thread = threading.Thread(target=beat, name="graphlint-progress", daemon=True)
    thread.start()
    try:
        yield started
    finally:
        done.set()
