"""Hostile input costs bounded work: expression chains past the parser's budget are GL903 before
the parser runs, a worker is capped in memory (a bomb under a small cap ends as GL903, fast),
only regular files are read and never past their limit (a link to /dev/zero, /proc, stdin), and
identifiers are matched as Python reads them (NFKC)."""
from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from graphlint.analysis.text import shape
from graphlint.analysis.text.source import NotSource, TooLarge, read_source
from graphlint.cli import main
from graphlint.config import Config
from graphlint.engine import check, pool
from graphlint.engine.cache import Cache

REPO = Path(__file__).resolve().parents[1]
HEAD = "import torch\n\n\ndef step(x: torch.Tensor, c: bool):\n"
SHAPES = {
    "unary": lambda n: "    y = " + "-" * n + "x\n",
    "not": lambda n: "    y = " + "not " * n + "x\n",
    "lambda": lambda n: "    y = " + "lambda: " * n + "x\n",
    "ternary": lambda n: "    y = " + " if c else ".join(["x"] * n) + "\n",
    "power": lambda n: "    y = " + " ** ".join(["x"] * n) + "\n",
    "call": lambda n: "    y = x" + "()" * n + "\n",
    "attribute": lambda n: "    y = x" + ".a" * n + "\n",
    "subscript": lambda n: "    y = x" + "[0]" * n + "\n",
    "plus over lines": lambda n: "    y = (" + " +\n        ".join(["x"] * n) + ")\n",
}


def cli(*args: str, input: bytes | None = None):
    return CliRunner().invoke(main, list(args), input=input, catch_exceptions=False)


@pytest.mark.parametrize("kind", sorted(SHAPES))
def test_a_chain_past_the_budget_is_gl903_before_the_parser(tmp_path, kind):
    (tmp_path / "deep.py").write_text(HEAD + SHAPES[kind](20_000) + "    return x.item()\n")
    started = time.monotonic()
    static = check([tmp_path], Config(root=tmp_path), jobs=1)
    [finding] = static.findings
    assert finding.rule == "GL903" and "expression chain of more than 1,000 links" in finding.message
    assert finding.line >= 5
    assert time.monotonic() - started < 20  # the parser takes minutes and gigabytes on these


@pytest.mark.parametrize("kind", sorted(SHAPES))
def test_a_chain_within_the_budget_is_analysed(tmp_path, kind):
    (tmp_path / "deep.py").write_text(HEAD + SHAPES[kind](300) + "    return x.item()\n")
    static = check([tmp_path], Config(root=tmp_path), jobs=1)
    rules = [f.rule for f in static.findings]
    assert "GL101" in rules and not [r for r in rules if r.startswith("GL9")], rules  # analysed to the end


def test_chains_in_strings_and_comments_do_not_count():
    text = "x = '" + "-" * 5000 + "'\n# " + "not " * 5000 + "\ny = '''\n" + ".a" * 5000 + "\n'''\n"
    assert shape.refusal(text, 1 << 20) is None
    assert shape.measure(text).longest_chain <= 1


def test_many_chains_within_the_limit_add_up_to_the_budget():
    one = "y = x" + ".a" * 900 + "\n"
    assert shape.refusal(one * 5, 1 << 20) is None
    reason, _ = shape.refusal(one * 40, 1 << 20)
    assert "long expression chains throughout" in reason


def test_the_token_budget_follows_max_file_size():
    literal = "x = [" + "0, " * 100_000 + "]\n"
    assert shape.refusal(literal, 1 << 20) is None  # 200,000 tokens in 300 KB: within a 1 MiB budget
    reason, _ = shape.refusal(literal, 400_000)
    assert "more tokens than max-file-size allows" in reason


def test_real_code_is_never_refused():
    for path in [*sorted((REPO / "dsv4_model").rglob("*.py")), *sorted((REPO / "graphlint").rglob("*.py"))]:
        assert shape.refusal(path.read_text("utf-8"), 1 << 20) is None, path


