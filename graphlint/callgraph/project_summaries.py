"""The project half of interprocedural inference: join the per-file summaries
(graphlint.analysis.summaries) over the linted code and give each file the facts the rest of
the code holds about it. A parameter gets a kind only when every call site that passes it
agrees; a call gets its callee's return kind; a class inherits attribute kinds from its bases in
other files and from what all its subclasses assign. Symbolic values (a parameter passed on,
another call's result) are resolved by iterating to a fixpoint, with a bound.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

from graphlint.analysis import catalog
from graphlint.callgraph.module_names import package_module

# Each round resolves one more level of forwarding (a parameter passed on, a call returned);
# real code settles in two or three.
_ROUNDS = 8
_BASE_DEPTH = 10
_UNKNOWN = object()


def _join(codes: Iterable[str]) -> str | None:
    """All agree (a device bool and a device tensor are a device tensor), else nothing."""
    result: str | None = None
    for code in codes:
        if result is None:
            result = code
        elif code != result:
            if {code, result} <= {"device", "device_bool"}:
                result = "device"
            else:
                return None
    return result


class _Index:
    def __init__(self, files: Sequence[Mapping[str, Any]], root: Path):
        self.modules: list[str] = []
        self.summaries: list[dict] = []
        self.functions: dict[tuple[str, str], tuple[int, dict]] = {}
        self.classes: dict[tuple[str, str], tuple[int, dict]] = {}
        self.by_module: dict[str, int] = {}
        self.unparsed_calls: set[str] = set()
        self._resolved: dict[tuple[str, str], Any] = {}
        for index, file in enumerate(files):
            self.unparsed_calls.update((file.get("extra") or {}).get("called_names", ()))
            summary = (file.get("extra") or {}).get("summary") or {"functions": [], "classes": {}}
            module = package_module(file["path"], root)
            self.modules.append(module)
            self.summaries.append(summary)
            self.by_module.setdefault(module, index)
            for function in summary["functions"]:
                self.functions[(module, function["q"])] = (index, function)
            for name, info in summary["classes"].items():
                self.classes[(module, name)] = (index, info)

    def _absolute(self, dotted: str, module: str) -> str:
        """A relative import (`..pkg.name`) made absolute from the importing module."""
        level = len(dotted) - len(dotted.lstrip("."))
        if not level:
            return dotted
        package = module.split(".")[:-level] if module else []
        rest = dotted[level:]
        return ".".join([*package, rest] if rest else package)

    def _split(self, dotted: str, table: Mapping[tuple[str, str], Any]) -> tuple[str, str] | None:
        """`pkg.mod.Class.method` -> the (module, qualname) of a known entry."""
        parts = dotted.split(".")
        for cut in range(len(parts) - 1, 0, -1):
            key = (".".join(parts[:cut]), ".".join(parts[cut:]))
            if key in table:
                return key
        return None

    def function(self, key: str, module: str) -> tuple[int, dict] | None:
        memo = self._resolved.get((key, module), _UNKNOWN)
        if memo is _UNKNOWN:
            memo = self._resolved[(key, module)] = self._function(key, module)
        return memo

    def _function(self, key: str, module: str) -> tuple[int, dict] | None:
        kind, _, name = key.partition(":")
        if kind == "loc":
            return self.functions.get((module, name))
        if kind == "imp":
            found = self._split(self._absolute(name, module), self.functions)
            return self.functions[found] if found else None
        if kind == "self":
            class_name, _, method = name.rpartition(".")
            for owner_module, owner in self.lineage(module, class_name):
                entry = self.functions.get((owner_module, f"{owner}.{method}"))
                if entry is not None:
                    return entry
        return None

    def base_class(self, text: str, module: str) -> tuple[str, str] | None:
        kind, _, name = text.partition(":")
        if kind == "loc":
            return (module, name) if (module, name) in self.classes else None
        if kind == "imp":
            return self._split(self._absolute(name, module), self.classes)
        return None

    def lineage(self, module: str, class_name: str) -> list[tuple[str, str]]:
        """The class and its linted bases, nearest first."""
        found: list[tuple[str, str]] = []
        queue = [(module, class_name)]
        while queue and len(found) < _BASE_DEPTH:
            key = queue.pop(0)
            if key in found or key not in self.classes:
                continue
            found.append(key)
            for base in self.classes[key][1]["bases"]:
                resolved = self.base_class(base, key[0])
                if resolved is not None:
                    queue.append(resolved)
        return found


def solve(files: Sequence[Mapping[str, Any]], root: Path) -> list[dict[str, Any]]:
    """For each file (in order), the facts its analysis may use: {"params": {qualname:
    {param: kind}}, "returns": {callee key: kind}, "attrs": {class: {attr: kind}}}; an empty
    dict where the rest of the code knows nothing more."""
    index = _Index(files, root)
    params, returns = _fixpoint(index, _call_sites(index))
    steps = _advanced_params(index)
    step_names, step_attrs = _learned_step_names(index, steps)
    step_names |= _learned_step_keywords(index, _step_returns(index))
    learned = _Learned(params, returns, steps, step_names, step_attrs, _subclass_attrs(index))
    return [_file_facts(index, learned, file_index, module, summary)
            for file_index, (module, summary) in enumerate(zip(index.modules, index.summaries))]


def _call_sites(index: _Index) -> list[tuple]:
    """Every call site once: (caller module, caller key, callee key, args, kwargs, callee entry)."""
    sites = []
    for module, summary in zip(index.modules, index.summaries):
        for function in summary["functions"]:
            for key, args, kwargs in function["calls"]:
                callee = index.function(key, module)
                if callee is not None:
                    sites.append((module, (module, function["q"]), key, args, kwargs, callee))
    return sites


def _resolve(value: Any, caller: tuple[str, str], module: str, index: _Index,
             params: Mapping[tuple[str, str], Mapping[str, str]], returns: Mapping[tuple[str, str], str]) -> Any:
    """A symbolic value of a summary under the facts of the last round: a kind, or _UNKNOWN."""
    tag = value[0]
    if tag == "kind":
        return value[1]
    if tag == "param":
        return params.get(caller, {}).get(value[1], _UNKNOWN)
    if tag == "call":
        callee = index.function(value[1], module)
        if callee is None:
            return _UNKNOWN
        return returns.get((index.modules[callee[0]], callee[1]["q"]), _UNKNOWN)
    if tag == "tuple":
        parts = [_resolve(part, caller, module, index, params, returns) for part in value[1]]
        if any(p is _UNKNOWN or p.startswith("tuple:") for p in parts):
            return _UNKNOWN
        return "tuple:" + ",".join("device" if p == "device_bool" else p for p in parts)
    return _UNKNOWN


def _fixpoint(index: _Index, sites: list[tuple]) -> tuple[dict[tuple[str, str], dict[str, str]],
                                                          dict[tuple[str, str], str]]:
    """Parameter kinds every call site agrees on and return kinds, round by round until
    they stop changing (at most _ROUNDS): each round resolves one more level of forwarding."""
    params: dict[tuple[str, str], dict[str, str]] = {}
    returns: dict[tuple[str, str], str] = {}
    for _ in range(_ROUNDS):
        passed = _passed(index, sites, params, returns)
        new_params = _agreed_params(index, passed)
        new_returns = _agreed_returns(index, params, returns)
        if new_params == params and new_returns == returns:
            break
        params, returns = new_params, new_returns
    return params, returns


def _passed(index: _Index, sites: list[tuple], params: Mapping[tuple[str, str], Mapping[str, str]],
            returns: Mapping[tuple[str, str], str]) -> dict[tuple[str, str], dict[str, list]]:
    """What each call site passes to each parameter of its callee, resolved under the last
    round's facts (_UNKNOWN where a site passes something not known, or may pass it unnamed)."""
    passed: dict[tuple[str, str], dict[str, list]] = {}
    for module, caller, key, args, kwargs, (callee_index, callee) in sites:
        if callee["cls"] is not None and not key.startswith("self:"):
            continue  # a method called through something else: the receiver is not mapped
        target = (index.modules[callee_index], callee["q"])
        names = [p[0] for p in callee["params"]]
        given: dict[str, Any] = {}
        for name, value in zip(names, args):
            given[name] = value
        for name, value in kwargs.items():
            if name not in ("*", "**"):
                given[name] = value
        slot = passed.setdefault(target, {})
        for name, _local, default in callee["params"]:
            if name in given:
                slot.setdefault(name, []).append(_resolve(given[name], caller, module, index, params, returns))
            elif "*" in kwargs or "**" in kwargs or default not in ("none", "host"):
                slot.setdefault(name, []).append(_UNKNOWN)
            elif default == "host":
                slot.setdefault(name, []).append("host")
    return passed


