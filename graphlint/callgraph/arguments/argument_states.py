"""What each parameter of a function in the captured step is at every call that reaches it
there, as far as None and literals go: None ("N"), one literal ("L" + its repr: `spec=True`,
`top_k=-1`), never None ("V"), or either (unknown).

A capture records what its callee was called with. `graph = torch.cuda.graph(g); with graph:
logits = model(inputs_embeds=embeds, position_ids=pos)` leaves `attention_mask` to its default,
None, and `LlamaModel.forward` gets that None passed on as `attention_mask=attention_mask`: the
`if attention_mask is not None:` arms below are not in the graph. Each call's record comes from
graphlint.analysis.argument_records (what each argument is, or which of the caller's parameters it
passes on); the call graph says which calls reach which functions, and the states are joined
over all of them to a fixed point. A function reached in any other way (an nn.Module forward
taken as a root, an entry point, a compiled callable whose calls are not seen) knows nothing
of its parameters. A `**kwargs` passed on holds the keywords its own callers give beyond the
named parameters (for a capturing function outside the region, read at its call sites).
"""
from __future__ import annotations

from typing import Any, Iterable, Mapping

from graphlint.analysis.argument_records import never_none

NONE, SET, EITHER = "N", "V", "?"
# Rounds of the fixed point: a state only rises (unset -> N/V -> either), so this is a bound
# for call chains of pathological depth, never reached on real code.
_MAX_ROUNDS = 64


def _join(first: str | None, second: str | None) -> str | None:
    if first is None:
        return second
    if second is None or first == second:
        return first
    # Two literals, or a literal and another value never None: never None.
    return SET if never_none(first) and never_none(second) else EITHER


def _join_bindings(out: dict[str, str | None], bindings: Iterable[Mapping[str, str | None]],
                   names: Iterable[str]) -> None:
    """Join what each binding gives each named parameter into `out` (a parameter it leaves
    unbound: either)."""
    for binding in bindings:
        for name in names:
            out[name] = _join(out.get(name), binding.get(name, EITHER))


def _known(state: Any) -> bool:
    return state == NONE or never_none(state)


class _Signature:
    """A function's parameters as a call binds them."""

    def __init__(self, facts: Mapping[str, Any]):
        names = [p if type(p) is str else p[0] for p in facts.get("params", ())]
        self.method = bool(facts.get("class")) and "staticmethod" not in facts.get("decorators", ())
        self.positional: list[str] = []
        self.keyword_only: list[str] = []
        self.varargs = self.varkw = False
        for name in names:
            if name.startswith("**"):
                self.varkw = True
            elif name.startswith("*"):
                self.varargs = True
            elif self.varargs:
                self.keyword_only.append(name)
            else:
                self.positional.append(name)
        self.defaults: dict[str, str] = dict(facts.get("defaults", {}))
        # Parameters with a default of any kind (a call may leave them out).
        self.optional = frozenset(facts.get("optional", ()))


