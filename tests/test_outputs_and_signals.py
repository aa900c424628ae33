"""Outputs never destroy anything and a stopped run leaves nothing behind: `-o` writes through a
symbolic link, writes a device or a FIFO with a reader as a stream, refuses a linted input, a
block device and a FIFO nobody reads, respects the umask, and an unwritable target is a clear
message with exit 2. Ctrl-C exits 130 and SIGTERM 143, and neither leaves a worker process."""
from __future__ import annotations

import os
import signal
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from graphlint.cli import main

BAD = "import torch\n\ndef step(x: torch.Tensor):\n    return x.max().item()\n"


def cli(*args: str):
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


@pytest.fixture(autouse=True)
def project(tmp_path, monkeypatch) -> Path:
    monkeypatch.chdir(tmp_path)
    Path("step.py").write_text(BAD)
    return tmp_path


def check_to(output: str, *extra: str):
    return cli("check", "step.py", "--no-cache", "--format", "json", "-o", output, *extra)


def test_a_character_device_is_written_as_a_device():
    result = check_to("/dev/null")
    assert result.exit_code == 1  # the violation, not an error
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)


def test_a_full_device_is_an_error_not_a_success():
    result = check_to("/dev/full")
    assert result.exit_code == 2 and "/dev/full: cannot write the report: No space left on device" in result.stderr
    assert stat.S_ISCHR(os.stat("/dev/full").st_mode)


def test_a_symbolic_link_is_written_through():
    Path("real.json").write_text("{}")
    os.symlink("real.json", "link.json")
    assert check_to("link.json").exit_code == 1
    assert os.path.islink("link.json") and '"GL101"' in Path("real.json").read_text()


def test_a_fifo_with_a_reader_gets_the_report_and_without_one_is_refused():
    os.mkfifo("out.fifo")
    result = check_to("out.fifo")
    assert result.exit_code == 2 and "a FIFO that nobody reads" in result.stderr
    received: list[bytes] = []
    reader = threading.Thread(target=lambda: received.append(Path("out.fifo").read_bytes()))
    reader.start()
    time.sleep(0.2)
    assert check_to("out.fifo").exit_code == 1
    reader.join(10)
    assert b'"GL101"' in received[0] and stat.S_ISFIFO(os.stat("out.fifo").st_mode)


@pytest.mark.parametrize("how", ["same", "link", "folder"])
def test_a_linted_file_is_never_overwritten(how):
    output = {"same": "step.py", "link": "alias.py", "folder": "step.py"}[how]
    if how == "link":
        os.symlink("step.py", "alias.py")
    args = ["check", "." if how == "folder" else "step.py", "--no-cache", "--format", "json", "-o", output]
    result = cli(*args)
    assert result.exit_code == 2 and "refusing to overwrite a linted file" in result.stderr
    assert Path("step.py").read_text() == BAD
    result = cli("baseline", "write", "step.py", "--no-cache", "-o", output)
    assert result.exit_code == 2 and Path("step.py").read_text() == BAD


def test_a_new_report_respects_the_umask_and_a_replaced_one_keeps_its_mode():
    old = os.umask(0o027)
    try:
        check_to("new.json")
        assert stat.S_IMODE(os.stat("new.json").st_mode) == 0o640
        os.chmod("new.json", 0o604)
        check_to("new.json")
        assert stat.S_IMODE(os.stat("new.json").st_mode) == 0o604
    finally:
        os.umask(old)


def test_an_unwritable_target_is_a_clear_error():
    Path("a-file").write_text("")
    result = check_to("a-file/report.json")
    assert result.exit_code == 2 and "a-file/report.json: cannot write the report" in result.stderr
    assert "internal error" not in result.output
    result = check_to(str(Path.cwd()))
    assert result.exit_code == 2


def _group_members(pgid: int) -> list[int]:
    members = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[2]) == pgid and fields[0] != "Z":
                members.append(int(entry.name))
    return members


def _slow_tree(folder: Path) -> None:
    # Each file takes seconds to analyse (long method chains, each within the parser's budget),
    # so the run is stopped mid-way; the padding makes the tree large enough for two workers.
    for index in range(4):
        (folder / f"slow{index}.py").write_text("import torch\n\ndef step(x: torch.Tensor):\n"
                                                 + ("    x = x" + ".abs()" * 450 + "\n") * 9
                                                 + "    return x\n" + "#" * 60_000 + "\n")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
@pytest.mark.parametrize("sig, code, whole_group", [(signal.SIGINT, 130, True), (signal.SIGTERM, 143, False)])
def test_a_stopped_run_exits_with_the_signal_code_and_leaves_no_process(project, sig, code, whole_group):
    _slow_tree(project)
    process = subprocess.Popen([sys.executable, "-m", "graphlint", "check", ".", "--no-cache", "-j", "2"],
                               cwd=project, start_new_session=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 60
    while len(_group_members(process.pid)) < 3 and time.monotonic() < deadline and process.poll() is None:
        time.sleep(0.1)  # the run and its two workers
    assert len(_group_members(process.pid)) >= 3
    if whole_group:
        os.killpg(process.pid, sig)  # as a terminal's Ctrl-C does
    else:
        os.kill(process.pid, sig)  # as a CI runner's timeout does: the run alone
    _, stderr = process.communicate(timeout=30)
    assert process.returncode == code, stderr
    time.sleep(0.5)
    assert _group_members(process.pid) == []
