"""Analyse one file: parse, infer device values per function, walk each function once with
every rule, and return raw findings with positions plus the facts regions need.

One parse and one walk per function, whatever the number of rules: the walker dispatches each
node to the rules that visit its type. Positions are computed only for files with findings.
Nothing here imports or runs the analysed code.
"""
from __future__ import annotations

import ast

import re
import sys
from collections import deque
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Iterator, Sequence

from graphlint.lazy import cst

from graphlint.analysis import catalog
from graphlint.analysis.facts.call_facts import MODULE_SCOPE, callgraph_facts
from graphlint.analysis.facts.encoding import encode, is_library_method
from graphlint.analysis.facts.graph_contexts import context_facts, record_contexts
from graphlint.analysis.capture_sites import (CAPTURE_BLOCK, capture_context, capture_sites, decorator_captures, one_time_blocks,
                                              rest_zones)
from graphlint.analysis.children import (trivia_types, children, code_children, compound_bodies, forget_scans,
                                        suite_body)
from graphlint.analysis.inference.class_facts import collect_class
from graphlint.analysis.inference.facts import ExternalFacts, ModuleFacts
from graphlint.analysis.inference.function_walk import Inference
from graphlint.analysis.inference.lattice import UNKNOWN
from graphlint.analysis.arm_guards import CONDITION, child_guards
from graphlint.analysis.names import collect_imports, normalise_identifiers
from graphlint.analysis.walk.rule import Context, RawFinding, Rule
from graphlint.analysis.summaries import class_summaries, function_summary
from graphlint.analysis.step_values import step_values, unconditional_counters
from graphlint.analysis.text import shape
from graphlint.analysis.text.source import MAX_BRACKET_DEPTH, bracket_depth
from graphlint.config import DEFAULT_MAX_FILE_SIZE

# A cheap gate before the expensive passes: a file that never mentions torch, tensors, CUDA or
# a sync method has nothing for these rules (a file named on the command line is parsed anyway).
SKIP_REASON = "they never mention torch, tensors or CUDA"
_INTERESTING = catalog.pattern("source_gates", "interesting")
_CALLED = re.compile(r"\b([A-Za-z_]\w*)\s*\(")
_DEFINES = re.compile(r"^\s*(?:class|def|async\s+def)\s", re.MULTILINE)
_MARKER = re.compile(r"#\s*graphlint:\s*(host|entry|eager)\b")
# Methods that construct or describe an object rather than run a step.
NOT_PER_STEP = frozenset({
    "__init__", "__new__", "__post_init__", "__init_subclass__", "__repr__", "__str__",
    "__getstate__", "__setstate__", "__del__", "__set_name__", "extra_repr", "__hash__", "__eq__",
})


@dataclass
class FunctionInfo:
    """A function or method of the file, in source order."""

    qualname: str
    line: int
    marker: str | None  # "host" | "entry" | "eager" from a comment on the def line
    class_name: str | None
    node: cst.FunctionDef = field(repr=False, compare=False)


@dataclass
class FileFinding:
    """A finding located in its file; the engine adds regions and suppressions."""

    rule: str
    function: str
    line: int
    col: int
    end_line: int
    end_col: int
    statement_line: int
    message: str
    fix: str
    zone: str | None = None  # one-time branch or capture block the finding lies in
    escape: str | None = None  # "returned": the region decides (analysis/walk/rule.RawFinding)
    guards: list | None = None  # [key, state]: the tests it runs under (analysis.arm_guards)


@dataclass
class FileAnalysis:
    path: str
    findings: list[FileFinding] = field(default_factory=list)
    functions: list[dict[str, Any]] = field(default_factory=list)
    parse_error: dict[str, Any] | None = None  # GL900: {line, col, message}
    # GL903: the file is beyond what graphlint analyses (size, nesting, time, a parser crash).
    limit: dict[str, Any] | None = None
    skipped: bool = False  # not parsed: it never mentions torch (SKIP_REASON)
    # Facts for the call graph (filled by graphlint.callgraph.graph when entry points are in use).
    extra: dict[str, Any] = field(default_factory=dict)


