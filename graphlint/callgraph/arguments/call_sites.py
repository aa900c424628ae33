"""The call sites of the linted functions, found by the name their callee ends in, and what
each one passes to a parameter (Project's CallResults reads them for parameter values)."""
from __future__ import annotations

from typing import Any, Sequence

from graphlint.callgraph.tags import DYN

# What a call site passes where `*args` / `**kwargs` before the parameter may hold it.
SPREAD = frozenset({(DYN, "an argument spread with * or **")})


def last_name(expr: Any) -> str:
    """The name a callee expression ends in: `f`, `self.step` -> `step`; "" for anything else."""
    if type(expr) is str:
        return expr
    if type(expr) is tuple and expr and expr[0] == "a":
        return expr[2]
    return ""


class CallSites:
    """The call-site half of Project's evaluation (it provides eval, _arg, mro, classes,
    functions and the matchers of callees)."""

    functions: dict
    classes: dict
    _sites: Any
    _passing: set

    def _call_sites(self) -> dict[str, list[tuple[tuple, tuple]]]:
        """Every call with arguments recorded, with the scope it is made in, by its callee's last
        name (built once; the call graph reads it too, for what capturing functions are passed)."""
        if self._sites is None:
            self._sites = {}
            for key, function in self.functions.items():
                owner = (key[0], function["class"]) if function["class"] else None
                env = function.get("env") or {}
                for call in function["calls"] + function["once"]:
                    last = last_name(call[1])
                    if len(call) >= 3 and last:
                        scope = (key[0], key[1], owner)
                        self._sites.setdefault(last, []).append((call, scope))
                        # A call through a local alias (`time_fn = timed_with_graph if graph else
                        # timed; time_fn(go)`) is a call site of what the alias may name too.
                        if type(call[1]) is str and call[1] in env:
                            for alias in _aliased_names(env[call[1]]) - {last}:
                                self._sites.setdefault(alias, []).append((call, scope))
        return self._sites

    def call_sites(self, name: str) -> list[tuple[tuple, tuple]]:
        """(call, scope) of every call with arguments whose callee's last name is `name`."""
        return self._call_sites().get(name, [])

    def _site_values(self, path: str, qualname: str, index: int, param: str, self_class: tuple | None):
        """(caller's scope, what the call passes) for each call site that runs the function;
        None where the call leaves the parameter out, SPREAD where `*args` may hold it."""
        if not qualname.endswith(".__init__") or self_class == (path, qualname[: -len(".__init__")]):
            self_class = None  # only another class's construction runs an inherited __init__
        function = self.functions.get((path, qualname))
        if function is None:
            return
        method = function["class"] is not None and "staticmethod" not in function["decorators"]
        if qualname.endswith(".__init__"):
            cls = (path, qualname[: -len(".__init__")])
            if cls not in self.classes:
                return
            short, matches = cls[1].rsplit(".", 1)[-1], lambda values: cls in self._classes_of(values)
        else:
            key = (path, qualname)
            short = qualname.rsplit(".", 1)[-1]
            matches = lambda values: key in self._functions_run(values)  # noqa: E731
        position = index - 1 if method else index  # a method's `self` is not passed
        if self_class is not None:
            sites, matches = self._subclass_init_sites(cls, index, position, self_class)
        else:
            sites = [(call, scope, position) for call, scope in self._call_sites().get(short, ())]
            if qualname.endswith(".__init__"):
                # `cls(...)` in a classmethod builds the class too (`model = cls(config, backbone_cls)`).
                sites += [(call, scope, position) for call, scope in self._call_sites().get("cls", ())]
        for call, scope, position in sites:
            if (self._passing and (call, scope[:2]) in self._passing) or not matches(self.eval(call[1], scope)):
                continue
            args = call[2] if len(call) > 2 else ()
            kwargs = dict(call[3]) if len(call) > 3 else {}
            spread = any(type(a) is tuple and a[:1] == ("star",) for a in args[:position + 1])
            self._passing.add((call, scope[:2]))  # a recursive call passing its own parameter on
            try:
                if param in kwargs:
                    passed = self.eval(kwargs[param], scope)
                elif 0 <= position < len(args) and not spread:
                    passed = self._arg(args, position, scope)
                else:
                    passed = SPREAD if spread or any(type(a) is tuple and a[:1] == ("star",) for a in args) else None
            finally:
                self._passing.discard((call, scope[:2]))
            yield scope, passed

    def _subclass_init_sites(self, cls: tuple[str, str], index: int, position: int, self_class: tuple):
        """The calls that run `cls.__init__` for an instance of its subclass `self_class`: the
        subclass's own construction (when it inherits this `__init__`) and the
        `super().__init__(model=model)` of the classes between them (`Base.__init__(self, model)`
        passes `self` as well), with the matcher of their callees."""
        chain = self.mro(self_class)[0]
        below = chain[: chain.index(cls)] if cls in chain else []
        sites = []
        if not any("__init__" in self.classes[c]["methods"] for c in below):
            sites = [(call, scope, position) for call, scope in self._call_sites().get(self_class[1].rsplit(".", 1)[-1], ())]
        sites += [(call, scope, position if _through_super(call[1]) else index)
                  for call, scope in self._call_sites().get("__init__", ()) if scope[2] in below]
        init = (cls[0], f"{cls[1]}.__init__")
        return sites, lambda values: self_class in self._classes_of(values) or init in self._functions_run(values)


def _aliased_names(exprs: Sequence) -> set[str]:
    """The last names of the functions a local name is bound to (`f = a if c else b`: a, b)."""
    names: set[str] = set()
    for expr in exprs:
        if type(expr) is tuple and expr[:1] == ("u",):
            names |= _aliased_names(expr[1])
        else:
            last = last_name(expr)
            if last:
                names.add(last)
    return names


def _through_super(func_expr: Any) -> bool:
    """`super().__init__` (bound: `self` is not passed), not `Base.__init__(self, ...)`."""
    base = func_expr[1] if type(func_expr) is tuple and func_expr[0] == "a" else None
    return type(base) is tuple and base[0] == "c" and base[1] == "super"