def test_a_memory_bomb_in_the_parser_ends_at_the_worker_cap(tmp_path, monkeypatch):
    # Past the chain check, 6,000 nested lambdas take the parser gigabytes; under a 1 GiB cap the
    # worker stops (MemoryError or the parser's abort) within seconds, and the next file is analysed.
    monkeypatch.setattr(shape, "MAX_CHAIN", 10**9)
    monkeypatch.setattr(shape, "MAX_CHAIN_COST", 10**18)
    (tmp_path / "bomb.py").write_text(HEAD + SHAPES["lambda"](6000))
    (tmp_path / "good.py").write_text(HEAD + "    return x.item()\n")
    started = time.monotonic()
    results = pool.analyse_all([("bomb.py", str(tmp_path / "bomb.py")), ("good.py", str(tmp_path / "good.py"))],
                               1, Cache(None), memory=1024)
    assert time.monotonic() - started < 60
    bomb, good = results
    assert "memory" in bomb["limit"]["message"], bomb["limit"]
    assert [f["rule"] for f in good["findings"]] == ["GL101"]


def test_a_memory_bomb_in_the_analysis_is_gl903_and_the_worker_is_replaced(tmp_path, monkeypatch):
    analyse = pool.analyse_file

    def hungry(task):
        if task[0] == "bomb.py":
            bytearray(8 * 1024**3)  # more than the cap: refused by the kernel at once
        return analyse(task)

    monkeypatch.setattr(pool, "analyse_file", hungry)  # the worker forks with it
    for name in ("bomb.py", "good.py"):
        (tmp_path / name).write_text(HEAD + "    return x.item()\n")
    bomb, good = pool.analyse_all([(n, str(tmp_path / n)) for n in ("bomb.py", "good.py")], 1, Cache(None),
                                  memory=1024)
    assert "ran out of memory (worker-memory)" in bomb["limit"]["message"]
    assert [f["rule"] for f in good["findings"]] == ["GL101"]


def test_worker_memory_is_a_config_key_with_a_range(tmp_path):
    (tmp_path / "pyproject.toml").write_text("[tool.graphlint]\nworker-memory = 100\n")
    (tmp_path / "a.py").write_text("import torch\n")
    result = CliRunner().invoke(main, ["check", str(tmp_path / "a.py"), "--config", str(tmp_path / "pyproject.toml")])
    assert result.exit_code == 2 and "worker-memory" in result.stderr and "256" in result.stderr


def _with_alarm(function, *args):
    # A read that never ends (a link to /dev/zero read in full) fails the test instead of hanging it.
    previous = signal.signal(signal.SIGALRM, lambda *_: (_ for _ in ()).throw(TimeoutError("read never ended")))
    signal.alarm(10)
    try:
        return function(*args)
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


@pytest.mark.skipif(not os.path.exists("/dev/zero"), reason="needs /dev/zero")
def test_a_file_replaced_by_a_link_to_a_device_is_refused_when_opened(tmp_path):
    (tmp_path / "zero.py").symlink_to("/dev/zero")  # as if swapped in after discovery
    with pytest.raises(NotSource):
        _with_alarm(read_source, tmp_path / "zero.py", 1 << 20)
    result = _with_alarm(pool.analyse_file, ("zero.py", str(tmp_path / "zero.py"), True, 1 << 20))
    assert "not a regular file" in result["parse_error"]["message"]
    [analysis] = _with_alarm(pool.analyse_all, [("zero.py", str(tmp_path / "zero.py"))], 1, Cache(None))
    assert analysis["limit"] or analysis["parse_error"]


def test_a_file_that_grew_past_the_limit_is_read_no_further(tmp_path):
    (tmp_path / "big.py").write_bytes(b"#" * 5000)
    with pytest.raises(TooLarge):
        read_source(tmp_path / "big.py", 1000)
    assert read_source(tmp_path / "big.py", 1000, prefix=True) == b"#" * 1000
    result = pool.analyse_file(("big.py", str(tmp_path / "big.py"), True, 1000))
    assert "larger than max-file-size" in result["limit"]["message"]