def _def_marker(node: cst.FunctionDef) -> str | None:
    """A `# graphlint: host|entry|eager` comment on the def line (end of the header, or
    after the opening parenthesis of a multi-line signature)."""
    comments: list[str] = []
    header = getattr(node.body, "header", None)
    if header is not None and header.comment is not None:
        comments.append(header.comment.value)
    ws = node.whitespace_before_params
    if isinstance(ws, cst.ParenthesizedWhitespace) and ws.first_line.comment is not None:
        comments.append(ws.first_line.comment.value)
    for comment in comments:
        match = _MARKER.search(comment)
        if match:
            return match.group(1)
    return None


def enumerate_functions(module: cst.Module) -> list[FunctionInfo]:
    """Every def in the file with its dotted qualified name (`Class.method`, `outer.inner`)."""
    found: list[FunctionInfo] = []
    _enumerate(module.body, "", None, found)
    return found


def _enumerate(body: Sequence[cst.CSTNode], prefix: str, class_name: str | None, found: list[FunctionInfo]) -> None:
    # A module-level function, not a closure that calls itself: that closure's cell would hold
    # it in a reference cycle with `found`, and so every function's tree, until a collection.
    for stmt in body:
        if isinstance(stmt, cst.FunctionDef):
            qualname = f"{prefix}{stmt.name.value}"
            found.append(FunctionInfo(qualname, 0, _def_marker(stmt), class_name, stmt))
            _enumerate(suite_body(stmt.body), qualname + ".", None, found)
        elif isinstance(stmt, cst.ClassDef):
            _enumerate(suite_body(stmt.body), f"{prefix}{stmt.name.value}.", stmt.name.value, found)
        elif isinstance(stmt, (cst.If, cst.Try, cst.With)):
            # Functions defined under `if TYPE_CHECKING:` / try-import blocks.
            for child in compound_bodies(stmt):
                _enumerate(child, prefix, class_name, found)
        elif isinstance(stmt, (cst.For, cst.While)):
            # A callback defined inside the loop that drives it (gpt-fast's generate loop).
            _enumerate(suite_body(stmt.body), prefix, class_name, found)


def _collect_classes(module: cst.Module, facts: ModuleFacts) -> None:
    stack: deque[cst.CSTNode] = deque(module.body)  # list.pop(0) is quadratic in the statements
    while stack:
        stmt = stack.popleft()
        if isinstance(stmt, cst.ClassDef):
            collect_class(stmt, facts)
            stack.extend(suite_body(stmt.body))
        elif isinstance(stmt, (cst.If, cst.Try, cst.With)):
            for body in compound_bodies(stmt):
                stack.extend(body)
    for name in facts.classes:
        facts.classes[name].is_module = facts.class_is_module(name)


class _Plan:
    """What a dispatch table needs from the rule classes alone, found once per process for a
    set of rules (dir() over every rule class and the node-type tests cost a millisecond or
    two per file): the visit methods' names per node type, the child function and the leaves
    no rule visits."""

    def __init__(self, rules: Sequence[type[Rule]]):
        self.methods: dict[str, list[tuple[int, str]]] = {}  # node type -> (rule index, method name)
        for index, rule in enumerate(rules):
            for attr in dir(rule):
                if attr.startswith("visit_"):
                    self.methods.setdefault(attr[len("visit_"):], []).append((index, attr))
        # Layout nodes (whitespace, commas, brackets) hold nothing a rule reads, so the walk
        # skips them, unless a rule visits one of their types.
        visited = [getattr(cst, name, None) for name in self.methods]
        trivia_visited = any(isinstance(t, type) and issubclass(t, trivia_types()) for t in visited)
        self.children = children if trivia_visited else code_children
        # Leaves no rule visits (a third of the nodes): nothing happens at them, so the walk
        # does not call itself for them.
        self.silent = frozenset(t for t in (getattr(cst, name) for name in _LEAVES) if t.__name__ not in self.methods)
        # Per node type: (definition, statement, loop); isinstance on libcst's abstract bases is slow.
        self.shapes: dict[type, tuple[bool, bool, bool]] = {}

    def shape_of(self, node_type: type) -> tuple[bool, bool, bool]:
        shape = self.shapes.get(node_type)
        if shape is None:
            shape = self.shapes[node_type] = (issubclass(node_type, (cst.FunctionDef, cst.ClassDef)),
                                              issubclass(node_type, (cst.SimpleStatementLine, cst.BaseCompoundStatement)),
                                              issubclass(node_type, (cst.For, cst.While)))
        return shape


