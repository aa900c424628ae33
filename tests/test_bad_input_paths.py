"""Hostile paths and configs end in a message naming the thing (exit 2, the rest of the run
still reported), never "internal error" or a hang: symlink loops, names that are not UTF-8,
paths longer than PATH_MAX, unreadable folders, FIFOs and devices (refused by type, never
opened), broken configs; named files with entry points configured elsewhere (the pre-commit
hook's case); terminal escape sequences in source lines."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

STEP = ("import torch\n\n\n"
        "def decode_step(x: torch.Tensor):\n"
        "    return x.max().item()\n")


def graphlint(args, cwd: Path, timeout: float = 60, unprivileged: bool = False) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "graphlint", *args]
    if unprivileged and os.geteuid() == 0:
        if shutil.which("setpriv") is None:
            pytest.skip("running as root without setpriv: permissions cannot be denied")
        drop = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
        if subprocess.run([*drop, sys.executable, "-c", "pass"], capture_output=True).returncode != 0:
            pytest.skip(f"{sys.executable} does not start as an unprivileged user (its files are root's)")
        command = [*drop, *command]
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    return subprocess.run(command, cwd=cwd, capture_output=True, timeout=timeout, env=env)


@pytest.fixture
def root():
    """A project folder others may enter (the unprivileged runs need that)."""
    folder = Path(tempfile.mkdtemp(prefix="graphlint-paths-"))
    folder.chmod(0o755)
    (folder / "pyproject.toml").write_text("[tool.graphlint]\n")
    (folder / "good.py").write_text(STEP)
    yield folder
    for path in folder.iterdir():
        if path.is_dir() and not path.is_symlink():
            path.chmod(0o755)
    shutil.rmtree(folder)  # file-descriptor based: also below PATH_MAX


def _report(result: subprocess.CompletedProcess) -> dict:
    return json.loads(result.stdout)


def test_symlink_loop_named_and_in_a_walk(root):
    os.symlink("b.py", root / "a.py")
    os.symlink("a.py", root / "b.py")
    named = graphlint(["check", "--no-cache", "a.py"], root)
    assert named.returncode == 2 and b"a.py: symlink loop" in named.stderr, named.stderr
    walked = graphlint(["check", "--no-cache", "--format", "json", "."], root)
    assert walked.returncode == 2, walked.stderr
    report = _report(walked)
    assert report["static"]["files"] == ["good.py"]  # the rest of the run is there
    assert any("a.py: symlink loop" in error for error in report["errors"]), report["errors"]


def test_file_name_that_is_not_utf8(root):
    (root / "pkg").mkdir()
    with open(os.fsencode(root / "pkg") + b"/bad\xff.py", "w") as handle:
        handle.write(STEP)
    walked = graphlint(["check", "--no-cache", "--format", "json", "."], root)
    assert walked.returncode == 2, walked.stderr
    report = _report(walked)
    assert any("bad\\xff.py" in error and "not valid UTF-8" in error for error in report["errors"]), report
    assert report["static"]["files"] == ["good.py"]
    named = graphlint(["check", "--no-cache", b"pkg/bad\xff.py"], root)
    assert named.returncode == 2 and b"pkg/bad\\xff.py: path is not valid UTF-8" in named.stderr, named.stderr


def test_path_longer_than_path_max(root):
    named = graphlint(["check", "--no-cache", "x" * 5000 + ".py"], root)
    assert named.returncode == 2 and b"too long" in named.stderr and b"internal error" not in named.stderr
    # A walk into folders nested deeper than PATH_MAX (made relative to open folders).
    fd = os.open(root, os.O_RDONLY)
    try:
        for _ in range(25):
            os.mkdir("d" * 200, dir_fd=fd)
            next_fd = os.open("d" * 200, os.O_RDONLY, dir_fd=fd)
            os.close(fd)
            fd = next_fd
        with open(os.open("deep.py", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd), "w") as handle:
            handle.write(STEP)
    finally:
        os.close(fd)
    walked = graphlint(["check", "--no-cache", "--format", "json", "."], root)
    assert walked.returncode == 2, walked.stderr
    report = _report(walked)
    assert any("PATH_MAX" in error for error in report["errors"]), report["errors"]
    assert "good.py" in report["static"]["files"]


def test_unreadable_subfolder_inside_a_walk(root):
    locked = root / "locked"
    locked.mkdir()
    (locked / "x.py").write_text(STEP)
    locked.chmod(0)
    result = graphlint(["check", "--no-cache", "--format", "json", "."], root, unprivileged=True)
    assert result.returncode == 2, result.stderr
    report = _report(result)
    assert any("locked: cannot read folder: permission denied" in error for error in report["errors"]), report
    assert report["static"]["files"] == ["good.py"]


def test_fifo_in_a_walked_folder_is_refused_without_opening_it(root):
    os.mkfifo(root / "x.py")  # opening it for reading would block forever
    result = graphlint(["check", "--no-cache", "--format", "json", "."], root, timeout=60)
    assert result.returncode == 2, result.stderr
    report = _report(result)
    assert any("x.py: a FIFO, not a regular file" in error for error in report["errors"]), report["errors"]
    assert report["static"]["files"] == ["good.py"]


def test_fifo_and_dev_null_on_the_command_line(root):
    os.mkfifo(root / "pipe.py")
    fifo = graphlint(["check", "--no-cache", "pipe.py"], root, timeout=60)
    assert fifo.returncode == 2 and b"pipe.py: a FIFO, not a file or folder" in fifo.stderr, fifo.stderr
    null = graphlint(["check", "--no-cache", "/dev/null"], root, timeout=60)
    assert null.returncode == 2 and b"/dev/null: a character device" in null.stderr, null.stderr


# Config (issue item 6).

@pytest.mark.parametrize("text,key", [("tool = 5\n", "'tool'"), ("[tool]\ngraphlint = 5\n", "'tool.graphlint'")])
def test_config_of_the_wrong_shape_names_file_and_key(root, text, key):
    (root / "pyproject.toml").write_text(text)
    result = graphlint(["check", "--no-cache"], root)
    assert result.returncode == 2, result.stderr
    assert b"pyproject.toml: key " + key.encode() in result.stderr and b"internal error" not in result.stderr


def test_config_option_naming_a_fifo_or_a_device_is_refused(root):
    os.mkfifo(root / "conf.toml")
    for given in ["conf.toml", "/dev/zero"]:
        result = graphlint(["check", "--no-cache", "--config", given], root, timeout=60)
        assert result.returncode == 2 and f"{given}: not a regular file".encode() in result.stderr, result.stderr


def test_unreadable_pyproject_names_the_file(root):
    (root / "pyproject.toml").write_text("[tool.graphlint]\n")
    (root / "pyproject.toml").chmod(0)
    result = graphlint(["check", "--no-cache"], root, unprivileged=True)
    assert result.returncode == 2, result.stderr
    assert b"pyproject.toml: cannot read config file: Permission denied" in result.stderr


def test_named_files_with_entry_points_in_a_file_not_named(root):
    """The pre-commit hook names only the staged files; the entry point lies in another one.
    Regions come from the configured package, findings only for the named files."""
    (root / "pyproject.toml").write_text('[tool.graphlint]\nentry-points = ["serve:run"]\n')
    (root / "serve.py").write_text("import torch\nfrom step import decode_step\n\n\ndef run(x):\n"
                                   "    decode_step(x)\n    return x.max().item()\n")
    (root / "step.py").write_text(STEP)
    (root / "good.py").unlink()
    result = graphlint(["check", "--no-cache", "--format", "json", "step.py"], root)
    assert result.returncode == 1, result.stderr
    report = _report(result)
    assert report["static"]["files"] == ["step.py"]
    assert [(f["path"], f["rule"], f["region"]) for f in report["static"]["findings"]] == \
        [("step.py", "GL101", "captured")]


# Text view (issue item 11): terminal escape sequences never reach the terminal raw.

def test_control_characters_in_source_lines_are_escaped(root):
    source = STEP.replace("return x.max().item()", 'return x.max().item(), "\x1b[2J\x1b]0;owned\x07\u202e"')
    (root / "good.py").write_text(source)
    result = graphlint(["check", "--no-cache", "--color", "never", "good.py"], root)
    assert result.returncode == 1
    out = result.stdout.decode()
    assert "\x1b" not in out and "\x07" not in out and "\u202e" not in out
    assert '"\\x1b[2J\\x1b]0;owned\\x07\\u202e"' in out
    caret_row = out.splitlines()[[i for i, line in enumerate(out.splitlines()) if "return x.max()" in line][0] + 1]
    assert caret_row.index("^") == out.splitlines()[[i for i, line in enumerate(out.splitlines())
                                                     if "return x.max()" in line][0]].index("x.max")