def _agreed_params(index: _Index, passed: Mapping[tuple[str, str], Mapping[str, list]]
                   ) -> dict[tuple[str, str], dict[str, str]]:
    """The kind of each parameter the function leaves unknown and every call site agrees on."""
    agreed: dict[tuple[str, str], dict[str, str]] = {}
    for target, by_name in passed.items():
        if target[1].rpartition(".")[2] in index.unparsed_calls:
            continue  # a file that was not parsed calls a function of this name
        entry = index.functions[target][1]
        local = {p[0]: p[1] for p in entry["params"]}
        facts = {}
        for name, values in by_name.items():
            if values and all(v is not _UNKNOWN for v in values):
                code = _join(values)
                # What the function leaves unknown, or a device kind of its own (an
                # annotation) that every caller contradicts with a host value.
                if code is not None and code != "none" and (
                        local.get(name) is None or (code == "host" and _is_device(local.get(name)))):
                    facts[name] = code
        if facts:
            agreed[target] = facts
    return agreed


def _agreed_returns(index: _Index, params: Mapping[tuple[str, str], Mapping[str, str]],
                    returns: Mapping[tuple[str, str], str]) -> dict[tuple[str, str], str]:
    """The kind each function returns, where all its returns (None aside) agree."""
    agreed: dict[tuple[str, str], str] = {}
    for (module, qualname), (_, function) in index.functions.items():
        values = [_resolve(entry, (module, qualname), module, index, params, returns) for entry in function["ret"]]
        values = [v for v in values if v != "none"]
        if values and all(v is not _UNKNOWN for v in values):
            code = _join(values)
            if code is not None:
                agreed[(module, qualname)] = code
    return agreed


