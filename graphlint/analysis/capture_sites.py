"""Per-file facts that decide regions without configuration: where a function captures a CUDA
graph (and what it captures), whether it replays one, and which of its branches are not part
of the captured decode step (training-only, lazy first-call initialisation, prefill-only,
debug-only, another backend's, the arm a comment calls the not-capturing one), including the
rest of a block after an early exit from such a branch's other arm.

Capture sites: `with torch.cuda.graph(...)` (its body), `g.capture_begin()` ... `g.capture_end()`
(the statements between), `torch.cuda.make_graphed_callables(f, ...)`, `torch.compile(f,
mode="reduce-overhead" | "max-autotune")` (or `options={"triton.cudagraphs": True}`), and a
def decorated with such a `torch.compile`. Nothing is resolved here; the call graph follows the
callees (graphlint.callgraph.graph).
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Iterator

from graphlint.lazy import cst

from graphlint.analysis import catalog
from graphlint.analysis.arm_guards import exits
from graphlint.analysis.children import code_children
from graphlint.analysis.names import ImportMap, dotted

GRAPH_CONTEXTS = catalog.names("graphs", "capture_contexts")
_COMPILE = catalog.names("graphs", "compile")
_GRAPHED = catalog.names("graphs", "graphed")
# torch.compile modes that wrap the compiled code in CUDA graphs (Inductor's cudagraph trees).
_GRAPH_MODES = catalog.names("graphs", "graph_modes")
_GRAPH_OPTIONS = catalog.names("graphs", "graph_options")
_CAPTURE_BEGIN = catalog.names("graphs", "capture_methods")
_CAPTURE_END = catalog.names("graphs", "capture_end_methods")
_REPLAY = catalog.names("graphs", "replay_methods")
_WRAPPER_CAPTURE = tuple(sorted(catalog.names("graphs", "wrapper_capture_words")))
_WRAPPER_REPLAY = tuple(sorted(catalog.names("graphs", "wrapper_replay_words")))
_TRAINING = catalog.names("modules", "training_flag")
# Flags that say "initialised" (`if not self._initialized:` ... one-time set-up).
_INIT_WORDS = ("initialized", "initialised", "_init_done", "warmed_up", "is_setup", "_built", "_setup_done")

TRAINING_ONLY = "training-only"
LAZY_INIT = "lazy-init"
PREFILL_ONLY = "prefill-only"
DEBUG_ONLY = "debug-only"
EAGER_ONLY = "eager-only"
OTHER_PLATFORM = "other-platform"
# Every kind above: code of a per-step function that the captured step does not run.
NOT_CAPTURED_KINDS = (TRAINING_ONLY, LAZY_INIT, PREFILL_ONLY, DEBUG_ONLY, EAGER_ONLY, OTHER_PLATFORM)
# The zone of the body of a `with torch.cuda.graph(...)` block: captured where it is written.
CAPTURE_BLOCK = "capture-block"


def _patterns(key: str, section: str = "step_flags") -> re.Pattern[str]:
    """One regular expression for a list of zones.toml patterns."""
    return re.compile("|".join(f"(?:{p})" for p in catalog.zones(section, key)))


# Step flags of serving engines: graphs capture the decode step, prefill runs eagerly
# (graphlint/data/zones.toml lists the spellings and where they come from).
_PREFILL_NAME = _patterns("prefill")
_DECODE_NAME = _patterns("decode")
_CAPTURE_NAME = _patterns("capture")
_DECODE_LENGTH = _patterns("decode_lengths")
_CONFIG_WORDS = catalog.zones("step_flags", "config_words")
_DEBUG_WORDS = catalog.zones("debug_flags", "words")
_DEBUG_CALLS = catalog.zones("debug_flags", "calls")
_PLATFORM_VALUES = frozenset(catalog.zones("platform_flags", "values"))
_PLATFORM_NAME = _patterns("names", "platform_flags")
_PLATFORM_CALL = _patterns("calls", "platform_flags")
_CAPTURE_STATE = _patterns("states", "capture_comments")
_CAPTURE_NEGATION = _patterns("negations", "capture_comments")
_PREFILL_COMMENT = _patterns("prefill", "capture_comments")


@dataclass
class CaptureSite:
    """One place that captures: its kind, the node to locate, and the callees it captures
    (libcst expressions: the callee of each call in a block, or the callable handed over)."""

    # "cuda-graph" | "capture-begin" | "graphed-callables" | "compile" | "compile-decorator", or
    # "compile-fullgraph" | "compile-fullgraph-decorator" (torch.compile(fullgraph=True), no CUDA graphs)
    kind: str
    node: cst.CSTNode
    callees: list[cst.BaseExpression] = field(default_factory=list)
    block: cst.CSTNode | None = None  # the code captured inline (a with body, capture_begin..end)


def capture_context(call: cst.Call, qualified: str | None) -> bool:
    """`torch.cuda.graph(g)` (`qualified` is the callee's dotted name), or an accelerator layer's
    wrapper of it given a CUDA graph: `get_accelerator().capture_to_graph(self._cuda_graphs)`."""
    return qualified in GRAPH_CONTEXTS or _wraps_graph(call, _WRAPPER_CAPTURE)


def replay_call(call: cst.Call, by_name: bool = True) -> bool:
    """`g.replay()` (with `by_name`, only on a receiver named as a graph), or an accelerator
    layer's `replay_graph(self._cuda_graphs)`."""
    if isinstance(call.func, cst.Attribute) and call.func.attr.value in _REPLAY and not call.args:
        return not by_name or _graph_like(call.func.value)
    return _wraps_graph(call, _WRAPPER_REPLAY)


def _wraps_graph(call: cst.Call, words: tuple[str, ...]) -> bool:
    func = call.func
    name = (func.attr.value if isinstance(func, cst.Attribute) else func.value if isinstance(func, cst.Name)
            else "").lower()
    positional = [a.value for a in call.args if a.keyword is None and not a.star]
    return bool(positional) and any(word in name for word in words) and _graph_like(positional[0])


def compile_kind(call: cst.Call, imports: ImportMap,
                 spread: dict[str, list[cst.BaseExpression]] | None = None) -> str | None:
    """The site kind of a `torch.compile(...)` call, None where it captures nothing.

    "compile": `mode="reduce-overhead"` or with cudagraphs on in `options`, given as keywords
    or spread from a dict (`**kwargs` with `kwargs = {"mode": "reduce-overhead"}` assigned in
    the function: `spread` maps a local name to the values assigned to it).
    "compile-fullgraph": `fullgraph=True` in a mode without CUDA graphs: a graph break is an
    error, so what the compiled function runs must trace whole (no host sync, no
    data-dependent shape), but nothing is replayed (a Python value is guarded, not frozen)."""
    if imports.resolve(call.func) not in _COMPILE:
        return None
    keywords = _compile_keywords(call, spread)
    if any(_captures_with(name, value) for name, value in keywords):
        return "compile"
    if any(name == "fullgraph" and isinstance(value, cst.Name) and value.value == "True" for name, value in keywords):
        return "compile-fullgraph"
    return None


def _compile_keywords(call: cst.Call, spread: dict[str, list[cst.BaseExpression]] | None) -> list:
    keywords = [(a.keyword.value, a.value) for a in call.args if a.keyword is not None]
    for arg in call.args:
        if arg.star == "**" and isinstance(arg.value, cst.Name):
            for value in (spread or {}).get(arg.value.value, ()):
                keywords.extend(_dict_items(value))
    return keywords


def _dict_items(value: cst.BaseExpression) -> list[tuple[str, cst.BaseExpression]]:
    """The string-keyed items of `{"mode": ...}` or `dict(mode=...)`."""
    if isinstance(value, cst.Dict):
        return [(str(e.key.evaluated_value), e.value) for e in value.elements
                if isinstance(e, cst.DictElement) and isinstance(e.key, cst.SimpleString)]
    if isinstance(value, cst.Call) and isinstance(value.func, cst.Name) and value.func.value == "dict":
        return [(a.keyword.value, a.value) for a in value.args if a.keyword is not None]
    return []


def _captures_with(keyword: str, value: cst.BaseExpression) -> bool:
    """Whether one keyword of torch.compile turns CUDA graphs on (in either arm of a conditional
    expression: `mode="reduce-overhead" if torch.cuda.is_available() else None` captures on CUDA)."""
    if isinstance(value, cst.IfExp):
        return _captures_with(keyword, value.body) or _captures_with(keyword, value.orelse)
    if keyword == "mode":
        return isinstance(value, cst.SimpleString) and value.evaluated_value in _GRAPH_MODES
    if keyword != "options":
        return False
    if isinstance(value, cst.Dict):
        for element in value.elements:
            if (isinstance(element, cst.DictElement) and isinstance(element.key, cst.SimpleString)
                    and element.key.evaluated_value in _GRAPH_OPTIONS
                    and isinstance(element.value, cst.Name) and element.value.value == "True"):
                return True
    return False


def calls_in(node: cst.CSTNode) -> list[cst.BaseExpression]:
    out: list[cst.BaseExpression] = []
    stack = [node]
    while stack:
        current = stack.pop()
        if isinstance(current, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
            continue
        if isinstance(current, cst.Call):
            out.append(current.func)
        stack.extend(reversed(code_children(current)))
    return out


def _callables(arg: cst.BaseExpression) -> list[cst.BaseExpression]:
    if isinstance(arg, (cst.Tuple, cst.List)):
        return [e.value for e in arg.elements]
    return [arg]


def decorator_captures(function: cst.FunctionDef, imports: ImportMap) -> tuple[cst.CSTNode, str] | None:
    """The `@torch.compile(...)` decorator that captures the function, with its site kind."""
    for decorator in function.decorators:
        kind = compile_kind(decorator.decorator, imports) if isinstance(decorator.decorator, cst.Call) else None
        if kind is not None:
            return decorator, f"{kind}-decorator"  # "compile-decorator" | "compile-fullgraph-decorator"
    return None


def _dict_assignments(function: cst.FunctionDef) -> dict[str, list[cst.BaseExpression]]:
    """Local names assigned a dict (`kwargs = {"mode": "reduce-overhead"}`), with every value."""
    found: dict[str, list[cst.BaseExpression]] = {}
    stack: list[cst.CSTNode] = [function.body]
    while stack:
        node = stack.pop()
        if isinstance(node, (cst.FunctionDef, cst.ClassDef)):
            continue
        if isinstance(node, cst.Assign) and isinstance(node.value, (cst.Dict, cst.Call)):
            for target in node.targets:
                if isinstance(target.target, cst.Name):
                    found.setdefault(target.target.value, []).append(node.value)
        stack.extend(code_children(node))
    return found


def capture_sites(function: cst.FunctionDef, imports: ImportMap) -> tuple[list[CaptureSite], cst.CSTNode | None]:
    """The capture sites in a function's own body (not nested defs), and its first replay."""
    sites: list[CaptureSite] = []
    replay: cst.CSTNode | None = None
    spread: dict[str, list[cst.BaseExpression]] | None = None  # built when a compile call spreads a dict
    stack: list[cst.CSTNode] = [function.body]
    while stack:
        node = stack.pop()
        if isinstance(node, (cst.FunctionDef, cst.ClassDef)):
            continue
        if isinstance(node, cst.With):
            for item in node.items:
                if isinstance(item.item, cst.Call) and capture_context(item.item, imports.resolve(item.item.func)):
                    sites.append(CaptureSite("cuda-graph", item.item, calls_in(node.body), node.body))
        elif isinstance(node, cst.Call):
            qualified = imports.resolve(node.func)
            positional = [a.value for a in node.args if a.keyword is None and not a.star]
            if positional and spread is None and any(a.star == "**" for a in node.args):
                spread = _dict_assignments(function)
            if qualified in _GRAPHED and positional:
                sites.append(CaptureSite("graphed-callables", node, _callables(positional[0])))
            elif positional and (kind := compile_kind(node, imports, spread)) is not None:
                sites.append(CaptureSite(kind, node, [positional[0]]))
            elif replay is None and replay_call(node):
                replay = node
        elif isinstance(node, cst.IndentedBlock) or isinstance(node, cst.Module):
            sites.extend(_begin_end(node.body))
        stack.extend(reversed(code_children(node)))
    return sites, replay


def _graph_like(receiver: cst.BaseExpression) -> bool:
    """`g`, `graph`, `self._graph`, `self.graphs[bs]`: a CUDA graph by its name (a replay buffer's
    `.replay()` is not one)."""
    while isinstance(receiver, cst.Subscript):
        receiver = receiver.value
    name = (dotted(receiver) or "").rsplit(".", 1)[-1].lower()
    return name in ("g", "cg") or "graph" in name


def _method_stmt(stmt: cst.CSTNode, methods: frozenset[str]) -> cst.Call | None:
    if isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1 and isinstance(stmt.body[0], cst.Expr):
        call = stmt.body[0].value
        if isinstance(call, cst.Call) and isinstance(call.func, cst.Attribute) and call.func.attr.value in methods:
            return call
    return None


def _begin_end(body: Any) -> list[CaptureSite]:
    """`g.capture_begin()` ... `g.capture_end()` in one block: the statements between."""
    sites = []
    begin: int | None = None
    for index, stmt in enumerate(body):
        if _method_stmt(stmt, _CAPTURE_BEGIN) is not None:
            begin = index
        elif begin is not None and _method_stmt(stmt, _CAPTURE_END) is not None:
            between = list(body[begin + 1:index])
            callees = [c for s in between for c in calls_in(s)]
            sites.append(CaptureSite("capture-begin", _method_stmt(body[begin], _CAPTURE_BEGIN), callees,
                                     between[0] if between else None))
            begin = None
    return sites


# ----- one-time branches ------------------------------------------------------------------------

def _is_self_training(node: cst.BaseExpression) -> bool:
    return (isinstance(node, cst.Attribute) and node.attr.value in _TRAINING
            and isinstance(node.value, cst.Name) and node.value.value == "self")


def _assignment_targets(body: cst.CSTNode, kinds: tuple[type, ...]) -> Iterator[cst.BaseExpression]:
    """Every target (tuple and list targets unpacked) of the `kinds` of assignment in the block,
    not entering nested definitions; a `setattr` / `self.register_buffer` call yields its call."""
    stack = [body]
    while stack:
        node = stack.pop()
        if isinstance(node, (cst.FunctionDef, cst.ClassDef)):
            continue
        if isinstance(node, kinds):
            targets = [t.target for t in node.targets] if isinstance(node, cst.Assign) else [node.target]
            for target in targets:
                yield from ([e.value for e in target.elements] if isinstance(target, (cst.Tuple, cst.List)) else [target])
        elif isinstance(node, cst.Call) and dotted(node.func) in ("setattr", "self.register_buffer"):
            yield node
        stack.extend(code_children(node))


def _assigned(body: cst.CSTNode, target_text: str) -> bool:
    """Whether the block assigns `target_text` (`self.buf`, `buf`) anywhere."""
    return any(isinstance(target, cst.Call) or dotted(target) == target_text
               for target in _assignment_targets(body, (cst.Assign, cst.AnnAssign, cst.AugAssign)))


def _flag_name(node: cst.BaseExpression) -> str | None:
    """The name a flag test reads, lower-cased: `state.is_prefill`, `mode.is_decode()`,
    `is_prefill`, `(meta := md.prefill_metadata)`, `ForwardMode.EXTEND`."""
    if isinstance(node, cst.NamedExpr):
        node = node.value
    if isinstance(node, cst.Call) and not node.args:
        node = node.func
    if isinstance(node, cst.Attribute):
        return node.attr.value.lower()
    if isinstance(node, cst.Name):
        return node.value.lower()
    return None


def _literal_flag(node: cst.BaseExpression) -> str | None:
    """A step kind spelled as a string a mode is compared with (`mode == "prefill"`)."""
    if not isinstance(node, cst.SimpleString):
        return None
    value = str(node.evaluated_value).lower()
    if _PREFILL_NAME.fullmatch(value):
        return "prefill"
    if _DECODE_NAME.fullmatch(value):
        return "decode"
    return None


def _step_flag(node: cst.BaseExpression) -> str | None:
    """"prefill" or "decode" for a step flag: `state.is_prefill`, `mode.is_decode()`,
    `cu_seqlen_prefill is not None`, `md.num_prefills > 0`, `mode == ForwardMode.EXTEND`."""
    if isinstance(node, cst.Comparison) and len(node.comparisons) == 1:
        operator, right = node.comparisons[0].operator, node.comparisons[0].comparator
        if isinstance(right, cst.Integer) and right.value == "1" and _is_decode_length(node.left):
            if isinstance(operator, cst.Equal):
                return "decode"  # `q_len == 1`
            if isinstance(operator, cst.GreaterThan):
                return "prefill"  # `q_len > 1`
        if isinstance(operator, (cst.IsNot, cst.GreaterThan, cst.NotEqual)) and _is_zero_or_none(right):
            return _step_flag(node.left)  # present, or more than none
        if isinstance(operator, cst.Equal):
            return _literal_flag(right) or _literal_flag(node.left) or _step_flag(right) or _step_flag(node.left)
        return None
    name = _flag_name(node)
    if name is None or _CONFIG_WORDS.intersection(name.split("_")):
        return None
    if _PREFILL_NAME.fullmatch(name):
        return "prefill"
    if _DECODE_NAME.fullmatch(name):
        return "decode"
    if _CAPTURE_NAME.fullmatch(name):
        return "capture"
    return None


def _is_decode_length(node: cst.BaseExpression) -> bool:
    name = _flag_name(node)
    return name is not None and bool(_DECODE_LENGTH.fullmatch(name))


def _is_zero_or_none(node: cst.BaseExpression) -> bool:
    return (isinstance(node, cst.Name) and node.value == "None") or (
        isinstance(node, cst.Integer) and node.value == "0")


def _flag_negation(test: cst.BaseExpression) -> tuple[cst.BaseExpression, bool]:
    """The flag a test reads and whether the test negates it (`not x`, `x is None`,
    `x == 0`, `mode != ForwardMode.DECODE`)."""
    if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        inner, negated = _flag_negation(test.expression)
        return inner, not negated
    if isinstance(test, cst.Comparison) and len(test.comparisons) == 1:
        operator, right = test.comparisons[0].operator, test.comparisons[0].comparator
        if isinstance(operator, (cst.Is, cst.Equal)) and _is_zero_or_none(right):
            return test.left, True
        if isinstance(operator, cst.NotEqual) and not _is_zero_or_none(right):
            return cst.Comparison(test.left, [cst.ComparisonTarget(cst.Equal(), right)]), True
    return test, False


def _debug_flag(node: cst.BaseExpression) -> bool:
    """A debug switch: `self.debug_tensor_dump_output_folder`, `DEBUG`, `logger.isEnabledFor(...)`."""
    if isinstance(node, cst.Comparison) and len(node.comparisons) == 1 and isinstance(
            node.comparisons[0].operator, cst.IsNot) and _is_zero_or_none(node.comparisons[0].comparator):
        node = node.left
    if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and node.func.attr.value in _DEBUG_CALLS:
        return True
    name = _flag_name(node)
    return name is not None and bool(_DEBUG_WORDS.intersection(name.split("_")))


def _platform_literal(node: cst.BaseExpression) -> bool:
    return isinstance(node, cst.SimpleString) and str(node.evaluated_value).lower() in _PLATFORM_VALUES


def _platform_test(node: cst.BaseExpression) -> bool:
    """A test that holds only on a backend without CUDA graphs: `SYSTEM == "ipex"`,
    `x.device.type in ("cpu", "mps")`, `_is_npu`, `current_platform.is_xpu()`,
    `torch.xpu.is_available()`."""
    if isinstance(node, cst.Comparison):
        if len(node.comparisons) != 1:
            return False
        operator, right = node.comparisons[0].operator, node.comparisons[0].comparator
        if isinstance(operator, cst.Equal):
            return _platform_literal(right) or _platform_literal(node.left)
        if isinstance(operator, cst.In) and isinstance(right, (cst.Tuple, cst.List, cst.Set)) and right.elements:
            return all(_platform_literal(element.value) for element in right.elements)
        return False
    if isinstance(node, cst.Call) and not node.args and _PLATFORM_CALL.fullmatch(dotted(node.func) or ""):
        return True
    name = _flag_name(node)
    return name is not None and bool(_PLATFORM_NAME.fullmatch(name))


def _first_comment(block: cst.CSTNode | None) -> str | None:
    """The first comment of an arm: on its header line, or above its first statement."""
    if isinstance(block, cst.SimpleStatementSuite):
        comment = block.trailing_whitespace.comment
        return comment.value if comment is not None else None
    if not isinstance(block, cst.IndentedBlock):
        return None
    if block.header.comment is not None:
        return block.header.comment.value
    for line in block.body[0].leading_lines if block.body else ():
        if line.comment is not None:
            return line.comment.value
    return None


def _comment_states(block: cst.CSTNode | None, state: re.Pattern[str]) -> bool:
    """Whether an arm's first comment states `state` from its start, not negated."""
    comment = _first_comment(block)
    if comment is None:
        return False
    text = comment.lstrip("#").strip().lower()
    return bool(state.match(text)) and not _CAPTURE_NEGATION.search(text)


def states_prefill(block: cst.CSTNode | None) -> bool:
    """Whether an arm's first comment names it the prefill (`# prefill`, `else:  # prefill stage`)."""
    return _comment_states(block, _PREFILL_COMMENT)


def states_capture(block: cst.CSTNode | None) -> bool:
    """Whether an arm's first comment says that it is the arm taken while a graph is captured
    (`# we are capturing cuda graph`); the other arm is then the eager path."""
    return _comment_states(block, _CAPTURE_STATE)


def _negated_flag(node: cst.BaseExpression) -> str | None:
    if isinstance(node, cst.UnaryOperation) and isinstance(node.operator, cst.Not):
        return _step_flag(node.expression)
    return None


def _operands(test: cst.BaseExpression, operator: type) -> list[cst.BaseExpression]:
    """The operands of a chain of one boolean operator (`a and b and c` -> [a, b, c])."""
    if isinstance(test, cst.BooleanOperation) and isinstance(test.operator, operator):
        return _operands(test.left, operator) + _operands(test.right, operator)
    return [test]


def _stores_into(body: cst.CSTNode, container: str) -> bool:
    """Whether the block assigns an item of `container` (`container[key] = ...`)."""
    return any(isinstance(target, cst.Subscript) and dotted(target.value) == container
               for target in _assignment_targets(body, (cst.Assign,)))


def one_time_test(test: cst.BaseExpression, body: cst.CSTNode) -> tuple[str | None, bool]:
    """(kind, negated) for an `if` test that selects one-time code: kind is TRAINING_ONLY or
    LAZY_INIT; negated means the one-time code is the else branch (`if not self.training:`).
    Lazy initialisation tests an attribute (`self.buf is None`, `not self._initialized`,
    `not hasattr(self, "x")`) that the branch sets."""
    if _is_self_training(test):
        return TRAINING_ONLY, False
    flag, negated = _flag_negation(test)
    step_kind = _step_flag(flag)
    if step_kind is None and isinstance(flag, cst.BooleanOperation) and isinstance(flag.operator, cst.Or):
        # `if mode.is_decode_or_idle() or mode.is_target_verify():` is the decode step; the
        # rest of its `elif` chain is prefill.
        kinds = {_step_flag(part) for part in _operands(flag, cst.Or)}
        step_kind = "decode" if kinds == {"decode"} else None
    if step_kind == "capture":
        return EAGER_ONLY, not negated  # the arm taken when not capturing
    if step_kind is not None:
        return PREFILL_ONLY, negated if step_kind == "prefill" else not negated
    if _debug_flag(flag):
        return DEBUG_ONLY, negated
    if _platform_test(flag) or (isinstance(flag, cst.BooleanOperation) and isinstance(flag.operator, cst.Or)
                                and all(_platform_test(part) for part in _operands(flag, cst.Or))):
        return OTHER_PLATFORM, negated
    if isinstance(test, cst.BooleanOperation) and isinstance(test.operator, cst.And):
        if _is_self_training(test.left) or _is_self_training(test.right):
            return TRAINING_ONLY, False
        # `if state.is_prefill and state.is_token_healing:` runs only when both hold.
        if any(_step_flag(part) == "prefill" or _negated_flag(part) == "decode" for part in _operands(test, cst.And)):
            return PREFILL_ONLY, False
        if any(_debug_flag(part) for part in _operands(test, cst.And)):
            return DEBUG_ONLY, False
        if any(_platform_test(part) for part in _operands(test, cst.And)):
            return OTHER_PLATFORM, False
    if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        inner = test.expression
        if _is_self_training(inner):
            return TRAINING_ONLY, True
        name = dotted(inner)
        if name is not None and "." in name:
            short = name.rsplit(".", 1)[-1].lower()
            if any(word in short for word in _INIT_WORDS) or _assigned(body, name):
                return LAZY_INIT, False
        if name is not None and "." not in name and any(word in name.lower() for word in _INIT_WORDS):
            # `was_initialized = cache.is_initialized; if not was_initialized: cache.lazy_init(...)`
            return LAZY_INIT, False
        if isinstance(inner, cst.Call) and dotted(inner.func) == "hasattr" and len(inner.args) == 2:
            return LAZY_INIT, False
    if (isinstance(test, cst.Comparison) and len(test.comparisons) == 1
            and isinstance(test.comparisons[0].operator, cst.NotIn)):
        # `if self.layer_idx not in params.states: params.states[self.layer_idx] = torch.zeros(...)`:
        # the first call fills the cache entry, later calls read it.
        container = dotted(test.comparisons[0].comparator)
        if container is not None and _stores_into(body, container):
            return LAZY_INIT, False
    if (isinstance(test, cst.Comparison) and len(test.comparisons) == 1
            and isinstance(test.comparisons[0].operator, cst.Is)
            and isinstance(test.comparisons[0].comparator, cst.Name) and test.comparisons[0].comparator.value == "None"):
        name = dotted(test.left)
        # Only state that outlives the call (`self.buf`): `if x is None: x = ...` on a local or
        # a parameter is a default taken every step.
        if name is not None and "." in name and _assigned(body, name):
            return LAZY_INIT, False
    if _cleared(test, body):
        return LAZY_INIT, False
    if states_capture(body):
        return EAGER_ONLY, True  # the arm says it is the capturing one: the other is eager
    return None, False


def _cleared(test: cst.BaseExpression, body: cst.CSTNode) -> bool:
    """`if self.wrapper.need_plan: self.wrapper.need_plan = False; plan(...)`: a flag the branch
    clears for itself runs the branch once (until something sets it again)."""
    name = dotted(test)
    if name is None or "." not in name:
        return False
    for stmt in getattr(body, "body", ()):
        smalls = stmt.body if isinstance(stmt, cst.SimpleStatementLine) else ()
        for small in smalls:
            if isinstance(small, cst.Assign) and isinstance(small.value, cst.Name) \
                    and small.value.value in ("False", "None") and any(dotted(t.target) == name for t in small.targets):
                return True
    return False


def rest_zones(statements: Any) -> dict[int, str]:
    """The statements of a block that follow an early exit out of one-time code's other arm
    (`if not meta.is_prefill: return out` ... the prefill rest), by id, with their kind."""
    found: dict[int, str] = {}
    kind: str | None = None
    for index, stmt in enumerate(statements):
        if kind is not None:
            found[id(stmt)] = kind
        elif type(stmt) is cst.If and stmt.orelse is None and exits(stmt.body):
            test_kind, negated = one_time_test(stmt.test, stmt.body)
            if test_kind is not None and negated:
                kind = test_kind
            elif test_kind is None and _done_guard(stmt.test, statements[index + 1:]):
                kind = LAZY_INIT
    return found


def _done_guard(test: cst.BaseExpression, rest: Any) -> bool:
    """`if meta.initialized: return` ... `meta.initialized = True`: the rest runs once (a
    plan made before capture); the flag is an attribute that the rest sets or that says so."""
    name = dotted(test)
    if name is None or "." not in name:
        return False
    short = name.rsplit(".", 1)[-1].lower()
    return any(word in short for word in _INIT_WORDS) or any(_assigned(stmt, name) for stmt in rest)


def one_time_blocks(node: cst.If) -> list[tuple[cst.CSTNode, str]]:
    """The blocks of an `if` that run once (or only in training), with their kind."""
    kind, negated = one_time_test(node.test, node.body)
    if kind is None and isinstance(node.orelse, cst.Else) and states_capture(node.orelse.body):
        return [(node.body, EAGER_ONLY)]  # `else:  # during CUDA graph capture ...`
    if kind is None and states_prefill(node.body):
        return [(node.body, PREFILL_ONLY)]  # `if n > 64:  # prefill`
    if kind is None and isinstance(node.orelse, cst.Else) and states_prefill(node.orelse.body):
        return [(node.orelse, PREFILL_ONLY)]  # `else:  # prefill`
    if kind is None:
        return []
    if negated:
        return [(node.orelse, kind)] if node.orelse is not None else []  # an Else, or an elif's If
    return [(node.body, kind)]
