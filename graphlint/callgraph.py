"""The static call graph across the linted files, and the regions it implies.

From the entry points (`[tool.graphlint] entry-points` and `# graphlint: entry` markers) the
graph follows plain calls and imports, `self.method()`, submodules assigned in `__init__` and
called (`self.attn(x)` reaches `Attention.forward`), module lists iterated (`for layer in
self.layers: layer(x)`), `super().forward`, and functions passed as arguments. Nothing is
imported or run: the per-file facts (graphlint.callgraph_facts) are evaluated here, lazily,
once every file is known. A call whose target cannot be determined is listed in `unresolved`
with the reason, never guessed; calls into libraries (torch, the standard library) are not
listed. Regions: entry points and their callees are `captured`; an `eager` function and what
only it reaches are `eager`; a `host` function is `host` and is not followed; the rest is
`unreached`.
"""
from __future__ import annotations

import builtins
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

from graphlint.config import Config, ConfigError
from graphlint.regions import CAPTURED, EAGER, HOST, UNREACHED, Placement, listed, module_name

# Values. A value is a tuple whose first item is one of these tags.
INST, CLS, FN, SUPER, MOD = "inst", "cls", "fn", "super", "mod"
LIST, TUPLE, DICT, BOUND = "list", "tuple", "dict", "bound"
EXT, PEXT, DYN, BUILTIN = "ext", "pext", "dyn", "builtin"  # library, project outside the lint, unknown

_EMPTY: frozenset = frozenset()
_BUILTINS = frozenset(dir(builtins))
_LIST_TYPES = frozenset({"list", "List", "Sequence", "MutableSequence", "Iterable", "Iterator", "Collection",
                         "set", "Set", "frozenset", "FrozenSet", "deque", "ModuleList", "Generator",
                         "AbstractSet", "Reversible"})
_DICT_TYPES = frozenset({"dict", "Dict", "Mapping", "MutableMapping", "OrderedDict", "defaultdict", "ModuleDict"})
_WRAPPERS = frozenset({"Optional", "Final", "Annotated", "ClassVar", "Required", "NotRequired", "ReadOnly"})
_CONTAINER_METHODS = frozenset({"items", "values", "keys", "get", "pop", "setdefault", "copy", "__getitem__"})
_SEQ_BUILTINS = frozenset({"list", "tuple", "sorted", "reversed", "iter", "set", "frozenset"})


class EntryPointError(ConfigError):
    """An entry point that names no linted function (exit code 2 in the CLI)."""


@dataclass
class CallGraph:
    """What `build` returns: regions for every linted function, the reachable set with its
    edges, and the calls that could not be resolved."""

    placements: dict[tuple[str, str], Placement] = field(default_factory=dict)
    unresolved: list[dict[str, Any]] = field(default_factory=list)
    entries: list[tuple[str, str]] = field(default_factory=list)
    # (path, qualname) -> callees, for every function reached (host ones have none).
    edges: dict[tuple[str, str], list[tuple[str, str]]] = field(default_factory=dict)
    order: list[tuple[str, str]] = field(default_factory=list)  # reachable, in discovery order
    external_calls: int = 0

    def reachable(self) -> list[tuple[str, str]]:
        return list(self.order)


def _freeze(value: Any) -> Any:
    """JSON lists -> tuples (hashable, so evaluations can be memoised); kwargs dict -> pairs."""
    if isinstance(value, list):
        return tuple(_freeze(v) for v in value)
    if isinstance(value, dict):
        return tuple(sorted((k, _freeze(v)) for k, v in value.items()))
    return value


def package_module(path: str, root: Path, _cache: dict[Path, bool] | None = None) -> str:
    """The module name Python would import the file as: folders with `__init__.py` above it
    make the package (`transformers/models/llama/modeling_llama.py` anywhere on disk). A file
    that is not on disk (an in-memory snippet) is named from its relative path."""
    full = Path(path) if Path(path).is_absolute() else root / path
    if not full.is_file():
        return module_name(path)
    parts = [] if full.name == "__init__.py" else [full.stem]
    folder = full.parent
    while (folder / "__init__.py").is_file() and folder.parent != folder:
        parts.insert(0, folder.name)
        folder = folder.parent
    return ".".join(parts) if parts else full.stem


