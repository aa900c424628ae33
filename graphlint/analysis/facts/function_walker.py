"""One pass over a function body for the call facts: what each local name may hold, the calls
it makes (and what each passes, None-wise), its returns and yields, and the attributes it
assigns to `self`, in the encoding of graphlint.analysis.facts.encoding. Calls in one-time
branches are kept apart: the call graph does not follow them.
"""
from __future__ import annotations

from typing import Any

from graphlint.lazy import cst

from graphlint.analysis import catalog
from graphlint.analysis.argument_records import SET, argument_record, join_records, value_state
from graphlint.analysis.arm_guards import arm_guards
from graphlint.analysis.capture_sites import one_time_blocks, rest_zones
from graphlint.analysis.facts.encoding import LIBRARY_METHODS, annotation, arg_aware, encode, passed_reference

MAX_PER_NAME = 8  # assignments kept per local name (flow-insensitive union)
MAX_RETURNS = 4
# Container methods that add to the container (the last argument is what it then holds).
_REGISTER_MODULE = catalog.names("modules", "register_module")
_MUTATORS = frozenset({"append", "extend", "insert", "add", "appendleft", "setdefault"})
# Literal node types, by name (libcst loads lazily: nothing here may touch it at import).
_LEAVES = frozenset({"Integer", "Float", "Imaginary", "SimpleString", "ConcatenatedString", "Ellipsis"})


