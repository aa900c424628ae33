"""Run one step under TorchFunctionMode + TorchDispatchMode and record what it did.

For every aten op the step runs, the interceptor keeps a light record: the op name, its non-tensor
arguments, the shapes, which tensors it read that the step did not create (inputs, buffers,
parameters), which new storages it allocated, and the user's source line. `hazards.py` compares these
records between steps; the sync phase reads the events.

Two modes:

- ``emulate=True`` (CPU emulation): events come from the catalog (`op_catalog.py`), argument-aware,
  and `torch.cuda.synchronize`-style calls are recorded and skipped.
- ``emulate=False`` (CUDA): sync debug mode's warnings are the source of truth (`on_sync_warning`,
  installed by the CUDA runner); the interceptor adds the name of the op being run, and records what
  that mode misses: device/event synchronisation and pageable ``non_blocking=True`` copies.
"""
from __future__ import annotations

import collections
import contextlib
import functools
import importlib
import sys
import weakref
from dataclasses import dataclass, field
from typing import Any, Callable

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode

from graphlint.runtime.tracing import op_catalog, residence
from graphlint.runtime import user_frames
from graphlint.runtime.tracing.residence import storage_key as _storage_key
from graphlint.runtime.tracing.sync_names import COPY_OPS as _COPY_OPS, name_sync as _name_sync


class SyncStop(RuntimeError):
    """Raised at the first event when the harness runs with `--sync-mode error`."""

    def __init__(self, event: dict):
        super().__init__(f"{event['kind']}: {event['op']} at {event['path']}:{event['line']}")
        self.event = event


@dataclass
class StepTrace:
    """What one step did. `ops` rows are `(name, args_signature, shapes, external_reads, site,
    callers)`, callers being the user frames above the site."""

    index: int
    ops: list = field(default_factory=list)
    events: list = field(default_factory=list)
    allocations: list = field(default_factory=list)  # (op, site, nbytes, weakref to the output)
    other_device: list = field(default_factory=list)  # (op, site, device)
    outputs: list = field(default_factory=list)  # {shape, dtype, device, static, dynamic}
    # storage key -> tensor, for tensors the step read but did not create; held so that their
    # addresses cannot be reused while steps are compared.
    external: dict = field(default_factory=dict)
    produced: dict = field(default_factory=dict)  # storage key -> site of the op that made it
    tainted: set = field(default_factory=set)
    lifted: dict = field(default_factory=dict)  # id -> tensor made from Python data in the step
    from_data: set = field(default_factory=set)  # storage keys of those tensors (kept after the step)
    retained_bytes: int = 0  # allocated by this step and alive after it
    live_bytes: int = 0  # allocated by this and the earlier traced steps, alive after it
    error: str | None = None
    no_tensor: str | None = None  # why the step's return value holds nothing to compare

    def allocated_bytes(self) -> int:
        return sum(a[2] for a in self.allocations)


def tensors_of(obj) -> list[torch.Tensor]:
    """The tensors in a step's output or an op's arguments (nested lists, tuples, dicts), in order."""
    return _tensors(obj, [])


def no_tensor_output(out: Any) -> str | None:
    """Why a step's return value cannot be compared between eager and replay, or None if it can."""
    if tensors_of(out):
        return None
    what = "None" if out is None else f"a {type(out).__name__} with no tensor in it"
    return (f"step() returned {what}: replay cannot be compared with eager (return the static output "
            "tensors, e.g. `return self.logits`)")


def _tensors(obj, out: list) -> list:
    if isinstance(obj, torch.Tensor):
        out.append(obj)
    elif isinstance(obj, (list, tuple)):
        for item in obj:
            if isinstance(item, (torch.Tensor, list, tuple)):
                _tensors(item, out)
    elif isinstance(obj, dict):
        for item in obj.values():
            _tensors(item, out)
    return out


