"""graphlint.analysis.positions gives each asked-for node the range libcst's PositionProvider gives it,
whether it is asked for alone, with others, or with every node of the file."""
from __future__ import annotations

import random

import libcst as cst
from libcst.metadata import MetadataWrapper, PositionProvider

from pathlib import Path

from graphlint.analysis.children import iter_code
from graphlint.analysis.positions import positions

REPO = Path(__file__).resolve().parents[1]

CRLF_AND_TABS = "import torch\r\nclass A:\r\n\tdef f(self, x):\r\n\t\tif x:\r\n\t\t\treturn x.item()  # c\r\n\r\n"
NO_TRAILING_NEWLINE = "def f(x):\n    return (x\n        .sum())"
DECORATED_AND_NESTED = '''
@torch.no_grad()
@other
def step(self, x: torch.Tensor):  # graphlint: entry
    """Doc."""
    if x.sum() > 0: y = x
    elif (x
          .any()):
        y = f"{x!r:>{w}}"
    else:
        pass
    for i in range(3):
        while x: x = x - 1; continue
    with a as b, c:
        try: return [t for t in y if t]
        except E as e: raise
        finally: del b
    match y:
        case [1, *r]: pass
'''


def corpus() -> list[cst.Module]:
    files = sorted((REPO / "dsv4_model").glob("*.py"))[:6]
    texts = [CRLF_AND_TABS, NO_TRAILING_NEWLINE, DECORATED_AND_NESTED] + [f.read_text("utf-8") for f in files]
    return [cst.parse_module(text) for text in texts]


def test_ranges_match_position_provider():
    rng = random.Random(0)
    for module in corpus():
        expected = MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider)
        nodes = list(iter_code(module))
        # Alone (the generation stops early), a few at random, the last ones, and all at once.
        samples = [[node] for node in nodes[:: max(1, len(nodes) // 50)]]
        samples += [rng.sample(nodes, min(7, len(nodes))), nodes[-3:], nodes]
        for sample in samples:
            got = positions(module, sample)
            for node in sample:
                assert got[node] == expected[node], (type(node).__name__, got[node], expected[node])


def test_nothing_asked_nothing_generated():
    assert positions(cst.parse_module("x = 1\n"), []) == {}
