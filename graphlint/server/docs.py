"""Rule documentation for the editor: the `explain` text of a rule as Markdown, and a file
for it under the cache folder whose URI diagnostics link to and `showDocument` opens (LSP
needs a URI, and the docs ship inside the package, not on a web site)."""
from __future__ import annotations

from pathlib import Path

from graphlint.rules import BY_CODE, BY_NAME


def rule_markdown(code: str) -> str | None:
    rule = BY_CODE.get(code.upper()) or BY_NAME.get(code)
    if rule is None:
        return None
    return (f"# {rule.code} {rule.name} ({rule.family()}, {rule.severity})\n\n{rule.docs()}\n\n"
            f"**Message:** {rule.message}\n\n**Fix:** {rule.fix}\n\n"
            f"`graphlint explain {rule.code}` prints this page.\n")


def docs_file(code: str, folder: Path) -> Path | None:
    """The rule's page as `folder/docs/CODE.md`, written when missing or out of date."""
    text = rule_markdown(code)
    if text is None:
        return None
    path = folder / "docs" / f"{code.upper()}.md"
    try:
        if not path.is_file() or path.read_text("utf-8") != text:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, "utf-8")
    except OSError:
        return None
    return path