def _advanced_params(index: _Index) -> dict[tuple[str, str], set[str]]:
    """Parameters some caller's loop advances between calls (a may-fact: one such caller is
    enough for the value to change from one step to the next)."""
    steps: dict[tuple[str, str], set[str]] = {}
    for module, summary in zip(index.modules, index.summaries):
        for function in summary["functions"]:
            for key, positions, names in function.get("steps", ()):
                callee = index.function(key, module)
                if callee is None or (callee[1]["cls"] is not None and not key.startswith("self:")):
                    continue
                params_in_order = [p[0] for p in callee[1]["params"]]
                chosen = {params_in_order[i] for i in positions if i < len(params_in_order)}
                chosen |= {n for n in names if n in params_in_order}
                if chosen:
                    steps.setdefault((index.modules[callee[0]], callee[1]["q"]), set()).update(chosen)
    return steps


@dataclass(frozen=True)
class _Learned:
    """What the project's rounds learned, before it is handed out file by file."""

    params: dict[tuple[str, str], dict[str, str]]
    returns: dict[tuple[str, str], str]
    steps: dict[tuple[str, str], set[str]]
    step_names: set[str]
    step_attrs: set[str]
    subclass_attrs: dict[tuple[str, str], dict[str, str]]


def _file_facts(index: _Index, learned: _Learned, file_index: int, module: str, summary: Mapping[str, Any]
                ) -> dict[str, Any]:
    """The facts one file's analysis may use: only those that can change one of its findings."""
    facts: dict[str, Any] = {}
    # Facts go only to functions where they can change a finding (see "sinks").
    judged = [f for f in summary["functions"] if f.get("sinks")]
    file_params = _file_params(learned, module, judged)
    if file_params:
        facts["params"] = file_params
    steps = learned.steps
    file_steps = {f["q"]: sorted(steps[(module, f["q"])]) for f in summary["functions"] if (module, f["q"]) in steps}
    if file_steps:
        facts["steps"] = file_steps
    # Only to files whose functions take a parameter of that name, or read that attribute off
    # a parameter: nothing else can change.
    names = learned.step_names.intersection(p[0] for f in summary["functions"] for p in f["params"])
    attrs = learned.step_attrs.intersection(a for f in summary["functions"] for a in f.get("pattrs", ()))
    if names:
        facts["step_names"] = sorted(names)
    if attrs:
        facts["step_attrs"] = sorted(attrs)
    file_returns = _file_returns(index, learned, module, judged)
    if file_returns:
        facts["returns"] = dict(sorted(file_returns.items()))
    file_attrs = _file_attrs(index, learned, file_index, module, summary, judged)
    if file_attrs:
        facts["attrs"] = file_attrs
    return facts


