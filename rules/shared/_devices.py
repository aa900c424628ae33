"""Whether a function handles several CUDA devices, from what its code does with devices: an
index other than the current device (`cuda:1`, `torch.device("cuda", i)`), a loop over
devices, `torch.cuda.device_count()` (not a loop over it that only indexes a per-device
list). Never from how a variable is spelled."""
from __future__ import annotations

import re

from graphlint.lazy import cst

from graphlint.analysis import catalog
from graphlint.analysis.children import iter_code
from graphlint.analysis.walk.rule import Context

from ._calls import source_text

_SET_CURRENT = catalog.names("devices", "set_current")
_CONTEXTS = catalog.names("devices", "current_context")
_COUNT = catalog.names("devices", "count")
_CURRENT = catalog.names("devices", "current")
_CONSTRUCTOR = catalog.names("devices", "constructor")
_STREAM = catalog.names("devices", "stream")
_DEVICE_METHODS = catalog.names("devices", "device_methods")
_MOVE_METHODS = catalog.names("tensor", "move_methods")
_CUDA_STRING = re.compile(r"^cuda:\s*(\d+)$")

CURRENT = ("current",)
Key = tuple  # ("current",) | ("index", n) | ("expr", source text)


def _indexes_only(loop: cst.For) -> bool:
    """Whether the loop's variable appears in its body, and only as a subscript's index."""
    if not isinstance(loop.target, cst.Name):
        return False
    name = loop.target.value
    body = list(iter_code(loop.body, skip=(cst.FunctionDef, cst.ClassDef)))
    indexes = {id(e.slice.value) for node in body if isinstance(node, cst.Subscript)
               for e in node.slice if isinstance(e.slice, cst.Index)}
    uses = [n for n in body if isinstance(n, cst.Name) and n.value == name]
    return bool(uses) and all(id(n) in indexes for n in uses)