_PLANS: dict[tuple[type[Rule], ...], _Plan] = {}


class _Dispatch:
    """Node type name -> the bound visit methods of every rule that has one. The rules are new
    for each file (they keep state while they walk it); the plan is shared."""

    def __init__(self, rules: Sequence[type[Rule]]):
        key = tuple(rules)
        plan = _PLANS.get(key)
        if plan is None:
            plan = _PLANS[key] = _Plan(rules)
        self.plan = plan
        self.rules = [rule() for rule in rules]
        self.table: dict[str, list[Any]] = {name: [getattr(self.rules[index], attr) for index, attr in methods]
                                            for name, methods in plan.methods.items()}
        self.children = plan.children
        self.silent = plan.silent
        # Per node type: (definition, statement, loop, handlers), so the walk asks once per type.
        self.kinds: dict[type, tuple[bool, bool, bool, list[Any] | None]] = {}

    def kind_of(self, node: cst.CSTNode) -> tuple[bool, bool, bool, list[Any] | None]:
        node_type = type(node)
        kind = (*self.plan.shape_of(node_type), self.table.get(node_type.__name__))
        self.kinds[node_type] = kind
        return kind


def _walk(node: cst.CSTNode, ctx: Context, dispatch: _Dispatch, top: bool = False) -> None:
    kind = dispatch.kinds.get(type(node)) or dispatch.kind_of(node)
    is_definition, is_statement, is_loop, handlers = kind
    if is_definition and not top:
        return  # nested definitions are analysed on their own
    saved_statement = ctx.statement
    if is_statement and not top:
        ctx.statement = node
    if handlers:
        for handler in handlers:
            handler(node, ctx)
    if is_loop:
        ctx.loop_depth += 1
    ctx.parents.append(node)
    node_type = type(node).__name__
    zones = _zones(node, ctx) if node_type in _ZONED else None
    guards = child_guards(node) if node_type in _GUARDED else None
    if ctx.rebindable:
        if node_type in _BINDING:
            ctx.rebound.update(_bound_names(node))
        if guards:
            guards = _still_valid(guards, ctx, node_type == "IndentedBlock")
    if ctx.site_guards is not None and id(node) in ctx.site_guards:
        ctx.site_guards[id(node)] = ctx.guards
    if top and isinstance(node, cst.FunctionDef):
        _walk(node.body, ctx, dispatch)
    elif zones or guards:
        saved_zone, saved_guards = ctx.zone, ctx.guards
        for child in _walked_children(node, ctx, dispatch):
            if zones:
                ctx.zone = zones.get(id(child), saved_zone)
            if guards:
                ctx.guards = saved_guards + guards.get(id(child), ())
            _walk(child, ctx, dispatch)
        ctx.zone, ctx.guards = saved_zone, saved_guards
    else:
        for child in _walked_children(node, ctx, dispatch):
            _walk(child, ctx, dispatch)
    ctx.parents.pop()
    if is_loop:
        ctx.loop_depth -= 1
    ctx.statement = saved_statement


def _walked_children(node: cst.CSTNode, ctx: Context, dispatch: _Dispatch) -> list[cst.CSTNode]:
    """The children the walk enters: all but the leaves no rule visits. A capture site may be a
    bare name (`with graph_context:`), and its guards are recorded, so it is kept."""
    silent, sites = dispatch.silent, ctx.site_guards
    return [child for child in dispatch.children(node)
            if type(child) not in silent or (sites is not None and id(child) in sites)]


