"""check and audit read one pipeline (graphlint.engine.pipeline): for every function the audit
lists, its findings are the ones `check` reports in it, facts across functions included."""
from __future__ import annotations

import textwrap
from collections import Counter
from pathlib import Path

import pytest

from graphlint import region_audit
from graphlint.config import Config
from graphlint.engine import check
from graphlint.testing import lint_snippet

REPO = Path(__file__).resolve().parents[1]
FIXTURES = REPO / "tests" / "fixtures"
PACKAGES = [
    (FIXTURES / "engine", "minivllm"),
    (FIXTURES / "engine", "tinyserve"),
    (FIXTURES / "regions", "servepkg"),
    (REPO, "dsv4_model"),
]


def _gate_package(root: Path) -> Path:
    """A forward that hands a device comparison to a plain function that branches on it."""
    package = root / "gatepkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "gate.py").write_text("def gate(flag):\n    if flag:\n        return 1\n    return 0\n")
    (package / "model.py").write_text(textwrap.dedent("""
        import torch
        from torch import nn

        from gatepkg.gate import gate

        class Model(nn.Module):
            def forward(self, x: torch.Tensor):
                return x * gate(x.sum() > 0)
        """))
    return package


def _by_function(findings) -> dict[tuple[str, str], Counter]:
    out: dict[tuple[str, str], Counter] = {}
    for finding in findings:
        if finding.suppressed or finding.function is None or finding.rule == "GL905":
            continue
        out.setdefault((finding.path, finding.function), Counter())[finding.rule] += 1
    return out


def _agree(paths, config) -> None:
    checked = _by_function(check(paths, config, jobs=1).findings)
    audited = region_audit.run(paths, config, jobs=1)
    names = {}
    for row in audited.rows:
        key = (row.path, row.function.rpartition(":")[2])
        names[key] = row
        assert Counter(row.findings) == checked.get(key, Counter()), (key, row.findings, checked.get(key))
    # Every finding `check` places in a per-step function is in the audit's row for it.
    for key, counts in checked.items():
        row = names.get(key)
        if row is not None:
            assert Counter(row.findings) == counts


@pytest.mark.parametrize("root,package", PACKAGES, ids=[p for _, p in PACKAGES])
def test_check_and_audit_agree_on_every_function(root, package):
    _agree([root / package], Config(root=root))


def test_a_device_value_passed_to_a_plain_function_is_the_same_finding_in_both(tmp_path):
    package = _gate_package(tmp_path)
    config = Config(root=tmp_path)
    checked = check([package], config, jobs=1).findings
    assert {(f.rule, f.function) for f in checked} == {("GL201", "gate")}
    audited = region_audit.run([package], config, jobs=1)
    rows = {row.function: row for row in audited.rows}
    assert rows["gate"].cls == "host-branch" and audited.verdict() == "fail"
    _agree([package], config)


def test_lint_snippet_reads_the_same_pipeline_with_a_config(tmp_path):
    package = _gate_package(tmp_path)
    code = (package / "gate.py").read_text() + "\n" + (package / "model.py").read_text().replace(
        "from gatepkg.gate import gate\n", "")
    swept = {(f.rule, f.function) for f in lint_snippet(code, prelude=False)}
    discovered = {(f.rule, f.function) for f in lint_snippet(code, prelude=False, config=Config(root=tmp_path))}
    assert ("GL201", "gate") in swept and discovered == {("GL201", "gate")}
