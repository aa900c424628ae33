"""Region files on the static side: the function hash both halves compute, reading a file into the
call graph's roots, stale entries (GL904), the cache key, bad files (exit 2) and audit's marks."""
from __future__ import annotations

import importlib.util
import json
import sys
import textwrap
from pathlib import Path
from types import SimpleNamespace

import pytest
from click.testing import CliRunner

from graphlint.region_audit import run as run_audit
from graphlint.callgraph import recorded
from graphlint.cli import main
from graphlint.config import Config, ConfigError, load
from graphlint.engine import check
from graphlint.runtime.tracing import record

SOURCE = textwrap.dedent('''\
    import functools
    import torch


    def plain(x):
        return x + 1


    @functools.lru_cache(maxsize=None)
    def cached(n):
        return n * 2


    class Model(torch.nn.Module):
        def forward(self, x):
            def inner(y):
                return y * 3
            return inner(x)

        @staticmethod
        def helper(
            x,
        ):
            return x  # trailing comment
            # a comment after the last statement


    if True:
        def conditional(x):
            return x - 1


    def decode(x):
        return Model().forward(x) + plain(x)
    ''')


def _module(tmp_path: Path, name: str = "sample"):
    path = tmp_path / f"{name}.py"
    path.write_text(SOURCE)
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return path, module


def _codes(module) -> list:
    functions = [module.plain, module.cached.__wrapped__, module.Model.forward, module.Model.helper,
                 module.conditional, module.decode]
    inner = next(c for c in module.Model.forward.__code__.co_consts if hasattr(c, "co_name") and c.co_name == "inner")
    return [f.__code__ for f in functions] + [inner]


def test_the_runtime_and_the_static_side_hash_and_name_every_def_alike(tmp_path):
    pytest.importorskip("torch")  # the sample module imports it
    path, module = _module(tmp_path)
    ran = record.functions_of(_codes(module), "sync")
    static = recorded.hashes(path.read_text())
    spans = {s.qualname: s for s in recorded.function_spans(path.read_text())}
    assert sorted(f["qualname"] for f in ran) == sorted(
        ["plain", "cached", "Model.forward", "Model.forward.inner", "Model.helper", "conditional", "decode"])
    for function in ran:
        assert function["hash"] in static[function["qualname"]], function
        assert (function["first"], function["last"]) == (spans[function["qualname"]].first,
                                                         spans[function["qualname"]].last)
    # decorated: from the decorator's line, as co_firstlineno; to the last statement
    assert spans["cached"].first == SOURCE.splitlines().index("@functools.lru_cache(maxsize=None)") + 1
    assert SOURCE.splitlines()[spans["Model.helper"].last - 1].strip() == "return x  # trailing comment"


def test_the_qualname_without_co_qualname_comes_from_the_defs_nesting(tmp_path):
    # Python 3.10 code objects have no co_qualname: the name is the static analysis's own
    # (read from the source alone, so this part needs no torch).
    span = next(s for s in recorded.function_spans(SOURCE) if s.name == "inner")
    assert record.qualname_of(SimpleNamespace(co_name="inner"), span) == "Model.forward.inner"
    if sys.version_info >= (3, 11) and importlib.util.find_spec("torch") is not None:
        _, module = _module(tmp_path, "sample310")
        assert record.qualname_of(_codes(module)[-1], span) == "Model.forward.inner"


def test_the_hash_ignores_moves_and_indentation_and_sees_edits():
    lines = ["class A:", "    def f(self):", "        return 1", ""]
    moved = ["", "", "def f(self):", "    return 1"]
    edited = ["def f(self):", "    return 2"]
    assert recorded.source_hash(lines, 2, 3) == recorded.source_hash(moved, 3, 4)
    assert recorded.source_hash(lines, 2, 3) != recorded.source_hash(edited, 1, 2)


# ----------------------------------------------------------------- a project with a region file
def _project(tmp_path: Path, config: str = "") -> Path:
    root = tmp_path / "proj"
    (root / "pkg").mkdir(parents=True)
    (root / "pkg" / "__init__.py").write_text("")
    (root / "pkg" / "runner.py").write_text(textwrap.dedent('''\
        import torch


        class Runner:
            def run(self, x):
                return self.scale(x).item()

            def scale(self, x):
                return x * 2

            def unused(self, x):
                return x.tolist()
        '''))
    (root / "pkg" / "adapter.py").write_text(textwrap.dedent('''\
        import torch


        class Adapter(torch.nn.Module):
            # The runner's method is named at run time: no static call graph follows it.
            def forward(self, x):
                return getattr(self.inner, self.method)(x)
        '''))
    (root / "graphlint.toml").write_text(config)
    return root


def _write_regions(root: Path, names: list[tuple[str, str]], rel: str = ".graphlint/regions.json") -> Path:
    functions = []
    for path, qualname in names:
        text = (root / path).read_text()
        span = next(s for s in recorded.function_spans(text) if s.qualname == qualname)
        functions.append({"path": path, "qualname": qualname, "first": span.first, "last": span.last,
                          "hash": recorded.source_hash(text.splitlines(), span.first, span.last)})
    target = root / rel
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(json.dumps({"schema": recorded.SCHEMA, "target": "pkg.adapter:make", "recorded": "2026-01-02",
                                  "functions": functions}))
    return target


