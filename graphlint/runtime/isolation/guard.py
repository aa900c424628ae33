"""Survive the target: a heartbeat of the call in progress, exits turned into errors, fault stacks.

The worker process runs every call into the target (factory, reset, prepare, step) under `Guard`:
it marks the call and its start in a small shared file (`CallClock`) that the parent reads to
enforce the step timeout, turns `sys.exit` / `os._exit` into a `TargetExit` error at the user's
line, and has faulthandler write the Python stack on a crash or on the parent's timeout signal.
"""
from __future__ import annotations

import mmap
import os
import re
import shutil
import signal
import struct
import threading
import time
from typing import Any, Callable

from graphlint.runtime import user_frames
from graphlint.runtime.targets.loader import TargetExit

CALLS = ("factory", "reset", "prepare", "step", "import")  # "import": loading the target module
_LAYOUT = struct.Struct("<dqq")  # started (time.monotonic, 0 = idle), step (-1 = none), call index
DUMP_SIGNAL = signal.SIGUSR1  # the parent's "you timed out: write your stack" signal


class CallClock:
    """Which target call runs now and since when, in a file both processes map.

    The parent compares `started` with `time.monotonic()` (one clock for all processes on a host)
    and so needs no message from a worker that may be stuck in C code holding the GIL.
    """

    def __init__(self, path: str, create: bool = False):
        self.path = path
        if create:
            with open(path, "wb") as handle:
                handle.write(_LAYOUT.pack(0.0, -1, -1))
        self._file = open(path, "r+b")
        self._map = mmap.mmap(self._file.fileno(), _LAYOUT.size)

    def enter(self, call: str, step: int | None) -> None:
        _LAYOUT.pack_into(self._map, 0, time.monotonic(), -1 if step is None else step, CALLS.index(call))

    def leave(self) -> None:
        _LAYOUT.pack_into(self._map, 0, 0.0, -1, -1)

    def read(self) -> dict | None:
        """The call in progress as `{call, step, started}`, or None between calls."""
        started, step, index = _LAYOUT.unpack_from(self._map, 0)
        if not started or not 0 <= index < len(CALLS):
            return None
        return {"call": CALLS[index], "step": None if step < 0 else step, "started": started}

    def close(self) -> None:
        self._map.close()
        self._file.close()


class Guard:
    """Wraps the target's protocol calls in the worker (see the module docstring)."""

    def __init__(self, clock: CallClock | None):
        self.clock = clock
        self.pid = os.getpid()
        self._real_exit = os._exit
        self.depth = 0
        self.prepared: int | None = None  # the step prepare() was last called for: step() runs it

    def call(self, name: str, fn: Callable[..., Any], *args, step: int | None = None, **kwargs) -> Any:
        if self.depth:  # a protocol call made from inside another (prepare() calling reset())
            return fn(*args, **kwargs)
        self.depth += 1
        if self.clock is not None:
            self.clock.enter(name, step)
        os._exit = self._exit_hook(name)
        try:
            return fn(*args, **kwargs)
        except SystemExit as exc:
            # Re-raised with the exit's own traceback, so the stack names the line that exited.
            raise TargetExit(f"{name}() called sys.exit({exc.code!r})").with_traceback(exc.__traceback__) from None
        finally:
            os._exit = self._real_exit
            self.depth -= 1
            if self.clock is not None:
                self.clock.leave()

    def _exit_hook(self, name: str) -> Callable[[int], None]:
        guard = self

        def exit_hook(code: int = 0) -> None:
            # A child forked by the target inherits this hook: there, exit as asked.
            if os.getpid() != guard.pid or threading.current_thread() is not threading.main_thread():
                guard._real_exit(code)
            raise TargetExit(f"{name}() called os._exit({code!r})")

        return exit_hook

    def wrap(self, target: Any) -> Any:
        """Route `target.reset/prepare/step` through `call` by instance attributes (the object
        keeps its identity, which the replay-hazard search relies on)."""
        for name in ("reset", "prepare", "step"):
            method = getattr(target, name)

            def guarded(*args, _name=name, _method=method, **kwargs):
                if _name == "prepare":
                    self.prepared = args[0] if args and isinstance(args[0], int) else None
                step = self.prepared if _name != "reset" else None
                return self.call(_name, _method, *args, step=step, **kwargs)

            guarded.__wrapped__ = method
            try:
                setattr(target, name, guarded)
            except (AttributeError, TypeError):
                pass  # __slots__ or a frozen object: the parent's timeout still applies
        return target


def leftover_threads() -> list[dict]:
    """Non-daemon threads other than the main one still alive: they would keep the worker alive."""
    found = []
    for thread in threading.enumerate():
        if thread is threading.main_thread() or thread.daemon or not thread.is_alive():
            continue
        entry: dict = {"name": thread.name}
        func = getattr(thread, "_target", None)
        code = getattr(func, "__code__", None)
        if code is not None:
            entry.update(path=user_frames.relative_path(code.co_filename), line=code.co_firstlineno,
                         function=code.co_name)
        found.append(entry)
    return found


_WORKER_FILE = os.path.join("graphlint", "runtime", "isolation", "worker.py")
_FRAME = re.compile(r'^\s*File "(?P<path>[^"]+)", line (?P<line>\d+) in (?P<function>\S+)')


def watch_parent(folder: str, kill_children: Callable[[], Any], parent: int | None = None) -> None:
    """A daemon thread that sees the parent change (graphlint died, however it died), kills
    what the target started, removes the run's temporary `folder` and ends this process. It
    lives here, not in the worker module, so that fault_stack never takes its stack for the
    main thread's. `parent`: the pid graphlint passed down (a parent that died while this
    process was starting is then seen too, where getppid() here would already name init)."""
    parent = os.getppid() if parent is None else parent

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(0.5)
        kill_children()
        if os.path.basename(folder).startswith("graphlint-runtime-"):
            shutil.rmtree(folder, ignore_errors=True)
        os._exit(3)

    threading.Thread(target=watch, name="graphlint-watchdog", daemon=True).start()


def fault_stack(text: str) -> list[dict]:
    """User frames of the main thread's stack in a faulthandler dump, outermost first."""
    blocks = [b for b in re.split(r"\n(?=(?:Current thread|Thread) 0x)", text) if "most recent call first" in b]
    # The main thread's stack starts in the worker's main(); a signal may land on any thread.
    main = next((b for b in blocks if _WORKER_FILE in b), blocks[0] if blocks else "")
    frames = []
    for raw in main.splitlines():
        match = _FRAME.match(raw)
        if match and user_frames.is_user_file(match["path"]):
            frames.append({"path": user_frames.relative_path(match["path"]), "line": int(match["line"]),
                           "function": match["function"]})
    frames.reverse()
    return frames
