"""GL401 against GL405 where the region decides: an allocation returned by the captured
callable outlives the step, one returned by an inner layer is an intermediate; GL405 is off
by default and on when selected, by code, name, prefix or ALL."""
from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from graphlint.config import Config
from graphlint.engine import check
from graphlint.engine.selectors import normalise_config
from graphlint.rules import BY_CODE

ENGINE = """
import torch
from torch import nn

class Layer(nn.Module):
    def forward(self, x: torch.Tensor):
        return torch.ones_like(x) * x            # a new tensor: the allocation is dropped

    def gate(self, x: torch.Tensor):
        return torch.zeros_like(x)               # returned to Model.forward: an intermediate

class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.layer = Layer()

    def forward(self, x: torch.Tensor):
        out = torch.empty_like(x)                # the captured callable returns it
        out.copy_(self.layer(x) + self.layer.gate(x))
        return out

class Runner:
    def __init__(self, model):
        self.model = model
        self.x = torch.zeros(4, 8, device="cuda")

    def capture(self):
        self.model(self.x)
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph):
            self.out = self.model(self.x)
"""


def _run(tmp_path: Path, select: tuple[str, ...] = ()) -> list[tuple[str, str, int]]:
    (tmp_path / "engine.py").write_text(textwrap.dedent(ENGINE))
    findings = check([tmp_path], normalise_config(Config(root=tmp_path, select=select)), jobs=1).findings
    return sorted((f.rule, f.function, f.line) for f in findings if f.rule.startswith("GL4"))


def test_a_fallback_roots_output_is_not_gl401_by_default(tmp_path):
    # The capture's callee (`self.model`) is unknown, so Model.forward is a root only as the
    # fallback: where its output goes is unknown too (the static output of the runner here).
    assert _run(tmp_path) == []


@pytest.mark.parametrize("select", [("GL405",), ("intermediate-allocation",), ("ALL",), ("GL4",)])
def test_intermediates_are_gl405_when_selected(tmp_path, select):
    found = _run(tmp_path, select)
    assert ("GL405", "Layer.forward", 7) in found and ("GL405", "Layer.gate", 10) in found
    assert ("GL405", "Model.forward", 18) in found and ("GL401", "Model.forward", 18) not in found


def test_the_resolved_captured_callables_output_is_gl401(tmp_path):
    (tmp_path / "engine.py").write_text(textwrap.dedent(ENGINE).replace(
        "    def __init__(self, model):\n        self.model = model\n",
        "    def __init__(self):\n        self.model = Model()\n"))
    findings = check([tmp_path], Config(root=tmp_path), jobs=1).findings
    assert [(f.rule, f.function, f.line) for f in findings if f.rule.startswith("GL4")] == [
        ("GL401", "Model.forward", 18)]


def test_a_returned_intermediate_says_where_it_goes(tmp_path):
    (tmp_path / "engine.py").write_text(textwrap.dedent(ENGINE))
    findings = check([tmp_path], Config(root=tmp_path, select=("GL405",)), jobs=1).findings
    gate = next(f for f in findings if f.function == "Layer.gate")
    assert "returned to `Model.forward`" in gate.message and gate.severity == "warning"


def test_the_opt_in_rule_is_off_by_default_and_says_so():
    rule = BY_CODE["GL405"]
    assert not rule.default_enabled
    assert "off by default" in rule.summary()  # what `graphlint rules` shows
    assert BY_CODE["GL401"].default_enabled


def test_a_constructor_called_in_the_step_keeps_its_tensors_on_the_new_object(tmp_path):
    """`self` of an `__init__` is the object being built: the step drops it here (GL405), a
    method that keeps a tensor on an existing object is GL401."""
    (tmp_path / "model.py").write_text(textwrap.dedent("""
        import torch
        from torch import nn

        class Scratch:
            def __init__(self, n: int, device):
                self.h = torch.zeros(n, device=device)

            def keep(self, x: torch.Tensor):
                self.last = x.clone()

        class Model(nn.Module):
            def forward(self, x: torch.Tensor):
                scratch = Scratch(x.shape[0], x.device)
                scratch.keep(x)
                return x + scratch.h
        """))
    findings = check([tmp_path], normalise_config(Config(root=tmp_path, select=("GL4",))), jobs=1).findings
    assert sorted((f.rule, f.function) for f in findings) == [("GL401", "Scratch.keep"), ("GL405", "Scratch.__init__")]
