"""Zero-config checks of small projects written out in a test: the files, an empty
`graphlint.toml` beside them (so the folder is the project), and the findings by file."""
from __future__ import annotations

import textwrap
from pathlib import Path

from graphlint.config import Config
from graphlint.engine import check


def marked_line(text: str, marker: str) -> int:
    """The line number, in `text` as written out, of the first line holding `marker`."""
    return next(number for number, line in enumerate(textwrap.dedent(text).splitlines(), 1) if marker in line)


def check_project(tmp_path: Path, files: dict[str, str]):
    """Write `files` (relative path -> source) under `tmp_path` and check them, zero-config."""
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(textwrap.dedent(text))
    (tmp_path / "graphlint.toml").write_text("")
    return check([tmp_path], Config(root=tmp_path), jobs=1)


def found_in(result, name: str) -> set[tuple[str, int]]:
    """(rule, line) of the findings in the file whose path ends with `name`."""
    return {(f.rule, f.line) for f in result.findings if f.path.endswith(name)}
