"""Names and messages a new user meets: every install line names the `graphlint-cuda`
distribution (`graphlint` on the index is another project), missing torch gives the install
hint on every path, torch's NumPy warning is silenced, `.gitignore` lists no tracked file,
the GitLab template publishes code quality, and `explain runtime` lists the runtime kinds."""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
# `pip install graphlint`, `pip install 'graphlint[hf]'`, `pip install "graphlint>=1"`: the other project.
WRONG_NAME = re.compile(r"""^['"]?graphlint(?!-cuda)(?:$|[\[<>=~!@'"\s])""")
BLOCK_TORCH = "import sys; sys.modules['torch'] = None; from graphlint.cli import main; main()"


def tracked_text_files() -> list[Path]:
    listed = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()
    files = []
    for rel in listed:
        path = ROOT / rel
        if path.suffix in (".py", ".md", ".yml", ".yaml", ".toml", ".sh", ".cfg", ".txt", "") and path.is_file():
            files.append(path)
    return files


def install_lines_naming_the_wrong_distribution(text: str) -> list[str]:
    """Lines whose `pip install` arguments (up to a shell separator or comment) name `graphlint`."""
    wrong = []
    for line in text.splitlines():
        for rest in re.split(r"pip3?\s+install\b", line)[1:]:
            arguments = re.split(r"&&|\|\||[;|#)]", rest)[0]
            if any(WRONG_NAME.match(token) for token in arguments.split()):
                wrong.append(line.strip())
                break
    return wrong


def test_the_grep_finds_the_wrong_name():
    # The check below must be able to fail.
    assert install_lines_naming_the_wrong_distribution("pip install 'graphlint[hf]'")
    assert install_lines_naming_the_wrong_distribution('raise X("needs it: pip install graphlint")')
    assert install_lines_naming_the_wrong_distribution("pip install graphlint>=0.1")
    assert not install_lines_naming_the_wrong_distribution("pip install 'graphlint-cuda[hf]'")
    assert not install_lines_naming_the_wrong_distribution("pip install -e . && graphlint check --runtime")
    assert not install_lines_naming_the_wrong_distribution('pip install "graphlint-cuda @ git+https://x/graphlint@v1"')
    assert install_lines_naming_the_wrong_distribution('python -m pip install -q "graphlint @ git+https://x"')


def test_every_install_line_names_graphlint_cuda():
    own = Path(__file__).resolve()
    wrong = [f"{path.relative_to(ROOT)}: {line}" for path in tracked_text_files() if path.resolve() != own
             for line in install_lines_naming_the_wrong_distribution(path.read_text("utf-8", "replace"))]
    assert wrong == []


def test_gitignore_lists_no_tracked_file():
    ignored = subprocess.run(["git", "ls-files", "-ci", "--exclude-standard"], cwd=ROOT, capture_output=True,
                             text=True, check=True).stdout.split()
    assert ignored == []


@pytest.mark.parametrize("args", [["check", "--runtime", "--runtime-target", "default", "dsv4_model/model.py"],
                                  ["check", "--runtime", "dsv4_model/model.py"], ["runtime"], ["runtime", "default"]])
def test_missing_torch_gives_the_install_hint_on_every_path(args):
    result = subprocess.run([sys.executable, "-c", BLOCK_TORCH, *args], cwd=ROOT,
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 2, result.stderr
    assert "pip install 'graphlint-cuda[runtime]'" in result.stderr, result.stderr
    assert "internal error" not in result.stderr and "Traceback" not in result.stderr


def test_torch_numpy_warning_is_silenced_where_graphlint_imports_torch():
    pytest.importorskip("torch")
    no_numpy = "import sys, warnings; warnings.simplefilter('default'); sys.modules['numpy'] = None; "
    probe = "import torch; torch.zeros(2)"
    bare = subprocess.run([sys.executable, "-c", no_numpy + probe], capture_output=True, text=True, timeout=300)
    assert "Failed to initialize NumPy" in bare.stderr  # the warning this is about
    quiet = subprocess.run([sys.executable, "-c", no_numpy + "import graphlint; " + probe], capture_output=True,
                           text=True, timeout=300)
    assert quiet.returncode == 0 and "Failed to initialize NumPy" not in quiet.stderr, quiet.stderr


def test_gitlab_template_publishes_code_quality():
    text = (ROOT / "ci" / "gitlab-ci.yml").read_text()
    data = yaml.safe_load(text)
    jobs = [job for job in data.values() if isinstance(job, dict) and "script" in job]
    reports = [job for job in jobs if "--format gitlab" in " ".join(job["script"])]
    assert reports, "no job runs check --format gitlab"
    for job in reports:
        script = " ".join(job["script"])
        written = re.search(r"--format gitlab\b.*?(?:-o|--output)\s+(\S+)", script)
        assert written, script
        assert job["artifacts"]["reports"]["codequality"] == written.group(1)


def test_explain_runtime_lists_the_runtime_kinds():
    from click.testing import CliRunner

    from graphlint.cli import main

    result = CliRunner().invoke(main, ["explain", "runtime"])
    assert result.exit_code == 0, result.output
    kinds = pytest.importorskip("graphlint.runtime.tracing.kinds")
    names = list(kinds.KINDS)
    assert names and all(name in result.output for name in names)


def test_missing_pygls_gives_the_server_install_hint():
    block = "import sys; sys.modules['pygls'] = None; from graphlint.cli import main; main()"
    result = subprocess.run([sys.executable, "-c", block, "server"], cwd=ROOT, capture_output=True, text=True,
                            timeout=120, stdin=subprocess.DEVNULL)
    assert result.returncode == 2 and "pip install 'graphlint-cuda[server]'" in result.stderr, result.stderr


def test_missing_torch_gives_the_install_hint_in_the_pytest_plugin(tmp_path):
    (tmp_path / "conftest.py").write_text("import sys\nsys.modules['torch'] = None  # as an install without torch\n")
    (tmp_path / "test_step.py").write_text("def test_step(graphlint_runtime):\n"
                                           "    graphlint_runtime('mypkg.decode:make_step')\n")
    result = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_step.py"],
                            cwd=tmp_path, capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL)
    assert result.returncode == 1, result.stdout
    assert "pip install 'graphlint-cuda[runtime]'" in result.stdout and "ModuleNotFoundError" not in result.stdout
