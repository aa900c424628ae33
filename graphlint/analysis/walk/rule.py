"""The rule base class and the context a rule sees while visiting one function.

A rule is its own specification (as in Fixit): its docstring is the user documentation in
four parts, MESSAGE and FIX are what the report says, and VALID / INVALID are code examples
that tests/test_rule_examples.py runs for every rule. A rule asks the shared analysis
(`ctx.value`, `ctx.qualified`) instead of re-deriving what a name holds.
"""
from __future__ import annotations

import inspect
import textwrap
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from graphlint.lazy import cst

if TYPE_CHECKING:
    from graphlint.analysis.inference.facts import FunctionFacts
    from graphlint.analysis.inference.lattice import Value
    from graphlint.analysis.names import ImportMap

FAMILIES = {
    "1": "sync",
    "2": "host-control-flow",
    "3": "dynamic-shape",
    "4": "allocation",
    "5": "capture-hygiene",
    "9": "graphlint",
}


@dataclass(frozen=True)
class Example:
    """A rule example; `expect` is how many findings of this rule an INVALID example yields."""

    code: str
    expect: int = 1


class Rule:
    """Base class. Subclasses set the ClassVars and define `visit_<NodeType>(node, ctx)`."""

    code: ClassVar[str]
    name: ClassVar[str]
    severity: ClassVar[str] = "error"
    message: ClassVar[str]
    fix: ClassVar[str]
    # Capture-only rules matter inside the graph, not in an eager break (syncs matter in both).
    capture_only: ClassVar[bool] = False
    # A hazard of eager ops that stream capture records (a host-to-device copy, a Python scalar
    # written into an element): where only torch.compile captures, Dynamo traces the op and
    # Inductor lowers the host constant into the graph (bench/probes/compile_constants.py: no
    # sync, no cudagraph skip, right results on an H200), so these hold only under stream capture.
    stream_capture_only: ClassVar[bool] = False
    # Off unless selected by code, prefix or ALL (as ruff's RUF100 is): rules about the run
    # itself, and opt-in rules that report what is no hazard (GL405's intermediates).
    default_enabled: ClassVar[bool] = True
    VALID: ClassVar[list[str]] = []
    INVALID: ClassVar[list[str | Example]] = []

    @classmethod
    def family(cls) -> str:
        return FAMILIES[cls.code[2]]

    @classmethod
    def docs(cls) -> str:
        return textwrap.dedent(inspect.getdoc(cls) or "").strip()

    @classmethod
    def summary(cls) -> str:
        """The docs' first paragraph as one line (a sentence may wrap in the docstring)."""
        docs = cls.docs()
        if not docs:
            return cls.message
        return " ".join(docs.split("\n\n", 1)[0].split())


@dataclass
class RawFinding:
    """A finding before positions and regions are attached (nodes are resolved per file)."""

    rule: type[Rule]
    node: cst.CSTNode
    statement: cst.CSTNode | None
    function: str
    message: str
    fix: str
    zone: str | None = None  # one of analysis.capture_sites.NOT_CAPTURED_KINDS, or "capture-block"
    # A finding whose verdict depends on the region: "returned" (a hazard only where the
    # function is its region's root, see engine/finalize).
    escape: str | None = None
    # (name, "N" | "V"): the None tests the finding's code runs under (analysis.arm_guards).
    guards: tuple = ()


class Context:
    """What a rule may ask while the walker is inside one function."""

    def __init__(self, function: str, facts: "FunctionFacts", imports: "ImportMap", sink: list[RawFinding]):
        self.function = function
        # The functions this one is defined in, outermost first (a closure's; not its class's).
        self.enclosing: tuple[str, ...] = ()
        self.facts = facts
        self.imports = imports
        self._sink = sink
        self.statement: cst.CSTNode | None = None
        self.parents: list[cst.CSTNode] = []
        # Names bound before the innermost loop began: `x = cat([x, y])` on them grows per step.
        self.loop_depth = 0
        # Set while the walk is inside a one-time branch or a `with torch.cuda.graph` body.
        self.zone: str | None = None
        # The tests the walk is under (`if mask is not None:` ...): graphlint.analysis.arm_guards.
        self.guards: tuple = ()
        # id of a capture site's node -> the guards it sits under (filled as the walk meets it).
        self.site_guards: dict[int, tuple] | None = None
        # Parameters the function binds again somewhere, and those the walk has seen rebound.
        self.rebindable: frozenset[str] = frozenset()
        self.rebound: set[str] = set()
        # What one rule derives from the whole function and another reuses (per_step_names).
        self.memo: dict[Any, Any] = {}

    def value(self, node: cst.CSTNode) -> "Value":
        return self.facts.of(node)

    def qualified(self, node: cst.BaseExpression) -> str | None:
        return self.imports.resolve(node)

    def report(self, rule: type[Rule] | Rule, node: cst.CSTNode, message: str | None = None, fix: str | None = None,
               escape: str | None = None) -> None:
        cls = rule if isinstance(rule, type) else type(rule)
        self._sink.append(RawFinding(cls, node, self.statement, self.function,
                                     message or cls.message, fix or cls.fix, self.zone, escape, self.guards))

    @property
    def parent(self) -> cst.CSTNode | None:
        return self.parents[-1] if self.parents else None