def _sig(a):
    """The part of an argument a CUDA graph freezes at capture: every non-tensor value."""
    if isinstance(a, torch.Tensor):
        return None
    if isinstance(a, (list, tuple)):
        return tuple(_sig(x) for x in a)
    if a is None or isinstance(a, (bool, int, str)):
        return a
    if isinstance(a, float):
        return a if a == a else "nan"
    if isinstance(a, (torch.dtype, torch.device, torch.layout, torch.memory_format)):
        return str(a)
    return type(a).__name__


def _lifted_value(t: torch.Tensor):
    # A tensor made from Python data inside the step carries that data into the kernel arguments,
    # so its value is part of what a graph freezes.
    if t.numel() <= 16 and t.device.type == "cpu":
        return tuple(t.reshape(-1).tolist())
    return ("tensor", tuple(t.shape))


def _resolve(dotted: str):
    """'Tensor.item' -> torch.Tensor.item; 'torch.cuda.Event.synchronize' -> that attribute."""
    parts = dotted.split(".")
    obj: Any = torch.Tensor if parts[0] == "Tensor" else importlib.import_module(parts[0])
    for part in parts[1:]:
        obj = getattr(obj, part, None)
        if obj is None:
            return None
    return obj


def _call_table() -> dict:
    """Python-level callable -> (emulation rule, CUDA pageable-copy rule); either may be None."""
    table: dict = {}
    for slot, rules in ((0, op_catalog.PY_RULES), (1, op_catalog.PAGEABLE_RULES)):
        for rule in rules:
            func = _resolve(rule.name)
            if func is not None:
                pair = list(table.get(func, (None, None)))
                pair[slot] = rule
                table[func] = tuple(pair)
    return table


_CALLS = _call_table()
# callable -> rule: calls inside which the emulation stays quiet (op_catalog.CPU_ONLY_HOST_CHECKS).
_QUIET_CALLS = {func: rule for rule in op_catalog.CPU_ONLY_HOST_CHECKS if (func := _resolve(rule.name)) is not None}
_OP_NAMES: dict = {}


def _op_name(func) -> tuple[str, str]:
    """('aten.index_put_', 'default') for an OpOverload, cached."""
    names = _OP_NAMES.get(func)
    if names is None:
        full = str(func)
        packet, _, overload = full.rpartition(".")
        if not packet.startswith("aten."):
            packet, overload = full, ""
        names = _OP_NAMES[func] = (packet, overload)
    return names


def _is_bool(t) -> bool:
    return isinstance(t, torch.Tensor) and t.dtype in (torch.bool, torch.uint8)


def _dest_device(args, kwargs):
    dev = kwargs.get("device")
    if dev is None:
        for a in args[1:]:
            if isinstance(a, (str, torch.device)):
                return a
            if isinstance(a, torch.Tensor):
                return a.device
    return dev


def _non_blocking(args, kwargs, name: str) -> bool:
    if kwargs.get("non_blocking"):
        return True
    if name == "Tensor.copy_":
        return len(args) > 2 and args[2] is True
    return any(a is True for a in args[1:])  # to(device, dtype, non_blocking) / cuda(device, non_blocking)


def _pageable(t: torch.Tensor) -> bool:
    return t.device.type == "cpu" and not t.is_pinned()


