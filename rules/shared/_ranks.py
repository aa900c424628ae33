"""What rank a tensor has, as the code that made it says: a full reduction is 0-dim, an
element of a `nonzero()` row one dimension less (ScalarTensorIndex, GL110, reads it)."""
from __future__ import annotations

from graphlint.lazy import cst

from graphlint.analysis import catalog
from graphlint.analysis.children import iter_code

# Full reductions (no dim): a 0-dim result. Ops whose result is 1-dim, and 2-dim (`nonzero()`).
_REDUCTIONS = catalog.names("rank", "full_reductions")
_ONE_DIM = catalog.names("rank", "one_dim")
_ROWS_OF_ONE_DIM = catalog.names("rank", "rows")


def _rank(node: cst.BaseExpression, ranks: dict[str, int]) -> int | None:
    """The rank an expression has when the code says so (None: not known)."""
    if isinstance(node, cst.Name):
        return ranks.get(node.value)
    if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute):
        method = node.func.attr.value
        keywords = {a.keyword.value for a in node.args if a.keyword is not None}
        positional_args = [a for a in node.args if a.keyword is None]
        if method in _REDUCTIONS and not positional_args and not keywords & {"dim", "axis"}:
            return 0
        if method in _ONE_DIM and not positional_args:
            return 1
        if method in _ROWS_OF_ONE_DIM and not keywords:
            return 2
        if method == "view" and len(positional_args) == 1 and isinstance(positional_args[0].value, (cst.Integer, cst.UnaryOperation)):
            return 1
        return None
    if isinstance(node, cst.Subscript) and len(node.slice) == 1 and isinstance(node.slice[0].slice, cst.Index):
        inner = _rank(node.value, ranks)
        index = node.slice[0].slice.value
        if inner is not None and inner >= 1 and isinstance(index, (cst.Integer, cst.UnaryOperation)):
            return inner - 1  # an element of a row: one dimension less
    return None


def scalar_tensors(function: cst.FunctionDef) -> frozenset[str]:
    """Locals that hold a 0-dim tensor, in order of the function's statements (a name rebound
    to something else stops being one)."""
    ranks: dict[str, int] = {}
    # Pre-order is source order; nested definitions and assignments are not entered.
    for node in iter_code(function.body, skip=(cst.FunctionDef, cst.ClassDef, cst.Lambda, cst.Assign)):
        kind = type(node)  # never subclassed: identity, not isinstance
        if kind is cst.For and isinstance(node.target, cst.Name):
            outer = _rank(node.iter, ranks)
            if outer is not None and outer >= 1:
                ranks[node.target.value] = outer - 1
        elif kind is cst.Assign and len(node.targets) == 1 and isinstance(node.targets[0].target, cst.Name):
            rank = _rank(node.value, ranks)
            name = node.targets[0].target.value
            if rank is None:
                ranks.pop(name, None)
            else:
                ranks[name] = rank
    return frozenset(name for name, rank in ranks.items() if rank == 0)
