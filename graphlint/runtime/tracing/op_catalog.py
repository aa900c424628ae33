"""What the runtime harness flags, as data: aten ops and Python-level tensor calls that would sync,
read a device value on the host, copy between host and device, or have a data-dependent shape on CUDA.

Each entry carries its event kind, the reason shown to the user, an optional argument condition
(evaluated in `intercept.py`), where the behaviour was checked and what to use instead (`FIXES`, or the
kind's default in `KIND_FIX`). Sources: RUNTIME_NOTES.md §1/§5 and its H200 table (torch 2.11.0+cu130);
CPU dispatch traces on torch 2.13.0+cpu. Ops that sync on CUDA although their CPU run shows nothing
(`aten._grouped_mm`) come from graphlint/data/cuda_sync_ops.toml, read through `graphlint.analysis.catalog`.

Event kinds (the `kind` of every `runtime.sync_events` record):

- ``sync``          an explicit or internal synchronisation that reads nothing back
                    (`torch.cuda.synchronize()`, `Event.synchronize()`, `torch.mode`).
- ``host-read``     a device value is read on the host: `.item()`, `bool()/int()/float()`, `if t:`,
                    f-strings, `print`, `torch.equal`, `histc` with default bounds.
- ``dynamic-shape`` the output's shape depends on the data, so the host must learn it:
                    `nonzero`, boolean-mask indexing, `unique`, `bincount`, `repeat_interleave` without
                    `output_size`, `masked_select`, one-argument `torch.where`.
- ``d2h-copy``      device-to-host copy: `.cpu()`, `.tolist()`, `.numpy()`, `.to("cpu")`.
- ``h2d-copy``      host-to-device copy of host data inside the step: `torch.tensor(list, device=...)`,
                    a Python scalar written into one element, a pageable `non_blocking=True` copy.
"""
from __future__ import annotations

from dataclasses import dataclass

from graphlint.analysis import catalog as data_catalog

KINDS = ("sync", "host-read", "dynamic-shape", "d2h-copy", "h2d-copy")

CHECKED_H200 = "seen on H200, torch 2.11.0+cu130 (RUNTIME_NOTES)"
CHECKED_CODE = "read in torch source (RUNTIME_NOTES §1)"
CHECKED_CPU = "dispatch trace, torch 2.13.0+cpu"


@dataclass(frozen=True)
class OpRule:
    """An aten op (overload packet name, e.g. `aten.nonzero`) that is flagged when `when` holds."""

    op: str
    kind: str
    reason: str
    checked: str
    when: str = "always"  # a condition name understood by intercept.py
    dtypes: tuple[str, ...] = ()  # for when="dtype": the first tensor argument's dtypes that fire