class FunctionWalker:
    """One pass over a function body: local bindings, calls, returns and `self.x = ...`."""

    def __init__(self, self_name: str | None, record_attr, class_name: str | None = None):
        self.self_name = self_name
        # The owning class by its own name: `KLlamaModel.dynamic_sdpa = Attention(...)` in a
        # method sets an attribute that every instance (and the class) reads.
        self.class_name = class_name
        self.record_attr = record_attr
        self.env: dict[str, list] = {}
        self.calls: list = []
        self._seen_calls: set[str] = set()
        self.returns: list = []
        self.yields: list = []  # what a generator yields (a context manager's `as` value)
        self.once: list = []  # calls in one-time branches
        self.one_time = False
        # What each call passes, None-wise (graphlint.analysis.argument_records), in the order of
        # `calls`, and the None-states of what each local name is bound to.
        self.call_args: list = []
        self.once_args: list = []
        self._call_index: dict[str, tuple[list, int]] = {}
        self.name_states: dict[str, list] = {}
        # The None tests, flags and literal comparisons each call of `calls` sits under (by
        # index; a call met again under other tests, or under none, has none): the call graph
        # does not follow a call in an arm the captured step never takes.
        self.guards: tuple = ()
        self.call_guards: dict[int, tuple] = {}

    def note(self, target: cst.BaseExpression, state: Any) -> None:
        """A name bound to a value of this None-state (None: unknown)."""
        if type(target) is cst.Name:
            slot = self.name_states.setdefault(target.value, [])
            if state not in slot:
                slot.append(state)
        elif type(target) in (cst.Tuple, cst.List):
            for element in target.elements:
                self.note(element.value, None)
        elif type(target) is cst.StarredElement:
            self.note(target.value, None)

    def bind(self, target: cst.BaseExpression, value: list | None) -> None:
        if value is None:
            value = ["?"]  # bound to something the graph cannot follow (arithmetic, literals)
        if isinstance(target, cst.Name):
            slot = self.env.setdefault(target.value, [])
            if len(slot) < MAX_PER_NAME and value not in slot:
                slot.append(value)
        elif isinstance(target, (cst.Tuple, cst.List)):
            for index, element in enumerate(target.elements):
                if isinstance(element, cst.StarredElement):
                    self.bind(element.value, ["i", value])
                else:
                    self.bind(element.value, ["ix", value, index])
        elif (isinstance(target, cst.Attribute) and isinstance(target.value, cst.Name) and value != ["?"]
              and target.value.value in (self.self_name, self.class_name) and target.value.value is not None):
            self.record_attr(target.attr.value, value)
        elif isinstance(target, cst.Subscript) and value != ["?"]:
            # `impls["paged"] = paged_attention`, `self.layers[i] = Layer()`: the container holds
            # the value (as a dict's value or a list's element: indexing and iterating both see it).
            key = encode(target.slice[0].slice.value) if len(target.slice) == 1 and isinstance(
                target.slice[0].slice, cst.Index) else None
            self._holds(target.value, ["u", [["d", [key], [value]], ["l", [value]]]])

    def _holds(self, container: cst.BaseExpression, value: list) -> None:
        """`container` (a local or `self.attr`) also holds `value` (a container literal)."""
        if isinstance(container, cst.Name):
            self.bind(container, value)
        elif (isinstance(container, cst.Attribute) and isinstance(container.value, cst.Name)
              and container.value.value == self.self_name and self.self_name is not None):
            self.record_attr(container.attr.value, value)

    # The walk names the fields it enters: libcst's generic `.children` rebuilds every node
    # through a visitor, which costs more than everything else here together.
    def block(self, suite: cst.BaseSuite | None) -> None:
        if suite is None:
            return
        rest = rest_zones(suite.body) if type(suite) is cst.IndentedBlock else {}
        for stmt in suite.body:
            if id(stmt) in rest:
                self._branch(stmt, True)
            else:
                self.statement(stmt)

    def _branch(self, node: cst.CSTNode, once: bool, guards: tuple = ()) -> None:
        """Walk an `if` branch; in a one-time branch (training-only, lazy initialisation) the
        bindings count but the calls are not per-step, so the graph does not follow them."""
        saved, saved_guards = self.one_time, self.guards
        self.one_time = saved or once
        self.guards = saved_guards + guards
        if isinstance(node, cst.BaseSuite):
            self.block(node)
        else:
            self.statement(node)
        self.one_time, self.guards = saved, saved_guards

    def statement(self, node: cst.CSTNode) -> None:
        kind = type(node)
        if kind is cst.SimpleStatementLine:
            for small in node.body:
                self.small(small)
        elif kind is cst.If:
            self.expr(node.test)
            once = {id(block) for block, _ in one_time_blocks(node)}
            true, false = arm_guards(node.test)
            self._branch(node.body, id(node.body) in once, true)
            if type(node.orelse) is cst.If:
                self._branch(node.orelse, id(node.orelse) in once, false)
            elif node.orelse is not None:
                self._branch(node.orelse.body, id(node.orelse) in once, false)
        elif kind is cst.For:
            self.expr(node.iter)
            self.note(node.target, None)
            self.bind(node.target, ["it", encode(node.iter)])
            self.block(node.body)
            if node.orelse is not None:
                self.block(node.orelse.body)
        elif kind is cst.While:
            self.expr(node.test)
            self.block(node.body)
            if node.orelse is not None:
                self.block(node.orelse.body)
        elif kind is cst.With:
            for item in node.items:
                self.expr(item.item)
                if item.asname is not None:
                    self.note(item.asname.name, None)
                    self.bind(item.asname.name, ["enter", encode(item.item)])
            self.block(node.body)
        elif kind in (cst.Try, cst.TryStar):
            self.block(node.body)
            for handler in node.handlers:
                if handler.name is not None:
                    self.note(handler.name.name, None)
                self.block(handler.body)
            for extra in (node.orelse, node.finalbody):
                if extra is not None:
                    self.block(extra.body)
        elif kind is cst.Match:
            self.expr(node.subject)
            for case in node.cases:
                self.expr(case.guard)
                self.block(case.body)
        elif kind in (cst.FunctionDef, cst.ClassDef):
            return  # nested definitions are functions of their own
        elif isinstance(node, cst.BaseCompoundStatement) or kind is cst.SimpleStatementSuite:
            for child in node.children:  # the rare rest
                if isinstance(child, (cst.BaseStatement, cst.BaseSuite)):
                    self.statement(child)
                elif isinstance(child, cst.BaseExpression):
                    self.expr(child)
        elif isinstance(node, cst.BaseSuite):
            self.block(node)

    def small(self, node: cst.CSTNode) -> None:
        kind = type(node)
        if kind is cst.Assign:
            self.expr(node.value)
            value = encode(node.value)
            state = value_state(node.value)
            for target in node.targets:
                self.note(target.target, state)
                self.bind(target.target, value)
        elif kind is cst.AnnAssign:
            self.bind(node.target, ["ann", annotation(node.annotation.annotation)])
            if node.value is not None:
                self.expr(node.value)
                self.note(node.target, value_state(node.value))
                self.bind(node.target, encode(node.value))
        elif kind is cst.Return:
            if node.value is not None:
                self.expr(node.value)
                encoded = encode(node.value)
                if encoded is not None and len(self.returns) < MAX_RETURNS:
                    self.returns.append(encoded)
        elif kind in (cst.Expr, cst.AugAssign):
            self.expr(node.value)
            if kind is cst.AugAssign:
                self.note(node.target, SET)
        elif kind is cst.Assert:
            self.expr(node.test)
            self.expr(node.msg)
        elif kind is cst.Raise:
            self.expr(node.exc)

    def expr(self, node: cst.CSTNode | None) -> None:
        """Record the calls (and walrus / comprehension bindings) inside an expression."""
        stack = [node]
        while stack:
            node = stack.pop()
            if node is None:
                continue
            kind = type(node)
            if kind is cst.Call:
                self._call(node)
                stack.append(node.func)
                stack.extend(arg.value for arg in node.args)
            elif kind is cst.Name or kind.__name__ in _LEAVES:
                continue
            elif kind is cst.Attribute:
                stack.append(node.value)
            elif kind is cst.Subscript:
                stack.append(node.value)
                for element in node.slice:
                    part = element.slice
                    stack.extend((part.value,) if type(part) is cst.Index else (part.lower, part.upper, part.step))
            elif kind is cst.BinaryOperation or kind is cst.BooleanOperation:
                stack.extend((node.left, node.right))
            elif kind is cst.UnaryOperation:
                stack.append(node.expression)
            elif kind is cst.Comparison:
                stack.append(node.left)
                stack.extend(c.comparator for c in node.comparisons)
            elif kind is cst.IfExp:
                stack.extend((node.test, node.body, node.orelse))
            elif kind in (cst.Tuple, cst.List, cst.Set):
                stack.extend(e.value for e in node.elements)
            elif kind is cst.Dict:
                for element in node.elements:
                    stack.extend((element.key, element.value) if type(element) is cst.DictElement else (element.value,))
            elif kind in (cst.ListComp, cst.SetComp, cst.GeneratorExp, cst.DictComp):
                stack.extend((node.key, node.value) if kind is cst.DictComp else (node.elt,))
                comp = node.for_in
                while comp is not None:
                    self.bind(comp.target, ["it", encode(comp.iter)])
                    stack.append(comp.iter)
                    stack.extend(condition.test for condition in comp.ifs)
                    comp = comp.inner_for_in
            elif kind is cst.NamedExpr:
                self.note(node.target, value_state(node.value))
                self.bind(node.target, encode(node.value))
                stack.append(node.value)
            elif kind is cst.Lambda:
                stack.append(node.body)
            elif kind is cst.Await or kind is cst.StarredElement:
                stack.append(node.expression if kind is cst.Await else node.value)
            elif kind is cst.FormattedString:
                stack.extend(p.expression for p in node.parts if type(p) is cst.FormattedStringExpression)
            elif kind in (cst.Yield,):
                stack.append(node.value if not isinstance(node.value, cst.From) else node.value.item)
                if node.value is not None and not isinstance(node.value, cst.From):
                    encoded = encode(node.value)
                    if encoded is not None and len(self.yields) < MAX_RETURNS:
                        self.yields.append(encoded)
            else:
                stack.extend(c for c in node.children if isinstance(c, cst.BaseExpression))

    def _merge_keywords(self, key: str, keywords: dict) -> None:
        """The same call met again with other name-like keyword arguments: the one entry passes
        either (a call that leaves a keyword out passes its default)."""
        records, index = self._call_index[key]
        entry = (self.once if records is self.once_args else self.calls)[index]  # appended together
        if len(entry) == 3:
            entry.append({})
        for name, ref in keywords.items():
            known = entry[3].get(name)
            if known is None:
                entry[3][name] = ref
            elif known != ref:
                options = known[1] if type(known) is list and known[:1] == ["u"] else [known]
                if ref not in options:
                    entry[3][name] = ["u", [*options, ref]]

    def _call(self, node: cst.Call) -> None:
        func = node.func
        if type(func) is cst.Attribute and func.attr.value in _MUTATORS and node.args:
            # `layers.append(Layer(i))`, `self.blocks.extend(blocks)`: what the container holds.
            item = node.args[-1].value
            held = encode(item)
            if held is not None:
                self._holds(func.value, ["l", [["star", held] if func.attr.value == "extend" else held]])
        if (type(func) is cst.Attribute and func.attr.value in LIBRARY_METHODS
                and not (type(func.value) is cst.Name and func.value.value == self.self_name)):
            return  # x.view(...), d.items(): a tensor's or a container's, never followed
        encoded = encode(node)
        if encoded is None or encoded[1] is None:
            return
        if len(encoded) == 2 or (len(encoded) == 3 and not arg_aware(encoded[1])):
            # Functions passed by name may be called (callbacks): keep name-like arguments.
            # In their positions (None for any other argument; a constructor the encoding kept
            # stays), up to the first keyword or star: a parameter's value is then read at its
            # call sites.
            built = encoded[2] if len(encoded) == 3 else []
            del encoded[2:]
            refs: list = []
            for index, arg in enumerate(node.args):
                if arg.keyword is not None or arg.star:
                    break
                refs.append(built[index] if index < len(built) and built[index] is not None else passed_reference(arg.value))
            while refs and refs[-1] is None:
                refs.pop()
            # Name-like keyword arguments too: a cache or a model handed down the layers
            # (`self.self_attn(x, graph_cache=graph_cache)`) says what the callee's parameter holds.
            keywords = {arg.keyword.value: ref for arg in node.args if arg.keyword is not None
                        for ref in (passed_reference(arg.value),) if ref is not None}
            if refs or keywords:
                encoded.append(refs)
            if keywords:
                encoded.append(keywords)
            key = repr(encoded[:3])
            if keywords and key in self._seen_calls:
                self._merge_keywords(key, keywords)
        else:
            key = repr(encoded)
        if key not in self._seen_calls:
            self._seen_calls.add(key)
            # A one-time call (lazy set-up, a capture made once per batch size) is not followed
            # for regions, but what it passes still tells what a parameter holds.
            (self.once if self.one_time else self.calls).append(encoded)
            records = self.once_args if self.one_time else self.call_args
            self._call_index[key] = (records, len(records))
            if self.guards and not self.one_time:
                self.call_guards[len(records)] = self.guards
            records.append(argument_record(node))
        else:
            records, index = self._call_index[key]
            records[index] = join_records(records[index], argument_record(node))
            if records is self.call_args and self.call_guards.get(index) != self.guards:
                self.call_guards.pop(index, None)  # met under other tests too
        # self.add_module("name", m) / setattr(self, "name", m) register an attribute by name.
        func = node.func
        args = [a.value for a in node.args if a.keyword is None]
        if (isinstance(func, cst.Attribute) and func.attr.value in _REGISTER_MODULE
                and isinstance(func.value, cst.Name) and func.value.value == self.self_name
                and len(args) >= 2 and isinstance(args[0], cst.SimpleString)):
            self.record_attr(args[0].evaluated_value, encode(args[1]))
        elif (isinstance(func, cst.Name) and func.value == "setattr" and len(args) == 3
              and isinstance(args[0], cst.Name) and args[0].value == self.self_name
              and isinstance(args[1], cst.SimpleString)):
            self.record_attr(args[1].evaluated_value, encode(args[2]))
