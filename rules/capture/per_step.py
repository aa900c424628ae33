"""Which values of a function change every decode step, for the GL5xx rules that judge what a
capture freezes (GL508, GL511): local names and parameters named like a decode position or a
counter, those a caller's loop advances, `self` attributes the class advances, attributes of
passed objects the project's loops advance, and the local arithmetic on any of them."""
from __future__ import annotations

from graphlint.lazy import cst

from graphlint.analysis import catalog
from graphlint.analysis.children import code_children
from graphlint.analysis.inference.annotation_kinds import annotation_value
from graphlint.analysis.inference.lattice import DEVICE, HOST, HOST_TENSOR, MODULE
from graphlint.analysis.names import dotted
from graphlint.analysis.walk.rule import Context
from ..shared._orchestration import walk as _walk

# Names that hold a value which changes every decode step (the reference port's red scalars: pos0,
# raw_row, n_raw, raw_start, n_comp, emit counters, token ids). `pos` and `position` are
# also common names for device tensors, so they count only when annotated as host scalars.
PER_STEP_NAMES = frozenset({
    "start_pos", "cur_pos", "step", "step_idx", "cur_step", "decode_step", "token_id", "tid",
    "next_token", "n_comp", "kv_len", "past_len", "past_length",
    "past_key_values_length", "cache_len", "cache_length", "raw_row", "n_raw", "raw_start", "pos0",
    "emit", "index_row", "num_tokens_so_far",
})
_ANNOTATED_ONLY = frozenset({"pos", "position", "cur_position"})
_META = catalog.names("tensor", "shape_metadata")
_ARITHMETIC = frozenset({"min", "max", "abs", "int", "float", "round", "divmod", "pow"})


def per_step_names(function: cst.FunctionDef, ctx: Context, by_name: bool = False) -> tuple[set[str], bool]:
    """The function's per-step local names, and whether anything per-step (a name or a
    `self.<per-step attribute>`) appears in it at all; `by_name`: from names alone, without
    the dataflow facts. Computed once per function and `by_name`: several rules ask."""
    key = ("per_step_names", id(function), by_name)
    known = ctx.memo.get(key)
    if known is None:
        known = ctx.memo[key] = _per_step_names(function, ctx, by_name)
    return known


def _per_step_names(function: cst.FunctionDef, ctx: Context, by_name: bool) -> tuple[set[str], bool]:
    names: set[str] = set()
    params = function.params
    for param in list(params.posonly_params) + list(params.params) + list(params.kwonly_params):
        name = param.name.value
        kind = annotation_value(param.annotation.annotation, ctx.imports).kind if param.annotation else None
        if kind in (DEVICE, HOST_TENSOR, MODULE):
            continue
        if (name in PER_STEP_NAMES or (name in _ANNOTATED_ONLY and kind == HOST)
                or name in getattr(ctx.facts, "per_step_names", ())):
            names.add(name)
        elif not by_name and name in getattr(ctx.facts, "per_step_params", ()):
            names.add(name)  # a caller's loop advances it between calls
    assignments = []
    self_attrs = False
    assignment_types = (cst.Assign, cst.AugAssign, cst.AnnAssign)
    for node in _walk(function.body):
        kind = type(node)  # libcst's node classes are final: `is` tests, not isinstance
        if kind in assignment_types:
            assignments.append(node)
        elif kind is not cst.Attribute:
            continue
        elif type(node.value) is cst.Name and node.value.value == "self" \
                and (_per_step_attr(node.attr.value, ctx, by_name) or node.attr.value in _ANNOTATED_ONLY):
            self_attrs = True
        elif not by_name and _advanced_object_attr(node, ctx):
            self_attrs = True
    # Local arithmetic on a per-step value is per-step too (`end_pos = start_pos + 1`); two
    # passes let loop-carried assignments settle.
    for _ in range(2 if names or self_attrs else 0):
        for assign in assignments:
            value = assign.value
            if value is None or ctx.value(value).kind in (DEVICE, HOST_TENSOR, MODULE):
                continue
            if not mentions(value, names, ctx, by_name):
                continue
            targets = [t.target for t in assign.targets] if isinstance(assign, cst.Assign) else [assign.target]
            for target in targets:
                parts = [e.value for e in target.elements] if isinstance(target, (cst.Tuple, cst.List)) else [target]
                for inner in parts:
                    if isinstance(inner, cst.Name):
                        names.add(inner.value)
    return names, bool(names) or self_attrs


def _per_step_attr(attr: str, ctx: Context, by_name: bool = False) -> bool:
    """A `self` attribute named like a position, or one the class advances itself."""
    return attr in PER_STEP_NAMES or (not by_name and attr in getattr(ctx.facts, "per_step_attrs", ()))


def _per_step_attribute(node: cst.Attribute, ctx: Context, by_name: bool = False) -> bool:
    """`self.start_pos` or an attribute the class advances (no tensor either), or `self.pos`
    known to hold a Python scalar (the class assigns it host values only), as a parameter
    `pos: int` is."""
    kind = ctx.value(node).kind
    if _per_step_attr(node.attr.value, ctx, by_name):
        return kind not in (DEVICE, HOST_TENSOR, MODULE)
    return node.attr.value in _ANNOTATED_ONLY and kind == HOST


def _advanced_object_attr(node: cst.Attribute, ctx: Context) -> bool:
    """`inference_params.seqlen_offset`: an attribute of a passed object that a loop of the
    project advances between steps (graphlint.callgraph.project_summaries learns them), holding no tensor."""
    return (isinstance(node.value, cst.Name) and node.value.value != "self"
            and node.attr.value in getattr(ctx.facts, "per_step_param_attrs", ())
            and ctx.value(node).kind not in (DEVICE, HOST_TENSOR, MODULE))


def mentions(node: cst.CSTNode, names: set[str], ctx: Context, by_name: bool = False) -> bool:
    """Whether a per-step value flows into `node` through arithmetic (not through shapes,
    metadata or the result of a function, which may well be a tensor)."""
    if isinstance(node, cst.Name):
        return node.value in names
    if isinstance(node, cst.Attribute):
        if node.attr.value in _META:
            return False
        if isinstance(node.value, cst.Name) and node.value.value == "self":
            return _per_step_attribute(node, ctx, by_name)
        if not by_name and _advanced_object_attr(node, ctx):
            return True
        return mentions(node.value, names, ctx, by_name)
    if isinstance(node, cst.Call):
        func = dotted(node.func) or ""
        if func in _ARITHMETIC or func.startswith("math."):
            return any(mentions(a.value, names, ctx, by_name) for a in node.args)
        return False
    if isinstance(node, (cst.Subscript, cst.Lambda, cst.BaseComp)):
        return False  # an element of something is not the per-step scalar itself
    return any(mentions(child, names, ctx, by_name) for child in code_children(node))
