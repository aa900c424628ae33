"""Reading a source or config file as graphlint reads every file: regular files only, checked
after they are opened (what was stat'ed may have been replaced by a link to /dev/zero or a
FIFO), never a file of /proc or /sys, with a byte limit; a stream (stdin) with the same limit.
"""
from __future__ import annotations

import functools
import os
import stat
from typing import BinaryIO


class NotSource(OSError):
    """A path that is not a regular file on a real file system (a FIFO, a device, a folder, a
    file of /proc or /sys), or one larger than the limit: refused, never read in full."""


class TooLarge(NotSource):
    """A file longer than the byte limit it was read with."""


def read_source(path: str | os.PathLike[str], max_bytes: int = 0, prefix: bool = False) -> bytes:
    """The bytes of a regular file, checked after it is opened (what was stat'ed at discovery
    may have been replaced since, by a link to /dev/zero or a FIFO): anything else raises
    NotSource before a byte is read. With `max_bytes` (0: none), a longer file raises NotSource,
    or with `prefix` its first `max_bytes` bytes are returned."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0))
    with os.fdopen(fd, "rb") as handle:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise NotSource(f"{os.fsdecode(path)}: {_kind(info.st_mode)}, not a regular file: not read")
        if info.st_dev in _pseudo_devices():
            raise NotSource(f"{os.fsdecode(path)}: a file of /proc or /sys, not a source file: not read")
        os.set_blocking(fd, True)
        return _read_limited(handle, path, max_bytes, prefix)


@functools.lru_cache(maxsize=1)
def _pseudo_devices() -> frozenset[int]:
    # /proc/self/environ and /sys files stat as regular files: they are told by their device.
    devices = set()
    for folder in ("/proc", "/sys"):
        try:
            devices.add(os.stat(folder).st_dev)
        except OSError:
            pass
    return frozenset(devices)


def _read_limited(handle: BinaryIO, path: str | os.PathLike[str], max_bytes: int, prefix: bool) -> bytes:
    data = handle.read(max_bytes + (0 if prefix else 1) if max_bytes else -1)
    if max_bytes and len(data) > max_bytes:
        raise TooLarge(f"{os.fsdecode(path)}: larger than {max_bytes:,} bytes: not read")
    return data


def read_stream(stream: BinaryIO, max_bytes: int, name: str = "stdin") -> bytes:
    """All of `stream` (stdin), refused with NotSource past `max_bytes` (0: no limit)."""
    return _read_limited(stream, name, max_bytes, False)


def _kind(mode: int) -> str:
    for test, kind in ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"), (stat.S_ISDIR, "a folder")):
        if test(mode):
            return kind
    return "not a regular file"
