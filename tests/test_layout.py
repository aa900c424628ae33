"""The package layout is the pipeline: each module imports only modules of its own stage or of
stages below it, and no import cycle exists. Imports are read from the source (nothing is
imported), including imports inside functions. The runtime wing's rooms are stages of their own,
every folder of modules is a package that says what it holds, and no two modules share a name.
Sizes are bounded so that the layout stays readable: no package holds more than 10 modules side
by side, no module is over 600 lines and no function over 100."""
from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# Stages from the bottom up. A module's stage is the first prefix that matches its dotted name.
STAGES = [
    ("base", ["graphlint", "graphlint.config", "graphlint.report", "graphlint.crosscheck", "graphlint.io"]),
    ("discovery", ["graphlint.discovery"]),
    # Per file: the tree and the catalogue (with the file as text), the inference on them, the
    # facts the project stages read, and one file's pass that gathers them all.
    ("analysis", ["graphlint.analysis"]),
    ("analysis inference", ["graphlint.analysis.inference"]),
    ("analysis facts", ["graphlint.analysis.facts", "graphlint.analysis.capture_sites",
                        "graphlint.analysis.step_values", "graphlint.analysis.summaries"]),
    ("analysis walk", ["graphlint.analysis.walk"]),
    # What the rule families share, below the families (and the registry) that use it.
    ("rules shared", ["graphlint.rules.shared"]),
    ("rules", ["graphlint.rules"]),
    ("callgraph", ["graphlint.callgraph"]),
    ("engine", ["graphlint.engine"]),
    ("library", ["graphlint.gating", "graphlint.region_audit", "graphlint.testing"]),
    # The runtime half stands beside the static one, one stage per room: where the user's frames
    # are, what to run, what a step did, the phases on a device (and under torch.compile), the
    # worker subprocess that runs them, and the harness that assembles Report.runtime.
    ("runtime frames", ["graphlint.runtime", "graphlint.runtime.user_frames"]),
    ("runtime targets", ["graphlint.runtime.targets"]),
    ("runtime tracing", ["graphlint.runtime.tracing"]),
    ("runtime devices", ["graphlint.runtime.cuda", "graphlint.runtime.emulation", "graphlint.runtime.torch_compile"]),
    ("runtime isolation", ["graphlint.runtime.isolation"]),
    ("runtime harness", ["graphlint.runtime.harness", "graphlint.runtime.lint_target"]),
    # Views render the sections of both halves.
    ("views", ["graphlint.views"]),
    # Entry points: the click commands (graphlint/commands/, the runtime's own among them) and the pytest plugin.
    ("cli", ["graphlint.cli", "graphlint.commands", "graphlint.server", "graphlint.__main__", "graphlint.pytest_plugin"]),
]


def _module_name(path: Path) -> str:
    if path.is_relative_to(ROOT / "rules"):
        parts = ["graphlint", "rules", *path.relative_to(ROOT / "rules").with_suffix("").parts]
    else:
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules() -> dict[str, Path]:
    files = [*(ROOT / "graphlint").rglob("*.py"), *(ROOT / "rules").rglob("*.py")]
    return {_module_name(path): path for path in files}


def _imports(name: str, path: Path, known: set[str]) -> set[str]:
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text("utf-8"))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            targets = [base] + [f"{base}.{alias.name}" for alias in node.names]
        else:
            continue
        for target in targets:
            # The deepest known module the import names (`from graphlint.analysis import catalog`
            # names graphlint.analysis.catalog).
            while target and target not in known:
                target = target.rpartition(".")[0]
            if target and target != name:
                found.add(target)
    return found


def _stage(name: str) -> int:
    best, index = -1, -1
    for position, (_, prefixes) in enumerate(STAGES):
        for prefix in prefixes:
            if (name == prefix or name.startswith(prefix + ".")) and len(prefix) > best:
                best, index = len(prefix), position
    assert index >= 0, f"{name} belongs to no stage: add it to STAGES"
    return index


def _graph() -> dict[str, set[str]]:
    modules = _modules()
    known = set(modules)
    return {name: _imports(name, path, known) for name, path in modules.items()}