def _tokenizer_position(text: str) -> dict[str, int]:
    """Where CPython's tokenizer stops (libcst's tokenizer errors, such as mixed tabs and
    spaces, all point at 1:1). Only compiled to a tree, never run; {} when it finds nothing."""
    try:
        compile(text, "<graphlint>", "exec", ast.PyCF_ONLY_AST, dont_inherit=True)
    except SyntaxError as error:
        if error.lineno:
            return {"line": error.lineno, "col": max(1, error.offset or 1)}
    except (RecursionError, MemoryError, ValueError):
        pass
    return {}


# Node types with no code below them and no part in the walk's own bookkeeping (not a
# statement, loop, definition or binding): only a rule's handler could make them matter.
_LEAVES = ("Name", "Integer", "Float", "Imaginary", "SimpleString")
_ZONED = frozenset({"If", "With", "IndentedBlock"})  # libcst node types, by name: libcst loads lazily
_GUARDED = frozenset({"If", "IfExp", "BooleanOperation", "IndentedBlock"})  # where a None test guards a child
_BINDING = frozenset({"Assign", "AnnAssign", "AugAssign", "For", "NamedExpr", "WithItem", "ExceptHandler"})


def _bound_names(node: cst.CSTNode) -> list[str]:
    """The plain names a binding statement (or a walrus, a `with ... as`, an `except ... as`) binds."""
    kind = type(node)
    if kind is cst.Assign:
        targets = [t.target for t in node.targets]
    elif kind is cst.WithItem:
        targets = [node.asname.name] if node.asname is not None else []
    elif kind is cst.ExceptHandler:
        targets = [node.name.name] if node.name is not None else []
    else:
        targets = [node.target]
    names: list[str] = []
    while targets:
        target = targets.pop()
        if type(target) is cst.Name:
            names.append(target.value)
        elif type(target) in (cst.Tuple, cst.List):
            targets.extend(e.value for e in target.elements)
        elif type(target) is cst.StarredElement:
            targets.append(target.value)
    return names


def _still_valid(guards: dict[int, tuple], ctx: Context, block: bool) -> dict[int, tuple] | None:
    """A None test of a name the function binds again says what the name held when the test
    ran only before the first rebinding, and never inside a loop (a later iteration may see
    the new value). A block's early exits are read before its statements are walked, so
    there such a name never guards."""
    def valid(name: str) -> bool:
        return name.startswith(CONDITION) or name not in ctx.rebindable or (
            not block and name not in ctx.rebound and not ctx.loop_depth)
    kept = {child: tuple(g for g in held if valid(g[0])) for child, held in guards.items()}
    return {child: held for child, held in kept.items() if held} or None


def _zones(node: cst.CSTNode, ctx: Context) -> dict[int, str] | None:
    """Children of an `if` or `with` that run once (training-only, lazy initialisation,
    prefill-only, debug-only) or inside a capture (`with torch.cuda.graph(...)`), and the rest
    of a block after an early exit from the other arm of such an `if`, by id."""
    if type(node) is cst.IndentedBlock:
        return rest_zones(node.body) or None
    if type(node) is cst.If:
        blocks = one_time_blocks(node)
        return {id(block): kind for block, kind in blocks} if blocks else None
    for item in node.items:
        if isinstance(item.item, cst.Call) and capture_context(item.item, ctx.qualified(item.item.func)):
            return {id(node.body): CAPTURE_BLOCK}
    return None


# A capture site or a replay names one of these; other files are not scanned for them.
_CAPTURE_HINT = catalog.pattern("source_gates", "capture_hint")


@dataclass
class _ModuleScope:
    """A module's own statements where capture_sites reads a function's body (a script that
    wraps its step, `policy = CudaGraphModule(policy)`, at module level)."""

    body: Any


def _capture_facts(module: Any, functions: Sequence[FunctionInfo], imports: Any,
                   text: str) -> dict[str, tuple[list, Any, Any]]:
    """qualname -> (capture sites, first replay, compile decorator) for functions with any;
    the module's own statements under MODULE_SCOPE."""
    found: dict[str, tuple[list, Any, Any]] = {}
    if not _CAPTURE_HINT.search(text):
        return found
    for info in functions:
        sites, replay = capture_sites(info.node, imports)
        decorator = decorator_captures(info.node, imports)
        if sites or replay is not None or decorator is not None:
            found[info.qualname] = (sites, replay, decorator)
    sites, replay = capture_sites(_ModuleScope(module), imports)
    if sites or replay is not None:
        found[MODULE_SCOPE] = (sites, replay, None)
    return found


