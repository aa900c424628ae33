"""The per-file cache in .graphlint_cache/: a warm run only hashes files and gives the same
report; an edit re-analyses that file alone; the config is applied after the cache; a new
graphlint, a damaged entry or an unwritable folder never gives a wrong or failed run."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from graphlint import __version__
from graphlint.engine import cache as engine_cache, fingerprints, pool
from graphlint import callgraph
from graphlint.cli import main
from graphlint.config import Config
from graphlint.engine import check
from graphlint.report import Report, dumps

REPO = Path(__file__).resolve().parents[1]
FIXTURES = REPO / "tests" / "fixtures" / "regions"

# nn.Module forwards: per-step code without configuration, beside the model package.
SYNC = "import torch\n\nclass Step(torch.nn.Module):\n    def forward(self, x: torch.Tensor):\n        return x.max().item()\n"
ALLOC = ("import torch\n\nclass Step(torch.nn.Module):\n    def forward(self, x: torch.Tensor):\n"
         "        y = torch.zeros(4, device='cuda')\n        return x + y\n")


def text(static) -> str:
    return dumps(Report(tool_version=__version__, static=static))


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "dsv4_model").mkdir()
    for name in ("__init__.py", "reference.py", "moe.py", "attention.py"):  # real code, with findings
        shutil.copy(REPO / "dsv4_model" / name, tmp_path / "dsv4_model" / name)
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "a.py").write_text(SYNC)
    (tmp_path / "pkg" / "b.py").write_text(ALLOC)
    return tmp_path


def run(project: Path, cache: Path | None, **config):
    return check([project], Config(root=project, **config), jobs=1, cache_dir=cache)


def test_a_warm_run_reads_every_file_from_the_cache_and_reports_the_same(project, tmp_path):
    cache = tmp_path / "cache"
    cold = run(project, cache)
    warm = run(project, cache)
    assert cold.stats["analysed"] == cold.stats["files"] == 6 and cold.stats["cache_hits"] == 0
    assert warm.stats["analysed"] == 0 and warm.stats["cache_hits"] == warm.stats["files"]
    assert text(warm) == text(cold)
    assert cold.findings and all(f.fingerprint for f in warm.findings)


def test_a_warm_run_neither_parses_nor_reads_source_for_fingerprints(project, tmp_path, monkeypatch):
    cache = tmp_path / "cache"
    cold = run(project, cache)

    def must_not_run(*args, **kwargs):
        raise AssertionError("a warm run analysed or read a file")

    monkeypatch.setattr(pool, "analyze_source", must_not_run)
    monkeypatch.setattr(fingerprints, "_read", must_not_run)
    assert text(run(project, cache)) == text(cold)


def test_an_edit_re_analyses_that_file_alone(project, tmp_path):
    cache = tmp_path / "cache"
    run(project, cache)
    (project / "pkg" / "b.py").write_text(SYNC)
    warm = run(project, cache)
    assert warm.stats["analysed"] == 1
    assert {f.rule for f in warm.findings if f.path == "pkg/b.py"} == {"GL101"}
    assert text(warm) == text(run(project, None))


def test_the_config_is_applied_after_the_cache(project, tmp_path):
    cache = tmp_path / "cache"
    run(project, cache)
    narrowed = run(project, cache, select=("GL4",), per_file_ignores={"dsv4_model/*": ("GL",)})
    assert narrowed.stats["analysed"] == 0
    assert narrowed.findings and {f.rule[:3] for f in narrowed.findings} == {"GL4"}
    assert {f.path for f in narrowed.findings} == {"pkg/b.py"}


def test_another_graphlint_misses_every_entry(project, tmp_path, monkeypatch):
    cache = tmp_path / "cache"
    run(project, cache)
    monkeypatch.setattr(engine_cache, "rules_fingerprint", lambda: "another version")
    assert run(project, cache).stats["cache_hits"] == 0


def test_a_damaged_entry_is_analysed_again(project, tmp_path):
    cache = tmp_path / "cache"
    cold = run(project, cache)
    entries = sorted(cache.rglob("*.json"))
    assert entries
    for entry in entries:
        entry.write_text('{"path": "trunc')
    again = run(project, cache)
    assert again.stats["analysed"] == again.stats["files"]
    assert text(again) == text(cold)


def test_a_result_that_is_not_json_stays_uncached_without_failing(project, tmp_path, monkeypatch):
    analyse = pool.analyse_file

    def with_bytes(task):
        data = analyse(task)
        if task[0] == "pkg/a.py":
            data["extra"]["oops"] = b"bytes"
        return data

    monkeypatch.setattr(pool, "analyse_file", with_bytes)
    cache = tmp_path / "cache"
    run(project, cache)
    warm = run(project, cache)
    assert warm.stats["analysed"] == 1


def test_an_unusable_cache_folder_still_lints(project, tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    static = run(project, blocker / "cache")
    assert static.findings and static.stats["cache_hits"] == 0


def test_the_call_graph_is_cached_and_rebuilt_after_an_edit(tmp_path, monkeypatch):
    tree = tmp_path / "regions"
    shutil.copytree(FIXTURES, tree)
    cache = tmp_path / "cache"
    config = Config(root=tree, entry_points=("servepkg.model:Decoder.decode_step",))
    cold = check([tree], config, jobs=1, cache_dir=cache)
    assert any(f.reached_via for f in cold.findings)
    build = callgraph.build
    calls = []

    def counting_build(files, config):
        calls.append(1)
        return build(files, config)

    monkeypatch.setattr(callgraph, "build", counting_build)
    assert text(check([tree], config, jobs=1, cache_dir=cache)) == text(cold)
    assert calls == []
    model = tree / "servepkg" / "model.py"
    model.write_text(model.read_text() + "\n# edited\n")
    assert text(check([tree], config, jobs=1, cache_dir=cache)) == text(cold)
    assert calls == [1]


def test_cli_cache_folder_options_and_clean(project, monkeypatch):
    (project / "pyproject.toml").write_text("[tool.graphlint]\npaths = ['pkg']\n")
    monkeypatch.chdir(project)
    runner = CliRunner()
    assert runner.invoke(main, ["check", "--no-cache", "-q"]).exit_code == 1
    assert not (project / ".graphlint_cache").exists()
    assert runner.invoke(main, ["check", "-q"]).exit_code == 1
    assert list((project / ".graphlint_cache").rglob("*.json"))
    assert runner.invoke(main, ["check", "-q", "--cache-dir", "elsewhere"]).exit_code == 1
    assert list((project / "elsewhere").rglob("*.json"))
    result = runner.invoke(main, ["clean"])
    assert result.exit_code == 0 and not (project / ".graphlint_cache").exists()
    assert runner.invoke(main, ["clean", "--cache-dir", "elsewhere"]).exit_code == 0
    assert not (project / "elsewhere").exists()


def test_the_json_report_holds_no_run_statistics(project, tmp_path):
    cache = tmp_path / "cache"
    run(project, cache)
    warm = run(project, cache)
    static = json.loads(text(warm))["static"]
    assert "cache_hits" not in static and "stats" not in static and "analysed" not in static


def test_an_entry_marker_brings_the_call_facts_back_from_the_cache(tmp_path):
    """Without configured entry points the call facts stay in the cache, not in memory; a
    `# graphlint: entry` marker in the last file needs those of the first."""
    tree = tmp_path / "tree"
    tree.mkdir()
    (tree / "a_helpers.py").write_text("import torch\n\ndef helper(x):\n    return x.sum().item()\n\n"
                                       "def unused(x):\n    return x.max().item()\n")
    (tree / "z_main.py").write_text("import torch\nfrom a_helpers import helper\n\n"
                                    "def driver(x):  # graphlint: entry\n    return helper(x)\n")
    expected = check([tree], Config(root=tree), jobs=1)
    # The marker adds its reach (the chain); it does not hide the rest of the run.
    assert [(f.function, f.reached_via) for f in expected.findings] == [("helper", ("driver", "helper")),
                                                                         ("unused", ())]
    cache = tmp_path / "cache"
    cold = check([tree], Config(root=tree), jobs=1, cache_dir=cache)
    warm = check([tree], Config(root=tree), jobs=1, cache_dir=cache)
    assert warm.stats["analysed"] == 0
    assert text(cold) == text(warm) == text(expected)
