"""Facts across functions and files: parameter kinds joined from every call site, return
kinds of callees, attributes across a class hierarchy; the rounds are cached with the files."""
from __future__ import annotations

import textwrap
from pathlib import Path

from graphlint.config import Config
from graphlint.engine import check

PACKAGE = {
    "pkg/__init__.py": "",
    "pkg/helpers.py": """
        import torch

        def pick(scores, floor):
            # No annotations: what `scores` holds is known only from the callers.
            if scores.max() > floor:
                return scores
            return scores * 0

        def width(n):
            if n > 8:
                return 8
            return n

        def last_position(positions: torch.Tensor):
            return positions[-1] + 1

        def forward_on(t):
            return pick(t, 0.5)
    """,
    "pkg/base.py": """
        import torch
        from torch import nn

        class Layer(nn.Module):
            def __init__(self):
                super().__init__()
                self.window = None

            def run(self, x: torch.Tensor):
                if self.window.sum() > 0:
                    return x
                return -x
    """,
    "pkg/step.py": """
        import torch
        from torch import nn
        from pkg.helpers import pick, width, last_position, forward_on
        from pkg.base import Layer

        class Windowed(Layer):
            def __init__(self, n: int):
                super().__init__()
                self.window = torch.zeros(n, device="cuda")

        def step(logits: torch.Tensor, cache: torch.Tensor, positions: torch.Tensor):
            a = pick(logits.softmax(-1), 0.1)
            b = forward_on(logits)
            n = width(logits.shape[-1])
            end = last_position(positions)
            sized = cache[:, :n]
            until = cache[:, :end]
            return a, b, sized, until
    """,
}


def write(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text), encoding="utf-8")


def found(root: Path, cache_dir: Path | None = None) -> set[tuple[str, int, str]]:
    result = check([root], Config(root=root), jobs=1, cache_dir=cache_dir)
    return {(f.path, f.line, f.rule) for f in result.findings}


def line_of(root: Path, rel: str, text: str) -> int:
    lines = (root / rel).read_text().splitlines()
    return next(i for i, line in enumerate(lines, 1) if text in line)


def test_call_sites_returns_and_inherited_attributes(tmp_path):
    write(tmp_path, PACKAGE)
    findings = found(tmp_path)
    # pick(): every caller passes a device tensor, directly or through forward_on().
    assert ("pkg/helpers.py", line_of(tmp_path, "pkg/helpers.py", "if scores.max() > floor"), "GL201") in findings
    # last_position() returns a device value: the slice bound in step() is a device value.
    assert ("pkg/step.py", line_of(tmp_path, "pkg/step.py", "until = cache[:, :end]"), "GL202") in findings
    # Layer.window is None in the base and a device tensor in the subclass that runs.
    assert ("pkg/base.py", line_of(tmp_path, "pkg/base.py", "if self.window.sum() > 0"), "GL201") in findings
    # width() gets a shape from its only caller: host-known, silent.
    assert not any(f[0] == "pkg/helpers.py" and f[1] == line_of(tmp_path, "pkg/helpers.py", "if n > 8") for f in findings)
    assert not any(f[0] == "pkg/step.py" and f[1] == line_of(tmp_path, "pkg/step.py", "sized = cache[:, :n]") and f[2] == "GL202"
                   for f in findings)


def test_disagreeing_call_sites_stay_unknown(tmp_path):
    files = dict(PACKAGE)
    files["pkg/other.py"] = """
        import torch
        from pkg.helpers import pick

        def host_side():
            return pick([1, 2, 3], 0)
    """
    write(tmp_path, files)
    findings = found(tmp_path)
    # One caller passes a list: `scores` is no longer known to be a device tensor.
    assert not any(f[0] == "pkg/helpers.py" and f[2] == "GL201" for f in findings)


def test_a_caller_that_is_not_parsed_makes_the_parameters_unknown(tmp_path):
    files = dict(PACKAGE)
    # No mention of torch: the file is not parsed, but it calls pick() with something.
    files["pkg/plain.py"] = """
        from pkg.helpers import pick

        def host_side(values):
            return pick(values, 0)
    """
    write(tmp_path, files)
    assert not any(f[0] == "pkg/helpers.py" and f[2] == "GL201" for f in found(tmp_path))


def test_rounds_are_cached_and_warm_runs_agree(tmp_path):
    write(tmp_path / "src", PACKAGE)
    cache = tmp_path / "cache"
    cold = check([tmp_path / "src"], Config(root=tmp_path / "src"), jobs=1, cache_dir=cache)
    warm = check([tmp_path / "src"], Config(root=tmp_path / "src"), jobs=1, cache_dir=cache)
    assert [f.__dict__ for f in cold.findings] == [f.__dict__ for f in warm.findings]
    assert warm.stats["cache_hits"] == warm.stats["files"]
    # Editing a caller so that it passes a host value changes the callee's findings.
    step = tmp_path / "src" / "pkg" / "step.py"
    step.write_text(step.read_text().replace("pick(logits.softmax(-1), 0.1)", "pick(logits.shape[0], 0.1)")
                    .replace("b = forward_on(logits)", "b = None"), encoding="utf-8")
    edited = check([tmp_path / "src"], Config(root=tmp_path / "src"), jobs=1, cache_dir=cache)
    assert not any(f.path == "pkg/helpers.py" and f.rule == "GL201" for f in edited.findings)