def analyze_source(path: str, text: str, rules: Sequence[type[Rule]], force: bool = False,
                   external: dict | None = None, call_graph: bool = True,
                   max_size: int = DEFAULT_MAX_FILE_SIZE) -> FileAnalysis:
    """Analyse one file's text. A syntax error becomes `parse_error` (GL900); a text longer than
    `max_size` (0: no limit) or nested too deeply for the analysis becomes `limit` (GL903), not an
    exception. `force`: parse the file even if it never mentions torch. `external`: facts from the
    rest of the linted code (graphlint.callgraph.project_summaries)."""
    if max_size and len(text) > max_size:
        return FileAnalysis(path, limit=limit_record(too_large(len(text), max_size)))
    try:
        return _analyze(path, text, rules, force, external, call_graph, max_size)
    except RecursionError:
        # Deeper than the recursion limit allows (the engine raises it in its workers, which
        # analyse on a large stack); what CPython compiles usually fits.
        return FileAnalysis(path, limit=limit_record(f"nested too deeply to analyse (more than "
                                                     f"{sys.getrecursionlimit()} levels of recursion)"))
    finally:
        forget_scans()  # the listed scans hold this file's tree


def too_large(size: int, max_size: int) -> str:
    return f"larger than max-file-size ({size:,} > {max_size:,} bytes)"


def limit_record(reason: str, line: int = 1) -> dict[str, Any]:
    """The `limit` of a FileAnalysis (GL903): why the file was not analysed."""
    return {"line": line, "col": 1, "message": reason}


def _analyze(path: str, text: str, rules: Sequence[type[Rule]], force: bool, external: dict | None,
             call_graph: bool, max_size: int = DEFAULT_MAX_FILE_SIZE) -> FileAnalysis:
    result = FileAnalysis(path)
    text = normalise_identifiers(text)  # `x.ｉtem()` is `x.item()` to Python
    module = _parse(result, path, text, force, max_size)
    if module is None:
        return result
    imports = collect_imports(module)
    facts = ModuleFacts(module, imports)
    _collect_classes(module, facts)
    functions = enumerate_functions(module)
    captures = _capture_facts(module, functions, imports, text)
    contexts = context_facts(functions, imports, bool(_CAPTURE_HINT.search(text)))
    # The call graph's per-file facts come from this same parse (no second read of the file);
    # the walk reads which parameters each function binds again.
    calls = callgraph_facts(module, imports, functions, facts) if call_graph else {"functions": {}}
    # The tests each capture site sits under (`else:` of a model-type test), met by the walk.
    site_guards: dict[int, tuple] = {id(site.node): () for sites, _, _ in captures.values() for site in sites}
    raw, summaries = _infer_and_walk(module, facts, imports, functions, rules, external, calls, site_guards)
    # What this file's functions pass, return and assign, for the project-wide join.
    result.extra["summary"] = {"functions": summaries, "classes": class_summaries(facts)}
    positions = _record_findings(result, module, functions, raw, captures, contexts)
    if call_graph:
        _record_call_facts(result, calls, captures, positions, site_guards)
        record_contexts(calls, contexts, positions)
    return result


@contextmanager
def _unvalidated() -> Iterator[None]:
    """libcst nodes built without their `_validate` checks (an eighth of the parse): what the
    parser builds from source it accepted is valid by construction. libcst's own comment on
    `CSTNode.__post_init__` suggests the same for parsing. Where a libcst release moves the
    check elsewhere, nothing is changed."""
    base = cst.CSTNode
    check = base.__dict__.get("__post_init__")
    if check is None:
        yield
        return
    base.__post_init__ = _no_check  # type: ignore[method-assign]
    try:
        yield
    finally:
        base.__post_init__ = check  # type: ignore[method-assign]


