"""A bounded fuzz run (seconds): mutated copies of the bundled model's files, plus a few of the
deep cases, checked in one run with one and two workers; every run ends in 0 or 1 with a report
listing every file. bench/fuzz.py is the long version (thousands of files, every deep and huge
case, one process per run)."""
from __future__ import annotations

import importlib.util
import json
import random
from pathlib import Path

import pytest
from click.testing import CliRunner

from graphlint.cli import main
from graphlint.engine import pool

REPO = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("graphlint_fuzz", REPO / "bench" / "fuzz.py")
fuzz = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(fuzz)  # type: ignore[union-attr]

QUICK_CASES = ("deep_elif.py", "deep_plus.py", "deep_parens.py", "deep_brackets.py", "nul.py", "empty.py",
               "only_bom.py", "huge_5mb.py")


@pytest.mark.parametrize("jobs", [1, 2])
def test_mutated_real_files_never_lose_a_run(tmp_path, monkeypatch, jobs):
    monkeypatch.setattr(pool, "_PARALLEL_MIN_BYTES", 0)
    rng = random.Random(jobs)
    seeds = fuzz.seed_files([REPO / "dsv4_model"])
    for index in range(25):
        seed = rng.choice(seeds)
        (tmp_path / f"m{index:02}_{seed.name}").write_bytes(fuzz.mutate(seed.read_bytes(), rng))
    cases = fuzz.deep_and_huge()
    for name in QUICK_CASES:
        (tmp_path / name).write_bytes(cases[name])
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(main, ["check", ".", "--no-cache", "-j", str(jobs), "--format", "json",
                                       "-o", "report.json"], catch_exceptions=False)
    assert result.exit_code in (0, 1), result.output
    assert "Traceback" not in result.output and "internal error" not in result.output
    report = json.loads(Path("report.json").read_text())
    assert sorted(report["static"]["files"]) == sorted(p.name for p in tmp_path.glob("*.py"))
    rules = {f["path"]: f["rule"] for f in report["static"]["findings"] if f["rule"].startswith("GL9")}
    assert rules.get("huge_5mb.py") == "GL903" and rules.get("deep_parens.py") == "GL900"
    assert "deep_elif.py" not in rules and "deep_plus.py" not in rules