def _file_params(learned: _Learned, module: str, judged: list[Mapping[str, Any]]) -> dict[str, dict[str, str]]:
    """Parameter kinds for the judged functions, where an unknown value there comes from them."""
    file_params = {}
    for function in judged:
        wanted = set(function.get("wanted", ()))
        local = {p[0]: p[1] for p in function["params"]}
        given = {p: c for p, c in learned.params.get((module, function["q"]), {}).items()
                 if "p:" + p in wanted and (_adds_findings(c) or (c == "host" and _is_device(local.get(p))))}
        if given:
            file_params[function["q"]] = given
    return file_params


def _file_returns(index: _Index, learned: _Learned, module: str, judged: list[Mapping[str, Any]]) -> dict[str, str]:
    """Return kinds of the callees the judged functions leave unknown, where it matters."""
    file_returns = {}
    for function in judged:
        wanted = set(function.get("wanted", ()))
        for key in function.get("unknown_calls", ()):
            if "c:" + key not in wanted:
                continue
            callee = index.function(key, module)
            if callee is not None:
                code = learned.returns.get((index.modules[callee[0]], callee[1]["q"]))
                if code is not None and _adds_findings(code):
                    file_returns[key] = code
    return file_returns


def _file_attrs(index: _Index, learned: _Learned, file_index: int, module: str, summary: Mapping[str, Any],
                judged: list[Mapping[str, Any]]) -> dict[str, dict[str, str]]:
    """Attribute kinds each class of the file inherits from bases in other files and from what
    its subclasses assign, for the attributes its judged methods read and leave unknown."""
    file_attrs = {}
    unknown_attrs: dict[str, set[str]] = {}
    for function in judged:
        if function["cls"] is not None:
            wanted = set(function.get("wanted", ()))
            unknown_attrs.setdefault(function["cls"], set()).update(
                a for a in function.get("unknown_attrs", ()) if "a:" + a in wanted)
    for class_name, info in summary["classes"].items():
        inherited: dict[str, str] = {}
        for key in reversed(index.lineage(module, class_name)[1:]):
            if index.classes[key][0] != file_index:  # same-file bases are joined by the file itself
                inherited.update(index.classes[key][1]["attrs"])
        for attr, code in learned.subclass_attrs.get((module, class_name), {}).items():
            if attr not in info["attrs"]:
                inherited.setdefault(attr, code)
        read = unknown_attrs.get(class_name, set())
        inherited = {a: c for a, c in inherited.items()
                     if info["attrs"].get(a) != c and a in read and _adds_findings(c)}
        if inherited:
            file_attrs[class_name] = dict(sorted(inherited.items()))
    return file_attrs


def _is_device(code: str | None) -> bool:
    return code is not None and code.startswith("device")


def _adds_findings(code: str) -> bool:
    """Rules report device values at the places a summary lists; a host fact there changes
    nothing, so only facts that are (or make) device values are worth a second analysis."""
    return code.startswith("device") or code == "module" or (code.startswith("tuple:") and "device" in code)


def _subclass_attrs(index: _Index) -> dict[tuple[str, str], dict[str, str]]:
    """Attributes every subclass that assigns them agrees on, for the base that only declares
    them (`cache: Optional[Tensor] = None` in a base, a device tensor in each subclass)."""
    seen: dict[tuple[str, str], dict[str, list[str]]] = {}
    for (module, name), (_, info) in index.classes.items():
        for base_key in index.lineage(module, name)[1:]:
            slot = seen.setdefault(base_key, {})
            for attr, code in info["attrs"].items():
                slot.setdefault(attr, []).append(code)
    result: dict[tuple[str, str], dict[str, str]] = {}
    for key, by_attr in seen.items():
        joined = {attr: code for attr, codes in by_attr.items() if (code := _join(codes)) is not None}
        if joined:
            result[key] = joined
    return result


