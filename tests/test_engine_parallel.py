"""Files analysed by worker processes give the same report as one process, byte for byte,
whatever the number of jobs and the order in which the workers finish."""
from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import pytest

from graphlint import __version__
from graphlint.engine import pool
from graphlint.config import Config
from graphlint.engine import check
from graphlint.report import Report, dumps

REPO = Path(__file__).resolve().parents[1]
FIXTURES = REPO / "tests" / "fixtures" / "regions"
TREE = [REPO / "dsv4_model", FIXTURES]


def report_text(paths, config: Config, jobs: int) -> tuple[str, dict]:
    static = check(paths, config, jobs=jobs)
    report = Report(tool_version=__version__, config=config.to_dict(), static=static)
    return dumps(report), static.stats


@pytest.fixture
def workers_even_for_small_trees(monkeypatch):
    # The tree is small enough that graphlint would rightly stay in one process.
    monkeypatch.setattr(pool, "_PARALLEL_MIN_BYTES", 0)


def test_jobs_1_and_2_give_byte_identical_reports(workers_even_for_small_trees):
    config = Config(root=REPO)
    one, one_stats = report_text(TREE, config, jobs=1)
    two, two_stats = report_text(TREE, config, jobs=2)
    assert one_stats["workers"] == 1 and two_stats["workers"] == 2
    assert one == two
    report = json.loads(one)
    assert report["static"]["findings"], "the reference port has findings: the comparison must not be empty"
    assert len(report["static"]["files"]) == one_stats["files"] > 20


def test_with_entry_points_the_call_graph_is_the_same_in_parallel(workers_even_for_small_trees):
    config = Config(root=FIXTURES, entry_points=("servepkg.model:Decoder.decode_step",))
    one, _ = report_text([FIXTURES], config, jobs=1)
    two, stats = report_text([FIXTURES], config, jobs=2)
    assert stats["workers"] == 2
    assert one == two
    assert any(f["reached_via"] for f in json.loads(one)["static"]["findings"])


# Workers see a patched function only when they are forked from this process.
forked_workers = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="workers fork on Linux only")


@forked_workers
def test_results_keep_input_order_when_workers_finish_out_of_order(workers_even_for_small_trees, monkeypatch):
    analyse = pool.analyse_file

    def first_file_last(task):
        if task[0] == "dsv4_model/__init__.py":
            time.sleep(0.3)  # the first file of the input finishes after all the others
        return analyse(task)

    monkeypatch.setattr(pool, "analyse_file", first_file_last)  # workers fork with it
    config = Config(root=REPO)
    serial = check(TREE, config, jobs=1)
    parallel = check(TREE, config, jobs=2)
    assert parallel.files == serial.files
    assert parallel.files[0] == "dsv4_model/__init__.py"
    assert [f.to_dict() for f in parallel.findings] == [f.to_dict() for f in serial.findings]


@forked_workers
@pytest.mark.parametrize("jobs", [1, 2])
def test_a_failure_on_one_file_is_a_finding_on_it_and_the_rest_is_checked(workers_even_for_small_trees,
                                                                          monkeypatch, jobs):
    analyse = pool.analyse_file

    def broken(task):
        if task[0].endswith("reference.py"):
            raise RuntimeError("rule crashed")
        return analyse(task)

    healthy = check(TREE, Config(root=REPO), jobs=jobs, cache_dir=None)
    monkeypatch.setattr(pool, "analyse_file", broken)
    static = check(TREE, Config(root=REPO), jobs=jobs)
    failed = [f for f in static.findings if f.rule == "GL903"]
    assert [f.path for f in failed] == ["dsv4_model/reference.py"]
    assert "internal error while analysing it: RuntimeError: rule crashed" in failed[0].message
    others = [f.to_dict() for f in healthy.findings if f.path != "dsv4_model/reference.py"]
    assert others and others == [f.to_dict() for f in static.findings if f.rule != "GL903"]


def test_small_trees_stay_in_one_process():
    _, stats = report_text([FIXTURES], Config(root=FIXTURES), jobs=2)
    assert stats["workers"] == 1
