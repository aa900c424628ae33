"""Literals a capture passes reach its region, and so do the values a call leaves to a default.

`model(ids, spec=True)` inside `torch.cuda.graph` makes the `else:` of `if spec:` in the model
dead there, `top_k=-1` makes `if top_k > 0:` dead, and an arm commented `# prefill` is the
eager prefill. A parameter defaulting to a name (`backbone_cls=DEFAULT_BACKBONE`) runs that
name when a call leaves it out, `cls(...)` in a classmethod builds the class, and
`Model.from_pretrained(...)` is a Model. A call of an attribute of the project's own object
whose value cannot be followed is said, not dropped."""
from __future__ import annotations

from pathlib import Path

import libcst as cst

from graphlint.analysis import arm_guards
from graphlint.analysis.argument_records import value_state

from project_checks import check_project, marked_line

MODEL = '''
import torch
from torch import nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.inner = Inner()

    def forward(self, ids, spec=False, top_k=0):
        return self.inner(ids, spec=spec, top_k=top_k)


class Inner(nn.Module):
    def forward(self, ids, spec=False, top_k=0):
        if spec:
            ids = ids + 1
        else:
            print(ids.sum().item())  # MARK-else
        if top_k > 0:
            print(ids.max().item())  # MARK-topk
        return ids
'''

RUNNER = '''
import torch
from model import Model


class Runner:
    def capture(self, model, ids):
        g = torch.cuda.CUDAGraph()
        for _ in range(3):
            model(ids, {args})
        with torch.cuda.graph(g):
            self.out = model(ids, {args})
        self.g = g

    def run(self):
        self.g.replay()


def main():
    r = Runner()
    r.capture(Model().cuda(), torch.zeros(1))
'''




def _model_lines(tmp_path: Path, args: str, model: str = MODEL) -> set[int]:
    result = check_project(tmp_path, {"model.py": model, "runner.py": RUNNER.format(args=args)})
    return {f.line for f in result.findings if f.path.endswith("model.py") and f.rule == "GL101"}


def test_a_literal_flag_the_capture_passes_makes_the_other_arm_dead(tmp_path):
    found = _model_lines(tmp_path, "spec=True")
    assert marked_line(MODEL, "MARK-else") not in found


def test_a_literal_number_the_capture_passes_makes_a_comparison_dead(tmp_path):
    found = _model_lines(tmp_path, "spec=True, top_k=-1")
    assert marked_line(MODEL, "MARK-topk") not in found


def test_the_arms_a_literal_takes_are_kept(tmp_path):
    found = _model_lines(tmp_path, "spec=False, top_k=5")
    assert {marked_line(MODEL, "MARK-else"), marked_line(MODEL, "MARK-topk")} <= found


def test_a_value_not_known_keeps_both_arms(tmp_path):
    found = _model_lines(tmp_path, "spec=ids.numel() > 0, top_k=ids.numel()")
    assert {marked_line(MODEL, "MARK-else"), marked_line(MODEL, "MARK-topk")} <= found


def test_two_calls_with_different_literals_keep_both_arms(tmp_path):
    model = MODEL.replace("        return self.inner(ids, spec=spec, top_k=top_k)",
                          "        self.inner(ids, spec=False)\n        return self.inner(ids, spec=spec, top_k=top_k)")
    found = _model_lines(tmp_path, "spec=True", model=model)
    assert marked_line(model, "MARK-else") in found


def test_a_rebound_flag_keeps_its_arms(tmp_path):
    model = MODEL.replace("        if spec:\n", "        spec = ids.numel() > 1\n        if spec:\n")
    found = _model_lines(tmp_path, "spec=True", model=model)
    assert marked_line(model, "MARK-else") in found


