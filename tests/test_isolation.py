"""One bad file never loses a run: code nested too deeply, a parser that crashes (SIGSEGV in
libcst's native code), an analysis past its time budget, a file over the size limit or a bug
on one file each become a finding on that file, with --jobs 1 and with several workers, and
every other file is still checked."""
from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import pytest

from graphlint.analysis.text import shape
from graphlint.analysis.walk import file as file_analysis
from graphlint.analysis.walk import stack
from graphlint.config import Config, ConfigError, from_mapping
from graphlint.engine import check, pool

GOOD = "import torch\n\n\ndef step(x: torch.Tensor):\n    return x.item()\n"
BODY_HEAD = "import torch\n\n\ndef step(x: torch.Tensor, a: int, c: bool):\n"


def deep(kind: str, n: int) -> str:
    """Deep but valid code (CPython compiles every one of these), then one real finding."""
    if kind == "elif":
        body = "    if a == 0:\n        pass\n" + "".join(f"    elif a == {i}:\n        pass\n" for i in range(1, n))
    elif kind == "plus":
        body = "    y = " + " + ".join(["x"] * n) + "\n"
    elif kind == "ternary":
        body = "    y = " + " if c else ".join(["x"] * n) + "\n"
    elif kind == "abs":
        body = "    y = x" + ".abs()" * n + "\n"
    elif kind == "index":
        body = "    y = x" + "[0]" * n + "\n"
    else:
        raise ValueError(kind)
    return BODY_HEAD + body + "    return x.item()\n"


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    for i in range(20):
        (tmp_path / f"good{i:02}.py").write_text(GOOD)
    return tmp_path


@pytest.fixture(params=[1, 2], ids=["jobs1", "jobs2"])
def jobs(request, monkeypatch) -> int:
    monkeypatch.setattr(pool, "_PARALLEL_MIN_BYTES", 0)  # two workers even for a small tree
    return request.param


def by_file(static) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for finding in static.findings:
        found.setdefault(finding.path, []).append(finding.rule)
    return found


def assert_good_files_checked(static) -> None:
    found = by_file(static)
    assert all(found.get(f"good{i:02}.py") == ["GL101"] for i in range(20)), found


@pytest.mark.parametrize("kind,n", [("elif", 480), ("plus", 490), ("ternary", 480), ("abs", 325), ("index", 325)])
def test_deep_but_valid_code_is_analysed(tree, jobs, kind, n):
    (tree / "deep.py").write_text(deep(kind, n))
    compile(deep(kind, n), "deep.py", "exec")  # valid Python
    static = check([tree], Config(root=tree), jobs=jobs)
    assert by_file(static)["deep.py"] == ["GL101"]  # analysed to its last line, no GL903
    assert_good_files_checked(static)


def test_too_many_nested_parentheses_is_a_parse_error_without_calling_the_parser(tree, jobs, monkeypatch):
    (tree / "parens.py").write_text("import torch\nx = " + "(" * 1300 + "1" + ")" * 1300 + "\n")
    static = check([tree], Config(root=tree), jobs=jobs)
    [error] = [f for f in static.findings if f.path == "parens.py"]
    assert error.rule == "GL900" and "too many nested parentheses (1300 levels; Python allows 200)" in error.message
    assert_good_files_checked(static)


def test_a_parser_crash_is_a_finding_on_that_file_and_the_worker_is_replaced(tree, jobs, monkeypatch):
    # Let 3,000 brackets reach libcst on an ordinary 8 MiB stack: its native parser overflows
    # the stack (SIGSEGV), which no in-process handler survives.
    monkeypatch.setattr(file_analysis, "MAX_BRACKET_DEPTH", 10**9)
    monkeypatch.setattr(shape, "MAX_CHAIN", 10**9)  # the brackets count as links of a chain too
    monkeypatch.setattr(stack, "STACK_BYTES", 8 * 1024 * 1024)
    (tree / "crash.py").write_text("import torch\nx = " + "[" * 3000 + "1" + "]" * 3000 + "\n")
    (tree / "crash2.py").write_text("import torch\nx = " + "[" * 3000 + "1" + "]" * 3000 + "\n")
    static = check([tree], Config(root=tree), jobs=jobs)
    for name in ("crash.py", "crash2.py"):
        [error] = [f for f in static.findings if f.path == name]
        assert error.rule == "GL903" and "crashed on it (SIGSEGV)" in error.message, error.message
    assert_good_files_checked(static)