class Interceptor:
    """Records steps of one target on one device; see the module docstring for the two modes."""

    def __init__(self, device: torch.device, *, emulate: bool, stop_at_first: bool = False):
        self.device = device
        self.emulate = emulate
        self.stop_at_first = stop_at_first
        self.rec: StepTrace | None = None
        self.last: StepTrace | None = None  # the latest step's trace, kept when the step raised
        self.py_call: str | None = None  # the flagged Python-level call running now
        self.py_event = False  # that call produced an event: ops inside it are not flagged again
        self.current_op: tuple | None = None  # on_op's entry for the aten op running now
        self.in_handler = False
        self.quiet = 0  # > 0 inside a call whose CPU kernel's host reads do not happen on CUDA
        self.raised_in: tuple | None = None  # (python call, on_op entry) of the last op that raised
        # on_op entries (packet, args, site, fired rule, name) of the latest ops, for naming a sync
        # warning after the fact
        self.recent: collections.deque = collections.deque(maxlen=16)
        # A context manager factory entered around each traced step only (CUDA: sync debug mode,
        # so that prepare() and reset() are not checked).
        self.arm: Callable[[], contextlib.AbstractContextManager] = contextlib.nullcontext
        self._slot = 0 if emulate else 1  # which rule of a _CALLS pair raises events
        self.residence = residence.Residence()  # emulation: which tensors would be host tensors

    # ----------------------------------------------------------------- running a step
    def run_step(self, fn: Callable[[], Any], index: int) -> tuple[Any, StepTrace]:
        """Run `fn()` as step `index`; returns its output and the trace.

        If `fn` raises (SyncStop included), the exception propagates and the partial trace is
        `self.last`.
        """
        rec = self.rec = self.last = StepTrace(index)
        self.residence.clear()
        out = None
        try:
            with self.patched_sync_calls(), _FunctionMode(self), _dispatch_mode(self), self.arm():
                out = fn()
        finally:
            self.rec = None
            self.py_call, self.py_event, self.current_op = None, False, None
            self.recent.clear()
            self._finish(rec, out)
        return out, rec

    def _finish(self, rec: StepTrace, out) -> None:
        rec.retained_bytes = sum(nbytes for _, _, nbytes, ref in rec.allocations if ref() is not None)
        rec.no_tensor = no_tensor_output(out)
        for t in tensors_of(out):
            key = _storage_key(t)
            rec.outputs.append({
                "shape": list(t.shape),
                "dtype": str(t.dtype).replace("torch.", ""),
                "device": str(t.device),
                "static": key not in rec.produced,
                "dynamic": key in rec.tainted,
                "site": rec.produced.get(key, (None, 0)),
            })
        rec.lifted.clear()

    # ----------------------------------------------------------------- events
    def emit(self, kind: str, op: str, detail: str, frame=None, stack: list | None = None) -> dict:
        stack = user_frames.user_stack(frame) if stack is None else stack
        top = stack[-1] if stack else {"path": "?", "line": 0, "function": "?"}
        event = {
            "op": op, "kind": kind, "path": top["path"], "line": top["line"], "function": top["function"],
            "stack": stack, "detail": detail, "step": self.rec.index if self.rec else None,
        }
        if self.rec is not None:
            self.rec.events.append(event)
        if self.stop_at_first:
            raise SyncStop(event)
        return event

    def on_sync_warning(self, message: str, frame=None) -> None:
        """Called by the CUDA runner's warning hook for "called a synchronizing CUDA operation".

        torch turns the C++ warning into a Python one when the outermost tensor call returns, so
        the op that synced is usually finished by then: it is looked up among the recent ops run
        from the same user line, preferring one the catalog knows.
        """
        stack = user_frames.user_stack(frame)
        where = (stack[-1]["path"], stack[-1]["line"]) if stack else None
        picked = self.current_op
        if picked is None:
            same_line = [r for r in self.recent if _site_at(r[2], where)]
            known = [r for r in same_line if r[3] is not None or r[0] in _COPY_OPS]
            picked = (known or same_line or [None])[-1]
        kind, op, reason = _name_sync(self.py_call, picked)
        detail = f"sync debug mode: {message.split('(Triggered')[0].strip()}" + (f"; {reason}" if reason else "")
        self.emit(kind, op, detail, stack=stack)

    def error_event(self, stopped: dict) -> dict:
        """The event for torch's sync debug "error" mode, which raises inside the op (CUDA)."""
        py_call, entry = self.raised_in or (None, None)
        kind, op, _reason = _name_sync(py_call, entry)
        stack = stopped.get("stack") or []
        top = stack[-1] if stack else {"path": "?", "line": 0, "function": "?"}
        return {"op": op, "kind": kind, **top, "stack": stack,
                "detail": "sync debug mode (error): called a synchronizing CUDA operation",
                "step": stopped.get("step")}

    # ----------------------------------------------------------------- sync API patches
    @contextlib.contextmanager
    def patched_sync_calls(self):
        """Patch the synchronize calls of op_catalog.SYNC_CALLS: they record an event while a step is
        traced, and do nothing on the emulation (also outside traced steps: a CPU build has no
        CUDA to wait for)."""
        saved = []
        for dotted, reason, _checked in op_catalog.SYNC_CALLS:
            if not self.emulate and dotted in op_catalog.SEEN_BY_SYNC_MODE:
                continue
            owner_name, _, attr = dotted.rpartition(".")
            owner = _resolve(owner_name)
            original = getattr(owner, attr, None) if owner is not None else None
            if original is None:
                continue
            saved.append((owner, attr, original))
            setattr(owner, attr, self._sync_wrapper(dotted, reason, original))
        try:
            yield
        finally:
            for owner, attr, original in reversed(saved):
                setattr(owner, attr, original)

    def _sync_wrapper(self, dotted: str, reason: str, original):
        interceptor = self

        def wrapper(*args, **kwargs):
            if interceptor.rec is not None:
                interceptor.emit("sync", dotted, reason)
            if interceptor.emulate:
                return None  # no CUDA to wait for on the CPU emulation
            return original(*args, **kwargs)

        wrapper.__wrapped__ = original
        return wrapper

    # ----------------------------------------------------------------- rule conditions
    def _host_scalar(self, t) -> bool:
        """A one-element host tensor: what index_put_ turns into masked_fill (no sync)."""
        if not isinstance(t, torch.Tensor) or t.numel() != 1 or t.device.type != "cpu":
            return False
        return self.device.type != "cpu" or id(t) in self.rec.lifted

    def _masked_fill_path(self, args, kwargs) -> bool:
        # Mirrors canDispatchToMaskedFill (TensorAdvancedIndexing.cpp): one bool index, the rest
        # None, a one-element host value and accumulate=False.
        accumulate = args[3] if len(args) > 3 else kwargs.get("accumulate", False)
        indices = [i for i in args[1] if i is not None]
        return (not accumulate and len(indices) == 1 and _is_bool(indices[0])
                and self._host_scalar(args[2]))

    def _condition(self, when: str, overload: str, args, kwargs, dtypes: tuple[str, ...] = ()) -> bool:
        if when == "always":
            return True
        if when == "dtype":  # a catalogued op seen to sync for these input dtypes only
            first = next((a for a in args if isinstance(a, torch.Tensor)), None)
            return first is not None and str(first.dtype).replace("torch.", "") in dtypes
        if when == "bool_index":
            return any(_is_bool(i) for i in args[1] if i is not None)
        if when == "bool_index_not_fill":
            return (any(_is_bool(i) for i in args[1] if i is not None)
                    and not self._masked_fill_path(args, kwargs))
        if when == "values_lifted_not_fill":
            return (not any(_is_bool(i) for i in args[1] if i is not None)
                    and id(args[2]) in self.rec.lifted)
        if when == "src_lifted":
            return len(args) > 1 and id(args[1]) in self.rec.lifted
        if when == "not_scalar":
            return args[0].dim() > 0
        if when == "one_arg_where":
            return overload == "default"
        if when == "no_output_size":
            return overload in ("Tensor", "self_Tensor") and kwargs.get("output_size") is None
        if when == "default_range":
            low = args[2] if len(args) > 2 else kwargs.get("min", 0)
            high = args[3] if len(args) > 3 else kwargs.get("max", 0)
            return low == high
        raise ValueError(f"unknown rule condition {when!r}")

    def _py_condition(self, when: str, name: str, args, kwargs) -> bool:
        if when == "always":
            return True
        if when == "to_host":
            dest = _dest_device(args, kwargs)
            if isinstance(dest, str):
                return dest.startswith("cpu")
            if isinstance(dest, torch.device):
                return dest.type == "cpu" and self.device.type != "cpu"
            return False
        if when == "host_data":
            data = args[0] if args else kwargs.get("data")
            if isinstance(data, torch.Tensor):
                return False
            return not isinstance(data, (bool, int, float, complex)) or "device" in kwargs
        if when == "from_host":
            return args[0].device.type == "cpu"
        if when == "num_classes_given":
            return (args[1] if len(args) > 1 else kwargs.get("num_classes", -1)) != -1
        if when == "pageable_non_blocking":
            if not _non_blocking(args, kwargs, name):
                return False
            if name == "Tensor.copy_":
                dst, src = args[0], args[1]
                return (_pageable(src) and dst.is_cuda) or (src.is_cuda and _pageable(dst))
            return _pageable(args[0])
        raise ValueError(f"unknown rule condition {when!r}")

    def on_call(self, func, args, kwargs):
        """A Python-level tensor call with a catalog entry (TorchFunctionMode)."""
        rule = _CALLS[func][self._slot]
        # The condition may itself run tensor ops (`is_pinned()` for a pageable copy): they are
        # the harness's, not the step's, so the dispatch mode does not record them.
        self.in_handler = True
        try:
            fired = rule is not None and self._py_condition(rule.when, rule.name, args, kwargs)
            fired = fired and not (self.emulate and self.residence.reads_host(rule.kind, args))
        finally:
            self.in_handler = False
        self.py_call = (rule or _CALLS[func][0] or _CALLS[func][1]).name
        self.py_event = False
        try:
            if fired:
                kind, reason = rule.kind, rule.reason or op_catalog.PAGEABLE_COPY_REASON
                if rule.name == "Tensor.copy_" and args[1].is_cuda:
                    kind = "d2h-copy"  # a device tensor copied into pageable host memory
                self.py_event = True
                self.emit(kind, rule.name, reason)
            return func(*args, **kwargs)
        finally:
            self.py_call, self.py_event = None, False

    # ----------------------------------------------------------------- per-op bookkeeping
    def on_op(self, func, args, kwargs):
        rec = self.rec
        packet, overload = _op_name(func)
        site, callers = user_frames.site_and_callers()
        rules = op_catalog.OP_RULES_BY_NAME.get(packet)
        fired = None
        if rules:
            for rule in rules:
                if self._condition(rule.when, overload, args, kwargs, rule.dtypes) and not (
                        self.emulate and self.residence.reads_host(rule.kind, args)):
                    fired = rule
                    if self.emulate and not self.py_event and not self.quiet:
                        self.emit(rule.kind, f"{packet}.{overload}", rule.reason)
                    break
        entry = (packet, args, site, fired, f"{packet}.{overload}")
        self.recent.append(entry)
        previous = self.current_op
        self.current_op = entry
        try:
            out = func(*args, **kwargs)
        except BaseException:
            self.raised_in = (self.py_call, entry)
            raise
        finally:
            self.current_op = previous
        self.in_handler = True
        try:
            self._record(rec, packet, overload, args, kwargs, out, site, fired, callers)
        finally:
            self.in_handler = False
        return out

    def _record(self, rec, packet, overload, args, kwargs, out, site, fired, callers) -> None:
        ins = _tensors(args, [])
        if kwargs:
            _tensors(kwargs, ins)
        name = f"{packet}.{overload}"
        in_keys = set()
        external = []
        tainted_shapes = set()
        # A lifted tensor is made from Python data in the step (its value is in the op's signature):
        # no external input, and not held by the trace (it would count as memory kept across steps).
        lift = packet in ("aten.lift_fresh", "aten.lift_fresh_copy")
        for pos, t in enumerate(ins):
            key = _storage_key(t)
            if key:
                in_keys.add(key)
                if key in rec.tainted:
                    tainted_shapes.add(tuple(t.shape))
                elif key not in rec.produced and not lift:
                    if key not in rec.external:
                        rec.external[key] = t
                    external.append((pos, key))
            self._check_device(rec, t, name, site)
            if self.emulate and t.dim() != 0 and self.residence.is_host(t):
                # On CUDA this tensor is a CPU one and the op runs on the host, as the CUDA run
                # reports it (phimoe's inv_freq built with torch.arange in every step).
                rec.other_device.append((name, site, "cpu (a host tensor: made in the step without a device)"))
        outs = _tensors(out, [])
        dynamic = fired is not None and fired.kind == "dynamic-shape"
        for t in outs:
            key = _storage_key(t)
            if not key:
                continue
            if lift or key not in in_keys:
                # A new storage (its address may be a freed one's: forget what that one was).
                rec.allocations.append((name, site, t.untyped_storage().nbytes(), weakref.ref(t)))
                if key not in rec.external:
                    rec.produced[key] = site
                # Data-dependent shapes flow through ops that keep the shape (elementwise) and stop at
                # ops that do not (reductions, matmuls); an in-place write keeps its target's shape.
                if dynamic or tuple(t.shape) in tainted_shapes:
                    rec.tainted.add(key)
                else:
                    rec.tainted.discard(key)
            self._check_device(rec, t, name, site)
        sig = tuple(_sig(a) for a in args)
        if kwargs:
            sig += tuple((k, _sig(v)) for k, v in sorted(kwargs.items()))
        if lift:
            for t in outs:
                rec.lifted[id(t)] = t
            rec.from_data.update(k for k in map(_storage_key, ins + outs) if k)
            sig += (_lifted_value(ins[0]),) if ins else ()
        shapes = tuple(tuple(t.shape) for t in ins) + tuple(tuple(t.shape) for t in outs)
        rec.ops.append((name, sig, shapes, tuple(external), site, callers))
        if self.emulate:
            self.residence.propagate(ins, outs)

    def _check_device(self, rec, t: torch.Tensor, op: str, site) -> None:
        dev = t.device
        if dev == self.device or (dev.type == self.device.type and self.device.index is None):
            return
        if dev.type == "cpu" and t.dim() == 0:
            return  # CPU scalars are kernel arguments on CUDA, not work on another device
        rec.other_device.append((op, site, str(dev)))


