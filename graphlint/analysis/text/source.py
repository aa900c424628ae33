"""Source text as Python reads it: bytes read from regular files only, with a byte limit,
decoded by the PEP 263 cookie or the BOM (`tokenize.detect_encoding`), lines split only where
the tokenizer ends a line, and the deepest bracket nesting, measured without parsing so that
input the parser cannot survive never reaches it.
"""
from __future__ import annotations

import io
import re
import tokenize

# CPython's tokenizer rejects deeper bracket nesting ("too many nested parentheses", MAXLEVEL).
MAX_BRACKET_DEPTH = 200

# Python ends a line at \n, \r\n or \r only; str.splitlines() also splits at form feed, \x1c-\x1e,
# \x85, U+2028 and U+2029, which would shift every later line against the parser's numbering.
_LINE_END = re.compile(r"\r\n|\r|\n")
_BRACKET = re.compile(r"[()\[\]{}]")
_OPENING = frozenset("([{")


from graphlint.io.reading import NotSource, TooLarge, read_source, read_stream  # noqa: F401 - read here, decoded below


class SourceError(ValueError):
    """The bytes are not Python source in any encoding Python would accept."""


def encoded_as_declared(text: str) -> bytes:
    """`text` (decoded by `decode`) as bytes in the encoding its own cookie declares, so that a
    copy on disk decodes to the same text."""
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(text.encode("utf-8", "surrogatepass")).readline)
        return text.encode("utf-8" if encoding == "utf-8-sig" else encoding)
    except (SyntaxError, LookupError, UnicodeEncodeError):
        return text.encode("utf-8", "surrogatepass")


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
