"""The per-file half of interprocedural inference: what each function of one file passes to
the linted functions it calls, what it returns and what its classes assign, as plain data that
is cached with the file. graphlint.callgraph.project_summaries joins these over the project."""
from __future__ import annotations

from typing import Any

from graphlint.analysis.inference.facts import ModuleFacts
from graphlint.analysis.inference.function_walk import Inference
from graphlint.analysis.inference.lattice import encode


def function_summary(qualname: str, class_name: str | None, inference: Inference) -> dict[str, Any]:
    """Parameters (in order, with the kind the function alone gives them and their default),
    the symbolic returns and the calls to possibly linted functions."""
    returns = sorted({tuple(entry) for entry in inference.returns.values()})
    calls = sorted({(key, tuple(args), tuple(sorted(kw.items())))
                    for key, args, kw in inference.calls.values()})
    return {
        "q": qualname,
        "cls": class_name,
        "params": [[name, encode(inference.local_params.get(name, inference.env.get(name))) if name in inference.local_params else None,
                    inference.param_defaults.get(name)] for name in inference.param_names]
                  + [[name, None, default] for name, default in inference.param_defaults.items()
                     if name not in inference.param_names],
        "ret": [list(r) for r in returns],
        "calls": [[key, [list(a) for a in args], {k: list(v) for k, v in kw}] for key, args, kw in calls],
        # Calls inside a loop that pass a local the loop advances (`pos += 1`): the callee's
        # parameter changes from one call to the next.
        "steps": sorted([key, positions, names] for key, positions, names in inference.step_args.values()),
        # Attributes of passed objects the loops advance, and those read off parameters.
        "step_attrs": sorted(inference.loop_attrs),
        "pattrs": sorted(inference.param_attrs),
        # Only these callees' returns and these attributes could change what the file says.
        "unknown_calls": sorted(inference.unknown_calls),
        "unknown_attrs": sorted(inference.unknown_attrs),
        # Places where a device value would be reported hold unknown values: only then can
        # facts from elsewhere change this function's findings.
        "sinks": inference.unknown_sinks,
        "wanted": sorted(inference.wanted),
    }


def class_summaries(facts: ModuleFacts) -> dict[str, Any]:
    """Each class's bases (as imported names where the import says so) and the attribute
    kinds its methods assign."""
    found: dict[str, Any] = {}
    for name, info in facts.classes.items():
        bases = [qualify(facts, base) for base in info.bases]
        attrs = {attr: code for attr, value in info.attrs.items() if (code := encode(value)) not in (None, "none")}
        found[name] = {"bases": bases, "attrs": attrs}
    return found


def qualify(facts: ModuleFacts, text: str) -> str:
    """A dotted name as the file's imports spell it out: `imp:<qualified>` for an imported
    root (relative imports keep their dots), `loc:<name>` otherwise."""
    root, _, rest = text.partition(".")
    full = facts.imports.aliases.get(root) or facts.imports.relative.get(root)
    if full is None:
        return "loc:" + text
    return "imp:" + (f"{full}.{rest}" if rest else full)