# aten ops, matched on the overload packet (`aten.index_put_` matches `.default` too).
OP_RULES: tuple[OpRule, ...] = (
    OpRule("aten._local_scalar_dense", "host-read",
           "reads a device value on the host (.item(), int(), float(), bool(), `if tensor:`, a tensor "
           "used as a Python number or index)", CHECKED_H200),
    OpRule("aten.nonzero", "dynamic-shape",
           "nonzero has a data-dependent output shape; the host waits for the count "
           "(use nonzero_static or a mask)", CHECKED_H200),
    OpRule("aten.argwhere", "dynamic-shape", "argwhere is nonzero: data-dependent output shape", CHECKED_CODE),
    OpRule("aten.nonzero_numpy", "dynamic-shape", "nonzero(as_tuple=True) has a data-dependent output shape",
           CHECKED_CODE),
    # Under inference_mode the composite ops reach the dispatch mode whole, not decomposed.
    OpRule("aten.where", "dynamic-shape",
           "one-argument torch.where(cond) is nonzero: data-dependent output shape "
           "(use torch.where(cond, x, y))", CHECKED_H200, when="one_arg_where"),
    OpRule("aten.item", "host-read", ".item() reads a device value on the host", CHECKED_CPU),
    OpRule("aten.masked_select", "dynamic-shape",
           "masked_select has a data-dependent output shape (use torch.where(mask, x, 0))", CHECKED_CODE),
    OpRule("aten._unique", "dynamic-shape", "unique has a data-dependent output shape", CHECKED_H200),
    OpRule("aten._unique2", "dynamic-shape", "unique has a data-dependent output shape", CHECKED_H200),
    OpRule("aten.unique_dim", "dynamic-shape", "unique has a data-dependent output shape", CHECKED_CODE),
    OpRule("aten.unique_consecutive", "dynamic-shape",
           "unique_consecutive has a data-dependent output shape", CHECKED_CODE),
    OpRule("aten.unique_dim_consecutive", "dynamic-shape",
           "unique_consecutive has a data-dependent output shape", CHECKED_CODE),
    OpRule("aten.bincount", "dynamic-shape",
           "bincount reads max() on the host to size its output, even with minlength "
           "(use counts.zero_(); counts.scatter_add_(0, idx, ones))", CHECKED_H200),
    OpRule("aten.repeat_interleave", "dynamic-shape",
           "repeat_interleave with tensor repeats and no output_size sums the repeats on the host",
           CHECKED_H200, when="no_output_size"),
    OpRule("aten.histc", "host-read",
           "histc with default bounds (min == max) reads the data's min and max on the host; pass fixed "
           "min/max", CHECKED_H200, when="default_range"),
    OpRule("aten.index", "dynamic-shape",
           "boolean-mask indexing x[mask] runs nonzero: data-dependent shape "
           "(use torch.where(mask, x, 0) or a fixed-size gather)", CHECKED_H200, when="bool_index"),
    OpRule("aten._unsafe_index", "dynamic-shape", "boolean-mask indexing runs nonzero", CHECKED_CODE,
           when="bool_index"),
    OpRule("aten.index_put_", "dynamic-shape",
           "x[mask] = tensor runs nonzero (a Python scalar through the mask is masked_fill and is fine; "
           "or use torch.where / masked_scatter with static shapes)", CHECKED_H200, when="bool_index_not_fill"),
    OpRule("aten.index_put", "dynamic-shape", "x[mask] = tensor runs nonzero", CHECKED_H200,
           when="bool_index_not_fill"),
    OpRule("aten._index_put_impl_", "dynamic-shape", "x[mask] = tensor runs nonzero", CHECKED_H200,
           when="bool_index_not_fill"),
    OpRule("aten.equal", "host-read", "torch.equal returns a Python bool: the host reads the result",
           CHECKED_CODE),
    OpRule("aten.allclose", "host-read", "torch.allclose returns a Python bool: the host reads the result",
           CHECKED_CODE),
    OpRule("aten.is_nonzero", "host-read", "is_nonzero reads a device value on the host", CHECKED_CODE),
    OpRule("aten.mode", "sync", "torch.mode synchronises inside its CUDA kernel", CHECKED_CODE),
    OpRule("aten._linalg_check_errors", "host-read",
           "linalg error checking reads the LAPACK info on the host (use the *_ex variant and check later)",
           CHECKED_CPU),
    OpRule("aten.copy_", "h2d-copy",
           "a Python scalar written into a device tensor (x[i] = 3.0) is a host-to-device copy; capture "
           "rejects it (write from a device tensor or a pinned buffer)", CHECKED_H200, when="src_lifted"),
    OpRule("aten.index_put_", "h2d-copy",
           "a Python scalar written through a tensor index is copied to the device first",
           CHECKED_CODE, when="values_lifted_not_fill"),
    OpRule("aten.lift_fresh", "h2d-copy",
           "a Python list becomes a tensor inside the step (an index list or data): a host-to-device copy "
           "each step", CHECKED_CPU, when="not_scalar"),
)


@dataclass(frozen=True)
class PyRule:
    """A Python-level tensor call, matched on its qualified name inside TorchFunctionMode."""

    name: str
    kind: str
    reason: str
    checked: str
    when: str = "always"


