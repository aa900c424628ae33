"""Run one file's analysis on a thread with a large stack and a raised recursion limit, so that
deep but valid code (hundreds of `elif` branches, long operator or method chains, deep nesting
that CPython compiles) is analysed instead of ending in RecursionError or a stack overflow.
"""
from __future__ import annotations

import sys
import threading
from typing import Callable, TypeVar

T = TypeVar("T")

# The default 8 MiB main-thread stack overflows (SIGSEGV in libcst's native parser) near 1,100
# nested brackets and the default limit of 1,000 frames stops at about 490 terms of `x + x`.
# Measured with libcst 1.5.1 and 1.9.0 (1,300 brackets: SIGSEGV on 8 MiB, parsed on 512 MiB);
# on 512 MiB and 40,000 frames, 3,000 levels of each construct
# CPython compiles (elif chains, ternaries, `.abs()` and `[0]` chains, unary and binary
# operators) are analysed. The stack is reserved address space; only the depth used is touched.
STACK_BYTES = 512 * 1024 * 1024
RECURSION_LIMIT = 40_000

_lock = threading.Lock()


def run_deep(function: Callable[..., T], *args: object) -> T:
    """`function(*args)` on a fresh thread with STACK_BYTES of stack and RECURSION_LIMIT frames;
    its exception, if any, is raised here."""
    outcome: dict[str, object] = {}

    def work() -> None:
        try:
            outcome["value"] = function(*args)
        except BaseException as error:  # noqa: BLE001 - handed to the caller as it is
            outcome["error"] = error

    with _lock:  # the stack size and recursion limit are process-wide settings
        old_limit = sys.getrecursionlimit()
        old_stack = threading.stack_size()
        try:
            threading.stack_size(STACK_BYTES)
            sys.setrecursionlimit(max(old_limit, RECURSION_LIMIT))
            thread = threading.Thread(target=work, name="graphlint-analysis", daemon=True)
            thread.start()
        finally:
            threading.stack_size(old_stack)
        try:
            thread.join()
        finally:
            sys.setrecursionlimit(old_limit)
    if "error" in outcome:
        raise outcome["error"]  # type: ignore[misc]
    return outcome["value"]  # type: ignore[return-value]