class ArgumentStates:
    """The fixed point over the calls the call graph followed.

    `functions`: (path, qualname) -> the call facts of that function (graphlint.analysis.facts.call_facts).
    `kwargs_sites`: function -> the argument records of its call sites, for a function outside
    the region whose `**kwargs` a captured call passes on (None: not all of them are known)."""

    def __init__(self, functions: Mapping[tuple[str, str], Mapping[str, Any]],
                 kwargs_sites: Any = None):
        self.functions = functions
        self.kwargs_sites = kwargs_sites or (lambda key: None)
        self._sites_of: dict[tuple[str, str], Any] = {}  # kwargs_sites, asked once per function
        self._signatures: dict[tuple[str, str], _Signature] = {}
        # callee -> {(caller, index of the call in the caller's calls): bound method call};
        # (None, -1) when it is reached in a way that says nothing of its arguments.
        self.incoming: dict[tuple[str, str], dict[tuple[tuple[str, str] | None, int], bool]] = {}
        # Roots that may be what a capture calls (a forward taken as a root): the capture's calls
        # whose arguments they accept say what they get.
        self.candidates: dict[tuple[str, str], list[tuple[tuple[str, str], int, bool]]] = {}

    def signature(self, key: tuple[str, str]) -> _Signature:
        found = self._signatures.get(key)
        if found is None:
            found = self._signatures[key] = _Signature(self.functions.get(key, {}))
        return found

    def record(self, caller: tuple[str, str], index: int, field: str = "args") -> Any:
        """The argument record of the caller's call at `index` of its calls (`field` "once_args":
        of its one-time calls); None when there is none."""
        args = self.functions.get(caller, {}).get(field)
        return args[index] if args is not None and 0 <= index < len(args) else None

    def add_call(self, callee: tuple[str, str], caller: tuple[str, str] | None = None, index: int = -1,
                 bound: bool = True) -> None:
        """One way `callee` is reached: the caller's call at `index` of its calls (no caller:
        reached in a way that says nothing of what it is passed)."""
        self.incoming.setdefault(callee, {})[(caller, index)] = bound

    def add_candidate(self, callee: tuple[str, str], caller: tuple[str, str], index: int, bound: bool) -> None:
        """`callee` may be what the caller's call at `index` runs (a capture's call whose callee is
        not resolved, or run in place of the one resolved): it counts if the call binds to it."""
        self.incoming.setdefault(callee, {})
        self.candidates.setdefault(callee, []).append((caller, index, bound))

    def _records(self, key: tuple[str, str]) -> list[tuple[tuple[str, str] | None, Any, bool]]:
        return [(caller, self.record(caller, index) if caller is not None else None, bound)
                for (caller, index), bound in self.incoming[key].items()]

    def solve(self, keys: Iterable[tuple[str, str]]) -> dict[tuple[str, str], dict[str, str]]:
        """(path, qualname) -> {parameter: "N" | "V" | a literal} for the parameters every call
        agrees on."""
        keys = [key for key in keys if key in self.incoming]
        states: dict[tuple[str, str], dict[str, str | None]] = {key: {} for key in keys}
        for _ in range(_MAX_ROUNDS):
            changed = False
            for key in keys:
                new = self._state(key, states)
                if new != states[key]:
                    states[key], changed = new, True
            if not changed:
                break
        known: dict[tuple[str, str], dict[str, str]] = {}
        for key, params in states.items():
            # What a parameter holds on entry: a None test after the function binds it again
            # carries no guard (graphlint.analysis.file drops it).
            kept = {name: state for name, state in params.items() if _known(state)}
            if kept:
                known[key] = kept
        return known

    def _state(self, key: tuple[str, str], states: Mapping) -> dict[str, str | None]:
        signature = self.signature(key)
        names = signature.positional + signature.keyword_only
        if signature.method and names and names[0] in ("self", "cls"):
            names = names[1:]
        out: dict[str, str | None] = {}
        ways = [(caller, record, bound, False) for caller, record, bound in self._records(key)]
        ways += [(caller, self.record(caller, index), bound, True) for caller, index, bound in self.candidates.get(key, ())]
        accepted = False
        for caller, record, bound, candidate in ways:
            bindings = self._bind(signature, caller, record, bound, states)
            if bindings is None:
                if candidate:
                    continue  # a call it cannot be the callee of
                bindings = [{}]
            accepted = accepted or candidate
            _join_bindings(out, bindings, names)
        if key in self.candidates and not accepted:
            out = {name: EITHER for name in names}  # no capture call it fits: nothing known
        return out

    def passed_states(self, key: tuple[str, str], records: list) -> dict[str, str]:
        """What the calls of `key` whose argument records are `records` ((record, binds a
        receiver) pairs: every call in the linted code) pass each parameter, where they agree."""
        signature = self.signature(key)
        names = signature.positional + signature.keyword_only
        out: dict[str, str | None] = {}
        for record, bound in records:
            _join_bindings(out, self._bind(signature, None, record, bound, {}) or [{}], names)
        return {name: state for name, state in out.items() if _known(state)}

    def _bind(self, signature: _Signature, caller: tuple[str, str] | None, record: Any, bound: bool,
              states: Mapping) -> list[dict[str, str | None]] | None:
        """What one call gives each parameter: one binding, or one per call site of the
        caller when it passes its `**kwargs` on; None when the call does not fit the signature
        (more arguments than parameters, a keyword it does not take, a required one missing)."""
        if record is None:
            return [{}]
        positional_names = signature.positional[1:] if signature.method and bound else list(signature.positional)
        given: dict[str, Any] = {}
        star = False
        for index, state in enumerate(record[0]):
            if state == "*":
                star = True
                break
            if index < len(positional_names):
                given[positional_names[index]] = state
            elif not signature.varargs:
                return None  # more arguments than parameters: not this function's call
        accepted = set(positional_names) | set(signature.keyword_only)
        for name, state in record[1].items():
            if name == "**":
                continue
            if name in accepted:
                given[name] = state
            elif not signature.varkw:
                return None
        if not star and "**" not in record[1] and any(
                name not in given and name not in signature.defaults and name not in signature.optional
                for name in positional_names + signature.keyword_only):
            return None  # a required parameter left out
        caller_states = states.get(caller, {}) if caller is not None else {}

        def value(state: Any) -> str | None:
            if type(state) is str and state.startswith("=") and not state.startswith("=**"):
                return caller_states.get(state[1:], EITHER if caller not in states else None)
            return state if _known(state) else EITHER

        spread = record[1].get("**", 0)
        extras: list[dict[str, Any]] | None = [{}]
        if spread != 0:
            extras = self._spread(caller, spread, states)
        bindings = []
        for extra in extras if extras is not None else [None]:
            binding: dict[str, str | None] = {}
            for name in positional_names + signature.keyword_only:
                if name in given:
                    binding[name] = value(given[name])
                elif star and name in positional_names:
                    binding[name] = EITHER  # an element of *args, perhaps
                elif extra is None:
                    binding[name] = EITHER  # a **kwargs whose keys are not known
                elif name in extra:
                    binding[name] = extra[name]
                else:
                    binding[name] = signature.defaults.get(name, EITHER)
            bindings.append(binding)
        return bindings

    def _spread(self, caller: tuple[str, str] | None, spread: Any, states: Mapping) -> list[dict[str, Any]] | None:
        """The keywords beyond its named parameters that each call of `caller` passes, when
        `spread` is the caller's own `**kwargs` passed on; None when not known."""
        if caller is None or type(spread) is not str or not spread.startswith("=**"):
            return None
        if caller in self.incoming:
            sites = [(record, bound) for _, record, bound in self._records(caller)]
        else:
            if caller not in self._sites_of:
                self._sites_of[caller] = self.kwargs_sites(caller)  # a scan of the project: once
            sites = self._sites_of[caller]
        if not sites:
            return None
        signature = self.signature(caller)
        named = set(signature.positional) | set(signature.keyword_only)
        found = []
        for record, bound in sites:
            if record is None or "**" in record[1] or "*" in record[0]:
                return None
            found.append({name: state if _known(state) else EITHER
                          for name, state in record[1].items() if name not in named})
        return found


def bound_call(func: Any) -> bool:
    """Whether a call binds its receiver as the first parameter (`self.f(x)`, `module(x)`,
    `super().f(x)`), as opposed to a method called through its class (`Base.f(self, x)`)."""
    if type(func) in (tuple, list) and func and func[0] == "a":
        receiver = func[1]
        return not (type(receiver) is str and receiver[:1].isupper())
    return True
