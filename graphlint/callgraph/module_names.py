"""The module name Python would import a linted file as: its package from the `__init__.py`
files above it (namespace portions within a package included), and the namespace folders right
above its top package. The call graph resolves imports by these names."""
from __future__ import annotations

import functools
from pathlib import Path

from graphlint.callgraph.regions import module_name


def package_module(path: str, root: Path) -> str:
    """The module name Python would import the file as: folders with `__init__.py` above it
    make the package (`transformers/models/llama/modeling_llama.py` anywhere on disk). A file
    that is not on disk (an in-memory snippet) is named from its relative path."""
    # A path is relative to the config's folder, or (outside it) as given on the command line.
    full = next((c for c in (root / path, Path(path)) if c.is_file()), None)
    if full is None:
        return module_name(path)
    package = _package_of(str(full.parent))
    if full.name == "__init__.py":
        return package or full.parent.resolve().name
    return f"{package}.{full.stem}" if package else full.stem


@functools.lru_cache(maxsize=4096)
def _package_of(folder_text: str) -> str:
    """The dotted package a folder is, as Python imports it ("" for none); one lookup per
    folder, however many files it holds (the call graph's cache key names every file's module)."""
    folder = Path(folder_text).resolve()
    parts: list[str] = []
    while folder.parent != folder and ((folder / "__init__.py").is_file() or _namespace_portion(folder)):
        parts.insert(0, folder.name)
        folder = folder.parent
    return ".".join(parts)


def namespace_parents(path: str, root: Path, module: str) -> list[str]:
    """Folders without `__init__.py` right above a file's top package, innermost last: with
    their parent on sys.path Python imports the package through them as namespace packages
    (`lmdeploy/pytorch/nn/linear.py`, no `lmdeploy/__init__.py`, is `lmdeploy.pytorch.nn.linear`)."""
    full = next((c for c in (root / path, Path(path)) if c.is_file()), None)
    if full is None:
        return []
    top = full.resolve().parent
    folders = len(module.split(".")) - (0 if full.name == "__init__.py" else 1)
    for _ in range(folders - 1):
        top = top.parent
    names: list[str] = []
    folder = top.parent
    while len(names) < 2 and folder.parent != folder and folder.name.isidentifier() \
            and not (folder / "__init__.py").is_file():
        names.insert(0, folder.name)
        folder = folder.parent
    return names


def _namespace_portion(folder: Path) -> bool:
    """A folder without `__init__.py` inside a regular package (within two levels): Python
    imports it as a namespace subpackage (`pkg/ns/mod.py` is `pkg.ns.mod`)."""
    return folder.name.isidentifier() and any(
        (up / "__init__.py").is_file() for up in (folder.parent, folder.parent.parent) if up != up.parent)
