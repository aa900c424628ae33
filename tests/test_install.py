"""The product as a user installs it, outside this checkout: the built wheel in a fresh virtual
environment runs every command and format, and the shipped pre-commit hook definition
(.pre-commit-hooks.yaml, `language: python`, unchanged) installs this repository into
pre-commit's own environment and gates a bad and a clean commit.

Slow (a wheel build and two fresh environments from the package index): marked `install`,
left out of the default run and run by .ci/run (`pytest -m install`).
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.install

CLEAN = ("import torch\n\n\n"
         "def decode_step(logits: torch.Tensor, out: torch.Tensor) -> None:\n"
         "    out.copy_(logits.argmax(-1))\n")
BAD = CLEAN + "    print(logits.max().item())\n"


def _run(args, cwd, env=None, timeout=600, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, **kwargs)


def _snapshot(dest: Path) -> str:
    """A git repository holding this working tree's files (tracked and untracked, not ignored)
    as one commit: a local clone of what is being tested, without network access. Returns its
    commit id."""
    files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=ROOT, check=True,
                           capture_output=True).stdout.decode().split("\0")
    for rel in filter(None, files):
        source = ROOT / rel
        if source.is_file():
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, dest / rel)
    env = _git_env(dest.parent)
    subprocess.run(["git", "init", "-q"], cwd=dest, check=True, env=env)
    subprocess.run(["git", "add", "-A"], cwd=dest, check=True, env=env)
    subprocess.run(["git", "commit", "-q", "-m", "snapshot"], cwd=dest, check=True, env=env)
    return subprocess.run(["git", "rev-parse", "HEAD"], cwd=dest, check=True, env=env, capture_output=True,
                          text=True).stdout.strip()


def _git_env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GIT_", "VIRTUAL_ENV", "PYTHONPATH"))}
    env.update(GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@t", GIT_COMMITTER_NAME="t", GIT_COMMITTER_EMAIL="t@t",
               GIT_CONFIG_NOSYSTEM="1", HOME=str(home))
    return env


@pytest.fixture(scope="module")
def wheel_env(tmp_path_factory) -> tuple[Path, Path]:
    """(the fresh environment's bin folder, a scratch project with one bad step)."""
    base = tmp_path_factory.mktemp("wheel")
    clone = base / "clone"
    clone.mkdir()
    _snapshot(clone)
    built = _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(base / "dist"), str(clone)],
                 cwd=base)
    assert built.returncode == 0, built.stdout + built.stderr
    [wheel] = (base / "dist").glob("*.whl")
    assert wheel.name.startswith("graphlint_cuda-")
    venv = base / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    installed = _run([str(venv / "bin" / "python"), "-m", "pip", "install", "-q", str(wheel)], cwd=base)
    assert installed.returncode == 0, installed.stdout + installed.stderr
    project = base / "project"
    (project / "pkg").mkdir(parents=True)
    (project / "pkg" / "__init__.py").write_text("")
    (project / "pkg" / "step.py").write_text(BAD)
    (project / "pyproject.toml").write_text('[tool.graphlint]\nentry-points = ["pkg.step:decode_step"]\n')
    return venv / "bin", project


