"""A cache that cannot lie and a run that a changing file cannot end: an entry is stored under the
bytes the worker analysed (an edit during the run never files the new findings under the old
content), an entry moved under another key is rejected, failed writes leave no temporary files,
a linked cache folder is refused, `clean` removes only graphlint's own folders, and a file that
turns into a symlink loop while the run looks at it costs that file alone."""
from __future__ import annotations

import errno
import os
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from graphlint import discovery
from graphlint.cli import main
from graphlint.config import Config, ConfigError
from graphlint.engine import check, pool
from graphlint.engine.cache import CACHEDIR_TAG, Cache, evict_stale

BAD = "import torch\n\n\ndef step(x: torch.Tensor):\n    return x.item()\n"
GOOD = "import torch\n\n\ndef step(x: torch.Tensor):\n    return x + 1\n"


def rules(static) -> list[str]:
    return [f.rule for f in static.findings]


@pytest.mark.parametrize("attempt", range(3))  # the race, repeated: the outcome never depends on timing
def test_an_edit_during_the_run_never_files_new_findings_under_the_old_content(tmp_path, monkeypatch, attempt):
    tree, cache = tmp_path / "tree", tmp_path / "cache"
    tree.mkdir()
    source = tree / "step.py"
    source.write_text(BAD)
    analyse = pool.analyse_file

    def edited_meanwhile(task):
        # The run has looked the file up under its old bytes; it is edited before the worker reads it.
        Path(task[1]).write_text(GOOD)
        return analyse(task)

    monkeypatch.setattr(pool, "analyse_file", edited_meanwhile)  # workers fork with it
    check([tree], Config(root=tree), jobs=1, cache_dir=cache)
    monkeypatch.setattr(pool, "analyse_file", analyse)
    source.write_text(BAD)  # undo, or a branch switch back
    again = check([tree], Config(root=tree), jobs=1, cache_dir=cache)
    assert rules(again) == ["GL101"]
    source.write_text(GOOD)
    assert rules(check([tree], Config(root=tree), jobs=1, cache_dir=cache)) == []  # stored under GOOD
    assert check([tree], Config(root=tree), jobs=1, cache_dir=cache).stats["cache_hits"] == 1


def test_an_entry_moved_under_another_key_is_rejected(tmp_path):
    tree, cache = tmp_path / "tree", tmp_path / "cache"
    tree.mkdir()
    (tree / "bad.py").write_text(BAD)
    (tree / "good.py").write_text(GOOD)
    cold = check([tree], Config(root=tree), jobs=1, cache_dir=cache)
    entries = {path.name: path for path in cache.glob("??/*.json")}
    bad_key, good_key = _keys(tree, cache)
    bad_entry, good_entry = entries[f"{bad_key}.json"], entries[f"{good_key}.json"]
    bad_text, good_text = bad_entry.read_bytes(), good_entry.read_bytes()
    bad_entry.write_bytes(good_text)  # valid checksums, swapped: bad.py's entry now says "clean"
    good_entry.write_bytes(bad_text)
    warm = check([tree], Config(root=tree), jobs=1, cache_dir=cache)
    assert warm.stats["analysed"] == 2
    assert rules(warm) == rules(cold) == ["GL101"]


def _keys(tree: Path, cache: Path) -> list[str]:
    from graphlint.engine.cache import content_digest

    keyed = Cache(cache)
    return [keyed.key(content_digest((tree / name).read_bytes()), name) for name in ("bad.py", "good.py")]


def test_a_failed_write_leaves_no_temporary_file(tmp_path, monkeypatch):
    cache = Cache(tmp_path / "cache")

    def full_disk(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "replace", full_disk)
    assert cache.put("ab" + "0" * 30, {"path": "x.py"}) is False
    assert not list((tmp_path / "cache").rglob("*.tmp"))


def test_eviction_removes_temporary_files_left_by_killed_runs(tmp_path):
    folder = tmp_path / "cache"
    (folder / "ab").mkdir(parents=True)
    stale, fresh = folder / "ab" / "abc.123.tmp", folder / "ab" / "abd.124.tmp"
    stale.write_text("partial")
    fresh.write_text("being written")
    old = time.time() - 2 * 3600
    os.utime(stale, (old, old))
    assert evict_stale(folder) == 1
    assert not stale.exists() and fresh.exists()


def test_a_cache_folder_that_is_a_link_is_refused(tmp_path, monkeypatch):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    tree = tmp_path / "tree"
    tree.mkdir()
    (tree / "step.py").write_text(BAD)
    (tree / ".graphlint_cache").symlink_to(elsewhere)
    monkeypatch.chdir(tree)
    result = CliRunner().invoke(main, ["check", "."])
    assert result.exit_code == 2 and "symbolic link" in result.stderr and ".graphlint_cache" in result.stderr
    assert not list(elsewhere.iterdir())  # nothing written through the link
    # Naming the folder itself is the way to use it.
    result = CliRunner().invoke(main, ["check", ".", "--cache-dir", str(elsewhere)])
    assert result.exit_code == 1 and list(elsewhere.iterdir())
    with pytest.raises(ConfigError):
        Cache(tree / ".graphlint_cache")


def test_clean_removes_only_a_folder_with_graphlints_tag(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    plain = tmp_path / "precious"
    plain.mkdir()
    (plain / "data.txt").write_text("keep me")
    result = CliRunner().invoke(main, ["clean", "--cache-dir", str(plain)])
    assert result.exit_code == 2 and "not a graphlint cache" in result.stderr
    assert (plain / "data.txt").read_text() == "keep me"
    (plain / "CACHEDIR.TAG").write_text("Signature: 8a477f597d28d172789f06886806bc55\n# another tool's\n")
    assert CliRunner().invoke(main, ["clean", "--cache-dir", str(plain)]).exit_code == 2 and plain.exists()
    link = tmp_path / "link"
    link.symlink_to(plain)
    assert CliRunner().invoke(main, ["clean", "--cache-dir", str(link)]).exit_code == 2 and plain.exists()
    real = tmp_path / "cache"
    real.mkdir()
    (real / "CACHEDIR.TAG").write_text(CACHEDIR_TAG)
    result = CliRunner().invoke(main, ["clean", "--cache-dir", str(real)])
    assert result.exit_code == 0 and not real.exists()
    assert CliRunner().invoke(main, ["clean", "--cache-dir", str(real)]).exit_code == 0  # nothing to remove


def test_a_file_that_becomes_a_symlink_loop_costs_that_file_not_the_run(tmp_path, monkeypatch):
    (tmp_path / "flip.py").write_text(BAD)
    (tmp_path / "step.py").write_text(BAD)
    resolve = Path.resolve

    def flipping(self, *args, **kwargs):
        if self.name == "flip.py":  # it turned into a loop between the stat and the resolve
            raise OSError(errno.ELOOP, "Too many levels of symbolic links", str(self))
        return resolve(self, *args, **kwargs)

    monkeypatch.setattr(Path, "resolve", flipping)
    files = [path.name for path in discovery.discover([tmp_path], tmp_path)]
    assert files == ["flip.py", "step.py"]
    static = check([tmp_path], Config(root=tmp_path), jobs=1)
    assert sorted(static.files) == ["flip.py", "step.py"]