def _no_check(self: Any) -> None:
    return None


def _parse(result: FileAnalysis, path: str, text: str, force: bool, max_size: int) -> cst.Module | None:
    """The file's tree, or None when it is not parsed; `result` then says why (skipped, a
    parse error, a limit) and, for a skipped file, the names it calls."""
    # A package `__init__.py` that only re-exports is parsed too: the call graph follows its imports.
    # A file that never mentions torch is still analysed when it defines functions or classes:
    # the call graph may pass through it (a container class of the engine's own, a plain-class
    # layer, a helper a forward hands a device value to).
    quiet = not force and not _INTERESTING.search(text)
    if quiet and not (path.endswith("__init__.py") and "import" in text) and not _DEFINES.search(text):
        result.skipped = True
        # Not parsed, but it may call linted functions: their parameters then have a caller
        # whose arguments are not known (graphlint.callgraph.project_summaries reads these names).
        result.extra["called_names"] = sorted(set(_CALLED.findall(text)))
        return None
    depth, depth_line = bracket_depth(text)
    if depth > MAX_BRACKET_DEPTH and quiet:
        result.skipped = True
        return None
    if depth > MAX_BRACKET_DEPTH:
        # CPython refuses this too; libcst's native parser would overflow its stack on it.
        result.parse_error = {"line": depth_line or 1, "col": 1,
                              "message": f"too many nested parentheses ({depth} levels; Python allows "
                                         f"{MAX_BRACKET_DEPTH})"}
        return None
    refused = shape.refusal(text, max_size)  # what would take the parser too long or too much memory
    if refused is not None:
        result.limit = limit_record(*refused)
        return None
    try:
        with _unvalidated():
            return cst.parse_module(text)
    except (cst.ParserSyntaxError, ValueError) as error:
        if quiet:
            # A file that never mentions torch is not graphlint's to judge: it stays unparsed.
            result.skipped = True
            result.extra["called_names"] = sorted(set(_CALLED.findall(text)))
        elif isinstance(error, cst.ParserSyntaxError):
            result.parse_error = {"line": error.raw_line, "col": error.raw_column + 1,
                                  "message": str(error).splitlines()[0] if str(error) else "syntax error"}
            if "tokenizer error" in str(error) or (error.raw_line, error.raw_column) == (1, 0):
                result.parse_error.update(_tokenizer_position(text))
        else:
            result.parse_error = {"line": 1, "col": 1, "message": f"could not parse: {error}"}
        return None


def _infer_and_walk(module: cst.Module, facts: ModuleFacts, imports: Any, functions: Sequence[FunctionInfo],
                    rules: Sequence[type[Rule]], external: dict | None, calls: dict,
                    site_guards: dict[int, tuple]) -> tuple[list[RawFinding], list[dict]]:
    """Each function in source order: its device values inferred, its summary for the project,
    then one walk with every rule, which also fills `site_guards` (the tests each capture site
    sits under). The raw findings and the summaries, in that order."""
    dispatch = _Dispatch(rules)
    raw: list[RawFinding] = []
    known = ExternalFacts.from_dict(external)
    summaries = []
    every_call = unconditional_counters(module)
    final_envs: dict[str, dict] = {}  # qualname -> the facts at the end of that function
    for info in functions:
        # A closure reads the names of the function it is defined in (`nonlocal` or not): they
        # keep what the enclosing function knows of them (functions come in source order, the
        # enclosing one first). `self` stays the closure's own business.
        outer = final_envs.get(info.qualname.rpartition(".")[0])
        env = {name: value for name, value in outer.items()
               if name not in ("self", "cls") and value.kind != UNKNOWN} if outer else None
        inference = Inference(facts, info.class_name, env=env, external=known)
        function_facts = inference.run_function(info.node, is_method=info.class_name is not None,
                                                qualname=info.qualname)
        summary = function_summary(info.qualname, info.class_name, inference)
        # The class's counters that move on every call (and hold host values, as inference says).
        counters = (facts.class_advanced(info.class_name)
                    & set().union(*(every_call.get(c, ()) for c in facts.lineage(info.class_name)))
                    if info.class_name else set())
        summary.update(step_values(info.node, counters, function_facts.of))
        summaries.append(summary)
        final_envs[info.qualname] = inference.env
        ctx = Context(info.qualname, function_facts, imports, raw)
        parts = info.qualname.split(".")
        ctx.enclosing = tuple(outer for outer in (".".join(parts[:k]) for k in range(1, len(parts))) if outer in final_envs)
        ctx.site_guards = site_guards or None
        ctx.rebindable = frozenset(calls["functions"].get(info.qualname, {}).get("rebound", ()))
        _walk(info.node, ctx, dispatch, top=True)
    return raw, summaries