class Project:
    """Every linted file's facts, indexed, and the evaluator of the facts' expressions."""

    def __init__(self, files: Sequence[Mapping[str, Any]], root: Path):
        self.modules: dict[str, str] = {}  # module name -> path
        self.module_of: dict[str, str] = {}
        self.alt_module_of: dict[str, str] = {}  # the path-based name, for entry-point specs
        self.is_package: dict[str, bool] = {}
        self.functions: dict[tuple[str, str], dict] = {}
        self.classes: dict[tuple[str, str], dict] = {}
        self.imports: dict[str, dict[str, str]] = {}
        self.globals: dict[str, dict[str, tuple]] = {}
        self.markers: dict[tuple[str, str], str | None] = {}
        self.method_names: dict[str, list[str]] = {}
        for file in files:
            path = file["path"]
            facts = (file.get("extra") or {}).get("calls") or {}
            for function in file.get("functions", []):
                self.markers[(path, function["qualname"])] = function.get("marker")
            if not facts:
                continue
            module = package_module(path, root)
            self.modules.setdefault(module, path)
            self.module_of[path] = module
            self.alt_module_of[path] = module_name(path)
            self.is_package[path] = path.endswith("__init__.py")
            self.imports[path] = dict(facts.get("imports", {}))
            self.globals[path] = {k: _freeze(v) for k, v in facts.get("globals", {}).items()}
            for qualname, data in facts.get("classes", {}).items():
                self.classes[(path, qualname)] = {
                    "bases": _freeze(data.get("bases", [])),
                    "methods": data.get("methods", {}),
                    "attrs": {k: _freeze(v) for k, v in data.get("attrs", {}).items()},
                }
                for method in data.get("methods", {}):
                    self.method_names.setdefault(method, []).append(f"{qualname}.{method}")
            for qualname, data in facts.get("functions", {}).items():
                self.functions[(path, qualname)] = {
                    "params": [(name, _freeze(ann)) for name, ann in data.get("params", [])],
                    "class": data.get("class"),
                    "decorators": data.get("decorators", []),
                    "env": {k: _freeze(v) for k, v in data.get("env", {}).items()},
                    "calls": _freeze(data.get("calls", [])),
                    "returns": _freeze(data.get("returns", [])),
                    "returns_ann": _freeze(data.get("returns_ann")),
                }
        self.project_tops = {name.split(".")[0] for name in self.modules}
        self._memo: dict[tuple, frozenset] = {}
        self._active: set[tuple] = set()
        self._mro: dict[tuple[str, str], tuple[list, list]] = {}

    # ----- names ------------------------------------------------------------------------------
    def eval(self, expr: Any, scope: tuple) -> frozenset:
        if expr is None:
            return _EMPTY
        key = (scope, expr)
        cached = self._memo.get(key)
        if cached is not None:
            return cached
        if key in self._active:
            return _EMPTY  # a cycle (x = f(x)): what the other assignments give is enough
        self._active.add(key)
        try:
            result = frozenset(self._eval(expr, scope))
        finally:
            self._active.discard(key)
        self._memo[key] = result
        return result

    def _eval(self, expr: tuple, scope: tuple) -> Iterable[tuple]:
        tag = expr[0]
        if tag == "n":
            return self.name(expr[1], scope)
        if tag == "a":
            return self.attr(self.eval(expr[1], scope), expr[2])
        if tag == "c":
            return self.call_result(expr, scope)
        if tag in ("i", "ix"):
            return self.index(self.eval(expr[1], scope), expr[2] if tag == "ix" else None)
        if tag == "s":
            return self.sliced(self.eval(expr[1], scope))
        if tag == "it":
            return self.element(self.eval(expr[1], scope))
        if tag == "l":
            return {(LIST, self._elements(expr[1], scope))}
        if tag == "t":
            return {(TUPLE, tuple(self.eval(e, scope) for e in expr[1]))}
        if tag == "d":
            keys = frozenset().union(*(self.eval(k, scope) for k in expr[1])) if expr[1] else _EMPTY
            values = frozenset().union(*(self.eval(v, scope) for v in expr[2])) if expr[2] else _EMPTY
            return {(DICT, keys, values)}
        if tag == "u":
            return frozenset().union(*(self.eval(e, scope) for e in expr[1]))
        if tag == "ann":
            return self.annotation(expr[1], scope)
        if tag == "enter":
            out: set = set()
            for value in self.eval(expr[1], scope):
                if value[0] == INST:
                    out |= self.returns_of(self.member(value[1], "__enter__", value[1]))
            return out
        if tag == "star":
            return self.element(self.eval(expr[1], scope))
        if tag == "?":
            return {(DYN, "a computed value")}
        return _EMPTY

    def _elements(self, items: Sequence, scope: tuple) -> frozenset:
        out: set = set()
        for item in items:
            if item is not None and item[0] == "star":
                out |= self.element(self.eval(item[1], scope))
            else:
                out |= self.eval(item, scope)
        return frozenset(out)

    def name(self, name: str, scope: tuple) -> set:
        path, qualname, self_class = scope
        while qualname is not None:
            function = self.functions.get((path, qualname))
            if function is None:
                # A class between two functions: its body is not a scope for inner functions.
                qualname = qualname.rsplit(".", 1)[0] if "." in qualname else None
                continue
            found: set = set()
            bound = False
            for index, (param, annotation) in enumerate(function["params"]):
                if param.lstrip("*") != name:
                    continue
                bound = True
                decorators = function["decorators"]
                owner = (path, function["class"]) if function["class"] else None
                if index == 0 and owner is not None and "staticmethod" not in decorators:
                    cls = self_class or owner
                    found.add((CLS, cls) if "classmethod" in decorators else (INST, cls))
                elif param.startswith("**"):
                    found.add((DICT, _EMPTY, frozenset({(DYN, f"keyword arguments `**{name}`")})))
                elif param.startswith("*"):
                    found.add((LIST, frozenset({(DYN, f"positional arguments `*{name}`")})))
                elif annotation is not None:
                    found |= self.annotation(annotation, (path, qualname, self_class))
                else:
                    found.add((DYN, f"parameter `{name}`"))
            assignments = function["env"].get(name)
            if assignments:
                bound = True
                for expr in assignments:
                    found |= self.eval(expr, (path, qualname, self_class))
            nested = (path, f"{qualname}.{name}")
            if nested in self.functions:
                bound = True
                found.add((FN, nested, None))
            if bound:
                return found
            qualname = qualname.rsplit(".", 1)[0] if "." in qualname else None
        return self.module_name_value(path, name)

    def module_name_value(self, path: str, name: str) -> set:
        if (path, name) in self.classes:
            return {(CLS, (path, name))}
        if (path, name) in self.functions:
            return {(FN, (path, name), None)}
        assignments = self.globals.get(path, {}).get(name)
        if assignments:
            out: set = set()
            for expr in assignments:
                out |= self.eval(expr, (path, None, None))
            return out
        target = self.imports.get(path, {}).get(name)
        if target is not None:
            return self.resolve_import(path, target)
        if name in _BUILTINS:
            return {(BUILTIN, name)}
        return {(DYN, f"undefined name `{name}`")}

    def resolve_import(self, path: str, target: str) -> set:
        if not target.startswith("."):
            return self.resolve_absolute(target, relative=False)
        level = len(target) - len(target.lstrip("."))
        rest = target[level:]
        parts = self.module_of.get(path, "").split(".")
        package = parts if self.is_package.get(path) else parts[:-1]
        if level - 1 > len(package):
            return {(PEXT, target)}
        base = package[: len(package) - (level - 1)]
        return self.resolve_absolute(".".join(base + ([rest] if rest else [])), relative=True)

    def resolve_absolute(self, dotted: str, relative: bool) -> set:
        parts = dotted.split(".")
        for k in range(len(parts), 0, -1):
            prefix = ".".join(parts[:k])
            if prefix in self.modules:
                values: set = {(MOD, prefix)}
                for attr in parts[k:]:
                    values = self.attr(frozenset(values), attr)
                return values
        if relative or parts[0] in self.project_tops:
            return {(PEXT, dotted)}
        return {(EXT, dotted)}

    # ----- types ------------------------------------------------------------------------------
    def annotation(self, ann: Any, scope: tuple) -> set:
        if not ann:
            return set()
        if ann[0] == "tu":
            out: set = set()
            for part in ann[1]:
                out |= self.annotation(part, scope)
            return out
        _, name, args = ann
        short = name.rsplit(".", 1)[-1]
        if name in ("None", "...", "[]"):
            return set()
        if short in _WRAPPERS:
            return self.annotation(args[0], scope) if args else set()
        if short == "Union":
            out = set()
            for part in args:
                out |= self.annotation(part, scope)
            return out
        if short in ("tuple", "Tuple"):
            if len(args) == 2 and args[1] == ("ty", "...", ()):
                return {(LIST, frozenset(self.annotation(args[0], scope)))}
            return {(TUPLE, tuple(frozenset(self.annotation(a, scope)) for a in args))}
        if short in _LIST_TYPES:
            return {(LIST, frozenset(self.annotation(args[0], scope)) if args else _EMPTY)}
        if short in _DICT_TYPES:
            key = frozenset(self.annotation(args[0], scope)) if len(args) > 0 else _EMPTY
            value = frozenset(self.annotation(args[1], scope)) if len(args) > 1 else _EMPTY
            return {(DICT, key, value)}
        if short in ("type", "Type"):
            return {(CLS, v[1]) for v in self.annotation(args[0], scope) if v[0] == INST} if args else set()
        if short == "Callable":
            return {(DYN, "a value annotated Callable")}
        head, *rest = name.split(".")
        values = frozenset(self.name(head, scope))
        for attr in rest:
            values = frozenset(self.attr(values, attr))
        out = set()
        for value in values:
            if value[0] == CLS:
                out.add((INST, value[1]))
            elif value[0] in (EXT, PEXT):
                out.add(value)
        return out

    def mro(self, cls: tuple[str, str]) -> tuple[list, list]:
        """Linted classes in method-resolution order (depth-first, left to right, as C3 for
        single inheritance), and the bases outside the linted files."""
        cached = self._mro.get(cls)
        if cached is not None:
            return cached
        self._mro[cls] = ([cls], [])  # cycle guard
        order: list = [cls]
        outside: list = []
        path, qualname = cls
        outer = qualname.rsplit(".", 1)[0] if "." in qualname else None
        scope = (path, outer if (path, outer or "") in self.functions else None, None)
        for base in self.classes[cls]["bases"]:
            for value in self.eval(base, scope):
                if value[0] == CLS and value[1] != cls:
                    sub, sub_outside = self.mro(value[1])
                    order.extend(c for c in sub if c not in order)
                    outside.extend(b for b in sub_outside if b not in outside)
                elif value[0] in (EXT, PEXT) and value not in outside:
                    outside.append(value)
        self._mro[cls] = (order, outside)
        return order, outside

    def member(self, cls: tuple[str, str], attr: str, self_class: tuple[str, str] | None,
               instance: bool = True, after: tuple[str, str] | None = None) -> set:
        order, outside = self.mro(self_class if after is not None and self_class else cls)
        if after is not None:
            order = order[order.index(after) + 1:] if after in order else []
        for owner in order:
            decorators = self.classes[owner]["methods"].get(attr)
            if decorators is None:
                continue
            key = (owner[0], f"{owner[1]}.{attr}")
            if key not in self.functions:
                continue
            if "property" in decorators or "cached_property" in decorators:
                return self.returns_of({(FN, key, self_class or owner)}) if instance else set()
            if "staticmethod" in decorators:
                return {(FN, key, None)}
            return {(FN, key, self_class or owner)}
        found: set = set()
        for owner in order:
            for method, expr in self.classes[owner]["attrs"].get(attr, ()):
                scope = (owner[0], method, self_class or owner) if method else (owner[0], None, None)
                found |= self.eval(expr, scope)
        if found:
            return found
        if outside:
            base = next((b for b in outside if b[0] == PEXT), outside[0])
            return {(base[0], f"{base[1]}.{attr}")}
        if after is not None:
            return set()
        return {(DYN, f"`{attr}`, which {cls[1]} does not define")}

    def attr(self, values: frozenset, attr: str) -> set:
        out: set = set()
        for value in values:
            tag = value[0]
            if tag == INST:
                out |= self.member(value[1], attr, value[1])
            elif tag == CLS:
                out |= self.member(value[1], attr, value[1], instance=False)
            elif tag == SUPER:
                out |= self.member(value[1], attr, value[2], after=value[1])
            elif tag == MOD:
                out |= self._module_attr(value[1], attr)
            elif tag in (LIST, TUPLE, DICT):
                if attr in _CONTAINER_METHODS:
                    out.add((BOUND, attr, value))
            elif tag in (EXT, PEXT):
                out.add((tag, _join(value[1], attr)))
            elif tag == DYN:
                out.add(value)
        return out

    def _module_attr(self, module: str, attr: str) -> set:
        submodule = f"{module}.{attr}"
        path = self.modules[module]
        if (path, attr) in self.classes or (path, attr) in self.functions or attr in self.globals.get(path, {}) \
                or attr in self.imports.get(path, {}):
            return self.module_name_value(path, attr)
        if submodule in self.modules:
            return {(MOD, submodule)}
        return {(PEXT, submodule)}

    # ----- containers ---------------------------------------------------------------------------
    def element(self, values: frozenset) -> set:
        out: set = set()
        for value in values:
            tag = value[0]
            if tag == LIST:
                out |= value[1]
            elif tag == TUPLE:
                for part in value[1]:
                    out |= part
            elif tag == DICT:
                out |= value[1]
            elif tag in (EXT, PEXT):
                out.add((tag, _join(value[1], "[]")))
            elif tag == DYN:
                out.add(value)
        return out

    def index(self, values: frozenset, position: int | None) -> set:
        out: set = set()
        for value in values:
            tag = value[0]
            if tag == TUPLE and position is not None and -len(value[1]) <= position < len(value[1]):
                out |= value[1][position]
            elif tag == DICT:
                out |= value[2]
            elif tag == INST:
                out |= self.returns_of(self.member(value[1], "__getitem__", value[1]))
            else:
                out |= self.element(frozenset({value}))
        return out

    def sliced(self, values: frozenset) -> set:
        out: set = set()
        for value in values:
            if value[0] == TUPLE:
                out.add((LIST, frozenset().union(*value[1]) if value[1] else _EMPTY))
            elif value[0] in (LIST, EXT, PEXT, DYN):
                out.add(value)
        return out

    # ----- calls --------------------------------------------------------------------------------
    def returns_of(self, callees: Iterable[tuple]) -> set:
        out: set = set()
        for value in callees:
            if value[0] != FN:
                continue
            key, self_class = value[1], value[2]
            function = self.functions.get(key)
            if function is None:
                continue
            scope = (key[0], key[1], self_class)
            if function["returns_ann"]:
                out |= self.annotation(function["returns_ann"], scope)
            else:
                for expr in function["returns"]:
                    out |= self.eval(expr, scope)
        return out

    def call_targets(self, values: frozenset) -> list[tuple]:
        """The functions a call of these values runs: FN values with their `self` class."""
        targets: list[tuple] = []
        for value in values:
            tag = value[0]
            if tag == FN:
                key, self_class = value[1], value[2]
                owner = self.functions.get(key, {}).get("class")
                if self_class is None and owner is not None:
                    self_class = (key[0], owner)
                targets.append((FN, key, self_class))
            elif tag == CLS:
                targets.extend(v for v in self.member(value[1], "__init__", value[1]) if v[0] == FN)
            elif tag == INST:
                for method in ("__call__", "forward"):
                    order, _ = self.mro(value[1])
                    if any(method in self.classes[c]["methods"] for c in order):
                        targets.extend(v for v in self.member(value[1], method, value[1]) if v[0] == FN)
        return targets

    def call_result(self, expr: tuple, scope: tuple) -> set:
        func = self.eval(expr[1], scope)
        args = expr[2] if len(expr) > 2 else ()
        kwargs = dict(expr[3]) if len(expr) > 3 else {}
        out: set = set()
        for value in func:
            tag = value[0]
            if tag == FN:
                out |= self.returns_of(self.call_targets(frozenset({value})))
            elif tag == CLS:
                out.add((INST, value[1]))
            elif tag == INST:
                out |= self.returns_of(self.call_targets(frozenset({value})))
            elif tag == BUILTIN:
                out |= self._builtin_call(value[1], args, kwargs, scope)
            elif tag == BOUND:
                out |= self._container_call(value[1], value[2])
            elif tag == EXT:
                out |= self._library_call(value[1], args, scope)
            elif tag == PEXT:
                out.add((PEXT, _join(value[1], "()")))
            elif tag == DYN:
                out.add((DYN, f"the result of {value[1]}"[:120]))
        return out

    def _arg(self, args: Sequence, index: int, scope: tuple) -> frozenset:
        if index >= len(args) or args[index] is None:
            return _EMPTY
        arg = args[index]
        if arg[0] == "star":
            return frozenset(self.element(self.eval(arg[1], scope)))
        return self.eval(arg, scope)

    def _builtin_call(self, name: str, args: Sequence, kwargs: dict, scope: tuple) -> set:
        if name in _SEQ_BUILTINS:
            return {(LIST, frozenset(self.element(self._arg(args, 0, scope))))}
        if name == "enumerate":
            return {(LIST, frozenset({(TUPLE, (_EMPTY, frozenset(self.element(self._arg(args, 0, scope)))))}))}
        if name == "zip":
            parts = tuple(frozenset(self.element(self._arg(args, i, scope))) for i in range(len(args)))
            return {(LIST, frozenset({(TUPLE, parts)}))}
        if name == "next":
            return self.element(self._arg(args, 0, scope))
        if name == "dict":
            keys: set = set()
            values: set = set()
            for value in self._arg(args, 0, scope):
                if value[0] == DICT:
                    keys |= value[1]
                    values |= value[2]
                for item in (value[1] if value[0] == LIST else ()):
                    if item[0] == TUPLE and len(item[1]) == 2:
                        keys |= item[1][0]
                        values |= item[1][1]
            for expr in kwargs.values():
                values |= self.eval(expr, scope)
            return {(DICT, frozenset(keys), frozenset(values))}
        if name == "getattr" and len(args) >= 2 and args[1] is not None and args[1][0] == "str":
            found = self.attr(self._arg(args, 0, scope), args[1][1])
            return found | (self._arg(args, 2, scope) if len(args) > 2 else set())
        if name == "super":
            path, qualname, self_class = scope
            function = self.functions.get((path, qualname or ""))
            start = None
            if args:
                start = next((v[1] for v in self._arg(args, 0, scope) if v[0] == CLS), None)
            elif function is not None and function["class"]:
                start = (path, function["class"])
            return {(SUPER, start, self_class or start)} if start is not None else set()
        return set()

    def _container_call(self, method: str, container: tuple) -> set:
        tag = container[0]
        keys = container[1] if tag == DICT else _EMPTY
        values = container[2] if tag == DICT else frozenset(self.element(frozenset({container})))
        if method == "items":
            return {(LIST, frozenset({(TUPLE, (keys, values))}))}
        if method == "values":
            return {(LIST, values)}
        if method == "keys":
            return {(LIST, keys)}
        if method == "copy":
            return {container}
        return set(values)

    def _library_call(self, dotted: str, args: Sequence, scope: tuple) -> set:
        short = dotted.rsplit(".", 1)[-1]
        if short in ("ModuleList", "ParameterList"):
            return {(LIST, frozenset(self.element(self._arg(args, 0, scope))))}
        if short == "Sequential":
            items: set = set()
            for index in range(len(args)):
                items |= self._arg(args, index, scope)
            return {(LIST, frozenset(items))}
        if short == "ModuleDict":
            items = set()
            for value in self._arg(args, 0, scope):
                if value[0] == DICT:
                    items |= value[2]
            return {(DICT, _EMPTY, frozenset(items))}
        if dotted in ("functools.partial", "functools.wraps", "functools.lru_cache", "functools.cache"):
            return set(self._arg(args, 0, scope))  # calling a partial calls its function
        return {(EXT, _join(dotted, "()"))}


