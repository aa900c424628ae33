"""The shape of a source measured from its tokens, before the parser sees it: how long its
longest expression chain is (unary `-`/`not`, `lambda:`, ternaries, `**` and other operators,
calls, subscripts, attributes, one inside the other) and how many tokens it has. libcst's
parser takes time and memory that grow with the square of such a chain and with the tokens, so
an input beyond these budgets is reported (GL903) instead of parsed.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

# CPython compiles chains of up to about 2,000 links; libcst parses a chain of 1,000 in under a
# second and 250 MB, one of 2,000 in 3 s and 800 MB, and 20,000 unary minus signs in gigabytes.
MAX_CHAIN = 1000
# Sum over every chain of its length squared: the parser's cost of all chains in the file
# (about 1 s per million on this measure). Ten chains at the limit fit; thousands do not.
MAX_CHAIN_COST = 10 * MAX_CHAIN * MAX_CHAIN
# Tokens allowed per byte of max-file-size: ordinary code has about 0.2, a file of literals
# (`0, 0, 0, ...`) 0.67, and the parser's memory grows with the tokens, not with the bytes.
TOKENS_PER_BYTE = 0.25

_STRING = r"""(?:[rRbBuUfFtT]{1,2})?(?:'''(?:[^'\\]|\\.|'(?!''))*(?:'''|\Z)|\"\"\"(?:[^"\\]|\\.|"(?!""))*(?:\"\"\"|\Z)
      |'(?:[^'\\\r\n]|\\.)*'?|"(?:[^"\\\r\n]|\\.)*"?)"""
_OPERATOR = r"""\*\*=?|//=?|<<=?|>>=?|->|:=|[-+*/%@&|^<>=!]=|\.\.\."""
# Every token (for the count): strings whole (unterminated ones to the end of the line), numbers,
# names, line ends, continuations, comments, operators, any other single character.
_TOKEN = re.compile(r"[ \t\f]*(?:" + _STRING + r"""
  | \d[\w.]*(?:(?<=[eE])[-+][\w.]*)? | \.\d[\w.]*
  | \w+ | \r\n|\r|\n | \\\r?\n|\\\r | \#[^\r\n]* | """ + _OPERATOR + r" | .)", re.VERBOSE | re.DOTALL)
# Only the tokens the chain count needs (the search itself skips names and numbers): strings
# and comments (nothing inside them counts), the links, brackets (one right after a name or a
# closing bracket is a call or a subscript: one more link), and what ends a chain: commas,
# line ends and assignments.
_SCAN = re.compile(_STRING + r"""
  | \#[^\r\n]*
  | \b(?:not|and|or|lambda|if|await)\b
  | [\w)\]][ \t]*[(\[]
  | """ + _OPERATOR + r"""
  | [-+*/%@&|^~.()\[\]{},;=]
  | \r\n|\r|\n | \\\r?\n|\\\r
""", re.VERBOSE | re.DOTALL)

# Tokens that add a link to the chain they are in (each nests the tree one level deeper in
# libcst); a comparison chain (`a < b < c`) is one flat node and does not count.
_LINKS = frozenset({"+", "-", "*", "/", "//", "%", "@", "**", "<<", ">>", "&", "|", "^", "~", ".",
                    "not", "and", "or", "lambda", "if", "await"})
_ASSIGN = frozenset({"=", "+=", "-=", "*=", "/=", "//=", "%=", "@=", "**=", "<<=", ">>=", "&=", "|=", "^=", ";"})


@dataclass(frozen=True)
class Shape:
    longest_chain: int  # links of the longest chain (each enclosing bracket adds one)
    chain_line: int  # the line where that chain reached its length, 1-based (0: none)
    chain_cost: int  # the sum of the squares of every chain's length


def count_tokens(text: str) -> int:
    return len(_TOKEN.findall(text))


def measure(text: str, stop_at: int = 0) -> Shape:
    """The chains of `text`. With `stop_at`, the scan ends at the first chain longer than that
    (the file is refused anyway), so a hostile input costs one pass at most."""
    counts = [0]  # links of the current chain at each open bracket level
    depth = longest = longest_line = cost = 0
    line = 1
    for token in _SCAN.findall(text):
        first = token[0]
        if token in _LINKS:
            counts[-1] += 1
            depth += 1
        elif len(token) == 1 and first in "([{":
            counts.append(0)
            depth += 1
        elif len(token) > 1 and token[-1] in "([" and first not in "'\"#" and token[-2] not in "'\"":
            if first in ")]" and len(counts) > 1:  # `)(`, `](`: the bracket closed, then a call
                closed = counts.pop()
                cost += closed * closed
                depth -= closed + 1
            counts[-1] += 1
            counts.append(0)
            depth += 2
        elif len(token) == 1 and first in ")]}":
            if len(counts) > 1:
                closed = counts.pop()
                cost += closed * closed
                depth -= closed + 1
            continue
        elif token == "," or (len(counts) == 1 and (first in "\r\n" or token in _ASSIGN)):
            cost += counts[-1] * counts[-1]
            depth -= counts[-1]
            counts[-1] = 0
            if first in "\r\n":
                line += 1
            continue
        elif first in "\r\n\\":
            line += 1
            continue
        else:  # a string or a comment, an assignment or `;` inside brackets
            if first != "#":
                line += token.count("\n")
            continue
        if depth > longest:
            longest, longest_line = depth, line
            if stop_at and longest > stop_at:
                break
    cost += sum(count * count for count in counts)
    return Shape(longest, longest_line, cost)


def refusal(text: str, max_size: int) -> tuple[str, int] | None:
    """(why the file is not parsed, line) when its shape is beyond a budget, else None.
    `max_size` (max-file-size, 0: no limit) sets the token budget."""
    if len(text) <= MAX_CHAIN:
        return None  # too short for a chain over the limit
    shape = measure(text, stop_at=MAX_CHAIN)
    if shape.longest_chain > MAX_CHAIN:
        return (f"an expression chain of more than {MAX_CHAIN:,} links (operators, `not`, `lambda`, ternaries, "
                "calls, subscripts or attributes, one inside the other): the parser's time and memory grow "
                "with its square", shape.chain_line)
    if shape.chain_cost > MAX_CHAIN_COST:
        return (f"long expression chains throughout (a parsing cost of {shape.chain_cost:,}, the sum of their "
                f"squared lengths, against a budget of {MAX_CHAIN_COST:,})", 1)
    budget = int(max_size * TOKENS_PER_BYTE)
    if max_size and len(text) > budget:  # a shorter text cannot have more tokens than the budget
        tokens = count_tokens(text)
        if tokens > budget:
            return (f"more tokens than max-file-size allows ({tokens:,} > {budget:,}: a quarter of a token per "
                    "byte)", 1)
    return None