def test_wheel_holds_every_package_of_the_tree(wheel_env):
    """Discovery, not a hand-kept list: every folder of modules in the tree is in the wheel."""
    bin_folder, _ = wheel_env
    [wheel] = (bin_folder.parents[1] / "dist").glob("*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    for source in [*(ROOT / "graphlint").rglob("*.py"), *(ROOT / "dsv4_model").rglob("*.py")]:
        assert source.relative_to(ROOT).as_posix() in names, source
    for source in (ROOT / "rules").rglob("*.py"):
        assert "graphlint/rules/" + source.relative_to(ROOT / "rules").as_posix() in names, source
    assert "graphlint/data/torch_catalog.toml" in names
    metadata = next(n for n in names if n.endswith("METADATA"))
    text = zipfile.ZipFile(wheel).read(metadata).decode()
    assert "License-Expression: Apache-2.0" in text and "Name: graphlint-cuda" in text


def test_installed_wheel_runs_every_command_and_format(wheel_env):
    bin_folder, project = wheel_env
    graphlint = str(bin_folder / "graphlint")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    where = _run([str(bin_folder / "python"), "-c", "import graphlint, graphlint.rules; print(graphlint.__file__)"],
                 cwd=project, env=env)
    assert "site-packages" in where.stdout and str(ROOT) not in where.stdout, where.stdout + where.stderr

    text = _run([graphlint, "check", "--no-cache"], cwd=project, env=env)
    assert text.returncode == 1, text.stdout + text.stderr
    assert "pkg/step.py:6:11 GL101" in text.stdout
    for fmt in ["json", "sarif", "github", "gitlab", "junit"]:
        result = _run([graphlint, "check", "--no-cache", "--format", fmt], cwd=project, env=env)
        assert result.returncode == 1, (fmt, result.stdout, result.stderr)
        assert "GL101" in result.stdout, fmt
        if fmt in ("json", "sarif", "gitlab"):
            json.loads(result.stdout)
    audit = _run([graphlint, "audit", "--no-cache"], cwd=project, env=env)
    assert audit.returncode == 1 and "pkg.step:decode_step" in audit.stdout, audit.stdout + audit.stderr
    rules = _run([graphlint, "rules"], cwd=project, env=env)
    assert rules.returncode == 0 and "GL101" in rules.stdout
    explain = _run([graphlint, "explain", "item-call"], cwd=project, env=env)
    assert explain.returncode == 0 and "GL101" in explain.stdout
    (project / "pkg" / "step.py").write_text(CLEAN)
    clean = _run([graphlint, "check", "--no-cache"], cwd=project, env=env)
    assert clean.returncode == 0, clean.stdout + clean.stderr


@pytest.fixture(scope="module")
def hook_repo(tmp_path_factory) -> tuple[Path, str]:
    base = tmp_path_factory.mktemp("hook")
    clone = base / "graphlint-clone"
    clone.mkdir()
    return clone, _snapshot(clone)


def _pre_commit() -> str:
    found = shutil.which("pre-commit", path=os.path.dirname(sys.executable)) or shutil.which("pre-commit")
    assert found, "pre-commit is a test dependency (pip install -e '.[test]')"
    return found


def test_shipped_hook_definition_gates_a_bad_and_a_clean_commit(hook_repo, tmp_path):
    """The hook exactly as .pre-commit-hooks.yaml ships it: pre-commit builds its own
    `language: python` environment by installing the repository at the pinned commit."""
    clone, rev = hook_repo
    shipped = yaml.safe_load((clone / ".pre-commit-hooks.yaml").read_text())
    assert next(h for h in shipped if h["id"] == "graphlint")["language"] == "python"
    env = _git_env(tmp_path)
    env["PRE_COMMIT_HOME"] = str(tmp_path / "pre-commit-home")
    env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", "")
    work = tmp_path / "work"
    work.mkdir()
    config = {"repos": [{"repo": str(clone), "rev": rev, "hooks": [{"id": "graphlint"}]}]}
    (work / ".pre-commit-config.yaml").write_text(yaml.safe_dump(config))
    # An entry point in another file than the staged one: regions come from the whole project.
    (work / "pyproject.toml").write_text('[tool.graphlint]\nentry-points = ["serve:run"]\n'
                                         'exclude = ["reference.py"]\n')
    (work / "serve.py").write_text("import torch\n\nfrom step import decode_step\n\n\n"
                                   "def run(a: torch.Tensor, b: torch.Tensor):\n    decode_step(a, b)\n")
    (work / "reference.py").write_text(BAD.replace("decode_step", "ref_step"))
    pre_commit = _pre_commit()
    assert _run(["git", "init", "-q"], cwd=work, env=env).returncode == 0
    assert _run([pre_commit, "install"], cwd=work, env=env).returncode == 0

    def commit(message: str) -> subprocess.CompletedProcess:
        subprocess.run(["git", "add", "-A"], cwd=work, check=True, env=env)
        return _run(["git", "commit", "-m", message], cwd=work, env=env, timeout=900)

    (work / "step.py").write_text(CLEAN)
    clean = commit("clean step")
    assert clean.returncode == 0, clean.stdout + clean.stderr
    assert "graphlint (CUDA-graph hazards)" in clean.stderr and "Passed" in clean.stderr

    (work / "step.py").write_text(BAD)
    rejected = commit("read a value on the host")
    shown = rejected.stdout + rejected.stderr
    assert rejected.returncode != 0, shown
    assert "Failed" in shown and "step.py:6:11 GL101" in shown, shown
    assert "reference.py" not in shown  # excluded, although pre-commit names it (--force-exclude)
    log = _run(["git", "log", "--format=%s"], cwd=work, env=env)
    assert log.stdout.splitlines() == ["clean step"]

    # `pre-commit try-repo`, as a user tries the hook before pinning it.
    tried = _run([pre_commit, "try-repo", str(clone), "graphlint", "--ref", rev, "--files", "step.py"],
                 cwd=work, env=env, timeout=900)
    assert tried.returncode == 1 and "step.py:6:11 GL101" in tried.stdout, tried.stdout + tried.stderr


def test_ci_template_install_step_installs_this_project(hook_repo, tmp_path):
    """The GitHub workflow's and the GitLab job's install commands, run as written, with the
    repository and revision pointed at the local clone: they install graphlint-cuda at that
    commit, whose `graphlint rules` lists this project's rules."""
    clone, rev = hook_repo
    workflow = yaml.safe_load((ROOT / "ci" / "github" / "graphlint.yml").read_text())
    step = next(s for s in workflow["jobs"]["static"]["steps"] if s.get("name") == "Install graphlint")
    gitlab = yaml.safe_load((ROOT / "ci" / "gitlab-ci.yml").read_text())
    for name, script in [("github", step["run"]), ("gitlab", "\n".join(gitlab["graphlint"]["before_script"]))]:
        venv = tmp_path / f"venv-{name}"
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        env = _git_env(tmp_path)
        env.update(PATH=f"{venv / 'bin'}{os.pathsep}{env['PATH']}", GRAPHLINT_REPO=f"file://localhost{clone}",
                   GRAPHLINT_REV=rev)
        installed = _run(["bash", "-euc", script], cwd=tmp_path, env=env)
        assert installed.returncode == 0, (name, installed.stdout, installed.stderr)
        rules = _run([str(venv / "bin" / "graphlint"), "rules"], cwd=tmp_path, env=env)
        assert rules.returncode == 0 and "GL101" in rules.stdout, (name, rules.stderr)