def test_flags_and_literal_comparisons_say_what_holds_in_each_arm():
    def guards(text: str):
        return arm_guards.arm_guards(cst.parse_expression(text))

    assert guards("spec") == ((("spec", "t"),), (("spec", "f"),))
    assert guards("not spec") == ((("spec", "f"),), (("spec", "t"),))
    assert guards("top_k > 0") == ((("top_k", "c> L0"),), (("top_k", "n> L0"),))
    assert guards("mode == 'decode'") == ((("mode", "c== L'decode'"),), (("mode", "n== L'decode'"),))
    assert guards("True") == ((), ()) and guards("x.y > 0") == ((), ())


def test_literal_states_contradict_only_the_arms_they_never_take():
    state = lambda text: value_state(cst.parse_expression(text))  # noqa: E731
    assert state("True") == "LTrue" and state("-1") == "L-1" and state('"a"') == "L'a'" and state("0x10") == "L16"
    contradicts = arm_guards.contradicts
    assert contradicts("f", "LTrue") and not contradicts("t", "LTrue")
    assert contradicts("t", "L0") and contradicts("t", "N") and not contradicts("f", "N")
    assert contradicts("c> L0", "L-1") and not contradicts("n> L0", "L-1")
    assert not contradicts("c> L0", "V") and not contradicts("t", "V")  # never None, value unknown
    assert not contradicts("c> L0", "N")  # `None > 0` is no comparison Python makes
    assert contradicts("N", "LTrue") and not contradicts("V", "LTrue")


# The capture every runner below makes: a warm-up call, then `self.step` inside the graph.
CAPTURE = '''
    def capture(self, x):
        g = torch.cuda.CUDAGraph()
        self.step(x)
        with torch.cuda.graph(g):
            self.out = self.step(x)
        self.g = g
'''

STEP = '''
import torch


class Runner:
    def step(self, ids):
        if ids.shape[-1] > 64:  # {comment}
            print(ids.sum().item())  # MARK-prefill
            self.helper(ids)
        else:  # decoding
            ids = ids + 1
        return ids

    def helper(self, ids):
        return ids.max().item()  # MARK-helper
''' + CAPTURE


def test_an_arm_commented_prefill_is_not_in_the_graph(tmp_path):
    result = check_project(tmp_path, {"runner.py": STEP.format(comment="prefill")})
    lines = {f.line for f in result.findings if f.rule == "GL101"}
    assert not lines & {marked_line(STEP, "MARK-prefill"), marked_line(STEP, "MARK-helper")}


def test_prefill_as_a_verb_keeps_the_arm(tmp_path):
    result = check_project(tmp_path, {"runner.py": STEP.format(comment="prefill the cache for the step")})
    lines = {f.line for f in result.findings if f.rule == "GL101"}
    assert {marked_line(STEP, "MARK-prefill"), marked_line(STEP, "MARK-helper")} <= lines


BACKBONES = '''
import torch
from torch import nn


class SlowBackbone(nn.Module):
    def forward(self, x):
        return x * x.sum().item()  # MARK-slow


class FastBackbone(nn.Module):
    def forward(self, x):
        return x * x.max().item()  # MARK-fast


BACKBONES = {"slow": SlowBackbone}
BACKBONES["fast"] = FastBackbone
DEFAULT_BACKBONE = SlowBackbone
'''

HOLDER = '''
import torch
from torch import nn
from backbones import BACKBONES, DEFAULT_BACKBONE


class Holder(nn.Module):
    def __init__(self, backbone_cls=DEFAULT_BACKBONE):
        super().__init__()
        self.backbone = backbone_cls()

    @classmethod
    def build(cls, name):
        return cls(BACKBONES[name])

    def step(self, x):
        return self.backbone(x)
''' + CAPTURE

# An engine given its model one way or another ({params}, {init}) and built by `main` ({build}).
ENGINE = '''
import torch
from {module} import {model}


class Engine:
    def __init__(self, {params}):
        {init}

    def step(self, x):
        return self.model(x)
''' + CAPTURE + '''

def main():
    engine = {build}
    engine.capture(torch.zeros(1))
'''


