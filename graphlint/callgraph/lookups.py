"""Where a name's value is bound: a module's own names and those it star-imports, and what
a class's methods assign to `self.attr` for an instance of a given class (graphlint.callgraph.values
evaluates the expressions)."""
from __future__ import annotations

from typing import Any, Callable, Sequence

from graphlint.analysis.facts.call_facts import STAR_IMPORT
from graphlint.callgraph.arguments.call_sites import last_name
from graphlint.callgraph.calls import UNPASSED
from graphlint.callgraph.tags import DYN, MOD

_MAX_STAR_DEPTH = 3  # star imports of star imports followed


def _only_unpassed_parameter(values) -> bool:
    """A parameter's value where no linted call passes it (CallResults.parameter_value)."""
    return len(values) == 1 and next(iter(values))[0] == DYN and next(iter(values))[1].startswith(UNPASSED)


class Lookups:
    """The binding half of Project's evaluation (it provides classes, functions, globals,
    imports, modules, eval, resolve_import and module_name_value)."""

    classes: dict
    functions: dict
    globals: dict
    imports: dict
    modules: dict
    eval: Callable[[Any, tuple], frozenset]

    def module_defines(self, path: str, name: str) -> bool:
        """Whether the module binds `name` itself: a class, a function, a global or an import."""
        return ((path, name) in self.classes or (path, name) in self.functions or name in self.globals.get(path, {})
                or name in self.imports.get(path, {}))

    def star_defines(self, path: str, name: str, depth: int = 0) -> bool:
        """Whether a module the file star-imports (`from .communication_op import *`) has `name`."""
        return depth < _MAX_STAR_DEPTH and any(
            self.module_defines(star, name) or self.star_defines(star, name, depth + 1)
            for star in self._star_modules(path))

    def star_value(self, path: str, name: str, depth: int = 0) -> set:
        """`name` as the first star-imported module that has it binds it."""
        for star in self._star_modules(path):
            if self.module_defines(star, name):
                return self.module_name_value(star, name)
            if depth < _MAX_STAR_DEPTH and self.star_defines(star, name, depth + 1):
                return self.star_value(star, name, depth + 1)
        return set()

    def _star_modules(self, path: str) -> list[str]:
        """The linted files `path` star-imports, in import order."""
        found = []
        for key, target in self.imports.get(path, {}).items():
            if key.startswith(STAR_IMPORT):
                found.extend(self.modules[value[1]] for value in self.resolve_import(path, target)
                             if value[0] == MOD and value[1] in self.modules)
        return found

    def assignments(self, owner: tuple[str, str], attr: str, order: Sequence[tuple[str, str]]) -> list:
        """What `owner`'s methods assign to `self.attr`, less what a method that a class before it
        in `order` overrides assigns: an instance of `LlamaCudagraph`, whose `alloc` replaces
        `Llama.alloc` without calling it, holds only the static cache its own `alloc` builds."""
        return [(method, expr) for method, expr in self.classes[owner]["attrs"].get(attr, ())
                if not method or not self._overridden(owner, method.rsplit(".", 1)[-1], order)]

    def assigned_values(self, order: Sequence[tuple[str, str]], attr: str, self_class: tuple[str, str] | None) -> set:
        """The values the classes of `order` assign to `self.attr`. A setter's assignment of a
        parameter no linted call passes (`set_input_embeddings(self, value): self.embed_tokens =
        value`, which only another library calls) counts only when nothing else assigns the
        attribute: it says nothing of what the constructor put there."""
        found: set = set()
        unset: set = set()
        for owner in order:
            for method, expr in self.assignments(owner, attr, order):
                scope = (owner[0], method, self_class or owner) if method else (owner[0], None, None)
                values = self.eval(expr, scope)
                if method and not method.endswith(".__init__") and _only_unpassed_parameter(values):
                    unset |= values
                else:
                    found |= values
        return found or unset

    def _overridden(self, owner: tuple[str, str], name: str, order: Sequence[tuple[str, str]]) -> bool:
        for cls in order:
            if cls == owner:
                return False
            if name in self.classes[cls]["methods"]:
                function = self.functions.get((cls[0], f"{cls[1]}.{name}"))
                # `super().alloc()` or `Llama.alloc(self)` runs the base's too.
                return function is not None and not any(
                    last_name(call[1]) == name and not (type(call[1]) is tuple and call[1][1] == "self")
                    for call in function["calls"] + function["once"])
        return False

    def scope_of(self, key: tuple[str, str]) -> tuple:
        """The scope a function's own expressions are evaluated in: (path, qualname, its class)."""
        owner = self.functions.get(key, {}).get("class")
        return (key[0], key[1], (key[0], owner) if owner else None)