def _record_findings(result: FileAnalysis, module: cst.Module, functions: Sequence[FunctionInfo],
                     raw: list[RawFinding], captures: dict[str, tuple[list, Any, Any]],
                     contexts: dict[str, tuple[list, bool]]) -> dict:
    """The functions and the findings into `result`, with their positions (computed only when
    something needs them); each place reported once per rule. Returns the positions."""
    needs_positions = bool(raw) or bool(captures) or bool(contexts) or any(f.marker for f in functions)
    capture_nodes = [n for sites, replay, decorator in captures.values()
                     for n in [*(site.node for site in sites), replay, decorator and decorator[0]] if n is not None]
    capture_nodes += [call for blocks, _ in contexts.values() for call, _ in blocks]
    from graphlint.analysis.positions import positions as node_positions  # libcst.metadata: only with findings
    positions = node_positions(module, [f.node.name for f in functions] + capture_nodes
                               + [n for item in raw for n in (item.node, item.statement)]) if needs_positions else {}
    for info in functions:
        if positions:
            info.line = positions[info.node.name].start.line
        result.functions.append({"qualname": info.qualname, "line": info.line, "marker": info.marker,
                                 "class": info.class_name})
    seen: set[tuple] = set()
    for item in raw:
        where = positions[item.node]
        statement_line = positions[item.statement].start.line if item.statement is not None else where.start.line
        key = (item.rule.code, where.start.line, where.start.column, where.end.line, where.end.column)
        if key in seen:
            continue  # loops are inferred twice; report each place once
        seen.add(key)
        result.findings.append(FileFinding(
            rule=item.rule.code, function=item.function,
            line=where.start.line, col=where.start.column + 1,
            end_line=where.end.line, end_col=where.end.column + 1,
            statement_line=statement_line, message=item.message, fix=item.fix,
            zone=item.zone, escape=item.escape, guards=[list(g) for g in item.guards] or None,
        ))
    result.findings.sort(key=lambda f: (f.line, f.col, f.rule))
    return positions


def _record_call_facts(result: FileAnalysis, calls: dict, captures: dict[str, tuple[list, Any, Any]],
                       positions: dict, site_guards: dict[int, tuple]) -> None:
    """The call graph's facts of this file into `result`, with each function's capture sites,
    the configuration tests each sits under, its compile decorator and replay by line."""
    result.extra["calls"] = calls
    for qualname, (sites, replay, decorator) in captures.items():
        entry = calls["functions"].get(qualname)
        if entry is None:
            continue
        # [kind, line, [callee expressions]]: the call graph resolves the callees.
        entry["captures"] = [[site.kind, positions[site.node].start.line,
                              [e for e in (encode(c) for c in site.callees if not is_library_method(c)) if e is not None]] for site in sites]
        conditions = [[list(g) for g in site_guards.get(id(site.node), ()) if g[0].startswith(CONDITION)]
                      for site in sites]
        if any(conditions):
            entry["capture_guards"] = conditions  # in the order of "captures"
        # Tests of plain names (a parameter's flag: `if compile:`): every call of the function
        # may rule the capture out.
        params = [[list(g) for g in site_guards.get(id(site.node), ()) if g[0].isidentifier()] for site in sites]
        if any(params):
            entry["capture_name_guards"] = params
        if decorator is not None:
            entry["captures"].append([decorator[1], positions[decorator[0]].start.line, []])
        if replay is not None:
            entry["replays"] = positions[replay].start.line
