"""Map a point of execution to the user's source line: the first frame outside torch and the harness.

Every runtime record names a path, a line and a call stack. The stack stops at the harness frame
that called the target, so it reads from the target's `step()` down to the line that did it.
"""
from __future__ import annotations

import os
import sys
import sysconfig
from types import FrameType, TracebackType

_RUNTIME_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep
# The runtime command runs the compile phase in its own process: its frames are the harness's too.
_COMMAND_FILE = os.path.join(os.path.dirname(_RUNTIME_DIR.rstrip(os.sep)), "commands", "runtime.py")
# Stdlib frames (contextlib, warnings, functools) sit between user code and torch; site-packages
# lives under the stdlib folder on many installs, so it is excluded from that test.
_STDLIB_DIRS = tuple(
    {os.path.abspath(p) + os.sep for p in (sysconfig.get_paths()["stdlib"], sysconfig.get_paths()["platstdlib"])}
)
_TORCH_DIRS: tuple[str, ...] | None = None

# code object -> "user" | "internal" | "harness"; frames are classified once per code object.
_KIND: dict[object, str] = {}
_REL: dict[str, str] = {}


def _torch_dirs() -> tuple[str, ...]:
    global _TORCH_DIRS
    if _TORCH_DIRS is None:
        import torch

        _TORCH_DIRS = (os.path.dirname(os.path.abspath(torch.__file__)) + os.sep,)
    return _TORCH_DIRS


def _classify(filename: str) -> str:
    if filename.startswith("<"):
        return "internal"  # <frozen importlib>, <string>
    path = os.path.abspath(filename)
    if path.startswith(_RUNTIME_DIR) or path == _COMMAND_FILE:
        return "harness"
    if path.startswith(_torch_dirs()):
        return "internal"
    if path.startswith(_STDLIB_DIRS) and "-packages" + os.sep not in path:
        return "internal"
    return "user"


def is_user_file(filename: str) -> bool:
    """A file of the user's (not torch, the standard library or the harness)."""
    return _classify(filename) == "user"


def _kind(code) -> str:
    kind = _KIND.get(code)
    if kind is None:
        kind = _KIND[code] = _classify(code.co_filename)
    return kind


def relative_path(filename: str) -> str:
    """`filename` relative to the current directory when inside it, '/'-separated; else absolute."""
    rel = _REL.get(filename)
    if rel is None:
        path = os.path.abspath(filename)
        cwd = os.getcwd() + os.sep
        rel = path[len(cwd):] if path.startswith(cwd) else path
        rel = _REL[filename] = rel.replace(os.sep, "/")
    return rel


def _frame_dict(code, lineno: int) -> dict:
    return {"path": relative_path(code.co_filename), "line": lineno or 0, "function": code.co_name}


def site_and_callers(frame: FrameType | None = None, limit: int = 64) -> tuple[tuple, tuple]:
    """The innermost user frame as a hashable `(code, line)` (else the innermost torch or stdlib
    frame), and the user frames above it up to the harness call, innermost first: where a
    control-flow divergence began when a branch chose between calls. One walk up the stack, cheap
    enough for every op (codes are classified once). A stack deeper than `limit` ends its callers
    in None: their outermost frames are unknown."""
    f = frame or sys._getframe(1)
    fallback = None
    while f is not None and _kind(f.f_code) != "user":
        if fallback is None and _kind(f.f_code) == "internal":
            fallback = (f.f_code, f.f_lineno)
        f = f.f_back
    if f is None:
        return fallback or (None, 0), ()
    site = (f.f_code, f.f_lineno)
    found: list = []
    f = f.f_back
    while f is not None and len(found) < limit:
        kind = _kind(f.f_code)
        if kind == "user":
            found.append((f.f_code, f.f_lineno))
        elif kind == "harness":
            break  # the harness called the target: the stack above is not the user's
        f = f.f_back
    if f is not None and len(found) >= limit:
        found.append(None)
    return site, tuple(found)


def site_dict(key: tuple) -> dict:
    """Expand a site key (graphlint.runtime.user_frames.site_and_callers) into `{path, line, function}`."""
    code, line = key
    if code is None:
        return {"path": "?", "line": 0, "function": "?"}
    return _frame_dict(code, line)


def user_stack(frame: FrameType | None = None, limit: int = 12) -> list[dict]:
    """User frames from the innermost outwards to the harness call, returned outermost first.

    Torch and stdlib frames in between (nn.Module.__call__, contextlib) are left out. When no user
    frame exists (a sync inside torch itself), the innermost non-harness frame stands in.
    """
    f = frame or sys._getframe(1)
    frames: list[dict] = []
    fallback = None
    while f is not None and len(frames) < limit:
        kind = _kind(f.f_code)
        if kind == "user":
            frames.append(_frame_dict(f.f_code, f.f_lineno))
        elif kind == "harness" and frames:
            break  # the harness called the target: the stack above is not the user's
        elif kind == "internal" and fallback is None:
            fallback = _frame_dict(f.f_code, f.f_lineno)
        f = f.f_back
    if not frames and fallback is not None:
        frames.append(fallback)
    frames.reverse()
    return frames


def traceback_stack(tb: TracebackType | None, limit: int = 12) -> list[dict]:
    """User frames of an exception's traceback, outermost first, innermost (where it was raised) last."""
    frames: list[dict] = []
    while tb is not None:
        code = tb.tb_frame.f_code
        if _kind(code) == "user":
            frames.append(_frame_dict(code, tb.tb_lineno))
        tb = tb.tb_next
    return frames[-limit:]