def test_a_default_and_a_classmethod_constructor_say_what_an_attribute_holds(tmp_path):
    result = check_project(tmp_path, {"backbones.py": BACKBONES, "holder.py": HOLDER})
    lines = {f.line for f in result.findings if f.path.endswith("backbones.py") and f.rule == "GL101"}
    assert {marked_line(BACKBONES, "MARK-slow"), marked_line(BACKBONES, "MARK-fast")} <= lines


def test_only_the_default_is_run_when_no_call_passes_one(tmp_path):
    holder = HOLDER.replace("        return cls(BACKBONES[name])", "        return cls()")
    result = check_project(tmp_path, {"backbones.py": BACKBONES, "holder.py": holder})
    lines = {f.line for f in result.findings if f.path.endswith("backbones.py") and f.rule == "GL101"}
    assert marked_line(BACKBONES, "MARK-slow") in lines and marked_line(BACKBONES, "MARK-fast") not in lines


def test_a_called_attribute_of_unknown_value_is_listed_not_dropped(tmp_path):
    holder = HOLDER.replace("    def __init__(self, backbone_cls=DEFAULT_BACKBONE):", "    def __init__(self, factory):")
    holder = holder.replace("        self.backbone = backbone_cls()", "        self.backbone = factory()")
    holder = holder.replace("        return cls(BACKBONES[name])", "        return None")
    result = check_project(tmp_path, {"backbones.py": BACKBONES, "holder.py": holder})
    assert [u["call"] for u in result.unresolved_calls] == ["self.backbone"], result.unresolved_calls
    assert any(f.rule == "GL905" for f in result.findings)


def test_from_pretrained_of_a_linted_model_is_that_model(tmp_path):
    model = '''
        import torch
        from transformers import PreTrainedModel


        class Model(PreTrainedModel):
            def forward(self, x):
                return x * x.sum().item()  # MARK-model
    '''
    engine = ENGINE.format(module="model", model="Model", params="path",
                           init="self.model = Model.from_pretrained(path).eval()", build='Engine("path")')
    result = check_project(tmp_path, {"model.py": model, "engine.py": engine})
    found = [f for f in result.findings if f.path.endswith("model.py") and f.rule == "GL101"]
    assert found and found[0].line == marked_line(model, "MARK-model")
    # Reached through the engine's capture, not as a forward taken as a root for want of one.
    assert "Engine.step" in found[0].reached_via


PRUNED = MODEL.replace("            print(ids.sum().item())  # MARK-else",
                       "            self._eager(ids)") + '''
    def _eager(self, ids):
        return ids.sum().item()  # MARK-helper
'''


def test_a_call_in_a_dead_arm_is_not_followed(tmp_path):
    result = check_project(tmp_path, {"model.py": PRUNED, "runner.py": RUNNER.format(args="spec=True")})
    assert marked_line(PRUNED, "MARK-helper") not in {f.line for f in result.findings if f.path.endswith("model.py")}
    assert ("model.py", "Inner._eager") not in result.regions or result.regions[("model.py", "Inner._eager")].region != "captured"


def test_a_call_in_an_arm_the_step_takes_is_followed(tmp_path):
    result = check_project(tmp_path, {"model.py": PRUNED, "runner.py": RUNNER.format(args="spec=False")})
    assert marked_line(PRUNED, "MARK-helper") in {f.line for f in result.findings if f.path.endswith("model.py")}


def test_an_attribute_set_from_a_constructor_parameter_holds_what_its_callers_pass(tmp_path):
    engine = ENGINE.format(module="backbones", model="SlowBackbone", params="model, steps",
                           init="self.model = model\n        self.steps = steps",
                           build="Engine(SlowBackbone().cuda().eval(), 4)")
    result = check_project(tmp_path, {"backbones.py": BACKBONES, "engine.py": engine})
    found = {f.line: f for f in result.findings if f.path.endswith("backbones.py") and f.rule == "GL101"}
    assert marked_line(BACKBONES, "MARK-slow") in found and "Engine.step" in found[marked_line(BACKBONES, "MARK-slow")].reached_via
    # The model the engine is given, not every forward of the tree in its place.
    assert marked_line(BACKBONES, "MARK-fast") not in found