# A name learned from a loop spreads by name to other functions, so it must also say that it
# counts positions: a word of it (split on "_") is one of these (`input_pos_maxp1`,
# `seqlen_offset`, `cache_len`); `value` or `hidden` advanced in some loop carries nothing.
_POSITION_WORDS = frozenset({
    "pos", "position", "positions", "offset", "offsets", "len", "length", "lengths", "seqlen", "seqlens",
    "step", "steps", "idx", "index", "seq", "past", "maxp1", "cur", "start", "end", "count", "seen", "filled",
})


def _position_like(name: str) -> bool:
    return bool(_POSITION_WORDS.intersection(name.lower().split("_")))


_MAX_STEP_DEFINITIONS = catalog.call_graph("step_returns", "max_definitions")


def _step_returns(index: Any) -> _StepReturns:
    """Which functions return a per-step value, and at which tuple positions (-1: the whole
    value), joined to a fixpoint over the symbolic sources of graphlint.analysis.step_values: a
    call by name is per-step when some linted function of that name returns one (a may-fact, as
    a loop advancing an argument is), a method called on `self` when the class's own does."""
    steps = _StepReturns(index)
    for _ in range(_ROUNDS):
        changed = False
        for module, summary in zip(index.modules, index.summaries):
            for function in summary["functions"]:
                for position, sources in (function.get("sret") or {}).items():
                    key = (module, function["q"])
                    if int(position) not in steps.by_function.get(key, ()) and \
                            any(steps.per_step(s, module, function) for s in sources):
                        steps.add(key, int(position))
                        changed = True
        if not changed:
            break
    return steps


class _StepReturns:
    def __init__(self, index: Any):
        self.index = index
        self.by_function: dict[tuple[str, str], set[int]] = {}
        self.by_name: dict[str, set[int]] = {}
        self.definitions: dict[str, int] = {}
        for summary in index.summaries:
            for function in summary["functions"]:
                name = function["q"].rpartition(".")[2]
                self.definitions[name] = self.definitions.get(name, 0) + 1

    def add(self, key: tuple[str, str], position: int) -> None:
        self.by_function.setdefault(key, set()).add(position)
        name = key[1].rpartition(".")[2]
        if self.definitions.get(name, 0) <= _MAX_STEP_DEFINITIONS:
            self.by_name.setdefault(name, set()).add(position)

    def per_step(self, source: Sequence, module: str, function: Mapping[str, Any]) -> bool:
        tag = source[0]
        if tag == "s":
            return True
        if tag == "m" and function.get("cls"):
            own = self.index.function(f"self:{function['cls']}.{source[1]}", module)
            if own is not None:
                return source[2] in self.by_function.get((self.index.modules[own[0]], own[1]["q"]), ())
        return tag in ("c", "m") and source[2] in self.by_name.get(source[1], ())


def _learned_step_keywords(index: Any, steps: _StepReturns) -> set[str]:
    """Keywords some call passes a per-step value under (`kv_offset=kv_offset`), named as a
    position or a length: the parameter of that name is per-step wherever it is taken."""
    if not steps.by_function:
        return set()
    return {keyword for module, summary in zip(index.modules, index.summaries) for function in summary["functions"]
            for keyword, sources in (function.get("skw") or {}).items()
            if _position_like(keyword) and any(steps.per_step(s, module, function) for s in sources)}


def _learned_step_names(index: Any, steps: dict[tuple[str, str], set[str]]) -> tuple[set[str], set[str]]:
    """Project-wide per-step names: the parameters some caller's loop advances (a value passed on
    under its own name stays the same position counter in every function that receives it), and
    the attributes of passed objects that a loop advances (`inference_params.seqlen_offset += n`),
    each named as a position or a length."""
    names = {name for chosen in steps.values() for name in chosen if _position_like(name)}
    attrs = {attr for summary in index.summaries for function in summary["functions"]
             for attr in function.get("step_attrs", ()) if _position_like(attr)}
    return names, attrs