class DeviceEvidence:
    """`reason` says why the function handles several devices (None: one device, as far as
    its code shows). `torch.cuda.set_device(d)` makes `d` the current device: work on `d`
    afterwards is single-device code."""

    def __init__(self, function: cst.FunctionDef, ctx: Context):
        self._ctx = ctx
        nodes = list(iter_code(function.body, skip=(cst.FunctionDef, cst.ClassDef)))
        docstrings = {id(s.body[0].value) for s in nodes if isinstance(s, cst.SimpleStatementLine)
                      and len(s.body) == 1 and isinstance(s.body[0], cst.Expr)}
        self._aliases: dict[str, cst.BaseExpression] = {}
        for node in nodes:
            if isinstance(node, cst.Assign) and len(node.targets) == 1:
                target = node.targets[0].target
                if isinstance(target, (cst.Name, cst.Attribute)):
                    self._aliases[source_text(target)] = node.value
        self._current = {CURRENT}
        switched = False
        for node in nodes:
            if isinstance(node, cst.Call) and ctx.qualified(node.func) in _SET_CURRENT and node.args:
                self._current.add(self.key(node.args[0].value))
                switched = True
        if not switched:
            self._current.add(("index", 0))  # the process's default device
        # `for i in range(torch.cuda.device_count()):` whose body uses `i` only to index a list
        # (`torch.cuda.default_generators[i]`, registered with a graph) does bookkeeping per
        # device, not work on each: that count is no evidence.
        self._loop_counts = {id(n) for loop in nodes if isinstance(loop, cst.For) and _indexes_only(loop)
                             for n in [loop.iter, *iter_code(loop.iter)]
                             if isinstance(n, cst.Call) and ctx.qualified(n.func) in _COUNT}
        self.reason = self._find(nodes, docstrings)

    @property
    def multi(self) -> bool:
        return self.reason is not None

    def key(self, node: cst.BaseExpression, depth: int = 0) -> Key:
        """Which device `node` names, as far as the function tells."""
        if isinstance(node, cst.Integer):
            return ("index", int(node.value, 0))
        if isinstance(node, cst.SimpleString):
            text = node.evaluated_value if isinstance(node.evaluated_value, str) else ""
            match = _CUDA_STRING.match(text.strip())
            if match:
                return ("index", int(match.group(1)))
            return CURRENT if text.strip() == "cuda" else ("expr", text)
        if isinstance(node, cst.FormattedString):
            inner = _formatted_index(node)
            return self.key(inner, depth + 1) if inner is not None else ("expr", source_text(node))
        if isinstance(node, cst.Call):
            qualified = self._ctx.qualified(node.func)
            if qualified in _CURRENT:
                return CURRENT
            if qualified in _CONSTRUCTOR:
                index = _constructor_index(node)
                if index is None:
                    return CURRENT  # torch.device("cuda"): the current device
                return self.key(index, depth + 1)
        if isinstance(node, (cst.Name, cst.Attribute)) and depth < 4:
            alias = self._aliases.get(source_text(node))
            if alias is not None and _names_device(alias, self._ctx):
                return self.key(alias, depth + 1)
        return ("expr", source_text(node))

    def _other(self, index: cst.BaseExpression) -> str | None:
        key = self.key(index)
        if key in self._current:
            return None
        if key[0] == "index":
            return f"`cuda:{key[1]}`"
        return f"device index `{source_text(index)}`, not the current device"

    def _find(self, nodes: list[cst.CSTNode], docstrings: set[int]) -> str | None:
        for node in nodes:
            if isinstance(node, cst.Call):
                reason = self._call(node)
                if reason:
                    return reason
            elif isinstance(node, cst.SimpleString) and id(node) not in docstrings:
                text = node.evaluated_value if isinstance(node.evaluated_value, str) else ""
                match = _CUDA_STRING.match(text.strip())
                if match and ("index", int(match.group(1))) not in self._current:
                    return f"`{text.strip()}`"
            elif isinstance(node, cst.FormattedString):
                inner = _formatted_index(node)
                if inner is not None:
                    reason = self._other(inner)
                    if reason:
                        return reason
            elif isinstance(node, cst.For):
                used = self._loop_over_devices([node.target], [node.body])
                if used:
                    return used
            elif isinstance(node, (cst.ListComp, cst.SetComp, cst.GeneratorExp, cst.DictComp)):
                targets, comp = [], node.for_in
                while comp is not None:
                    targets.append(comp.target)
                    comp = comp.inner_for_in
                body = [node.key, node.value] if isinstance(node, cst.DictComp) else [node.elt]
                used = self._loop_over_devices(targets, body)
                if used:
                    return used
        return None

    def _call(self, node: cst.Call) -> str | None:
        qualified = self._ctx.qualified(node.func)
        if qualified in _COUNT:
            return None if id(node) in self._loop_counts else "`torch.cuda.device_count()`"
        args = [a.value for a in node.args if a.keyword is None and a.star == ""]
        if qualified in _CONSTRUCTOR:
            index = _constructor_index(node)
            return self._other(index) if index is not None else None
        if qualified in _CONTEXTS and args:
            return self._other(args[0])
        if qualified in _SET_CURRENT and args and self.key(args[0]) not in (CURRENT, ("index", 0)) \
                and self.key(args[0])[0] == "index":
            # set_device(1): work moves off the default device, which one-time state (the
            # default capture stream of torch.cuda.graph) was made on.
            return f"`torch.cuda.set_device({source_text(args[0])})`"
        if qualified is None and isinstance(node.func, cst.Attribute):
            method = node.func.attr.value
            literal = args[0] if args and isinstance(args[0], cst.Integer) else None
            if method in _DEVICE_METHODS and args:
                return self._other(args[0])
            if method in _MOVE_METHODS and literal is not None:
                return self._other(literal)  # x.to(1): a device index
        return None

    def _loop_over_devices(self, targets: list[cst.BaseExpression], body: list[cst.CSTNode]) -> str | None:
        """A loop whose variable is used as a device in its body (`for d in ...:
        torch.cuda.set_device(d)`, `Stream(device=d)`, `f"cuda:{d}"`, `[... for d in ...]`)."""
        names = {n.value for t in targets for n in [t, *iter_code(t)] if isinstance(n, cst.Name)}
        if not names:
            return None
        for part in body:
            for node in [part, *iter_code(part, skip=(cst.FunctionDef, cst.ClassDef))]:
                if isinstance(node, cst.Call):
                    places = self._device_places(node)
                elif isinstance(node, cst.FormattedString):
                    places = [_formatted_index(node)]
                else:
                    continue
                for place in places:
                    if isinstance(place, cst.Name) and place.value in names:
                        return f"a loop over devices (`{place.value}`)"
        return None

    def _device_places(self, call: cst.Call) -> list[cst.BaseExpression]:
        """The arguments of `call` that are a device or a device index."""
        qualified = self._ctx.qualified(call.func)
        positional = [a.value for a in call.args if a.keyword is None and a.star == ""]
        places = [a.value for a in call.args if a.keyword is not None and a.keyword.value == "device"]
        if qualified in _SET_CURRENT | _CONTEXTS | _STREAM and positional:
            places.append(positional[0])
        elif qualified in _CONSTRUCTOR:
            index = _constructor_index(call)
            if index is not None:
                places.append(index)
        elif qualified is None and isinstance(call.func, cst.Attribute) and call.func.attr.value in _DEVICE_METHODS:
            places.extend(positional[:1])
        return places


def _names_device(node: cst.BaseExpression, ctx: Context) -> bool:
    """An expression that is a device spelled out (a string, an f-string, torch.device(...))."""
    if isinstance(node, (cst.SimpleString, cst.FormattedString, cst.Integer)):
        return True
    return isinstance(node, cst.Call) and ctx.qualified(node.func) in _CONSTRUCTOR | _CURRENT


def _constructor_index(call: cst.Call) -> cst.BaseExpression | None:
    """The index `torch.device(...)` is given: `("cuda", i)`, `(type="cuda", index=i)`,
    `("cuda:1")`, `(f"cuda:{i}")`; None for `torch.device("cuda")` or `("cpu")`."""
    positional = [a.value for a in call.args if a.keyword is None and a.star == ""]
    keyword = {a.keyword.value: a.value for a in call.args if a.keyword is not None}
    if "index" in keyword:
        return keyword["index"]
    if len(positional) >= 2:
        return positional[1]
    if positional and isinstance(positional[0], (cst.Integer, cst.FormattedString)):
        return positional[0]
    if positional and isinstance(positional[0], cst.SimpleString):
        text = positional[0].evaluated_value if isinstance(positional[0].evaluated_value, str) else ""
        return positional[0] if _CUDA_STRING.match(text.strip()) else None
    return None


def _formatted_index(node: cst.FormattedString) -> cst.BaseExpression | None:
    """`e` of f"cuda:{e}" (the whole string, nothing else in it)."""
    parts = node.parts
    if (len(parts) == 2 and isinstance(parts[0], cst.FormattedStringText) and parts[0].value.strip() == "cuda:"
            and isinstance(parts[1], cst.FormattedStringExpression)):
        return parts[1].expression
    return None