def test_every_module_belongs_to_a_stage():
    for name in _modules():
        _stage(name)


def test_no_module_imports_a_stage_above_its_own():
    upward = [f"{name} ({STAGES[_stage(name)][0]}) imports {target} ({STAGES[_stage(target)][0]})"
              for name, targets in _graph().items() for target in sorted(targets)
              if name != "graphlint" and _stage(target) > _stage(name)]
    assert upward == []


def test_there_is_no_import_cycle():
    graph = _graph()
    # A package's __init__ re-exporting its own modules is not a cycle of the pipeline.
    edges = {name: {t for t in targets if not name.startswith(t + ".")} for name, targets in graph.items()}
    state: dict[str, int] = {}
    cycles: list[list[str]] = []

    def visit(node: str, trail: list[str]) -> None:
        state[node] = 1
        for target in sorted(edges.get(node, ())):
            if state.get(target) == 1:
                cycles.append(trail[trail.index(target):] + [target] if target in trail else [node, target])
            elif target not in state:
                visit(target, trail + [target])
        state[node] = 2

    for name in sorted(edges):
        if name not in state:
            visit(name, [name])
    assert cycles == []


def test_the_checker_sees_an_upward_import(tmp_path):
    # The test above must be able to fail: an analysis module importing the engine is upward.
    module = tmp_path / "probe.py"
    module.write_text("from graphlint.engine import check\n")
    found = _imports("graphlint.analysis.probe", module, set(_modules()))
    assert "graphlint.engine" in found and _stage("graphlint.engine") > _stage("graphlint.analysis.probe")


def test_the_runtime_imports_no_view_and_no_command():
    # The views render the runtime's dict and the command drives it: neither is the runtime's to call.
    graph = _graph()
    found = [f"{name} imports {target}" for name, targets in graph.items() if name.startswith("graphlint.runtime")
             for target in sorted(targets) if target.startswith(("graphlint.views", "graphlint.commands"))]
    assert found == []
    # Imports by name (importlib, `python -m`) do not show in the import graph: the source never names them.
    named = [f"{path.relative_to(ROOT)}:{number}" for path in sorted((ROOT / "graphlint" / "runtime").rglob("*.py"))
             for number, line in enumerate(path.read_text("utf-8").splitlines(), 1)
             if re.search(r"graphlint\.(views|commands)\b", line)]
    assert named == []


def test_the_runtime_check_sees_a_view_import(tmp_path):
    module = tmp_path / "probe.py"
    module.write_text("def f():\n    from graphlint.views.sections.runtime_text import render_runtime\n")
    assert "graphlint.views.sections.runtime_text" in _imports("graphlint.runtime.tracing.probe", module, set(_modules()))


def test_every_folder_of_modules_is_a_package_that_says_what_it_holds():
    folders = {path.parent for path in [*(ROOT / "graphlint").rglob("*.py"), *(ROOT / "rules").rglob("*.py")]}
    bare = [str(folder.relative_to(ROOT)) for folder in sorted(folders) if not (folder / "__init__.py").is_file()
            or not ast.get_docstring(ast.parse((folder / "__init__.py").read_text("utf-8")))]
    assert bare == []


def _shared_names(paths: list[Path]) -> dict[str, list[str]]:
    by_name: dict[str, list[str]] = {}
    for path in paths:
        if path.name != "__init__.py":
            by_name.setdefault(path.name, []).append(path.relative_to(ROOT).as_posix())
    return {name: sorted(where) for name, where in sorted(by_name.items()) if len(where) > 1}


def test_no_two_modules_share_a_file_name():
    # A name says what a module holds; two modules of one name make every traceback and search ambiguous.
    assert _shared_names([*(ROOT / "graphlint").rglob("*.py"), *(ROOT / "rules").rglob("*.py")]) == {}


def test_the_name_check_sees_a_shared_name():
    paths = [ROOT / "graphlint" / "a" / "summaries.py", ROOT / "graphlint" / "b" / "summaries.py",
             ROOT / "graphlint" / "a" / "__init__.py", ROOT / "graphlint" / "b" / "__init__.py"]
    assert _shared_names(paths) == {"summaries.py": ["graphlint/a/summaries.py", "graphlint/b/summaries.py"]}