def _join(base: str, attr: str) -> str:
    joined = f"{base}{attr}" if attr in ("()", "[]") else f"{base}.{attr}"
    return joined if len(joined) <= 120 else joined[:117] + "..."


def _text(expr: Any) -> str:
    """A call's callee as source-like text, rebuilt from its encoding."""
    if expr is None:
        return "<expression>"
    tag = expr[0]
    if tag == "n":
        return expr[1]
    if tag == "a":
        return f"{_text(expr[1])}.{expr[2]}"
    if tag == "c":
        return f"{_text(expr[1])}(...)"
    if tag in ("i", "ix", "s"):
        return f"{_text(expr[1])}[...]"
    return "<expression>"


# ----- regions ----------------------------------------------------------------------------------

def _designation(project: Project, key: tuple[str, str], config: Config) -> str | None:
    path, qualname = key
    marker = project.markers.get(key)
    modules = [m for m in (project.module_of.get(path), project.alt_module_of.get(path), module_name(path)) if m]
    if marker == "host" or any(listed(config.host, m, qualname) for m in modules):
        return HOST
    if marker == "eager" or any(listed(config.eager, m, qualname) for m in modules):
        return EAGER
    return None


def _spec_matches(project: Project, spec: str, path: str) -> bool:
    if ":" not in spec:
        return True
    wanted = spec.partition(":")[0]
    names = {project.module_of.get(path), project.alt_module_of.get(path), module_name(path)}
    return any(n and (n == wanted or n.endswith("." + wanted)) for n in names)


