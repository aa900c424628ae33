"""Find, import and build a runtime target: `module:callable`, `path/to/file.py:callable`, or
`hf:MODEL` (a transformers causal LM, `hf_target.py`).

The target protocol (shared with the bundled model): `factory(device, **options)` returns an object
with `device`, `reset()`, `prepare(step)`, `step()` and optionally `max_steps`. Loading fails with
`TargetError`, which the command turns into exit code 2 and a one-line message.
"""
from __future__ import annotations

import importlib
import importlib.util
import os
import sys
from typing import Any, Callable

DEFAULT_TARGET = "dsv4_model.target:graph_safe"
REFERENCE_TARGET = "dsv4_model.target:reference"
# Shorthands accepted in place of TARGET (`graphlint runtime reference`).
SHORTHANDS = {
    "graph-safe": DEFAULT_TARGET,
    "graph_safe": DEFAULT_TARGET,
    "default": DEFAULT_TARGET,
    "reference": REFERENCE_TARGET,
}
# The bundled targets run the tiny configuration unless --option says otherwise.
BUNDLED_OPTIONS = {"config": "tiny", "batch": 1, "seed": 0}

PROTOCOL = ("reset", "prepare", "step")


class UsageError(Exception):
    """Bad input to the harness (target, device, option): the command exits with code 2."""


class TargetError(UsageError):
    """The target cannot be found, imported, built, or does not follow the protocol."""


class UnsupportedTarget(TargetError):
    """The harness cannot run this kind of target at all (an architecture that keeps its own cache):
    verdict `unsupported`. A factory says so with a TargetError whose message starts with PREFIX
    (the message is all that crosses the worker's process boundary)."""

    PREFIX = "unsupported: "
    verdict = "unsupported"


class TargetExit(RuntimeError):
    """The target called sys.exit() or os._exit() inside a protocol call (raised by the worker's
    guard, read by the tracer: both sit above the targets, so the error lives here)."""


# `hf:NAME` (or `hf` with --option model=...): the bundled transformers causal-LM target.
HF_PREFIX = "hf"
HF_FACTORY = "graphlint.runtime.targets.hf_target:make"


def is_hf(spec: str) -> bool:
    return spec == HF_PREFIX or spec.startswith(HF_PREFIX + ":")


def resolve_spec(target: str | None) -> str:
    """TARGET as typed -> a `module:callable` or `file.py:callable` spec (shorthands expanded);
    `hf` and `hf:MODEL` stay as typed (see `load_factory`)."""
    if not target:
        return DEFAULT_TARGET
    if target in SHORTHANDS:
        return SHORTHANDS[target]
    if is_hf(target):
        return target
    if ":" not in target:
        raise TargetError(
            f"target {target!r} is not module:callable or path/to/file.py:callable "
            f"(shorthands: {', '.join(sorted(SHORTHANDS))})"
        )
    return target


def default_options(spec: str) -> dict[str, Any]:
    if is_hf(spec):
        model = spec.partition(":")[2]
        return {"model": model} if model else {}
    return dict(BUNDLED_OPTIONS) if spec.startswith("dsv4_model.") else {}


def parse_option(text: str) -> tuple[str, Any]:
    """'key=value' -> (key, value); ints, floats, true/false and none are parsed, the rest stays text."""
    key, sep, raw = text.partition("=")
    key = key.strip()
    if not sep or not key or not key.isidentifier():
        raise TargetError(f"option {text!r} is not key=value")
    return key, parse_value(raw.strip())


def parse_value(raw: str) -> Any:
    lowered = raw.lower()
    if lowered in ("true", "false"):
        return lowered == "true"
    if lowered == "none":
        return None
    for convert in (int, float):
        try:
            return convert(raw)
        except ValueError:
            pass
    return raw


def load_factory(spec: str) -> Callable[..., Any]:
    """Import the module or file of `spec` and return its callable.

    The current directory is put on `sys.path` first (as `python -m` would), so a target next to
    the user's code loads from a console-script run too.
    """
    if is_hf(spec):
        if importlib.util.find_spec("transformers") is None:
            raise TargetError(f"target {spec!r} needs transformers: pip install 'graphlint-cuda[hf]'")
        spec = HF_FACTORY
    location, _, attr_path = spec.rpartition(":")
    if not location or not attr_path:
        raise TargetError(f"target {spec!r} is not module:callable")
    if os.getcwd() not in sys.path and "" not in sys.path:
        sys.path.insert(0, os.getcwd())
    if location.endswith(".py") or os.sep in location or "/" in location:
        module = _load_file(location)
    else:
        try:
            module = importlib.import_module(location)
        except ImportError as exc:
            raise TargetError(f"cannot import target module {location!r}: {exc}") from None
        except Exception as exc:  # the module raised while importing
            raise TargetError(f"importing {location!r} failed: {type(exc).__name__}: {exc}") from None
    obj: Any = module
    for part in attr_path.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise TargetError(f"{location!r} has no attribute {attr_path!r}") from None
    if not callable(obj):
        raise TargetError(f"target {spec!r} is not callable")
    return obj