# Python-level calls that reach no aten op on the CPU (`.cpu()`, `.tolist()`, `print`) or whose
# user-facing name says more than the aten op underneath (`Tensor.__bool__` vs `_local_scalar_dense`).
PY_RULES: tuple[PyRule, ...] = (
    PyRule("Tensor.item", "host-read", ".item() reads a device value on the host", CHECKED_H200),
    PyRule("Tensor.__bool__", "host-read",
           "bool(tensor) / `if tensor:` reads a device value on the host and branches on it", CHECKED_H200),
    PyRule("Tensor.__int__", "host-read", "int(tensor) reads a device value on the host", CHECKED_H200),
    PyRule("Tensor.__float__", "host-read", "float(tensor) reads a device value on the host", CHECKED_H200),
    PyRule("Tensor.__index__", "host-read",
           "a tensor used as a Python index or slice bound is read on the host", CHECKED_CODE),
    PyRule("Tensor.__complex__", "host-read", "complex(tensor) reads a device value on the host", CHECKED_CODE),
    PyRule("Tensor.__contains__", "host-read", "`v in tensor` reads a device value on the host", CHECKED_CPU),
    PyRule("Tensor.__format__", "host-read",
           "formatting a tensor (f-string, format) reads its value on the host", CHECKED_H200),
    PyRule("Tensor.__repr__", "host-read", "printing a tensor copies its values to the host", CHECKED_CODE),
    PyRule("Tensor.tolist", "d2h-copy", ".tolist() copies the tensor to the host", CHECKED_H200),
    PyRule("Tensor.numpy", "d2h-copy", ".numpy() copies the tensor to the host", CHECKED_CODE),
    PyRule("Tensor.__array__", "d2h-copy", "numpy conversion copies the tensor to the host", CHECKED_CODE),
    PyRule("Tensor.cpu", "d2h-copy", ".cpu() copies the tensor to the host", CHECKED_H200),
    PyRule("Tensor.to", "d2h-copy", ".to('cpu') copies the tensor to the host", CHECKED_H200, when="to_host"),
    PyRule("torch.tensor", "h2d-copy",
           "torch.tensor(host data) inside the step copies host data to the device each step "
           "(keep a static device buffer, fill it in prepare())", CHECKED_H200, when="host_data"),
    PyRule("torch.as_tensor", "h2d-copy", "torch.as_tensor(host data) copies host data to the device",
           CHECKED_CODE, when="host_data"),
    PyRule("torch.asarray", "h2d-copy", "torch.asarray(host data) copies host data to the device",
           CHECKED_CODE, when="host_data"),
    PyRule("torch.from_numpy", "h2d-copy", "a numpy array becomes a tensor inside the step", CHECKED_CODE),
    PyRule("Tensor.new_tensor", "h2d-copy", "new_tensor(host data) copies host data to the device",
           CHECKED_CODE),
    PyRule("Tensor.cuda", "h2d-copy", ".cuda() of a host tensor inside the step is a host-to-device copy",
           CHECKED_CODE, when="from_host"),
)

# The reverse of cuda_sync_ops.toml: Python-level calls whose CPU kernel reads values on the host for
# an argument check that the CUDA kernel leaves to a device assert. The emulation reports nothing
# inside them while `when` holds. one_hot: Onehot.cpp ("rely on device asserts from scatter to avoid
# sync here"); on the H200 (torch 2.11) Mixtral's `one_hot(idx, num_classes=E)` line raised no sync
# debug mode warning, while the CPU kernel ran min().item() and max().item().
CPU_ONLY_HOST_CHECKS: tuple[PyRule, ...] = (
    PyRule("torch.nn.functional.one_hot", "host-read",
           "one_hot's CPU kernel checks the class range on the host; the CUDA kernel does not sync when "
           "num_classes is given", CHECKED_H200, when="num_classes_given"),
)

# On CUDA, sync debug mode is the source of truth for the rules above; these are the Python-level
# copies it misses and that are checked there instead (RUNTIME_NOTES H200 table).
PAGEABLE_RULES: tuple[PyRule, ...] = (
    PyRule("Tensor.to", "h2d-copy", "", CHECKED_H200, when="pageable_non_blocking"),
    PyRule("Tensor.cuda", "h2d-copy", "", CHECKED_H200, when="pageable_non_blocking"),
    PyRule("Tensor.copy_", "h2d-copy", "", CHECKED_H200, when="pageable_non_blocking"),
)

# The same calls seen through sync debug mode on CUDA miss pageable `non_blocking=True` copies:
# the driver makes them synchronous and torch does not warn (RUNTIME_NOTES H200 table).
PAGEABLE_COPY_REASON = (
    "a non_blocking copy from pageable host memory is synchronous in the driver; sync debug mode does "
    "not see it (use a pinned buffer)"
)

