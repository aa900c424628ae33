"""Sources are read as Python reads them: decoded by their PEP 263 cookie or BOM, numbered by
the tokenizer's line ends only (a form feed, U+2028 or \\x1c earlier in the file moves
nothing), so suppressions match and the caret is under the flagged line; a walked file that
never mentions torch is counted as skipped unparsed, and a file named on the command line is
always parsed."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from graphlint.analysis.text.source import decode, split_lines
from graphlint.cli import main

STEP = "def step(x: torch.Tensor):\n    return x.max().item()\n"


def cli(*args: str):
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


@pytest.fixture(autouse=True)
def in_tmp(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)


def findings(*paths: str) -> list[dict]:
    result = cli("check", *paths, "--no-cache", "--format", "json")
    return json.loads(result.stdout)["static"]["findings"]


@pytest.mark.parametrize("encoding, text", [
    ("latin-1", "# -*- coding: latin-1 -*-\nimport torch\nNAME = 'caf\u00e9'\n"),
    ("cp1252", "# coding: cp1252\nimport torch\nQUOTE = '\u201cdone\u201d \u20ac'\n"),
])
def test_pep_263_sources_are_decoded_not_parse_errors(encoding, text):
    Path("legacy.py").write_bytes((text + STEP).encode(encoding))
    [finding] = findings("legacy.py")
    assert finding["rule"] == "GL101" and finding["line"] == 5 and finding["col"] == 12


def test_a_bom_is_not_part_of_the_first_line():
    Path("bom.py").write_bytes(b"\xef\xbb\xbfimport torch\n" + STEP.encode())
    [finding] = findings("bom.py")
    assert (finding["rule"], finding["line"], finding["col"]) == ("GL101", 3, 12)
    assert decode(b"\xef\xbb\xbfx = 1\n") == "x = 1\n"


def test_undecodable_bytes_are_a_parse_error_that_says_why():
    Path("bad.py").write_bytes(b"import torch\nx = '\xff'\n")
    [finding] = findings("bad.py")
    assert finding["rule"] == "GL900" and "cannot decode as utf-8" in finding["message"]


@pytest.mark.parametrize("separator", ["\x0c", "\u2028", "\x1c", "\x85", "\x0b"])
def test_odd_line_separators_do_not_shift_lines(separator):
    source = f"import torch\nNOTE = 'a{separator}b'  # {separator} in a comment\n" + \
             "def step(x: torch.Tensor):\n    return x.max().item()  # graphlint: ignore[GL101] -- known\n" + \
             "def other(x: torch.Tensor):\n    return x.max().item()\n"
    Path("odd.py").write_text(source, encoding="utf-8")
    result = findings("odd.py")
    assert [(f["line"], f["suppressed"]) for f in result] == [(4, True), (6, False)]
    text = cli("check", "odd.py", "--no-cache").stdout
    assert "    6 |     return x.max().item()\n" in text
    assert split_lines(source)[5] == "    return x.max().item()"


def test_a_walked_file_without_torch_is_counted_as_skipped_and_a_named_one_is_parsed():
    Path("pkg").mkdir()
    Path("pkg/util.py").write_text("def broken(:\n")
    Path("pkg/step.py").write_text("import torch\n" + STEP)
    result = cli("check", "pkg", "--no-cache", "--format", "json")
    report = json.loads(result.stdout)
    assert report["static"]["skipped_unparsed"] == {"files": 1, "reason": "they never mention torch, tensors or CUDA"}
    assert [f["rule"] for f in report["static"]["findings"]] == ["GL101"]
    text = cli("check", "pkg", "--no-cache").stdout
    assert "2 files checked (1 skipped unparsed: they never mention torch, tensors or CUDA)" in text
    named = findings("pkg/util.py")
    assert [f["rule"] for f in named] == ["GL900"]


def test_a_long_line_is_shown_as_a_window_around_the_finding():
    Path("wide.py").write_text("import torch\n" + "def step(x: torch.Tensor):\n    y = (" + "1, " * 5000
                               + "x.max().item())\n")
    text = cli("check", "wide.py", "--no-cache").stdout
    shown = [line for line in text.splitlines() if line.lstrip().startswith("3 |")]
    assert len(shown) == 1 and len(shown[0]) < 200 and "x.max().item()" in shown[0]
    caret = text.splitlines()[text.splitlines().index(shown[0]) + 1]
    assert caret.index("^") == shown[0].index("x.max().item()")