def _load_file(path: str):
    """Import a file as Python runs a script: its folder goes on sys.path for its own imports."""
    if not os.path.isfile(path):
        raise TargetError(f"target file {path!r} does not exist")
    folder = os.path.dirname(os.path.abspath(path))
    if folder not in sys.path:
        sys.path.insert(0, folder)
    name = "graphlint_target_" + os.path.splitext(os.path.basename(path))[0]
    module_spec = importlib.util.spec_from_file_location(name, path)
    if module_spec is None or module_spec.loader is None:
        raise TargetError(f"cannot load {path!r} as a Python file")
    module = importlib.util.module_from_spec(module_spec)
    sys.modules[name] = module  # dataclasses and pickling look the module up by name
    try:
        module_spec.loader.exec_module(module)
    except Exception as exc:
        sys.modules.pop(name, None)
        raise TargetError(f"importing {path!r} failed: {type(exc).__name__}: {exc}") from None
    return module


def effective_steps(requested: int | None, default: int, target: Any) -> int:
    """Steps to run: the request or the default, never more than the target's `max_steps`."""
    steps = requested or default
    max_steps = getattr(target, "max_steps", None)
    if isinstance(max_steps, int) and max_steps > 0:
        steps = min(steps, max_steps)
    return max(steps, 1)


def build(factory: Callable[..., Any], device, options: dict[str, Any], guard=None):
    """Call `factory(device, **options)` and check the result follows the protocol.

    With a `guard.Guard` (in the worker), the factory call is timed and exit-proof, and the
    target's protocol calls are routed through the guard.
    """
    try:
        if guard is not None:
            target = guard.call("factory", factory, device, **options)
        else:
            target = factory(device, **options)
    except TargetError:
        raise  # the factory's own account of why it cannot build (hf targets)
    except TypeError as exc:
        if _options_refused(factory, device, options):
            raise TargetError(f"building the target failed (check --option names): {exc}") from None
        raise TargetError(f"building the target failed: TypeError: {exc}{_raised_at(exc)}") from None
    except Exception as exc:
        raise TargetError(f"building the target failed: {type(exc).__name__}: {exc}{_raised_at(exc)}") from None
    missing = [name for name in PROTOCOL if not callable(getattr(target, name, None))]
    if not hasattr(target, "device"):
        missing.append("a device attribute")
    if missing:
        raise TargetError(f"the target object ({type(target).__name__}) lacks {', '.join(missing)} "
                          "(protocol: device, reset(), prepare(step), step())")
    return guard.wrap(target) if guard is not None else target


def _options_refused(factory: Callable[..., Any], device, options: dict[str, Any]) -> bool:
    """The factory's signature does not take these options (a TypeError raised inside the factory
    is not the options' fault)."""
    import inspect

    try:
        inspect.signature(factory).bind(device, **options)
    except TypeError:
        return True
    except ValueError:  # no signature to check (a builtin)
        return bool(options)
    return False


def _raised_at(exc: BaseException) -> str:
    """` (at file:line)`: the innermost frame of the exception, library frames included."""
    tb = exc.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    return f" (at {tb.tb_frame.f_code.co_filename}:{tb.tb_lineno})" if tb is not None else ""


def describe(target: Any) -> dict[str, Any]:
    """Where the target's step() is defined: `{path, line, qualname}`, for linting its own code
    with step() as the entry point (`graphlint runtime --lint`). Empty when it cannot be told."""
    import inspect

    from graphlint.runtime import user_frames

    method = inspect.unwrap(getattr(type(target), "step", None) or (lambda: None))
    code = getattr(method, "__code__", None)
    if code is None:
        return {}
    # The files of the target's classes: attributes set in a base class's __init__ tell the linter
    # which of them are device tensors.
    files = []
    for cls in type(target).__mro__:
        try:
            found = inspect.getsourcefile(cls)
        except TypeError:  # builtins
            continue
        if found and user_frames.is_user_file(found) and user_frames.relative_path(found) not in files:
            files.append(user_frames.relative_path(found))
    return {"path": user_frames.relative_path(code.co_filename), "line": code.co_firstlineno,
            "qualname": getattr(method, "__qualname__", code.co_name), "files": files}