# Synchronisation APIs patched during a step: sync debug mode misses the first two (they call the
# CUDA runtime directly); on the CPU emulation all are recorded and do nothing.
SYNC_CALLS: tuple[tuple[str, str, str], ...] = (
    ("torch.cuda.synchronize", "torch.cuda.synchronize() waits for every stream of the device "
     "(use events and wait_stream)", CHECKED_H200),
    ("torch.cuda.Event.synchronize", "Event.synchronize() blocks the host until the event completes",
     CHECKED_H200),
    ("torch.cuda.Stream.synchronize", "Stream.synchronize() blocks the host until the stream drains",
     CHECKED_H200),
    ("torch.accelerator.synchronize", "torch.accelerator.synchronize() waits for the whole device",
     CHECKED_CODE),
)
# On CUDA, sync debug mode already reports Stream.synchronize (from inside torch/cuda/streams.py).
SEEN_BY_SYNC_MODE = frozenset({"torch.cuda.Stream.synchronize"})

# Ops that only a GPU run shows (graphlint/data/cuda_sync_ops.toml): flagged on the CPU emulation as
# they would be on CUDA, and on CUDA they name the op behind a sync debug mode warning.
CUDA_ONLY_RULES: tuple[OpRule, ...] = tuple(
    OpRule(entry.op, entry.kind, f"{entry.reason} ({entry.seen_on})", entry.seen_on,
           when="dtype" if entry.dtypes else "always", dtypes=entry.dtypes)
    for entry in data_catalog.cuda_sync_ops()
)
OP_RULES = OP_RULES + CUDA_ONLY_RULES

# Why each event kind breaks a CUDA graph (the `explanation` of every event of that kind).
KIND_EXPLANATION = {
    "sync": "the host waits for the device inside the step: a stall every eager step, and CUDA forbids "
            "synchronizing a stream while it is being captured, so the capture fails",
    "host-read": "a device value is copied to the host and Python uses it: a sync every step; during capture "
                 "the copy is illegal, and a value read at capture time would be frozen into the graph",
    "dynamic-shape": "the output's size depends on the data, so the host reads a count back (a sync); a graph "
                     "has the fixed shapes of the captured step and cannot hold it",
    "d2h-copy": "a device-to-host copy blocks until the device catches up; during capture it fails, and a "
                "replay would not refresh the host copy",
    "h2d-copy": "host data copied to the device inside the step: capture rejects copies from pageable host "
                "memory, and a captured copy replays the capture-time data",
}
# What to do instead, per kind, where an entry has no fix of its own.
KIND_FIX = {
    "sync": "remove the synchronize from the step; order streams with events (event.record(); "
            "stream.wait_event(event)) or stream.wait_stream()",
    "host-read": "keep the value on the device (torch.where, clamp, masks) or read it after replay from a "
                 "pinned buffer",
    "dynamic-shape": "use a fixed-shape form: nonzero_static(size=N), torch.where(mask, x, y), masks with a "
                     "static maximum, output_size= / fixed bounds",
    "d2h-copy": "copy after replay, outside the step, into a pinned buffer with copy_(..., non_blocking=True) "
                "and an event",
    "h2d-copy": "keep a static device buffer and fill it in prepare() (outside the graph), from a pinned "
                "host buffer with non_blocking=True",
}
# Per-entry fixes (rule name -> fix), more precise than the kind's default.
FIXES = {
    "aten._local_scalar_dense": KIND_FIX["host-read"],
    "aten.nonzero": "torch.nonzero_static(x, size=N) or a boolean mask used with torch.where",
    "aten.argwhere": "torch.nonzero_static(x, size=N) or a mask",
    "aten.nonzero_numpy": "torch.nonzero_static(x, size=N) or a mask",
    "aten.where": "the three-argument torch.where(cond, x, y), which keeps the shape",
    "aten.masked_select": "torch.where(mask, x, 0) keeps the shape",
    "aten._unique": "a fixed-size alternative: a one-hot/scatter count over the known value range",
    "aten._unique2": "a fixed-size alternative: a one-hot/scatter count over the known value range",
    "aten.bincount": "counts.zero_(); counts.scatter_add_(0, idx, ones) into a preallocated buffer",
    "aten.repeat_interleave": "pass output_size= (a host-known bound), or use a fixed-shape gather",
    "aten.histc": "pass fixed min= and max= (histc(x, bins, min=lo, max=hi))",
    "aten.index": "torch.where(mask, x, 0) or a fixed-size gather (index_select with static indices)",
    "aten.index_put_": "torch.where(mask, new, x) or masked_scatter_ with static shapes; a Python scalar "
                       "through the mask (x[mask] = 0.0) is masked_fill and is fine",
    "aten.copy_": "write from a device tensor (a static buffer filled in prepare()), not a Python scalar",
    "aten.lift_fresh": "build index lists and constants once, as device buffers, outside the step",
    "aten.equal": "torch.eq(a, b).all() as a device tensor and torch.where instead of a branch",
    "aten.allclose": "torch.isclose(a, b).all() as a device tensor and torch.where instead of a branch",
    "aten.mode": "a fixed-shape alternative (sort + gather) or compute it outside the step",
    "aten._linalg_check_errors": "use the *_ex variant and check `info` after replay",
    "Tensor.item": KIND_FIX["host-read"],
    "Tensor.__bool__": "branchless math (torch.where) or torch.cond; branch on host-known values only",
    "Tensor.__int__": "use a host-known bound (the static maximum) and masking",
    "Tensor.__float__": "keep the arithmetic on tensors",
    "Tensor.__index__": "index with the tensor itself (index_select / gather) instead of a Python int",
    "Tensor.__format__": "drop the print from the step, or log after replay from the output buffers",
    "Tensor.__repr__": "drop the print from the step, or log after replay from the output buffers",
    "Tensor.tolist": "keep the data on the device; replace host loops over the list with fixed-shape gathers",
    "torch.tensor": "keep a static device buffer and fill it in prepare() (outside the graph)",
    "torch.cuda.synchronize": KIND_FIX["sync"],
    "torch.cuda.Event.synchronize": "stream.wait_event(event) orders the work without blocking the host",
    "torch.cuda.Stream.synchronize": "other_stream.wait_stream(stream) orders the work without blocking the host",
}
FIXES.update({entry.op: entry.fix for entry in data_catalog.cuda_sync_ops()})
# Capture errors torch raises, recognised by their text: (text, why, fix).
CAPTURE_ERRORS: tuple[tuple[str, str, str], ...] = (
    ("synchronizing CUDA operation", KIND_EXPLANATION["sync"], KIND_FIX["sync"]),
    ("Cannot copy between CPU and CUDA tensors during CUDA graph capture",
     "a copy between pageable host memory and the device ran inside the captured region",
     "write inputs into static device buffers in prepare(); copy results out after replay into a pinned buffer"),
    ("operation not permitted when stream is capturing",
     "a synchronizing call (a host read, a sync, a pageable copy) ran while the stream was capturing",
     KIND_FIX["host-read"]),
    ("operation failed due to a previous error during capture",
     "an earlier call in the captured region invalidated the capture",
     "find the first sync event of the step (the sync phase lists them) and remove it"),
)


