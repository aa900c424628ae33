"""What the inference knows beyond one expression: per file (`ModuleFacts`: imports, classes
and what their methods assign, module-level host constants, function names), per function
(`FunctionFacts`: the Value of every expression, the per-step values by dataflow) and from the
rest of the linted code (`ExternalFacts`, joined over the project)."""
from __future__ import annotations

from dataclasses import dataclass

from graphlint.lazy import cst

from graphlint.analysis.inference.annotation_kinds import MODULE_BASES
from graphlint.analysis.inference.lattice import V_HOST, V_UNKNOWN, Value, join
from graphlint.analysis.inference.syntax import is_literal
from graphlint.analysis.names import ImportMap


class ClassInfo:
    """What the methods of one class assign to `self.<attr>`, joined over the class."""

    def __init__(self, name: str, bases: list[str]):
        self.name = name
        self.bases = bases
        self.attrs: dict[str, Value] = {}
        self.is_module = False
        # Host attributes a method advances (`self.offset += n`): they change every call.
        self.advanced: set[str] = set()

    def assign(self, attr: str, value: Value) -> None:
        old = self.attrs.get(attr)
        self.attrs[attr] = value if old is None else join(old, value)


class ModuleFacts:
    """Per-file facts the inference needs: imports, classes, module-level host constants."""

    def __init__(self, module: cst.Module, imports: ImportMap):
        self.imports = imports
        self.classes: dict[str, ClassInfo] = {}
        self.constants: dict[str, Value] = {}
        self.functions: set[str] = set()
        for stmt in module.body:
            if isinstance(stmt, cst.SimpleStatementLine):
                for small in stmt.body:
                    if isinstance(small, cst.Assign) and len(small.targets) == 1:
                        target = small.targets[0].target
                        if isinstance(target, cst.Name) and is_literal(small.value):
                            self.constants[target.value] = V_HOST
            elif isinstance(stmt, cst.FunctionDef):
                self.functions.add(stmt.name.value)

    def class_is_module(self, name: str, seen: frozenset[str] = frozenset()) -> bool:
        info = self.classes.get(name)
        if info is None or name in seen:
            return False
        for base in info.bases:
            short = base.rsplit(".", 1)[-1]
            if short in MODULE_BASES:
                return True
            if self.class_is_module(short, seen | {name}):
                return True
        return False

    def lineage(self, name: str, seen: frozenset[str] = frozenset()) -> list[str]:
        """The class and its same-file bases, by name (each once, a cycle cut)."""
        info = self.classes.get(name)
        if info is None or name in seen:
            return []
        found = [name]
        for base in info.bases:
            found += [c for c in self.lineage(base.rsplit(".", 1)[-1], seen | {name}) if c not in found]
        return found

    def class_advanced(self, name: str) -> set[str]:
        return set().union(*(self.classes[c].advanced for c in self.lineage(name)))

    def class_attrs(self, name: str, seen: frozenset[str] = frozenset()) -> dict[str, Value]:
        """Attributes of a class and of its same-file bases (a subclass's own assignment wins)."""
        info = self.classes.get(name)
        if info is None or name in seen:
            return {}
        merged: dict[str, Value] = {}
        for base in info.bases:
            merged.update(self.class_attrs(base.rsplit(".", 1)[-1], seen | {name}))
        merged.update(info.attrs)
        return merged


class FunctionFacts:
    """The inferred Value of every expression node of one function body, by node identity."""

    def __init__(self) -> None:
        self.values: dict[int, Value] = {}
        # Names assigned before entering each loop, to spot loop-carried cache growth.
        self.loop_depth = 0
        # Per-step Python values by dataflow: parameters that a caller's loop advances between
        # calls, and `self` attributes the class advances with an augmented assignment.
        self.per_step_params: set[str] = set()
        self.per_step_attrs: set[str] = set()
        self.per_step_param_attrs: set[str] = set()  # `param.<attr>` a caller's loop advances
        self.per_step_names: set[str] = set()  # parameters named as a per-step value elsewhere

    def of(self, node: cst.CSTNode) -> Value:
        return self.values.get(id(node), V_UNKNOWN)


@dataclass
class ExternalFacts:
    """What other functions of the linted code say about this file (graphlint.callgraph.
    summaries joins them): parameter kinds from every call site, return kinds of callees by
    callee key, attribute kinds inherited from classes in other files."""

    params: dict[str, dict[str, str]]  # function qualname -> parameter -> kind code
    returns: dict[str, str]  # callee key (see Inference.callee_key) -> kind code
    attrs: dict[str, dict[str, str]]  # class name -> attribute -> kind code
    steps: dict[str, list[str]] = None  # function qualname -> parameters a caller's loop advances
    step_names: list[str] = None  # parameter names some caller's loop advances, project-wide
    step_attrs: list[str] = None  # attributes of passed objects some loop advances, project-wide

    @classmethod
    def from_dict(cls, data: dict | None) -> "ExternalFacts | None":
        if not data:
            return None
        return cls(data.get("params", {}), data.get("returns", {}), data.get("attrs", {}), data.get("steps", {}),
                   data.get("step_names", []), data.get("step_attrs", []))
