"""Neovim, headless and scripted, attached to `graphlint server` as the README sets it up
(vim.lsp.config on Neovim 0.11+, vim.lsp.start_client before), gets the file's diagnostics.
Skipped where no `nvim` is installed."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("pygls")
NVIM = shutil.which("nvim")
SCRIPT = Path(__file__).parent / "data" / "neovim" / "graphlint_lsp.lua"
HAZARD = ("import torch\n\n\n"
          "def decode_step(x: torch.Tensor):\n"
          "    n = x.max().item()\n"
          "    return x * n\n")


@pytest.mark.skipif(NVIM is None, reason="nvim is not installed")
def test_headless_neovim_gets_the_diagnostics(tmp_path):
    (tmp_path / "pyproject.toml").write_text("[tool.graphlint]\n")
    (tmp_path / "step.py").write_text(HAZARD)
    out = tmp_path / "diagnostics.txt"
    graphlint = Path(sys.executable).parent / "graphlint"
    env = {**os.environ, "GRAPHLINT_BIN": str(graphlint), "GRAPHLINT_NVIM_OUT": str(out), "HOME": str(tmp_path)}
    subprocess.run([NVIM, "--headless", "-u", "NONE", "-i", "NONE", "-c", f"luafile {SCRIPT}", "step.py"],
                   cwd=tmp_path, env=env, timeout=180, check=True, stdin=subprocess.DEVNULL,
                   stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    lines = out.read_text().splitlines()
    assert any(line.startswith("5:9 GL101 ") and "item-call" in line for line in lines), lines
