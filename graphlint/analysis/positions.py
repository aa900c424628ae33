"""Source ranges of a few nodes of a libcst tree: the ranges libcst's PositionProvider gives
(the syntactic ones), at a fraction of its cost.

PositionProvider regenerates the whole file and records a range for every node; a finding
needs a handful. Here the same code generation runs, but only the wanted nodes (and the
nodes their ranges are hoisted from) are recorded, and it stops once the last one is known.
tests/test_positions.py checks the result against PositionProvider node for node.
"""
from __future__ import annotations

import re
from contextlib import contextmanager, nullcontext
from typing import Iterable, Iterator

import libcst as cst
from libcst.metadata import CodePosition, CodeRange, MetadataWrapper, PositionProvider

try:  # the code generator's state is not public API; without it, use PositionProvider
    from libcst._nodes.internal import CodegenState
except ImportError:  # pragma: no cover - depends on the installed libcst
    CodegenState = None  # type: ignore[assignment,misc]

_NEWLINE = re.compile(r"\r\n?|\n")
_NOTHING = nullcontext()


class _Done(Exception):
    """Every wanted range is known: the rest of the file need not be generated."""


if CodegenState is not None:

    class _RecordingState(CodegenState):  # type: ignore[misc,valid-type]
        """Code generation that tracks line/column and records ranges of wanted nodes only."""

        def __init__(self, module: cst.Module, wanted: Iterable[cst.CSTNode]):
            super().__init__(default_indent=module.default_indent, default_newline=module.default_newline)
            self.line = 1
            self.column = 0
            self.counted = 0  # tokens already folded into line and column
            # Keyed by id(): CSTNode.__hash__ is a Python function, and this asks for every node.
            self.wanted = {id(node) for node in wanted}
            self.pending = len(self.wanted)
            self.starts: dict[int, CodePosition] = {}
            self.found: dict[int, CodeRange] = {}

        def here(self) -> CodePosition:
            """The position after the tokens generated so far. Tokens are folded in only when a
            wanted node asks, not one call per token (most of the file is no wanted node)."""
            tokens = self.tokens
            if self.counted < len(tokens):
                chunk = "".join(tokens[self.counted:])
                if "\r" in chunk:  # token by token: "\r" + "\n" across two tokens is two breaks
                    for token in tokens[self.counted:]:
                        self._advance(token)
                elif "\n" in chunk:
                    self.line += chunk.count("\n")
                    self.column = len(chunk) - chunk.rfind("\n") - 1
                else:
                    self.column += len(chunk)
                self.counted = len(tokens)
            return CodePosition(self.line, self.column)

        def _advance(self, value: str) -> None:
            if "\n" in value or "\r" in value:
                segments = _NEWLINE.split(value)
                self.line += len(segments) - 1
                self.column = len(segments[-1])
            else:
                self.column += len(value)

        def before_codegen(self, node: cst.CSTNode) -> None:
            if id(node) in self.wanted:
                self.starts[id(node)] = self.here()

        def after_codegen(self, node: cst.CSTNode) -> None:
            key = id(node)
            if key not in self.wanted:
                return
            start = self.starts.pop(key)
            if key not in self.found:  # a node without a syntactic range keeps its full one
                self.found[key] = CodeRange(start, self.here())
            self.pending -= 1
            if self.pending <= 0:
                raise _Done

        def _want(self, node: cst.CSTNode | None) -> None:
            if node is not None and id(node) not in self.wanted:
                self.wanted.add(id(node))
                self.pending += 1

        def record_syntactic_position(self, node: cst.CSTNode, *, start_node: cst.CSTNode | None = None,
                                      end_node: cst.CSTNode | None = None):  # type: ignore[override]
            if id(node) not in self.wanted:
                return _NOTHING
            # The range may be hoisted from descendants generated inside this block.
            self._want(start_node)
            self._want(end_node)
            return self._record(node, start_node, end_node)

        @contextmanager
        def _record(self, node: cst.CSTNode, start_node: cst.CSTNode | None,
                    end_node: cst.CSTNode | None) -> Iterator[None]:
            start = self.here()
            yield
            end = self.here()
            if start_node is not None:
                start = self.found[id(start_node)].start
            if end_node is not None:
                end = self.found[id(end_node)].end
            self.found[id(node)] = CodeRange(start, end)


def positions(module: cst.Module, nodes: Iterable[cst.CSTNode]) -> dict[cst.CSTNode, CodeRange]:
    """The PositionProvider range of each node in `nodes` (all must belong to `module`)."""
    wanted = [node for node in nodes if node is not None]
    if not wanted:
        return {}
    if CodegenState is None:  # pragma: no cover
        return dict(MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider))
    state = _RecordingState(module, wanted)
    try:
        module._codegen(state)
    except _Done:
        pass
    return {node: state.found[id(node)] for node in wanted if id(node) in state.found}