def test_a_worker_that_exits_is_replaced(tree, jobs, monkeypatch):
    analyse = pool.analyse_file

    def exits(task):
        if task[0] == "good05.py":
            os._exit(3)
        return analyse(task)

    monkeypatch.setattr(pool, "analyse_file", exits)
    static = check([tree], Config(root=tree), jobs=jobs)
    found = by_file(static)
    assert found.pop("good05.py") == ["GL903"]
    assert all(rules == ["GL101"] for rules in found.values()) and len(found) == 19


def test_an_analysis_past_the_time_budget_is_stopped(tree, jobs, monkeypatch):
    analyse = pool.analyse_file

    def slow(task):
        if task[0] == "good07.py":
            import time

            time.sleep(60)
        return analyse(task)

    monkeypatch.setattr(pool, "analyse_file", slow)
    static = check([tree], Config(root=tree, file_timeout=1.0), jobs=jobs)
    [late] = [f for f in static.findings if f.path == "good07.py"]
    assert late.rule == "GL903" and "per-file time budget (file-timeout = 1 s)" in late.message
    assert len([f for f in static.findings if f.rule == "GL101"]) == 19


def test_a_file_over_max_file_size_is_reported_not_read(tree, jobs):
    (tree / "huge.py").write_text(GOOD + "# " + "x" * 1_200_000 + "\n")
    static = check([tree], Config(root=tree), jobs=jobs)
    [big] = [f for f in static.findings if f.path == "huge.py"]
    assert big.rule == "GL903" and "larger than max-file-size (1,200,0" in big.message
    assert_good_files_checked(static)
    raised = check([tree], Config(root=tree, max_file_size=0), jobs=jobs)
    assert by_file(raised)["huge.py"] == ["GL101"]


def test_limits_are_config_keys(tmp_path):
    config = from_mapping({"max-file-size": 10, "file-timeout": 2.5}, tmp_path / "pyproject.toml")
    assert (config.max_file_size, config.file_timeout) == (10, 2.5)
    for bad in ({"max-file-size": -1}, {"file-timeout": "soon"}, {"max-file-size": True}):
        with pytest.raises(ConfigError, match="must be a number"):
            from_mapping(bad, tmp_path / "pyproject.toml")


def test_a_limited_result_is_not_cached(tree, monkeypatch):
    analyse = pool.analyse_file

    def exits(task):
        if task[0] == "good05.py":
            os._exit(3)
        return analyse(task)

    monkeypatch.setattr(pool, "analyse_file", exits)
    cache = tree / ".cache"
    check([tree], Config(root=tree), jobs=1, cache_dir=cache)
    monkeypatch.setattr(pool, "analyse_file", analyse)
    again = check([tree], Config(root=tree), jobs=1, cache_dir=cache)
    assert again.stats["analysed"] == 1 and by_file(again)["good05.py"] == ["GL101"]


def test_a_fifo_among_the_tasks_is_reported_not_read(tmp_path):
    from graphlint.engine.cache import Cache

    fifo = tmp_path / "pipe.py"
    os.mkfifo(fifo)
    (tmp_path / "good.py").write_text(GOOD)
    results = pool.analyse_all([("pipe.py", str(fifo)), ("good.py", str(tmp_path / "good.py"))], 1, Cache(None))
    assert results[0]["limit"]["message"] == "not a regular file"
    assert [f["rule"] for f in results[1]["findings"]] == ["GL101"]
