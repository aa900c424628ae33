"""Predict what a replay would get wrong by comparing the op traces of consecutive eager steps.

A CUDA graph replays the kernels of the one step it captured, with that step's arguments and
addresses. So any difference between the traces of step 0 and step k is a replay hazard:

- ``frozen-scalar``        a non-tensor argument differs (`buf.fill_(self.pos)`, a slice offset):
                           replay keeps the captured value;
- ``control-flow``         the ops themselves differ (a host branch or loop on a step-dependent
                           value): replay runs the captured branch;
- ``shape-varies``         a tensor shape differs (a growing cache): a graph has fixed shapes;
- ``stale-input``          an op reads a tensor the step did not create that is a different object
                           than at step 0 (prepare() rebinds an attribute instead of copying into the
                           static buffer): replay reads the old address;
- ``dynamic-output-shape`` the step's outputs change shape or come from a data-dependent-shape op;
- ``other-device``         ops run on tensors of another device (on CUDA: an empty or partial graph;
                           host work is not replayed at all).
"""
from __future__ import annotations

import difflib
import linecache
import os
import re
import types
from typing import Any

import torch

from graphlint.runtime import user_frames
from graphlint.runtime.tracing.intercept import StepTrace

MAX_PER_HAZARD = 20
_OPAQUE = (torch.Tensor, type, types.FunctionType, types.MethodType, types.ModuleType)

WHY = {
    "frozen-scalar": "a graph replays the value captured at capture time",
    "control-flow": "a graph replays the ops of the captured step only",
    "shape-varies": "a graph has the shapes of the captured step",
    "stale-input": "a graph reads the captured tensor's address; copy new inputs into the static buffer",
    "dynamic-output-shape": "a graph cannot produce outputs whose shape depends on the data",
    "other-device": "work outside the capturing device and stream is not captured (empty graph, stale replay)",
}


# What to do instead, per hazard (the `fix` of every hazard record).
FIX = {
    "frozen-scalar": "pass the value as a device tensor written in prepare() (buf.copy_ / buf.fill_ outside "
                     "the graph), not as a Python number inside the step",
    "control-flow": "branch on host-known values only; make data-dependent branches branchless (torch.where) "
                    "or capture one graph per branch",
    "shape-varies": "preallocate at the maximum size and mask (a static cache), or capture one graph per bucket",
    "stale-input": "copy new inputs into the static buffer in prepare() (buf.copy_(new)) instead of rebinding "
                   "the attribute",
    "dynamic-output-shape": "return fixed-shape outputs: pad to a static maximum and return a count or a mask",
    "other-device": "run the whole step on the capturing device: move the tensors there once, outside the step",
}


MAX_SYMPTOM_SITES = 8
BRANCH_LOOKBACK = 40  # lines searched upwards for the branch a control-flow root sits under
# How a folded group's root explains its symptoms.
GROUP_NOTE = {
    "frozen-scalar": "the same Python value reaches the other ops listed",
    "control-flow": "one host branch: the other divergences of this step follow from it",
}
FIRST_STEP_NOTE = ("only the first traced step takes this path (the later steps agree with each other): a "
                   "first-call path; capture after a warm-up step, or make the path the same on every step")