def test_recorded_functions_are_captured_with_their_reason(tmp_path):
    root = _project(tmp_path)
    before = check([str(root / "pkg")], load(start=root))
    assert not [f for f in before.findings if f.rule == "GL101"]
    _write_regions(root, [("pkg/adapter.py", "Adapter.forward"), ("pkg/runner.py", "Runner.run")])
    after = check([str(root / "pkg")], load(start=root))
    (item,) = [f for f in after.findings if f.rule == "GL101"]
    assert item.function == "Runner.run" and item.region == "captured"
    assert item.region_reason == "ran inside the captured step of pkg.adapter:make (recorded 2026-01-02)"
    # what a recorded function calls is captured too; what nothing reaches is not
    assert after.regions[("pkg/runner.py", "Runner.scale")].region == "captured"
    assert after.regions[("pkg/runner.py", "Runner.unused")].region == "unreached"
    assert not [f for f in after.findings if f.rule == "GL904"]


def test_a_renamed_or_edited_function_makes_the_file_stale_once(tmp_path):
    root = _project(tmp_path)
    _write_regions(root, [("pkg/adapter.py", "Adapter.forward"), ("pkg/runner.py", "Runner.run"),
                          ("pkg/runner.py", "Runner.scale")])
    runner = root / "pkg" / "runner.py"
    runner.write_text(runner.read_text().replace("def scale(self, x):\n        return x * 2",
                                                 "def scale(self, x):\n        return x * 3")
                      .replace("def run(", "def run_renamed("))
    result = check([str(root / "pkg")], load(start=root))
    (stale,) = [f for f in result.findings if f.rule == "GL904"]
    assert stale.path == ".graphlint/regions.json" and stale.severity == "warning"
    assert "2 of 3 recorded functions are stale" in stale.message
    assert "Runner.run (pkg/runner.py: gone)" in stale.message
    assert "Runner.scale (pkg/runner.py: source changed)" in stale.message
    assert "graphlint runtime pkg.adapter:make --record-regions" in stale.fix
    # the entry that still matches still counts
    assert result.regions[("pkg/adapter.py", "Adapter.forward")].reason.startswith(recorded.REASON_PREFIX)
    ignored = check([str(root / "pkg")], load(start=root), ignore=("GL904",))
    assert not [f for f in ignored.findings if f.rule == "GL904"]


def test_a_warm_check_sees_a_new_region_file(tmp_path):
    root = _project(tmp_path)
    cache = tmp_path / "cache"
    config = load(start=root)
    cold = check([str(root / "pkg")], config, cache_dir=cache)
    _write_regions(root, [("pkg/runner.py", "Runner.run")])
    warm = check([str(root / "pkg")], config, cache_dir=cache)
    assert [f.rule for f in cold.findings if f.rule == "GL101"] == []
    assert [f.rule for f in warm.findings if f.rule == "GL101"] == ["GL101"]
    assert not [f for f in warm.findings if f.rule == "GL904"]
    # the staleness verdict is cached too, under the files' keys: an edit is seen at once
    runner = root / "pkg" / "runner.py"
    runner.write_text(runner.read_text().replace("return self.scale(x).item()", "return self.scale(x).item() + 1"))
    edited = check([str(root / "pkg")], config, cache_dir=cache)
    (stale,) = [f for f in edited.findings if f.rule == "GL904"]
    assert "Runner.run (pkg/runner.py: source changed)" in stale.message


def test_a_configured_region_file_is_read_and_a_broken_one_is_exit_2(tmp_path, monkeypatch):
    root = _project(tmp_path, 'region-file = "ci/regions.json"\n')
    monkeypatch.chdir(root)
    missing = CliRunner().invoke(main, ["check", "pkg"])
    assert missing.exit_code == 2 and "ci/regions.json" in missing.output and "--record-regions" in missing.output
    _write_regions(root, [("pkg/runner.py", "Runner.run")], rel="ci/regions.json")
    found = CliRunner().invoke(main, ["check", "pkg"])
    assert found.exit_code == 1 and "GL101" in found.output
    (root / "ci" / "regions.json").write_text("{not json")
    broken = CliRunner().invoke(main, ["check", "pkg"])
    assert broken.exit_code == 2 and "not a readable region file" in broken.output
    assert "Traceback" not in broken.output
    (root / "ci" / "regions.json").write_text(json.dumps({"schema": "other"}))
    wrong = CliRunner().invoke(main, ["check", "pkg"])
    assert wrong.exit_code == 2 and "not a region file" in wrong.output


def test_config_key_type_is_checked(tmp_path):
    (tmp_path / "graphlint.toml").write_text("region-file = 3\n")
    with pytest.raises(ConfigError, match="region-file"):
        load(start=tmp_path)


def test_audit_marks_the_functions_of_the_region_file(tmp_path):
    root = _project(tmp_path)
    _write_regions(root, [("pkg/runner.py", "Runner.run")])
    result = run_audit([str(root / "pkg")], Config(root=root))
    marked = {row.function: row.recorded for row in result.rows}
    assert marked["Adapter.forward"] is False  # a forward: discovered, not recorded
    assert marked["Runner.run"]
    assert marked["Runner.scale"] is False  # reached from a recorded function, not recorded itself
    rows = {row["function"]: row["from_region_file"] for row in result.to_dict()["functions"]}
    assert rows == {"Adapter.forward": False, "Runner.run": True, "Runner.scale": False}


def test_third_party_entries_match_the_end_of_a_linted_path():
    entry = recorded.Entry("transformers/models/llama/modeling_llama.py", "LlamaModel.forward", "h", "transformers")
    own = recorded.Entry("models/llama/modeling_llama.py", "LlamaModel.forward", "h")
    paths = ["/venv/site-packages/transformers/models/llama/modeling_llama.py", "x/models/llama/modeling_llama.py"]
    assert recorded.matched([entry], paths) == {entry: paths[0]}
    assert recorded.matched([own], paths) == {}  # a project entry names its path exactly
