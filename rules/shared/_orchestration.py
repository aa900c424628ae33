"""What a function does with graphs, streams and devices, from one scan of its body: shared by
the GL5xx rules (computed once per function) with the small helpers they use to read it."""
from __future__ import annotations

from typing import Iterator

from graphlint.lazy import cst

from graphlint.analysis import catalog
from graphlint.analysis.capture_sites import capture_context, replay_call
from graphlint.analysis.children import iter_scope
from graphlint.analysis.names import dotted
from graphlint.analysis.walk.rule import Context
from ._calls import method_name
from ._devices import DeviceEvidence

SYNCHRONIZE = catalog.names("synchronize", "functions")
GRAPH_CONTEXTS = catalog.names("graphs", "capture_contexts")
_STREAM_CONTEXTS = catalog.names("graphs", "stream_contexts") | GRAPH_CONTEXTS
_GRAPH_CLASS = catalog.names("graphs", "graph_class")
# The class's own name, as an annotation spells it (`g: CUDAGraph`, `torch.cuda.CUDAGraph`).
_GRAPH_CLASS_NAMES = tuple(sorted({name.rsplit(".", 1)[-1] for name in _GRAPH_CLASS}))
_CAPTURE_METHODS = catalog.names("graphs", "capture_methods")
REPLAY_METHODS = catalog.names("graphs", "replay_methods")


class Orchestration:
    """Whether the function captures or replays a graph, which names hold graphs, and the
    evidence (or none) that it handles several devices."""

    def __init__(self, function: cst.FunctionDef, ctx: Context):
        self.function = function
        self.captures = False  # torch.cuda.graph(...) or CUDAGraph.capture_begin
        self.replays: list[cst.Call] = []
        self.graph_names: set[str] = set()  # locals or attributes that hold a CUDAGraph
        params = function.params
        for param in list(params.params) + list(params.kwonly_params) + list(params.posonly_params):
            if param.annotation is not None and (dotted(param.annotation.annotation) or "").endswith(_GRAPH_CLASS_NAMES):
                self.graph_names.add(param.name.value)
        for node in walk(function.body):
            if isinstance(node, cst.Assign) and isinstance(node.value, cst.Call) \
                    and ctx.qualified(node.value.func) in _GRAPH_CLASS:
                for target in node.targets:
                    name = dotted(target.target)
                    if name:
                        self.graph_names.add(name)
            elif isinstance(node, cst.Call):
                if capture_context(node, ctx.qualified(node.func)) or method_name(node) in _CAPTURE_METHODS:
                    self.captures = True
                elif replay_call(node, by_name=False):
                    self.replays.append(node)
        self.devices = DeviceEvidence(function, ctx)

    @property
    def multi_device(self) -> bool:
        return self.devices.multi

    @property
    def orchestrates(self) -> bool:
        return self.captures or bool(self.replays)


_FACTS: dict[int, tuple[cst.FunctionDef, Orchestration]] = {}


def orchestration(ctx: Context) -> Orchestration | None:
    function = ctx.parents[0] if ctx.parents and isinstance(ctx.parents[0], cst.FunctionDef) else None
    if function is None:
        return None
    cached = _FACTS.get(id(function))
    if cached is not None and cached[0] is function:
        return cached[1]
    if len(_FACTS) > 64:
        _FACTS.clear()
    facts = Orchestration(function, ctx)
    _FACTS[id(function)] = (function, facts)
    return facts


def with_evidence(message: str, facts: Orchestration) -> str:
    """The message with the multi-device evidence it rests on."""
    return f"{message} (several devices: {facts.devices.reason})"


def walk(node: cst.CSTNode) -> Iterator[cst.CSTNode]:
    """Every node under `node` in source order, not entering nested functions or classes."""
    return iter_scope(node)


def in_stream_context(ctx: Context) -> bool:
    for parent in ctx.parents:
        if isinstance(parent, cst.With):
            for item in parent.items:
                if isinstance(item.item, cst.Call) and (ctx.qualified(item.item.func) in _STREAM_CONTEXTS
                                                        or capture_context(item.item, ctx.qualified(item.item.func))):
                    return True
    return False


def graph_call(node: cst.Call, ctx: Context) -> bool:
    return capture_context(node, ctx.qualified(node.func))