def _site_at(site: tuple, where: tuple | None) -> bool:
    if where is None or site[0] is None:
        return False
    found = user_frames.site_dict(site)
    return (found["path"], found["line"]) == where


class _FunctionMode(TorchFunctionMode):
    def __init__(self, interceptor: Interceptor):
        super().__init__()
        self.it = interceptor

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        it = self.it
        quiet = _QUIET_CALLS.get(func)
        if quiet is not None and it.emulate and it.rec is not None and it._py_condition(
                quiet.when, quiet.name, args, kwargs):
            it.quiet += 1
            try:
                return func(*args, **kwargs)
            finally:
                it.quiet -= 1
        if func not in _CALLS or it.in_handler or it.rec is None or it.py_call is not None:
            proceed = functools.partial(func, *args, **kwargs)
        else:
            proceed = functools.partial(it.on_call, func, args, kwargs)
        if func in residence.WATCHED and it.emulate and it.rec is not None and not it.in_handler:
            return it.residence.call(func, args, kwargs, proceed, it.emit)
        return proceed()


_DISPATCH_MODE: type | None = None


def _dispatch_mode(interceptor: Interceptor) -> TorchDispatchMode:
    """The dispatch mode, its class made on first use.

    TorchDispatchMode wraps `__torch_dispatch__` in `torch._dynamo.disable`, which imports dynamo
    (2-3 s) at the first op. That guard only matters when the step itself uses torch.compile, so
    it is kept when dynamo is already loaded (by the target) and skipped otherwise.
    """
    global _DISPATCH_MODE
    if _DISPATCH_MODE is None:
        keep_guard = "torch._dynamo" in sys.modules

        class _DispatchMode(TorchDispatchMode):
            @classmethod
            def _should_skip_dynamo(cls) -> bool:
                return keep_guard

            def __init__(self, it: Interceptor):
                super().__init__()
                self.it = it

            def __torch_dispatch__(self, func, types, args=(), kwargs=None):
                kwargs = kwargs or {}
                if self.it.rec is None or self.it.in_handler:
                    return func(*args, **kwargs)
                return self.it.on_op(func, args, kwargs)

        _DISPATCH_MODE = _DispatchMode
    return _DISPATCH_MODE(interceptor)