def _short(value: Any, limit: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


class _Collector:
    """Groups hazards by (hazard, op, path, line) and counts them."""

    def __init__(self):
        self.items: dict[tuple, dict] = {}
        self.per_kind: dict[str, int] = {}
        self.groups: dict[tuple, tuple] = {}  # record key -> (root group, position in the step)

    def add(self, hazard: str, op: str, site, detail: str, steps: list[int], device: str | None = None,
            group: tuple | None = None, order: int = 0):
        """One hazard at `site`; records of one `group` (one host branch, one Python value) are
        folded under the first of them by `fold_groups`."""
        where = user_frames.site_dict(site)
        # One record per line; only frozen scalars are told apart by op (each op freezes its own).
        key = (hazard, op if hazard == "frozen-scalar" else device, where["path"], where["line"])
        item = self.items.get(key)
        if item is not None:
            item["count"] += 1
            return
        if group is not None:
            self.groups[key] = (group, steps[-1], order)
        # Symptoms of a group beyond the cap are still counted by fold_groups.
        if self.per_kind.get(hazard, 0) >= MAX_PER_HAZARD and group is None:
            return
        self.per_kind[hazard] = self.per_kind.get(hazard, 0) + 1
        self.items[key] = {"hazard": hazard, "op": op, **where, "detail": f"{detail}; {WHY[hazard]}",
                           "explanation": WHY[hazard], "fix": FIX[hazard],
                           "steps": steps, "count": 1, **({"device": device} if device else {})}

    def fold(self, keys: list[tuple], note: str) -> None:
        """Keep the first record of `keys` (in step order) as the root; the others become its
        counted symptoms, their sites listed."""
        keys = [k for k in keys if k in self.items]
        if len(keys) < 2:
            return
        root = self.items[keys[0]]
        sites = root.setdefault("symptom_sites", [])
        for key in keys[1:]:
            symptom = self.items.pop(key)
            root["symptoms"] = root.get("symptoms", 0) + 1
            if len(sites) < MAX_SYMPTOM_SITES:
                sites.append(f"{symptom['hazard']} {symptom['op']} at {symptom['path']}:{symptom['line']}")
        root["detail"] = f"{root['detail']}; {note} ({root['symptoms']} symptom(s) folded in)"

    def fold_groups(self) -> None:
        by_group: dict[tuple, list] = {}
        for key, (group, step, order) in self.groups.items():
            by_group.setdefault(group, []).append((step, order, key))
        for group, members in by_group.items():
            keys = [key for _step, _order, key in sorted(members)]
            self.fold(keys, GROUP_NOTE[group[0]])


def compare(traces: list[StepTrace], target: Any = None) -> list[dict]:
    """Hazards found between `traces[0]` and each later trace (consecutive steps after reset)."""
    found = _Collector()
    usable = [t for t in traces if t.error is None]
    for trace in usable:
        for op, site, device in trace.other_device:
            found.add("other-device", op, site, f"{op} ran on {device}, not on the target's device", [trace.index],
                      device)
        for n, out in enumerate(trace.outputs):
            if out["dynamic"]:
                found.add("dynamic-output-shape", f"output[{n}]", out["site"],
                          f"output {n} comes from a data-dependent-shape op", [trace.index])
    if not usable:
        return list(found.items.values())
    base = usable[0]
    for trace in usable[1:]:
        _compare_pair(base, trace, usable[-1], target, found)
        shapes0 = [o["shape"] for o in base.outputs]
        shapes = [o["shape"] for o in trace.outputs]
        if shapes0 != shapes:
            changed = next((o for o, s0 in zip(trace.outputs, shapes0) if o["shape"] != s0), trace.outputs[0]
                           if trace.outputs else {"site": (None, 0)})
            found.add("dynamic-output-shape", "outputs", changed["site"],
                      f"output shapes {shapes0} at step {base.index}, {shapes} at step {trace.index}",
                      [base.index, trace.index])
    _fold_first_step(usable, target, found)
    found.fold_groups()
    for record in found.items.values():
        _at_branch(record)
    return sorted(found.items.values(), key=lambda h: (h["hazard"], h["path"], h["line"]))


def _fold_first_step(usable: list[StepTrace], target, found: _Collector) -> None:
    """Hazards seen only against step 0, when steps 1.. agree among themselves, are one path that the
    first step alone takes: one record at its root (the first branch), the rest its symptoms."""
    if len(usable) < 3:
        return
    later = _Collector()
    for trace in usable[2:]:
        _compare_pair(usable[1], trace, usable[-1], target, later)
    only_first = [key for key in found.items if key not in later.items and key[0] != "other-device"]
    if not only_first or any(key[0] == "control-flow" for key in later.items):
        return  # later steps branch among themselves too: step-dependent paths, reported as such
    order = {key: found.groups.get(key, (None, 0, 0))[1:] for key in only_first}
    branches = [k for k in only_first if k[0] == "control-flow"]
    root = min(branches or only_first, key=lambda k: order[k])
    rest = sorted((k for k in only_first if k != root), key=lambda k: order[k])
    for key in [root, *rest]:
        found.groups.pop(key, None)
    if rest:
        found.fold([root, *rest], FIRST_STEP_NOTE)
    else:
        found.items[root]["detail"] += f"; {FIRST_STEP_NOTE}"


def _made_in_step_constant(base: StepTrace, trace: StepTrace, key0: int, key1: int) -> bool:
    """Both steps read a tensor made from the same Python data inside the step (`torch.tensor([-1])`):
    the captured one holds the same value, so the new object is no stale input."""
    t0, t1 = base.external.get(key0), trace.external.get(key1)
    if t0 is None or t1 is None or t0.shape != t1.shape or t0.dtype != t1.dtype or t0.device != t1.device:
        return False
    made = key1 in trace.from_data and key0 in base.from_data
    try:
        return made and bool(torch.equal(t0, t1))
    except RuntimeError:
        return False


def _compare_pair(base: StepTrace, trace: StepTrace, last: StepTrace, target, found: _Collector) -> None:
    """Align the two op sequences (exactly, or by difflib when a branch ran other ops) and compare
    the aligned ops' arguments, shapes and external tensors; unaligned runs are control flow."""
    steps = [base.index, trace.index]
    names0 = [op[0] for op in base.ops]
    names1 = [op[0] for op in trace.ops]
    if names0 == names1:
        blocks = [("equal", 0, len(names0), 0, len(names1))]
    else:
        blocks = difflib.SequenceMatcher(None, names0, names1, autojunk=False).get_opcodes()
    for tag, i1, i2, j1, j2 in blocks:
        if tag != "equal":
            _diverged(base, trace, (i1, i2), (j1, j2), found)
            continue
        for i, j in zip(range(i1, i2), range(j1, j2)):
            a, b = base.ops[i], trace.ops[j]
            # When the tensors' shapes differ too, changed int arguments are sizes that follow
            # them (`expand(b, s, k, d)` after a growing k): one shape-varies hazard, not two.
            if a[1] != b[1] and a[2] == b[2]:
                # Ops that receive the same changed values take one Python value: one root.
                changed = tuple((x, y) for x, y in zip(a[1], b[1]) if x != y)
                found.add("frozen-scalar", b[0], b[4], _arg_diff(a[1], b[1], steps), steps,
                          group=("frozen-scalar", trace.index, _hashable(changed)), order=j)
            if a[2] != b[2]:
                found.add("shape-varies", b[0], b[4], _shape_diff(a[2], b[2], steps), steps, order=j)
            if a[3] != b[3]:
                keys0 = dict(a[3])
                for pos, key in b[3]:
                    if pos in keys0 and keys0[pos] != key:
                        if _made_in_step_constant(base, trace, keys0[pos], key):
                            continue
                        name = _attribute_name(target, _read_by(last, j, pos))
                        what = f"{name} is" if name else f"tensor argument {pos} is"
                        found.add("stale-input", b[0], b[4],
                                  f"{what} a different tensor at step {trace.index} than at step {base.index} "
                                  "(rebound by prepare() or by the step)", steps, order=j)


def _read_by(trace: StepTrace, j: int, pos: int):
    """The external tensor that op j read at argument `pos` in `trace`; the target still holds the
    last traced step's inputs, so that is where an attribute name can be found."""
    if j < len(trace.ops):
        key = dict(trace.ops[j][3]).get(pos)
        return trace.external.get(key)
    return None


def _diverged(base: StepTrace, trace: StepTrace, span0: tuple[int, int], span1: tuple[int, int],
              found: _Collector) -> None:
    def describe(t: StepTrace, span: tuple[int, int]) -> str:
        first, stop = span
        if first >= stop:
            return f"step {t.index} did not"
        op = t.ops[first]
        where = user_frames.site_dict(op[4])
        return f"step {t.index} ran {stop - first} op(s) from {op[0]} at {where['path']}:{where['line']}"

    at = trace.ops[span1[0]] if span1[0] < span1[1] else base.ops[span0[0]]
    site = at[4]
    if span0[0] < span0[1] and span1[0] < span1[1]:
        site = _choosing_frame(base.ops[span0[0]], at)
    found.add("control-flow", at[0], site, f"the ops differ: {describe(base, span0)}, {describe(trace, span1)}",
              [base.index, trace.index], group=("control-flow", trace.index), order=span1[0])


def _choosing_frame(first: tuple, other: tuple) -> tuple:
    """The frame of `other` where two steps' first differing ops part: the innermost function both
    stacks share, at `other`'s line there. Ops of two helpers that a caller's branch chose between
    (falcon_h1's conv update or full conv, in transformers 5.25) part at the caller's call line,
    under its `if`, not inside either helper."""
    if None in first[5] or None in other[5]:
        return other[4]  # a stack cut short cannot be lined up from its outermost frame
    chain0 = ((first[4],) + first[5])[::-1]
    chain1 = ((other[4],) + other[5])[::-1]
    for depth, (frame0, frame1) in enumerate(zip(chain0, chain1)):
        if frame0 == frame1:
            continue
        if frame0[0] is frame1[0] or depth == 0:
            return frame1  # one function, two lines: the branch is in it
        return chain1[depth - 1]  # one call line, two callees: the choice is the caller's
    return other[4]


def _at_branch(record: dict) -> None:
    """A control-flow root is placed at the `if`/`for`/`while` its first differing op sits under
    (the op's own line kept as `op_line`)."""
    if record["hazard"] != "control-flow" or not record.get("path") or not record.get("line"):
        return
    path = record["path"] if os.path.isabs(record["path"]) else os.path.abspath(record["path"])
    text = linecache.getline(path, record["line"])
    indent = len(text) - len(text.lstrip())
    for line in range(record["line"] - 1, max(record["line"] - BRANCH_LOOKBACK, 0), -1):
        above = linecache.getline(path, line)
        stripped = above.lstrip()
        if not stripped or stripped.startswith("#"):
            continue
        if len(above) - len(stripped) < indent:
            if re.match(r"else\b", stripped):
                # The `else` arm's test is the `if` (or `elif`) it closes: place the record there.
                line = _opening_test(path, line, len(above) - len(stripped))
            if re.match(r"(if|elif|else|for|while)\b", stripped):
                record["op_line"], record["line"] = record["line"], line
                return
            if re.match(r"(def|class|with|try|except|finally|async)\b", stripped):
                return  # the enclosing block is not a branch: keep the op's line
            indent = len(above) - len(stripped)  # the op's line continues this statement


def _opening_test(path: str, else_line: int, indent: int) -> int:
    """The `if`/`elif`/`for`/`while` that the `else` at `else_line` closes (the `else` itself when
    it closes a `try` or lies beyond the lookback)."""
    for line in range(else_line - 1, max(else_line - BRANCH_LOOKBACK, 0), -1):
        text = linecache.getline(path, line)
        stripped = text.lstrip()
        if not stripped or stripped.startswith("#") or len(text) - len(stripped) > indent:
            continue
        if len(text) - len(stripped) < indent or not re.match(r"(if|elif|for|while)\b", stripped):
            return else_line
        return line
    return else_line


def _hashable(value):
    try:
        hash(value)
        return value
    except TypeError:
        return repr(value)


def _arg_diff(a: tuple, b: tuple, steps: list[int]) -> str:
    parts = []
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            parts.append(f"argument {i} is {_short(x)} at step {steps[0]}, {_short(y)} at step {steps[1]}")
    if len(a) != len(b):
        parts.append(f"{len(a)} arguments at step {steps[0]}, {len(b)} at step {steps[1]}")
    return "; ".join(parts[:3])


def _shape_diff(a: tuple, b: tuple, steps: list[int]) -> str:
    for x, y in zip(a, b):
        if x != y:
            return f"shape {list(x)} at step {steps[0]}, {list(y)} at step {steps[1]}"
    return f"{len(a)} tensors at step {steps[0]}, {len(b)} at step {steps[1]}"


def _attribute_name(target, tensor) -> str | None:
    """Which attribute of the target holds `tensor` (one level into containers and modules)."""
    if target is None or tensor is None:
        return None
    seen: set[int] = set()

    def search(obj, prefix: str, depth: int):
        if id(obj) in seen or depth > 2:
            return None
        seen.add(id(obj))
        if isinstance(obj, torch.nn.Module):
            for name, t in list(obj.named_buffers()) + list(obj.named_parameters()):
                if t is tensor:
                    return f"{prefix}.{name}"
        items = vars(obj).items() if hasattr(obj, "__dict__") else ()
        if isinstance(obj, dict):
            items = ((str(k), v) for k, v in obj.items())
        elif isinstance(obj, (list, tuple)):
            items = ((f"[{i}]", v) for i, v in enumerate(obj))
        for name, value in items:
            label = f"{prefix}{name}" if name.startswith("[") else f"{prefix}.{name}"
            if value is tensor:
                return label
            if isinstance(value, (dict, list, tuple, torch.nn.Module)) or (
                hasattr(value, "__dict__") and not isinstance(value, _OPAQUE)
            ):
                hit = search(value, label, depth + 1)
                if hit:
                    return hit
        return None

    return search(target, "target", 0)
