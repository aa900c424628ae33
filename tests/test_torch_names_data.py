"""The torch names the static analysis matches live in graphlint/data: each category with its
reason, each file with the torch version it was checked on, every name real on that torch,
and no torch name spelled in the code of graphlint/analysis, graphlint/callgraph or rules/."""
from __future__ import annotations

import ast
import importlib
import re
from pathlib import Path

import pytest

from graphlint.analysis import catalog

ROOT = Path(__file__).resolve().parents[1]
STATIC_CODE = [ROOT / "graphlint" / "analysis", ROOT / "graphlint" / "callgraph", ROOT / "rules"]
# A whole string that is a torch name or prefix: `torch.cuda.graph`, `torch.nn.`, `torch.set_`.
_TORCH_NAME = re.compile(r"torch\.[\w.]*")
# Literals that spell a torch name without matching one: (file, literal) -> why.
_NOT_MATCHED = {
    ("graphlint/callgraph/roots/capture_roots.py", "torch.cuda.graph"): "the label of a capture site in a region's reason",
}
# Written in code still: (file) -> why. Remove an entry once the file reads the catalogue.
_PENDING: dict[str, str] = {}
# Matched as written although the torch the catalogues were checked on lacks them.
_ABSENT_ON_CHECKED_TORCH = {"torch.synchronize", "torch.accelerator.stream"}


def _resolves(name: str) -> bool:
    parts = name.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for part in parts[cut:]:
            if not hasattr(obj, part):
                return False
            obj = getattr(obj, part)
        return True
    return False


def _entries():
    for section, body in catalog.sections().items():
        for key, value in body.items():
            if isinstance(value, list):
                for name in value:
                    yield section, key, name


def _checked_torch():
    torch = pytest.importorskip("torch")
    checked = min(re.match(r"\d+\.\d+", v).group(0) for v in catalog.checked_versions().values())
    have = tuple(int(p) for p in torch.__version__.split(".")[:2])
    if have < tuple(int(p) for p in checked.split(".")):
        pytest.skip(f"torch {torch.__version__} is older than the {checked} the catalogues were checked on")
    return torch


def test_every_category_has_a_reason_and_every_file_a_torch_version():
    versions = catalog.checked_versions()
    assert versions and all(re.match(r"\d+\.\d+", v) for v in versions.values()), versions
    for section, body in catalog.sections().items():
        assert str(body.get("reason", "")).strip(), f"[{section}] has no reason"


def test_qualified_names_exist_on_the_torch_they_were_checked_on():
    _checked_torch()
    missing = set()
    for section, key, name in _entries():
        if name.startswith("torch.") and not name.endswith((".", "_")) and not _resolves(name):
            missing.add(name)
    assert missing == _ABSENT_ON_CHECKED_TORCH, "names torch lacks (or now has): " + ", ".join(
        sorted(missing ^ _ABSENT_ON_CHECKED_TORCH))


def test_method_and_class_categories_are_torch_attributes():
    torch = _checked_torch()
    module = torch.nn.Module
    for key, value in catalog.sections()["tensor"].items():
        if isinstance(value, list):
            assert [m for m in value if not hasattr(torch.Tensor, m)] == [], key
    modules = catalog.sections()["modules"]
    for key in ("containers", "parameter_containers", "callable_containers", "list_containers",
                "dict_containers", "tensor_classes"):
        assert [c for c in modules[key] if not hasattr(torch.nn, c)] == [], key
    for key in ("call_methods", "register_tensor", "register_module"):
        assert [m for m in modules[key] if not hasattr(module, m)] == [], key
    assert [m for m in modules["shared_methods"] if not (hasattr(module, m) or hasattr(torch.Tensor, m))] == []


def _code_strings(tree: ast.AST):
    """String constants of a module that are not docstrings."""
    docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                  if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
                  and node.body and isinstance(node.body[0], ast.Expr)
                  and isinstance(node.body[0].value, ast.Constant)}
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
            yield node


def test_static_code_spells_no_torch_name():
    found = []
    for folder in STATIC_CODE:
        for path in sorted(folder.glob("*.py")):
            rel = path.relative_to(ROOT).as_posix()
            if rel in _PENDING:
                continue
            for node in _code_strings(ast.parse(path.read_text(encoding="utf-8"))):
                if _TORCH_NAME.fullmatch(node.value) and (rel, node.value) not in _NOT_MATCHED:
                    found.append(f"{rel}:{node.lineno}: {node.value!r}")
    assert found == [], "torch names in code (move them to graphlint/data):\n" + "\n".join(found)


def test_the_scan_finds_a_name_written_in_code():
    """The scan above is not vacuous: a literal torch name in code is found, a message is not."""
    tree = ast.parse('"""torch.cuda.graph in a docstring"""\nX = "torch.cuda.graph"\nY = "torch.cuda.graph() failed"\n')
    assert [n.value for n in _code_strings(tree) if _TORCH_NAME.fullmatch(n.value)] == ["torch.cuda.graph"]
    for rel in _PENDING:
        pending = (ROOT / rel).read_text(encoding="utf-8")
        assert any(_TORCH_NAME.fullmatch(n.value) for n in _code_strings(ast.parse(pending))), \
            f"{rel} no longer spells torch names: remove it from _PENDING"


def test_catalogues_load_once():
    assert catalog.names("tensor", "casts") is catalog.names("tensor", "casts")
    assert catalog._raw() is catalog._raw()