@pytest.mark.skipif(not os.path.exists("/proc/self/environ"), reason="needs /proc")
def test_a_link_into_proc_is_never_shown_as_source(tmp_path, monkeypatch):
    monkeypatch.setenv("GRAPHLINT_SECRET_FOR_TEST", "hunter2-do-not-print")
    (tmp_path / "env.py").symlink_to("/proc/self/environ")
    monkeypatch.chdir(tmp_path)
    result = cli("check", "env.py", "--no-cache")
    assert "hunter2" not in result.output
    assert result.exit_code in (1, 2) and "env.py" in result.output


def test_the_text_view_reads_a_bounded_prefix_of_a_huge_file(tmp_path, monkeypatch):
    from graphlint.views import text

    huge = tmp_path / "huge.py"
    with open(huge, "wb") as handle:  # sparse: 3 GB on paper, nothing on disk
        handle.write(b"import torch\n")
        handle.truncate(3 * 1024**3)
    monkeypatch.chdir(tmp_path)
    result = cli("check", "huge.py", "--no-cache")
    assert result.exit_code == 1 and "GL903" in result.output and "MemoryError" not in result.output
    assert len(text._leading_lines(huge)) <= text.MAX_SOURCE_BYTES


def test_stdin_has_the_size_limit_and_its_own_encoding(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "pyproject.toml").write_text("[tool.graphlint]\nmax-file-size = 1000\n")
    result = cli("check", "-", "--no-cache", input=b"import torch\n" + b"#" * 5000 + b"\n")
    assert result.exit_code == 2 and "larger than max-file-size" in result.stderr
    latin = "# -*- coding: latin-1 -*-\nimport torch\n\ndef step(x: torch.Tensor):\n    s = 'é'\n    return x.item()\n"
    result = cli("check", "-", "--no-cache", input=latin.encode("latin-1"))
    assert result.exit_code == 1 and "GL101" in result.output and "internal error" not in result.output


@pytest.mark.parametrize("source", [
    "import torch\n\ndef step(x: torch.Tensor):\n    return x.\uff49tem()\n",  # full-width i
    "import torch\n\ndef step(x: torch.Tensor):\n    return x.\U0001d422tem()\n",  # mathematical bold i
    "import \uff54orch\n\ndef step(x: \uff54orch.Tensor):\n    return x.item()\n",  # import ｔorch
])
def test_identifiers_are_matched_after_nfkc_as_python_reads_them(tmp_path, source):
    (tmp_path / "s.py").write_text(source, encoding="utf-8")
    static = check([tmp_path], Config(root=tmp_path), jobs=1)
    assert [f.rule for f in static.findings] == ["GL101"]
    assert static.findings[0].line == 4


def test_nfkc_leaves_strings_and_comments_alone(tmp_path):
    from graphlint.analysis.names import normalise_identifiers

    text = "x.\uff49tem()  # \uff49tem\ns = '\uff49tem'\n"
    assert normalise_identifiers(text) == "x.item()  # \uff49tem\ns = '\uff49tem'\n"
    plain = "s = '日本語'  # コメント\n"
    assert normalise_identifiers(plain) is plain


def test_json_report_of_a_refused_file_names_the_line(tmp_path, monkeypatch):
    (tmp_path / "deep.py").write_text(HEAD + "    y = 1\n" + SHAPES["unary"](5000))
    monkeypatch.chdir(tmp_path)
    result = cli("check", ".", "--no-cache", "--format", "json")
    report = json.loads(result.stdout)
    [finding] = report["static"]["findings"]
    assert finding["rule"] == "GL903" and finding["line"] == 6


def test_the_memory_cap_counts_from_what_the_worker_inherited(tmp_path):
    # A parent that already holds a large address space (a pytest run that imported torch) must
    # leave its workers the same room: 2 GiB mapped here, then a 1 GiB cap, and files still analyse.
    import mmap

    ballast = mmap.mmap(-1, 2 * 1024**3)  # reserved, never touched: costs no memory
    try:
        (tmp_path / "good.py").write_text(HEAD + "    return x.item()\n")
        [good] = pool.analyse_all([("good.py", str(tmp_path / "good.py"))], 1, Cache(None), memory=1024)
        assert [f["rule"] for f in good["findings"]] == ["GL101"], good.get("limit")
    finally:
        ballast.close()
