"""`graphlint audit` agrees with `check`: its `roots:` line lists every root of the run (the
`-e` ones and the discovered capture sites alike), and its exit code is check's: a captured
function with warnings only does not fail it unless --fail-on warning."""
from __future__ import annotations

import os
from pathlib import Path

from click.testing import CliRunner

from graphlint.cli import main

CAPTURE = ("import torch\n\n\n"
           "class Model(torch.nn.Module):\n"
           "    def forward(self, x: torch.Tensor):\n"
           "        return x * 2\n\n\n"
           "def extra_step(x: torch.Tensor):\n"
           "    return x + 1\n\n\n"
           "def capture(model: Model, x: torch.Tensor):\n"
           "    g = torch.cuda.CUDAGraph()\n"
           "    with torch.cuda.graph(g):\n"
           "        y = model(x)\n"
           "    return g, y\n")
WARNING_ONLY = ("import torch\n\n\n"
                "def decode_step(x: torch.Tensor):\n"
                "    buf = torch.zeros(4, device=x.device)\n"  # returned by the captured step: GL401, a warning
                "    buf.add_(x)\n"
                "    return buf\n\n\n"
                "def capture(x: torch.Tensor):\n"
                "    torch.cuda.synchronize()\n"
                "    g = torch.cuda.CUDAGraph()\n"
                "    with torch.cuda.graph(g):\n"
                "        decode_step(x)\n")


def run(root: Path, args: list[str]):
    old = os.getcwd()
    os.chdir(root)
    try:
        return CliRunner().invoke(main, [*args, "--no-cache"])
    finally:
        os.chdir(old)


def project(tmp_path: Path, source: str) -> Path:
    (tmp_path / "pyproject.toml").write_text("[tool.graphlint]\n")
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "step.py").write_text(source)
    return tmp_path


def test_roots_line_lists_every_root_with_an_entry_point(tmp_path):
    root = project(tmp_path, CAPTURE)
    discovered = run(root, ["audit", "pkg"])
    assert "roots: Model.forward" in discovered.stdout, discovered.stdout
    both = run(root, ["audit", "pkg", "-e", "pkg.step:extra_step"])
    roots = both.stdout.splitlines()[0]
    assert roots.startswith("roots: ") and {"extra_step", "Model.forward"} <= set(roots[7:].split(", ")), roots


def test_warning_only_function_passes_audit_as_it_passes_check(tmp_path):
    root = project(tmp_path, WARNING_ONLY)
    check = run(root, ["check", "pkg"])
    audit = run(root, ["audit", "pkg"])
    assert "GL401" in check.stdout and check.exit_code == 0, check.stdout
    assert audit.exit_code == check.exit_code == 0, audit.stdout
    assert "allocates" in audit.stdout and "warnings only" in audit.stdout
    strict_check = run(root, ["check", "pkg", "--fail-on", "warning"])
    strict_audit = run(root, ["audit", "pkg", "--fail-on", "warning"])
    assert strict_audit.exit_code == strict_check.exit_code == 1, strict_audit.stdout
    assert "FAIL" in strict_audit.stdout


def test_an_error_still_fails_the_audit(tmp_path):
    root = project(tmp_path, WARNING_ONLY.replace("return buf\n", "return buf.max().item()\n"))
    assert run(root, ["check", "pkg"]).exit_code == run(root, ["audit", "pkg"]).exit_code == 1