def _resolve_entries(project: Project, config: Config) -> list[tuple]:
    entries: list[tuple] = []
    for spec in config.entry_points:
        qualname = spec.partition(":")[2] if ":" in spec else spec
        found = [key for key in project.functions if key[1] == qualname and _spec_matches(project, spec, key[0])]
        if not found and ":" not in spec:
            found = [key for key in project.functions if key[1].endswith("." + qualname)]
        targets = [(FN, key, (key[0], project.functions[key]["class"]) if project.functions[key]["class"] else None)
                   for key in found]
        if not targets:
            # `Class.method` inherited from a base, or a class itself (its forward / __call__).
            owner, _, method = qualname.rpartition(".")
            for key in project.classes:
                if _spec_matches(project, spec, key[0]):
                    if key[1] == qualname:
                        targets.extend(project.call_targets(frozenset({(INST, key)})))
                    elif owner and key[1] == owner:
                        targets.extend(v for v in project.member(key, method, key) if v[0] == FN)
        if not targets:
            raise EntryPointError(
                f"entry point '{spec}' names no function in the linted files "
                f"(expected module:Qualified.name, e.g. dsv4_model.model:GraphSafeDSV4.step)")
        entries.extend(targets)
    for key, marker in project.markers.items():
        if marker == "entry" and key in project.functions:
            owner = project.functions[key]["class"]
            entries.append((FN, key, (key[0], owner) if owner else None))
    return entries


