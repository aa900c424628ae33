"""Source text as Python reads it: bytes read from regular files only, with a byte limit,
decoded by the PEP 263 cookie or the BOM (`tokenize.detect_encoding`), lines split only where
the tokenizer ends a line, and the deepest bracket nesting, measured without parsing so that
input the parser cannot survive never reaches it.
"""
from __future__ import annotations

import functools
import io
import os
import re
import stat
import tokenize
from typing import BinaryIO

# CPython's tokenizer rejects deeper bracket nesting ("too many nested parentheses", MAXLEVEL).
MAX_BRACKET_DEPTH = 200

# Python ends a line at \n, \r\n or \r only; str.splitlines() also splits at form feed, \x1c-\x1e,
# \x85, U+2028 and U+2029, which would shift every later line against the parser's numbering.
_LINE_END = re.compile(r"\r\n|\r|\n")
_BRACKET = re.compile(r"[()\[\]{}]")
_OPENING = frozenset("([{")


class SourceError(ValueError):
    """The bytes are not Python source in any encoding Python would accept."""


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


def encoded_as_declared(text: str) -> bytes:
    """`text` (decoded by `decode`) as bytes in the encoding its own cookie declares, so that a
    copy on disk decodes to the same text."""
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(text.encode("utf-8", "surrogatepass")).readline)
        return text.encode("utf-8" if encoding == "utf-8-sig" else encoding)
    except (SyntaxError, LookupError, UnicodeEncodeError):
        return text.encode("utf-8", "surrogatepass")


def _kind(mode: int) -> str:
    for test, kind in ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"), (stat.S_ISDIR, "a folder")):
        if test(mode):
            return kind
    return "not a regular file"


def decode(data: bytes) -> str:
    """The text of a source file as the interpreter decodes it (a BOM is removed)."""
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
    except SyntaxError as error:  # an unknown cookie, or a BOM with a non-UTF-8 cookie
        raise SourceError(str(error)) from None
    try:
        return data.decode(encoding)  # "utf-8-sig" when a BOM is present: it is stripped
    except (UnicodeDecodeError, LookupError) as error:
        raise SourceError(f"cannot decode as {encoding}: {error}") from None


def split_lines(text: str) -> list[str]:
    """The lines of `text` as the tokenizer numbers them (line N is element N - 1)."""
    lines = _LINE_END.split(text)
    if lines and lines[-1] == "":
        lines.pop()
    return lines


def bracket_depth(text: str) -> tuple[int, int]:
    """(deepest bracket nesting, its line). A cheap count over every bracket character is
    tried first; only when it exceeds the limit is the file tokenized, so that brackets inside
    strings and comments do not count."""
    deepest = _plain_depth(text)
    if deepest <= MAX_BRACKET_DEPTH:
        return deepest, 0
    return _tokenized_depth(text)


def _tokenized_depth(text: str) -> tuple[int, int]:
    depth = deepest = line = 0
    try:
        for token in tokenize.generate_tokens(io.StringIO(text).readline):
            if token.type == tokenize.OP and token.string in _OPENING:
                depth += 1
                if depth > deepest:
                    deepest, line = depth, token.start[0]
            elif token.type == tokenize.OP and token.string in ")]}" and depth:
                depth -= 1
            elif token.type == tokenize.STRING and "f" in _prefix(token.string).lower():
                # Python < 3.12 gives an f-string as one token: count the brackets in it.
                inner = _plain_depth(token.string)
                if depth + inner > deepest:
                    deepest, line = depth + inner, token.start[0]
    except (tokenize.TokenError, SyntaxError) as error:
        # Python 3.12+ tokenizes in C, which stops at CPython's own limit ("too many nested
        # parentheses") before the count gets past it; other errors the parser reports itself.
        if "nested" in str(error):
            return max(deepest, _plain_depth(text)), line
    return deepest, line


def _prefix(literal: str) -> str:
    return literal[:len(literal) - len(literal.lstrip("rRbBuUfF"))]


def _plain_depth(text: str) -> int:
    """Bracket nesting counting every bracket character, strings and comments included."""
    depth = deepest = 0
    for match in _BRACKET.finditer(text):
        if match.group() in _OPENING:
            depth += 1
            deepest = max(deepest, depth)
        elif depth:
            depth -= 1
    return deepest
