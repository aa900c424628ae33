"""The process's own terminal streams, as both halves' progress displays need them."""
from __future__ import annotations

import sys


def real_stderr() -> bool:
    """stderr is a file descriptor (a terminal, a pipe, a CI log), not a stream captured in
    process (a caller collecting the report), which gets no progress lines."""
    try:
        sys.stderr.fileno()
    except (AttributeError, OSError, ValueError):
        return False
    return True
