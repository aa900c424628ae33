"""A cache entry graphlint cannot trust is analysed again, never crashes a run: valid JSON of
the wrong shape (`[]`, a missing key, an unknown rule code), an entry whose checksum does not
match, a FIFO (reading it would block forever) or a link to /dev/zero (it never ends) in place
of an entry. The next run gives the same report as a run without a cache and heals the entry."""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from graphlint import __version__
from graphlint.config import Config
from graphlint.engine import check
from graphlint.engine.cache import Cache, valid_analysis
from graphlint.report import Report, dumps

SYNC = "import torch\n\ndef step(x: torch.Tensor):\n    return x.max().item()\n"
GRAPH = "import torch\n\n\ndef step(x: torch.Tensor):  # graphlint: entry\n    return helper(x)\n\n\n" \
        "def helper(x):\n    return x.max().item()\n"


def report(static) -> str:
    return dumps(Report(tool_version=__version__, static=static))


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "a.py").write_text(SYNC)
    (tmp_path / "b.py").write_text(GRAPH)
    return tmp_path


def run(project: Path):
    return check([project], Config(root=project), jobs=1, cache_dir=project / ".cache")


def entries(project: Path) -> list[Path]:
    return sorted((project / ".cache").rglob("*.json"))


def rewrite_every_entry(project: Path, value) -> None:
    """Store `value` with a correct checksum, as a graphlint build would, so only the shape
    check can reject it."""
    cache = Cache(project / ".cache")
    for entry in entries(project):
        cache.put(entry.stem, value(json.loads(entry.read_bytes().partition(b"\n")[2])))


def unknown_rule(entry):
    for finding in entry.get("findings", []):
        finding["rule"] = "GL999"
    entry.get("placements", [[0]])[0][0] = 5
    return entry


@pytest.mark.parametrize("value", [
    lambda entry: [],
    lambda entry: {},
    lambda entry: {k: v for k, v in entry.items() if k not in ("findings", "placements")},
    unknown_rule,
    lambda entry: {**entry, "findings": [{"rule": "GL101", "line": "1"}]} if "findings" in entry else entry,
    lambda entry: {**entry, "fingerprint_texts": [[99, ""]] * len(entry.get("findings", []))}
    if "findings" in entry else {**entry, "placements": "x"},
], ids=["list", "empty", "missing-key", "unknown-rule", "wrong-type", "bad-index"])
def test_valid_json_of_the_wrong_shape_is_analysed_again(project, value):
    cold = run(project)
    assert cold.findings and len(entries(project)) == 4  # two files, the project facts and the call graph
    rewrite_every_entry(project, value)
    again = run(project)
    assert report(again) == report(cold)
    assert again.stats["cache_hits"] == 0
    healed = run(project)
    assert healed.stats["cache_hits"] == 2 and report(healed) == report(cold)


def test_an_entry_that_does_not_match_its_checksum_is_analysed_again(project):
    cold = run(project)
    for entry in entries(project):
        digest, _, text = entry.read_bytes().partition(b"\n")
        entry.write_bytes(digest + b"\n" + text.replace(b"GL101", b"GL102"))
    assert report(run(project)) == report(cold)
    for entry in entries(project):
        entry.write_text("[]")  # no checksum at all
    assert report(run(project)) == report(cold)


@pytest.mark.parametrize("kind", ["fifo", "dev-zero-link", "folder"])
def test_an_entry_that_is_not_a_regular_file_is_not_read(project, kind):
    cold = run(project)
    for entry in entries(project):
        entry.unlink()
        if kind == "fifo":
            os.mkfifo(entry)
        elif kind == "folder":
            entry.mkdir()
        else:
            entry.symlink_to("/dev/zero")
    assert report(run(project)) == report(cold)


def test_the_shape_check_accepts_what_graphlint_writes(project):
    run(project)
    values = [json.loads(entry.read_bytes().partition(b"\n")[2]) for entry in entries(project)]
    assert sum(valid_analysis(v) for v in values) == 2