# Sizes, for the shipped code (graphlint/ and rules/). A package with more modules side by side
# than this is grouped into subpackages by what they do; a longer module or function is split.
MAX_FLAT_MODULES = 10
MAX_MODULE_LINES = 600
MAX_FUNCTION_LINES = 100


def _package_files() -> list[Path]:
    return [*(ROOT / "graphlint").rglob("*.py"), *(ROOT / "rules").rglob("*.py")]


def _crowded_folders(paths: list[Path], root: Path = ROOT) -> dict[str, int]:
    """Folders holding more than MAX_FLAT_MODULES modules directly (an `__init__.py` aside)."""
    counts: dict[Path, int] = {}
    for path in paths:
        if path.name != "__init__.py":
            counts[path.parent] = counts.get(path.parent, 0) + 1
    return {folder.relative_to(root).as_posix(): count for folder, count in sorted(counts.items())
            if count > MAX_FLAT_MODULES}


def _long_modules(paths: list[Path], root: Path = ROOT) -> dict[str, int]:
    lengths = {path.relative_to(root).as_posix(): len(path.read_text("utf-8").splitlines()) for path in paths}
    return {name: length for name, length in sorted(lengths.items()) if length > MAX_MODULE_LINES}


def _long_functions(paths: list[Path], root: Path = ROOT) -> dict[str, int]:
    """`path:function` over MAX_FUNCTION_LINES lines, from its `def` line to its last line
    (methods and nested functions included)."""
    found: dict[str, int] = {}
    for path in paths:
        for node in ast.walk(ast.parse(path.read_text("utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                length = node.end_lineno - node.lineno + 1
                if length > MAX_FUNCTION_LINES:
                    found[f"{path.relative_to(root).as_posix()}:{node.name}"] = length
    return dict(sorted(found.items()))


def test_no_package_holds_more_than_ten_modules_side_by_side():
    assert _crowded_folders(_package_files()) == {}


def test_the_folder_check_sees_a_crowded_package(tmp_path):
    folder = tmp_path / "graphlint" / "crowded"
    folder.mkdir(parents=True)
    paths = [folder / "__init__.py", *(folder / f"m{i}.py" for i in range(MAX_FLAT_MODULES + 1))]
    assert _crowded_folders(paths, tmp_path) == {"graphlint/crowded": MAX_FLAT_MODULES + 1}
    assert _crowded_folders(paths[:-1], tmp_path) == {}  # ten modules and an __init__.py are fine


def test_no_module_is_over_600_lines():
    assert _long_modules(_package_files()) == {}


def test_the_module_check_sees_a_long_module(tmp_path):
    module = tmp_path / "graphlint" / "long_module.py"
    module.parent.mkdir()
    module.write_text("x = 1\n" * (MAX_MODULE_LINES + 1))
    assert _long_modules([module], tmp_path) == {"graphlint/long_module.py": MAX_MODULE_LINES + 1}
    module.write_text("x = 1\n" * MAX_MODULE_LINES)
    assert _long_modules([module], tmp_path) == {}


def test_no_function_is_over_100_lines():
    assert _long_functions(_package_files()) == {}


def test_the_function_check_sees_a_long_function(tmp_path):
    module = tmp_path / "graphlint" / "long_function.py"
    module.parent.mkdir()
    body = "".join(f"        x{i} = {i}\n" for i in range(MAX_FUNCTION_LINES))
    module.write_text(f"class C:\n    def short(self):\n        pass\n\n    def long(self):\n{body}")
    assert _long_functions([module], tmp_path) == {"graphlint/long_function.py:long":
                                                                 MAX_FUNCTION_LINES + 1}
    fits = "".join(f"    x{i} = {i}\n" for i in range(MAX_FUNCTION_LINES - 1))
    module.write_text(f"def fits():\n{fits}")  # the `def` line and 99 more: 100 lines
    assert _long_functions([module], tmp_path) == {}