def _packet(op: str) -> str:
    return op.rpartition(".")[0] if op.startswith("aten.") and op.count(".") >= 2 else op


def _sync_op(op: str):
    packet = _packet(op)
    return next((e for e in data_catalog.cuda_sync_ops() if e.op == packet), None)


def explain(kind: str, op: str) -> dict:
    """`{explanation, fix}` for a runtime event of `kind` raised by `op` ('aten.x.overload',
    'Tensor.item', 'torch.cuda.synchronize', or 'unknown')."""
    sync_op = _sync_op(op)
    explanation = KIND_EXPLANATION.get(kind, KIND_EXPLANATION["sync"])
    if sync_op is not None:
        explanation = f"{sync_op.reason} ({sync_op.seen_on})"
    return {"explanation": explanation, "fix": FIXES.get(_packet(op)) or KIND_FIX.get(kind, KIND_FIX["sync"])}


def explain_capture_error(message: str, op: str | None = None) -> dict | None:
    """`{explanation, fix}` for a capture error torch raised; `op` is the cause's op when known.

    A catalogued CUDA-only op is named with its own fix (grouped_mm: its copy error, or the sync
    error when sync debug mode is armed); otherwise the message's text decides, and None means it
    is not a known one."""
    sync_op = _sync_op(op) if op else None
    if sync_op is not None:
        return {"explanation": f"{sync_op.op}: {sync_op.reason} ({sync_op.seen_on})", "fix": sync_op.fix}
    for text, why, fix in CAPTURE_ERRORS:
        if text in message:
            return {"explanation": why, "fix": fix}
    return None


PY_RULES_BY_NAME = {r.name: r for r in PY_RULES}

# An op may carry several rules (index_put_: a boolean mask, or a lifted Python scalar).
OP_RULES_BY_NAME: dict[str, tuple[OpRule, ...]] = {}
for _rule in OP_RULES:
    OP_RULES_BY_NAME[_rule.op] = OP_RULES_BY_NAME.get(_rule.op, ()) + (_rule,)
del _rule
