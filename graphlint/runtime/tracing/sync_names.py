"""How a sync debug mode warning seen on CUDA is named: its kind, op and reason, from the Python call
and the aten op it happened in (the interceptor's record of what was running)."""
from __future__ import annotations

import torch

from graphlint.runtime.tracing import op_catalog

COPY_OPS = frozenset({"aten.copy_", "aten._to_copy", "aten._copy_from", "aten.to"})


def name_sync(py_call: str | None, entry: tuple | None) -> tuple[str, str, str]:
    """(kind, op, reason) of a sync seen on CUDA, from the Python call and the aten op
    (`on_op`'s entry) it happened in: the Python-level name wins, copies are named by direction."""
    kind, op, reason = "sync", "unknown", ""
    packet = None
    if entry is not None:
        packet, args, _site, rule, op = entry
        kind = rule.kind if rule is not None and packet not in COPY_OPS else classify_warning(packet, args)
        reason = rule.reason if rule is not None else ""
    if py_call is not None:
        rule = op_catalog.PY_RULES_BY_NAME.get(py_call)
        if rule is not None:
            reason = rule.reason
            if packet not in COPY_OPS:
                kind = rule.kind
        op = py_call
    return kind, op, reason


def classify_warning(packet: str, args) -> str:
    """The event kind of a sync debug mode warning raised inside aten op `packet` (CUDA)."""
    if packet in COPY_OPS:
        ts = [a for a in args if isinstance(a, torch.Tensor)]
        if packet == "aten.copy_" and len(ts) >= 2:
            dst, src = ts[0], ts[1]
            return "h2d-copy" if src.device.type == "cpu" else "d2h-copy" if dst.device.type == "cpu" else "sync"
        return "h2d-copy" if ts and ts[0].device.type == "cpu" else "d2h-copy"
    rules = op_catalog.OP_RULES_BY_NAME.get(packet)
    return rules[0].kind if rules else "sync"
