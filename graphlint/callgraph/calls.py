"""What calls, containers and annotations give in the call graph's evaluation: builtins (`list`,
`dict`, `getattr`, `super`), container methods and iteration, library calls (`nn.ModuleList`,
`islice`, `partial`, `torch.compile`), declared types, and what a function's call sites pass to
its parameters. A mixin of graphlint.callgraph.values.Project.
"""
from __future__ import annotations

from typing import Any, Sequence

from graphlint.analysis import catalog
from graphlint.callgraph.arguments.call_sites import SPREAD, CallSites
from graphlint.callgraph.tags import BUILTIN, CLS, DICT, DYN, EMPTY as _EMPTY, EXT, FN, INST, LIST, MOD, PEXT, STR, \
    SUPER, TUPLE, join as _join, linted_leaves, uninformative

_LIST_TYPES = frozenset({"list", "List", "Sequence", "MutableSequence", "Iterable", "Iterator", "Collection",
                         "set", "Set", "frozenset", "FrozenSet", "deque", "ModuleList", "Generator",
                         "AbstractSet", "Reversible"})
_DICT_TYPES = frozenset({"dict", "Dict", "Mapping", "MutableMapping", "OrderedDict", "defaultdict", "ModuleDict"})
_WRAPPERS = frozenset({"Optional", "Final", "Annotated", "ClassVar", "Required", "NotRequired", "ReadOnly"})
# Declared types that say "some module": a value annotated so may run any forward.
_ABSTRACT_MODULES = catalog.names("modules", "abstract")
_LIST_CONTAINERS = catalog.names("modules", "list_containers")
_CALLABLE_CONTAINERS = catalog.names("modules", "callable_containers")
_DICT_CONTAINERS = catalog.names("modules", "dict_containers")
_SEQ_BUILTINS = frozenset({"list", "tuple", "sorted", "reversed", "iter", "set", "frozenset"})
# Library calls whose result runs the callable they wrap (`torch.compile(model)`):
# graphlint/data/call_graph.toml.
WRAPS_CALLABLE = catalog.call_graph("wraps_callable", "names")
# A function called from more places than this says little about what one call passes...
_MAX_CALL_SITES = 8
# A base with more subclasses than this says little about what `self` holds.
MAX_SUBCLASSES = 8
# The reason of a parameter's value where no linted call passes it (parameter_value).
UNPASSED = "parameter `"
_NONE = (BUILTIN, "None")
# ...unless every one of them passes linted code: a registry spelled as call sites
# (`FlashCausalLM(model_class=FlashLlamaForCausalLM, ...)` once per architecture), or a model
# tree's constructor called by one builder per architecture (`TransformerDecoder(layers=layers)`,
# each passing a list of that architecture's layers), which holds every value as a dict of
# implementations does. Up to this many sites are read for it.
_MAX_FACTORY_SITES = 64
# Method names of torch.Tensor or nn.Module (and so of a linted class): on a value of unknown
# type they are far more likely the tensor's or the module's own.
TENSOR_METHODS = catalog.names("modules", "shared_methods")
# At most this many linted classes may define a method for a call on an unknown receiver to
# reach them all (graphlint/data/call_graph.toml says why).
MAX_CANDIDATES = catalog.call_graph("candidates", "max_classes")


def _unbind(expr: Any, params: Sequence[str]) -> Any:
    """`expr` with a lambda's parameters made unknown (where they are read, not attribute names)."""
    if type(expr) is str:
        return ("?",) if expr in params else expr
    if type(expr) is tuple and expr[:1] == ("a",):
        return ("a", _unbind(expr[1], params), expr[2])
    if type(expr) is tuple and expr[:1] in (("ix",), ("s",), ("i",)):
        return (expr[0], _unbind(expr[1], params), *expr[2:])
    return expr