def _display_names(project: Project) -> dict[tuple[str, str], str]:
    """qualname, or module:qualname where two linted files define the same qualname."""
    counts: dict[str, int] = {}
    for _, qualname in project.functions:
        counts[qualname] = counts.get(qualname, 0) + 1
    return {key: key[1] if counts[key[1]] == 1 else f"{project.module_of.get(key[0], key[0])}:{key[1]}"
            for key in project.functions}


def build(files: Sequence[Mapping[str, Any]], config: Config) -> CallGraph:
    """Regions of every linted function from the entry points; raises EntryPointError when an
    entry point names nothing."""
    project = Project(files, Path(config.root))
    entries = _resolve_entries(project, config)
    graph = CallGraph()
    names = _display_names(project)
    region: dict[tuple[str, str], str] = {}
    parent: dict[tuple[str, str], tuple[str, str] | None] = {}
    unresolved: dict[tuple, dict] = {}
    seen_contexts: set[tuple] = set()
    eager_seeds: list[tuple] = []

    def chain(key: tuple[str, str]) -> tuple[str, ...]:
        out: list[str] = []
        node: tuple[str, str] | None = key
        while node is not None and len(out) < 64:
            out.append(names.get(node, node[1]))
            node = parent.get(node)
        return tuple(reversed(out))

    def reach(target: tuple, mode: str, via: tuple[str, str] | None, queue: deque) -> None:
        key = target[1]
        designation = _designation(project, key, config)
        if designation == HOST:
            if key not in region:
                region[key], parent[key] = HOST, via
                graph.order.append(key)
            return
        wanted = EAGER if designation == EAGER or mode == EAGER else CAPTURED
        if wanted == EAGER and mode == CAPTURED:
            eager_seeds.append((target, via))
            return
        if region.get(key) == CAPTURED and wanted == EAGER:
            return  # already captured: what it reaches is captured too
        if key not in region or (region[key] != CAPTURED and wanted == CAPTURED):
            if key not in region:
                graph.order.append(key)
            region[key], parent[key] = wanted, via
        context = (key, target[2], wanted)
        if context not in seen_contexts:
            seen_contexts.add(context)
            queue.append((target, wanted))

    def run(queue: deque) -> None:
        while queue:
            target, mode = queue.popleft()
            key, self_class = target[1], target[2]
            scope = (key[0], key[1], self_class)
            callees = graph.edges.setdefault(key, [])
            for call in project.functions[key]["calls"]:
                for callee in _callees(project, call, scope, key, names, unresolved, graph):
                    if callee[1] not in callees:
                        callees.append(callee[1])
                    reach(callee, mode, key, queue)

    queue: deque = deque()
    for entry in entries:
        designation = _designation(project, entry[1], config)
        if designation == EAGER:
            eager_seeds.append((entry, None))
        else:
            reach(entry, CAPTURED, None, queue)
    run(queue)
    for target, via in eager_seeds:
        key = target[1]
        if region.get(key) == CAPTURED:
            continue
        if key not in region:
            graph.order.append(key)
            region[key], parent[key] = EAGER, via
        context = (key, target[2], EAGER)
        if context not in seen_contexts:
            seen_contexts.add(context)
            queue.append((target, EAGER))
        run(queue)

    graph.entries = list(dict.fromkeys(e[1] for e in entries))
    for file in files:
        for function in file.get("functions", []):
            key = (file["path"], function["qualname"])
            if key in region:
                graph.placements[key] = Placement(region[key], chain(key))
            else:
                graph.placements[key] = Placement(UNREACHED)
    graph.unresolved = sorted(unresolved.values(), key=lambda u: (u["path"], u["caller"], u["call"]))
    return graph


