"""The pre-commit hook: in a scratch repository whose .pre-commit-config.yaml uses graphlint's
`graphlint` hook (taken from .pre-commit-hooks.yaml, run as a local system hook so that nothing
is downloaded), a commit that adds `.item()` to a per-step function is rejected with the finding
shown, and a clean commit passes."""
from __future__ import annotations

import os
import re
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


PROJECT = {
    "servekit/__init__.py": "",
    "servekit/runner.py": (
        "import torch\n\n"
        "from servekit.model import Model\n"
        "from servekit.helpers import to_tokens\n\n\n"
        "class Runner:\n"
        "    def __init__(self):\n"
        "        self.model = Model().to('cuda').eval()\n"
        "        self.ids = torch.zeros(8, dtype=torch.long, device='cuda')\n"
        "        self.model(self.ids)\n"
        "        self.graph = torch.cuda.CUDAGraph()\n"
        "        with torch.cuda.graph(self.graph):\n"
        "            self.out = self.model(self.ids)\n\n"
        "    def step(self):\n"
        "        self.graph.replay()\n"
        "        return to_tokens(self.out)\n"),
    "servekit/model.py": (
        "import torch\n"
        "from torch import nn\n\n"
        "from servekit.helpers import scale_of\n\n\n"
        "class Model(nn.Module):\n"
        "    def forward(self, ids: torch.Tensor) -> torch.Tensor:\n"
        "        x = ids.float()\n"
        "        return x * scale_of(x)\n"),
}
# Reached from the captured forward (a sync every step), and called after the replay (host code).
HELPERS = ("import torch\n\n\n"
           "def scale_of(x: torch.Tensor) -> float:\n"
           "    return float(x.abs().max().item())\n\n\n"
           "def to_tokens(out: torch.Tensor) -> list:\n"
           "    return out.argmax(-1).tolist()\n")
FINDING = re.compile(r"^(servekit/\S+\.py):(\d+):(\d+) (GL\d+)", re.MULTILINE)


def test_a_file_staged_alone_gets_the_findings_of_the_whole_project(repo):
    work, env = repo
    for name, text in PROJECT.items():
        (work / name).parent.mkdir(parents=True, exist_ok=True)
        (work / name).write_text(text)
    first = commit(work, env, "engine without helpers")
    assert first.returncode == 0, first.stdout + first.stderr
    (work / "servekit" / "helpers.py").write_text(HELPERS)
    staged_alone = commit(work, env, "helpers")  # the hook is given servekit/helpers.py only
    assert staged_alone.returncode != 0
    alone = set(FINDING.findall(staged_alone.stdout + staged_alone.stderr))
    all_files = subprocess.run(["pre-commit", "run", "--all-files"], cwd=work, env=env, capture_output=True,
                               text=True, timeout=120)
    whole = subprocess.run(["graphlint", "check", "--no-cache"], cwd=work, env=env, capture_output=True, text=True,
                           timeout=120)
    everything = set(FINDING.findall(all_files.stdout + all_files.stderr))
    tree = set(FINDING.findall(whole.stdout))
    helpers = lambda found: {f for f in found if f[0] == "servekit/helpers.py"}  # noqa: E731
    # Only the helper the captured forward reaches: the one called after the replay is host code.
    assert alone == {("servekit/helpers.py", "5", "18", "GL101")}
    assert helpers(everything) == alone and helpers(tree) == alone
