"""The pre-commit hook: in a scratch repository whose .pre-commit-config.yaml uses graphlint's
`graphlint` hook (taken from .pre-commit-hooks.yaml, run as a local system hook so that nothing
is downloaded), a commit that adds `.item()` to a per-step function is rejected with the finding
shown, and a clean commit passes."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
HOOKS = yaml.safe_load((ROOT / ".pre-commit-hooks.yaml").read_text())

pytestmark = pytest.mark.skipif(shutil.which("pre-commit", path=os.path.dirname(sys.executable)) is None
                                and shutil.which("pre-commit") is None,
                                reason="pre-commit is not installed (pip install 'graphlint-cuda[test]')")

CLEAN = ("import torch\n\n\n"
         "def decode_step(logits: torch.Tensor, out: torch.Tensor) -> None:\n"
         "    out.copy_(logits.argmax(-1))\n")
ITEM = CLEAN + "    print(logits.max().item())\n"


def hook(hook_id: str) -> dict:
    [found] = [h for h in HOOKS if h["id"] == hook_id]
    return found


def test_manifest_declares_both_hooks():
    static, runtime = hook("graphlint"), hook("graphlint-runtime")
    assert static["entry"] == "graphlint check --force-exclude" and static["types"] == ["python"]
    assert static.get("pass_filenames", True) and "manual" not in static.get("stages", [])
    assert runtime["entry"] == "graphlint runtime" and runtime["stages"] == ["manual"]
    assert runtime["pass_filenames"] is False


@pytest.fixture
def repo(tmp_path: Path) -> tuple[Path, dict]:
    env = dict(os.environ)
    env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", "")
    env["PRE_COMMIT_HOME"] = str(tmp_path / "pre-commit-home")
    env.update(GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@t", GIT_COMMITTER_NAME="t", GIT_COMMITTER_EMAIL="t@t")
    work = tmp_path / "work"
    work.mkdir()
    local = {**hook("graphlint"), "language": "system"}  # the published hook, without an environment to build
    config = {"repos": [{"repo": "local", "hooks": [local]}]}
    (work / ".pre-commit-config.yaml").write_text(yaml.safe_dump(config))
    (work / "pyproject.toml").write_text("[tool.graphlint]\n")
    subprocess.run(["git", "init", "-q"], cwd=work, check=True, env=env)
    subprocess.run(["pre-commit", "install"], cwd=work, check=True, env=env, capture_output=True)
    return work, env


def commit(work: Path, env: dict, message: str) -> subprocess.CompletedProcess:
    subprocess.run(["git", "add", "-A"], cwd=work, check=True, env=env)
    return subprocess.run(["git", "commit", "-m", message], cwd=work, env=env, capture_output=True, text=True,
                          timeout=120)


def test_clean_commit_passes_and_item_call_is_rejected(repo):
    work, env = repo
    (work / "step.py").write_text(CLEAN)
    clean = commit(work, env, "clean step")
    assert clean.returncode == 0, clean.stdout + clean.stderr
    assert "graphlint (CUDA-graph hazards)" in clean.stderr and "Passed" in clean.stderr

    (work / "step.py").write_text(ITEM)
    rejected = commit(work, env, "read a value on the host")
    assert rejected.returncode != 0
    shown = rejected.stdout + rejected.stderr  # git hands the hook's output to stderr
    assert "Failed" in shown
    assert "step.py:6:11 GL101" in shown  # the finding is shown to the committer
    log = subprocess.run(["git", "log", "--format=%s"], cwd=work, env=env, capture_output=True, text=True)
    assert log.stdout.splitlines() == ["clean step"]
