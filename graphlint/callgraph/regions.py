"""The region of every function: `captured` (inside the graph), `eager` (an eager break:
syncs matter, capture-only rules do not), `host` (outside by design) or `unreached`.

The call graph (graphlint.callgraph.graph) finds them from capture sites, nn.Module forwards and
configured roots. In the sweep mode (`regions = "sweep"`, `check --sweep`, `default_placements`)
every function is per-step (`captured`) except constructors, functions listed in `host` and
functions marked `# graphlint: host`; module-level code is never per-step.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Mapping, Sequence

from graphlint.analysis.walk.file import NOT_PER_STEP

CAPTURED = "captured"
EAGER = "eager"
HOST = "host"
UNREACHED = "unreached"


@dataclass(frozen=True)
class Placement:
    region: str
    reached_via: tuple[str, ...] = ()
    reason: str = ""  # why: "capture site at path:line", "forward of nn.Module X", "configured host", ...
    # (parameter, "N" | "V"): what every call that reaches the function in its region passes
    # for that parameter, None-wise (graphlint.callgraph.arguments.argument_states).
    known: tuple[tuple[str, str], ...] = ()
    # Captured only through torch.compile (Inductor's CUDA graphs), never by stream capture.
    compiled: bool = False


def module_name(rel_path: str) -> str:
    """`pkg/sub/mod.py` -> `pkg.sub.mod`; `pkg/__init__.py` -> `pkg`."""
    parts = rel_path[:-3].split("/") if rel_path.endswith(".py") else rel_path.split("/")
    if parts and parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _matches(spec: str, module: str, qualname: str) -> bool:
    """`module:Qualified.name`, `Qualified.name` or a bare function name."""
    if ":" in spec:
        spec_module, _, spec_name = spec.partition(":")
        return (module == spec_module or module.endswith("." + spec_module)) and qualname == spec_name
    return qualname == spec or qualname.endswith("." + spec)


def listed(specs: Iterable[str], module: str, qualname: str) -> bool:
    return any(_matches(spec, module, qualname) for spec in specs)


def default_placements(files: Sequence[Mapping], host: Sequence[str], eager: Sequence[str]) -> dict[tuple[str, str], Placement]:
    """(path, qualname) -> Placement for the grep-mode default (no entry points)."""
    placements: dict[tuple[str, str], Placement] = {}
    for file in files:
        module = module_name(file["path"])
        for function in file["functions"]:
            qualname = function["qualname"]
            short = qualname.rsplit(".", 1)[-1]
            marker = function.get("marker")
            parent = placements.get((file["path"], qualname.rsplit(".", 1)[0])) if "." in qualname else None
            if parent is not None and parent.region in (HOST, EAGER):
                region = parent.region  # a closure runs where its enclosing function runs
            elif marker == "host" or listed(host, module, qualname) or short in NOT_PER_STEP:
                region = HOST
            elif marker == "eager" or listed(eager, module, qualname):
                region = EAGER
            else:
                region = CAPTURED
            placements[(file["path"], qualname)] = Placement(region, reason="sweep: every function is per-step"
                                                             if region == CAPTURED else f"sweep: {region} by name")
    return placements