def _callees(project: Project, call: tuple, scope: tuple, caller: tuple[str, str], names: dict,
             unresolved: dict, graph: CallGraph) -> list[tuple]:
    func_expr = call[1]
    values = project.eval(func_expr, scope)
    targets = project.call_targets(values)
    reasons: list[str] = []
    for value in values:
        tag = value[0]
        if tag == PEXT:
            receiver = value[1][: -len(func_expr[2]) - 1] if func_expr[0] == "a" and value[1].endswith(
                "." + func_expr[2]) else ""
            if "()" in receiver or "[]" in receiver:
                # A method of a value computed outside the lint (attn_output.reshape): most
                # likely a tensor; listed only when a linted class has a method of that name.
                reason = _dynamic_reason(project, func_expr, (DYN, f"a value computed by `{receiver}`"), scope)
                if reason:
                    reasons.append(reason)
            else:
                reasons.append(f"`{value[1]}` is outside the linted files")
        elif tag == DYN:
            reason = _dynamic_reason(project, func_expr, value, scope)
            if reason:
                reasons.append(reason)
        elif tag == EXT:
            graph.external_calls += 1
        elif tag == INST and not targets:
            outside = [b[1] for b in project.mro(value[1])[1] if b[0] == PEXT]
            if outside:
                reasons.append(f"{value[1][1]} inherits its forward from {outside[0]}, outside the linted files")
            elif not project.mro(value[1])[1]:
                reasons.append(f"an instance of {value[1][1]}, which defines neither forward nor __call__")
    # Functions passed as arguments are assumed to be called (callbacks, functools.partial).
    for arg in list(call[2] if len(call) > 2 else ()) + [v for _, v in (call[3] if len(call) > 3 else ())]:
        if arg is not None and arg[0] in ("n", "a"):
            for value in project.eval(arg, scope):
                if value[0] == FN:
                    targets.extend(project.call_targets(frozenset({value})))
    if reasons:
        text = _text(func_expr)
        entry = unresolved.setdefault((caller, text), {
            "path": caller[0], "caller": names.get(caller, caller[1]), "call": text, "reason": ""})
        entry["reason"] = "; ".join(sorted(set(reasons) | ({entry["reason"]} if entry["reason"] else set())))
    return targets


def _dynamic_reason(project: Project, func_expr: tuple, value: tuple, scope: tuple) -> str | None:
    """Why a call of an unknown value is unresolved, or None when it is most likely a library
    method on an unannotated value (`x.float()` on a tensor parameter): those are not listed
    unless a linted class defines a method of that name."""
    if func_expr[0] == "a":
        method = func_expr[2]
        defined = project.method_names.get(method)
        if not defined:
            return None
        shown = ", ".join(sorted(defined)[:3]) + (", ..." if len(defined) > 3 else "")
        return f"receiver type unknown ({value[1]}); linted classes define `{method}` ({shown})"
    return f"{value[1]} is not known statically"