class CallResults(CallSites):
    """The calls half of Project's evaluation (it provides eval, attr, element, member, mro,
    call_targets and the indexed functions)."""

    functions: dict
    classes: dict
    modules: dict
    _sites: Any
    _passing: set
    _passed: dict
    _run_keys: dict
    _class_keys: dict
    _memo: dict
    _targets: dict
    narrowing: dict
    method_names: dict
    function_facts: dict

    def passed_arguments(self, path: str, qualname: str, index: int, param: str,
                         by_caller: dict | None = None, self_class: tuple | None = None) -> set:
        """What the call sites of a function pass to one of its parameters (`LayerStack(layers)`:
        the container holds what its constructor was given; `self.capture(bs, forward)`: the
        step captured). At most a few call sites, else nothing; `*args` and `**kwargs` never.
        `by_caller` (if given) receives what each calling function passes. An `__init__` run for
        a subclass's instance (`self_class`) is passed what that subclass's constructor calls and
        the `super().__init__(...)` calls on its way up pass, not what other subclasses pass."""
        if param.startswith("*"):
            return set()
        if not qualname.endswith(".__init__") or self_class == (path, qualname[: -len(".__init__")]):
            self_class = None
        if by_caller is not None or self._passing:
            return self._passed_arguments(path, qualname, index, param, by_caller, self_class)
        # Outside a recursion through call sites, the answer is the same for every scope the
        # function is evaluated in: computed once.
        key = (path, qualname, index, param, self_class)
        known = self._passed.get(key)
        if known is None:
            known = self._passed[key] = frozenset(self._passed_arguments(path, qualname, index, param, None,
                                                                         self_class))
        return set(known)

    def candidates(self, func_expr: Any) -> list[tuple]:
        """Every linted method named as the call's attribute, when only a few classes define it
        (`self.attn_backend.forward_decode(...)` on a backend chosen at run time). Tensor methods
        that modules share (`to`, `float`) and dunders say nothing of the receiver's type."""
        if not (type(func_expr) is tuple and func_expr[0] == "a"):
            return []
        method = func_expr[2]
        if method in TENSOR_METHODS or method.startswith("__"):
            return []
        owners = self.method_names.get(method, ())
        if not owners or len(owners) > MAX_CANDIDATES:
            return []
        found: list[tuple] = []
        for qualified in owners:
            owner, _, _ = qualified.rpartition(".")
            for cls in self.classes_named(owner):
                if method in self.classes[cls]["methods"]:
                    key = (cls[0], qualified)
                    if key in self.functions:
                        decorators = self.functions[key]["decorators"]
                        if "property" not in decorators and "cached_property" not in decorators:
                            found.append((FN, key, cls))
        return sorted(dict.fromkeys(found), key=lambda target: (target[1], target[2] or ()))

    def lambda_call(self, value: tuple) -> tuple | None:
        """The call a lambda's body makes, its parameters unknown (`lambda model, x:
        model.verify(x)`: `model` is what the lambda's callers pass), and the scope it is made in."""
        body, scope, params = value[1], value[2], value[3] if len(value) > 3 else ()
        if not (type(body) is tuple and body[:1] == ("c",)):
            return None
        return ("c", _unbind(body[1], params)), scope

    def lambda_targets(self, value: tuple, sites: Sequence[tuple] = ()) -> list[tuple]:
        """What calling a lambda runs: its body's callee, with a parameter it calls (`model` of
        `lambda model, x: model.verify(x)`) holding what the calls `sites` ((call, scope) pairs)
        pass; else the few methods of that name."""
        found = self.lambda_call(value)
        if found is None:
            return []
        call, scope = found
        params = value[3] if len(value) > 3 else ()
        attrs: list[str] = []
        root = value[1][1]
        while type(root) is tuple and root[:1] == ("a",):
            attrs.insert(0, root[2])
            root = root[1]
        if type(root) is str and root in params and sites:
            held: set = set()
            for site, site_scope in sites:
                args = site[2] if len(site) > 2 else ()
                kwargs = dict(site[3]) if len(site) > 3 else {}
                position = params.index(root)
                if root in kwargs:
                    held |= self.eval(kwargs[root], site_scope)
                elif position < len(args) and args[position] is not None:
                    held |= self.eval(args[position], site_scope)
            for attr in attrs:
                held = self.attr(frozenset(held), attr)
            targets = self.call_targets(frozenset(held))
            if targets:
                return targets
        return self.call_targets(frozenset(self.eval(call[1], scope))) or self.candidates(call[1])

    def parameter_value(self, function: dict, scope: tuple, index: int, param: str, annotation: Any) -> set:
        """What a plain parameter holds. Annotated with linted classes: those classes (every
        subclass of a base, unless the region's calls narrow them). Unannotated, or `Callable` /
        `nn.Module` / `List[T]`: what the call sites pass, and the default where a call leaves
        it out."""
        path, qualname, self_class = scope
        declared = self.annotation(annotation, scope) if annotation is not None else set()
        if declared and not all(uninformative(v) for v in declared):
            if (path, qualname, param) not in self.narrowing:
                by_sites = self.narrowed_by_sites(declared, function, scope, index, param)
                if by_sites is not None:
                    return by_sites
            return self.narrowed(declared, path, qualname, param)
        passed = self.passed_arguments(path, qualname, index, param, self_class=self_class)
        default = function["default_values"].get(param)
        if default is not None:  # looked up where the function is defined
            passed = passed | self.eval(default, (path, qualname.rpartition(".")[0] or None, self_class))
        return passed or declared or {(DYN, f"{UNPASSED}{param}`")}

    def narrowed(self, declared: set, path: str, qualname: str, param: str) -> set:
        """What a parameter annotated with a linted class holds: every subclass, unless the
        region's calls of the function say which (graphlint.callgraph.arguments.narrowing)."""
        return set(self.narrowing.get((path, qualname, param), declared))

    def narrow(self, key: tuple[str, str, str], values: frozenset | None) -> None:
        """From now on the parameter holds only `values` (None: what its annotation says): what
        was evaluated before is forgotten."""
        if values is None:
            self.narrowing.pop(key, None)
        else:
            self.narrowing[key] = values
        self._forget()

    def widen(self) -> None:
        """Every parameter holds what its annotation says again."""
        self.narrowing.clear()
        self._forget()

    def _forget(self) -> None:
        for cache in (self._memo, self._passed, self._targets, self._run_keys, self._class_keys):
            cache.clear()

    def _passed_arguments(self, path: str, qualname: str, index: int, param: str, by_caller: dict | None,
                          self_class: tuple | None = None) -> set:
        out: set = set()
        matched = 0
        for scope, passed in self._site_values(path, qualname, index, param, self_class):
            matched += 1
            if matched > _MAX_CALL_SITES and by_caller is None and not (
                    matched <= _MAX_FACTORY_SITES and (linted_leaves(out) > 0 or _library_only(out))):
                return set()
            passed = set() if passed is None or passed is SPREAD else passed
            out |= passed
            if by_caller is not None:
                by_caller.setdefault(scope[:2], set()).update(passed)  # who passed what
        return out if matched <= _MAX_CALL_SITES or linted_leaves(out) > 0 or _library_only(out) else set()

    def narrowed_by_sites(self, declared: set, function: dict, scope: tuple, index: int, param: str) -> set | None:
        """What a parameter annotated with a base of several linted classes holds where every
        call site says (`kv_cache: Optional[KVCache] = None`, which no builder passes, holds no
        subclass of KVCache): the instances of those classes passed, the default's where a call
        leaves it out. None where a site passes something else, spreads `*args`, or there are
        more sites than are read."""
        path, qualname, self_class = scope
        classes = {value[1] for value in declared if value[0] == INST}
        if len(classes) < 2:
            return None
        default = function["default_values"].get(param)
        # The None-state facts keep a `= None` default, which the call facts leave out.
        defaults_none = (self.function_facts.get((path, qualname)) or {}).get("defaults", {}).get(param) == "N"
        found: set = set()
        matched = 0
        for _, passed in self._site_values(path, qualname, index, param, self_class):
            matched += 1
            if matched > _MAX_FACTORY_SITES or passed is SPREAD or (passed is None and default is None
                                                                      and not defaults_none):
                return None
            if passed is None:
                passed = {_NONE} if defaults_none else self.eval(
                    default, (path, qualname.rpartition(".")[0] or None, self_class))
            for value in passed:
                if value[0] == INST and value[1] in classes:
                    found.add(value)
                elif value != _NONE:
                    return None
        return found if matched else None

    def _functions_run(self, values: frozenset) -> frozenset:
        """The keys of the functions calling these values runs (a call site is matched against
        every function of its name: asked for the same values many times)."""
        known = self._run_keys.get(values)
        if known is None:
            known = self._run_keys[values] = frozenset(t[1] for t in self.call_targets(values))
        return known

    def _classes_of(self, values: frozenset) -> frozenset:
        """The classes among these values."""
        known = self._class_keys.get(values)
        if known is None:
            known = self._class_keys[values] = frozenset(v[1] for v in values if v[0] == CLS)
        return known

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
        if name == "getattr" and len(args) >= 2 and type(args[1]) is tuple and args[1][0] == "str":
            found = self.attr(self._arg(args, 0, scope), args[1][1])
            return found | (self._arg(args, 2, scope) if len(args) > 2 else set())
        if name == "getattr" and args:
            names = self._arg(args, 1, scope) if len(args) > 1 else set()
            if names and all(value[0] == STR for value in names):
                # `getattr(base_module, function_name)`, every call passing a literal name.
                held = frozenset(self._arg(args, 0, scope))
                found = set().union(*(self.attr(held, value[1]) for value in names))
            else:
                # `getattr(impls, config.backend)`: a name chosen at run time may be any of them.
                found = self._any_attribute(self._arg(args, 0, scope))
            return found | (self._arg(args, 2, scope) if len(args) > 2 else set())
        if name == "super":
            path, qualname, self_class = scope
            function = self.functions.get((path, qualname or ""))
            start = None
            if args:
                start = next((v[1] for v in self._arg(args, 0, scope) if v[0] == CLS), None)
            elif function is not None and function["class"]:
                start = (path, function["class"])
            if start is None:
                return set()
            # `super(Wrapped, self.inner)`: the instance named, not this method's self.
            # Where the instance may be any of many classes (a parameter annotated with the base of
            # a model tree), it says too little: as `super()` of this method's class.
            named = {v[1] for v in self._arg(args, 1, scope) if v[0] == INST} if len(args) > 1 else set()
            if named and len(named) <= MAX_SUBCLASSES:
                return {(SUPER, start, cls) for cls in named}
            return {(SUPER, start, self_class or start)}
        return set()

    def _any_attribute(self, values: frozenset) -> set:
        """What `getattr(obj, name)` may give when the name is computed: every function and class
        of a linted module, every method of a linted instance (its dunders and constructors aside)."""
        out: set = set()
        for value in values:
            if value[0] == MOD:
                path = self.modules[value[1]]
                out.update((FN, key, None) for key in self.functions
                           if key[0] == path and "." not in key[1])
                out.update((CLS, key) for key in self.classes if key[0] == path and "." not in key[1])
            elif value[0] == INST:
                for owner in self.mro(value[1])[0]:
                    for method in self.classes[owner]["methods"]:
                        if not method.startswith("__"):
                            out |= {v for v in self.member(value[1], method, value[1]) if v[0] == FN}
            elif value[0] in (EXT, PEXT, DYN):
                out.add((DYN, "an attribute chosen at run time"))
        return out

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
        if short in _LIST_CONTAINERS:
            return {(LIST, frozenset(self.element(self._arg(args, 0, scope))))}
        if short in _CALLABLE_CONTAINERS:
            items: set = set()
            for index in range(len(args)):
                items |= self._arg(args, index, scope)
            return {(LIST, frozenset(items))}
        if short in _DICT_CONTAINERS:
            items = set()
            for value in self._arg(args, 0, scope):
                if value[0] == DICT:
                    items |= value[2]
            return {(DICT, _EMPTY, frozenset(items))}
        if dotted in ("itertools.islice", "itertools.chain"):
            # `islice(self.layers, start, end)` (pipeline-parallel models) iterates the modules.
            count = 1 if short == "islice" else len(args)
            items = set()
            for index in range(count):
                items |= self.element(self._arg(args, index, scope))
            return {(LIST, frozenset(items))}
        if dotted in ("functools.partial", "functools.wraps", "functools.lru_cache", "functools.cache"):
            return set(self._arg(args, 0, scope))  # calling a partial calls its function
        if dotted in WRAPS_CALLABLE:
            # `torch.compile(model)`: the compiled module runs the model's forward.
            return set(self._arg(args, 0, scope)) or {(EXT, _join(dotted, "()"))}
        return {(EXT, _join(dotted, "()"))}

    def annotation(self, ann: Any, scope: tuple) -> set:
        if not ann:
            return set()
        if type(ann) is str:
            name, args = ann, ()
        elif ann[0] == "tu":
            out: set = set()
            for part in ann[1]:
                out |= self.annotation(part, scope)
            return out
        else:
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
            if len(args) == 2 and args[1] == "...":
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
                # A value typed as a class may be any linted subclass: calls on it reach every
                # override (`self.layers[i].update(...)` on a cache layer base class).
                out.add((INST, value[1]))
                out.update((INST, sub) for sub in self.subclasses(value[1]))
            elif value[0] == EXT and value[1] in _ABSTRACT_MODULES:
                # `model: nn.Module` names no code: the module it holds is unknown, so what
                # calling it runs is unresolved (and said), never torch's own Module.forward.
                out.add((DYN, "a value annotated nn.Module"))
            elif value[0] in (EXT, PEXT):
                out.add(value)
        return out

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
            elif tag == INST:
                # A container class of the engine's own: what its `__iter__` gives, else what
                # its `__getitem__` returns (Python iterates by index then).
                out |= self.iterated(value[1])
        return out

    def iterated(self, cls: tuple[str, str]) -> set:
        if self.defines(cls, "__iter__"):
            out: set = set()
            for returned in self.returns_of(self.member(cls, "__iter__", cls)):
                out |= self.element(frozenset({returned})) if returned[0] != INST else {returned}
            return out
        if self.defines(cls, "__getitem__"):
            return self.returns_of(self.member(cls, "__getitem__", cls))
        return set()

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


def _library_only(values: set) -> bool:
    """Only library objects (`cu_call(cudart.cudaGraphConditionalHandleCreate(...))` at every
    one of many sites): the helper's result is the library's, never linted code to follow."""
    return bool(values) and all(value[0] in (EXT, BUILTIN) for value in values)
