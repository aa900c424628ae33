"""Import aliases of one module, so `import torch as t; t.nonzero` and
`from torch import nonzero as nz` both resolve to `torch.nonzero`.

This replaces libcst's QualifiedNameProvider: the rules only need dotted names rooted at an
import, and collecting the few import statements of a file costs almost nothing.
"""
from __future__ import annotations

import io
import re
import sys
import tokenize
import unicodedata
from dataclasses import dataclass, field

from graphlint.lazy import cst

_NON_ASCII_WORD = re.compile(r"\w*[^\x00-\x7f]\w*")


def normalise_identifiers(text: str) -> str:
    """`text` with every identifier NFKC-normalised, as the compiler reads it (PEP 3131):
    `x.ｉtem()` is `x.item()`, `import ｔorch` imports torch. Strings and comments are left as
    they are; an ASCII text, or one whose non-ASCII words are already normal, is returned at
    once. A name whose normal form has another length (a ligature) shifts the columns after it
    on its line."""
    if text.isascii():
        return text
    if all(unicodedata.is_normalized("NFKC", word) for word in set(_NON_ASCII_WORD.findall(text))):
        return text
    lines = text.splitlines(keepends=True)
    edits: list[tuple[int, int, int, str]] = []
    try:
        for token in tokenize.generate_tokens(io.StringIO(text).readline):
            if token.type == tokenize.NAME and not token.string.isascii():
                normal = unicodedata.normalize("NFKC", token.string)
                if normal != token.string:
                    (row, start), (_, end) = token.start, token.end
                    edits.append((row, start, end, normal))
    except (tokenize.TokenError, SyntaxError):
        return text  # the parser reports what is wrong with it
    for row, start, end, normal in reversed(edits):  # right to left: earlier columns stay valid
        line = lines[row - 1]
        lines[row - 1] = line[:start] + normal + line[end:]
    return "".join(lines)


def dotted(node: cst.BaseExpression) -> str | None:
    """`a.b.c` for a Name/Attribute chain, else None."""
    # Type identity, not isinstance: libcst's node classes are never subclassed, and isinstance
    # against them goes through ABCMeta (this runs on nearly every expression of a file).
    kind = type(node)
    if kind is cst.Name:
        return node.value  # type: ignore[attr-defined]
    parts: list[str] = []
    attribute = cst.Attribute
    while kind is attribute:
        parts.append(node.attr.value)  # type: ignore[attr-defined]
        node = node.value  # type: ignore[attr-defined]
        kind = type(node)
    if kind is cst.Name:
        parts.append(node.value)  # type: ignore[attr-defined]
        return ".".join(reversed(parts))
    return None


def _module_name(node: cst.BaseExpression | None) -> str:
    if node is None:
        return ""
    name = dotted(node)
    return name or ""


@dataclass
class ImportMap:
    """Local name -> fully qualified dotted name, for every import in the module."""

    aliases: dict[str, str] = field(default_factory=dict)
    # Relative imports keep their dots (".moe.route"); the call graph resolves them per package.
    relative: dict[str, str] = field(default_factory=dict)
    stars: list[str] = field(default_factory=list)  # the modules of `from m import *`

    def add(self, node: cst.Import | cst.ImportFrom) -> None:
        if isinstance(node, cst.Import):
            for alias in node.names:
                full = _module_name(alias.name)
                if alias.asname is not None and isinstance(alias.asname.name, cst.Name):
                    self.aliases[alias.asname.name.value] = full
                else:
                    root = full.split(".")[0]
                    self.aliases[root] = root
            return
        level = len(node.relative)
        base = _module_name(node.module)
        if isinstance(node.names, cst.ImportStar):
            # `from .communication_op import *`: the names it re-exports are found through it.
            self.stars.append("." * level + base)
            return
        for alias in node.names:
            name = _module_name(alias.name)
            local = name
            if alias.asname is not None and isinstance(alias.asname.name, cst.Name):
                local = alias.asname.name.value
            full = f"{base}.{name}" if base else name
            if level:
                self.relative[local] = "." * level + full
            else:
                self.aliases[local] = full

    def resolve(self, node: cst.BaseExpression) -> str | None:
        """The qualified name of `node` when its root is an imported name, else None."""
        name = dotted(node)
        if name is None:
            return None
        root, _, rest = name.partition(".")
        full = self.aliases.get(root)
        if full is None:
            return None
        return f"{full}.{rest}" if rest else full


def collect_imports(module: cst.Module) -> ImportMap:
    """Imports at module level and inside functions (lazy imports in forward() are common)."""
    imports = ImportMap()
    stack: list[cst.CSTNode] = [module]
    while stack:
        node = stack.pop()
        kind = type(node)  # libcst's node classes are never subclassed: no isinstance
        if kind in (cst.Import, cst.ImportFrom):
            imports.add(node)
            continue
        if kind in (cst.Module, cst.IndentedBlock):
            stack.extend(node.body)
        elif kind is cst.SimpleStatementLine:
            stack.extend(node.body)
        elif kind in (cst.FunctionDef, cst.ClassDef, cst.With, cst.For, cst.While):
            stack.append(node.body)
        elif kind is cst.If:
            stack.append(node.body)
            if node.orelse is not None:
                stack.append(node.orelse)
        elif kind is cst.Else:
            stack.append(node.body)
        elif kind is cst.Try:
            stack.append(node.body)
            stack.extend(h.body for h in node.handlers)
            if node.orelse is not None:
                stack.append(node.orelse.body)
            if node.finalbody is not None:
                stack.append(node.finalbody.body)
    return imports


# Bases that only say how a class is typed (`Generic[T]`, `Protocol`): no behaviour comes from them.
_TYPING_BASES = frozenset({"Generic", "typing.Generic", "Protocol", "typing.Protocol", "typing_extensions.Protocol"})


def class_bases(node: cst.ClassDef) -> list[cst.BaseExpression]:
    """A class's bases as the hierarchy sees them: a subscripted base is its class
    (`StreamingModule[_MHAState]` is StreamingModule), typing-only bases are left out, and so
    are keyword arguments (`metaclass=`)."""
    bases = []
    for arg in node.bases:
        if arg.keyword is not None or arg.star:
            continue
        value = arg.value.value if isinstance(arg.value, cst.Subscript) else arg.value
        if dotted(value) in _TYPING_BASES:
            continue
        bases.append(value)
    return bases


def torch_or_stdlib(dotted_name: str) -> bool:
    """Whether a qualified name is torch's or the standard library's (`torch.no_grad`,
    `contextlib.nullcontext`), as opposed to another library's or the project's."""
    root = dotted_name.split(".", 1)[0]
    return root == "torch" or root in sys.stdlib_module_names
