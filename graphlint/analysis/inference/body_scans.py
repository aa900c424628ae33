"""Scans of a function body before its walk: the names it uses as tensors, whether a loop drives
decode steps, and what a loop body advances (its locals, and attributes of objects passed in)."""
from __future__ import annotations

from graphlint.lazy import cst

from graphlint.analysis import catalog
from graphlint.analysis.children import iter_code
from graphlint.analysis.names import dotted

# Methods only tensors have (graphlint/data/torch_values.toml): a name used as their receiver
# is a tensor even without an annotation.
_TENSOR_ONLY_METHODS = catalog.names("tensor", "only_methods")


def tensor_evidence(body: cst.CSTNode) -> set[str]:
    """Names that the function uses as tensors: receivers of tensor-only methods."""
    names: set[str] = set()
    for node in iter_code(body, skip=(cst.FunctionDef,)):
        if type(node) is cst.Call:  # exact type: isinstance on libcst's ABC-based classes is slow
            func = node.func
            if (isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name)
                    and func.attr.value in _TENSOR_ONLY_METHODS):
                names.add(func.value.value)
    return names


def advanced_names(body: cst.BaseSuite) -> set[str]:
    """Locals a loop body advances: `n += k` or `n = n + k` (the name on both sides)."""
    names: set[str] = set()
    for node in iter_code(body, skip=(cst.FunctionDef, cst.ClassDef, cst.Lambda)):
        if type(node) is cst.AugAssign and isinstance(node.target, cst.Name):
            names.add(node.target.value)
        elif type(node) is cst.Assign and isinstance(node.value, cst.BinaryOperation):
            for target in node.targets:
                if isinstance(target.target, cst.Name) and any(
                        isinstance(n, cst.Name) and n.value == target.target.value
                        for n in (node.value.left, node.value.right)):
                    names.add(target.target.value)
    return names


def steps_loop(stmt: cst.For | cst.While) -> bool:
    """Whether a loop may drive decode steps: `while not done:`, `for _ in range(n)` (also
    through `tqdm(...)`, `itertools.count()`). A loop over the items of a collection (`for
    group in groups:`, `range(len(items))`) walks data inside one step: if the step is captured,
    its counters replay the same values, which the capture may freeze."""
    if isinstance(stmt, cst.While):
        return True
    iterable = stmt.iter
    while isinstance(iterable, cst.Call) and iterable.args and (dotted(iterable.func) or "").rsplit(".", 1)[-1] in (
            "tqdm", "trange", "track"):
        iterable = iterable.args[0].value
    if not isinstance(iterable, cst.Call):
        return False
    name = (dotted(iterable.func) or "").rsplit(".", 1)[-1]
    if name in ("count", "trange"):
        return True
    if name != "range":
        return False
    # `range(len(items))` walks items; `range(max_new_tokens)` steps.
    return not any(isinstance(a.value, cst.Call) and dotted(a.value.func) == "len" for a in iterable.args)


def advanced_object_attrs(body: cst.BaseSuite) -> set[str]:
    """Attributes of objects other than `self` that a loop body advances (`params.seqlen_offset
    += n`): the object is passed to the step, and the attribute changes between calls."""
    attrs: set[str] = set()
    for node in iter_code(body, skip=(cst.FunctionDef, cst.ClassDef, cst.Lambda)):
        if (type(node) is cst.AugAssign and isinstance(node.target, cst.Attribute)
                and isinstance(node.target.value, cst.Name) and node.target.value.value != "self"
                and isinstance(node.operator, (cst.AddAssign, cst.SubtractAssign))):
            attrs.add(node.target.attr.value)
    return attrs
