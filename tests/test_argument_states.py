"""What a capture passes reaches its region: a parameter that every call in the captured step
leaves None (or always passes) makes the arms of its None tests dead there, and findings in a
dead arm are not per-step. Anything the graph cannot see (a call it did not follow, a compiled
callable's callers, a `**kwargs` of unknown keys, a parameter the body rebinds) keeps them."""
from __future__ import annotations

import textwrap
from pathlib import Path

from graphlint.config import Config
from graphlint.engine import check
import libcst as cst

from graphlint.analysis import arm_guards

MODEL = '''
import torch
from torch import nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.inner = Inner()

    def forward(self, ids, attention_mask=None, embeds=None, **kwargs):
        return self.inner(ids, attention_mask=attention_mask, embeds=embeds, **kwargs)


class Inner(nn.Module):
    def forward(self, ids, attention_mask=None, embeds=None, scale=None):
        if scale is not None:
            print(scale.item())
        if attention_mask is not None and attention_mask.sum().item() > 0:
            ids = ids + 1
        return self._mask(attention_mask, ids)

    def _mask(self, mask, x):
        if mask is None:
            return x
        return x * mask.sum().item()
'''

RUNNER = '''
import torch
from model import Model


class Runner:
    def capture(self, model, ids, **kwargs):
        g = torch.cuda.CUDAGraph()
        for _ in range(3):
            model(ids, {args}**kwargs)
        with torch.cuda.graph(g):
            self.out = model(ids, {args}**kwargs)
        self.g = g

    def run(self):
        self.g.replay()


def main():
    r = Runner()
    m = Model().cuda()
    r.capture(m, torch.zeros(1), {kwargs})
'''


def _lines(tmp_path: Path, runner_args: str = "", runner_kwargs: str = "scale=torch.ones(1)",
           model: str = MODEL) -> set[tuple[str, int]]:
    (tmp_path / "model.py").write_text(textwrap.dedent(model))
    (tmp_path / "runner.py").write_text(RUNNER.format(args=runner_args, kwargs=runner_kwargs))
    (tmp_path / "graphlint.toml").write_text("")
    found = check([tmp_path], Config(root=tmp_path), jobs=1).findings
    return {(f.rule, f.line) for f in found if f.path.endswith("model.py")}


def test_an_argument_the_capture_leaves_to_its_none_default_makes_its_arms_dead(tmp_path):
    found = _lines(tmp_path)
    # `scale` arrives through the runner's **kwargs (its caller passes scale=...): kept.
    assert ("GL101", 18) in found
    # `attention_mask` is never passed: None in Model.forward, passed on to Inner.forward and
    # positionally to `_mask`, whose `.item()` after `if mask is None: return` is dead, and so is
    # the membership test behind `attention_mask is not None and`.
    assert ("GL101", 26) not in found
    assert not any(line == 19 for _, line in found)


def test_a_capture_that_passes_the_argument_keeps_its_arms(tmp_path):
    found = _lines(tmp_path, runner_args="attention_mask=ids, ")
    assert ("GL101", 26) in found and ("GL101", 19) in found


def test_a_caller_that_does_not_say_keeps_the_arms(tmp_path):
    # The runner's caller spreads a dict of its own: the keys are not known.
    found = _lines(tmp_path, runner_kwargs="**options")
    assert ("GL101", 18) in found and ("GL101", 26) in found


def test_one_call_that_passes_it_among_many_that_do_not_keeps_the_arm(tmp_path):
    model = MODEL.replace("        return self._mask(attention_mask, ids)",
                          "        self._mask(ids, ids)\n        return self._mask(attention_mask, ids)")
    found = _lines(tmp_path, model=model)
    assert ("GL101", 27) in found


def test_a_parameter_the_function_rebinds_keeps_its_arms(tmp_path):
    model = MODEL.replace("        if mask is None:\n            return x",
                          "        mask = mask if mask is not None else x\n        if mask is None:\n            return x")
    found = _lines(tmp_path, model=model)
    assert ("GL101", 27) in found


def test_a_compiled_callable_knows_nothing_of_its_arguments(tmp_path):
    (tmp_path / "model.py").write_text(textwrap.dedent(MODEL))
    (tmp_path / "runner.py").write_text(textwrap.dedent('''
        import torch
        from model import Model

        def build():
            return torch.compile(Model().cuda(), mode="reduce-overhead")
    '''))
    (tmp_path / "graphlint.toml").write_text("")
    found = {(f.rule, f.line) for f in check([tmp_path], Config(root=tmp_path), jobs=1).findings}
    assert ("GL101", 26) in found


def parse_expression_guards(text: str):
    return arm_guards.arm_guards(cst.parse_expression(text))


def test_none_tests_say_what_holds_in_each_arm():
    assert parse_expression_guards("x is None") == ((("x", "N"),), (("x", "V"),))
    assert parse_expression_guards("not x is not None") == ((("x", "N"),), (("x", "V"),))
    assert parse_expression_guards("x is not None and y is None") == ((("x", "V"), ("y", "N")), ())
    assert parse_expression_guards("x is None or y is None") == ((), (("x", "V"), ("y", "V")))
    # An attribute or a comparison with anything but a literal says nothing; a truth test is a
    # flag (tests/test_literal_arguments.py), not a None test.
    assert parse_expression_guards("self.x is None") == ((), ())
    assert parse_expression_guards("x") == ((("x", "t"),), (("x", "f"),))
    assert parse_expression_guards("x == y") == ((), ())
    assert parse_expression_guards("x == None") == ((), ())


GENERATOR = '''
import torch


class Generator:
    def __init__(self, model, compile: bool):
        self.model = model
        if compile:
            if self.model.config.model_type == "vision":
                self.model.compile()
            else:
                self.decode_one_token = torch.compile(self.decode_one_token, mode="reduce-overhead")

    def decode_one_token(self, model, x, pos):
        if model.config.model_type == "vision":
            mask = pos.item()
            return model(x, mask=mask)
        if model.config.{flag}:
            print(x.sum().item())
        return model(x)

    def generate(self, x, pos, steps: int):
        for _ in range(steps):
            x = self.decode_one_token(self.model, x, pos)
        return x
'''


def _generator_lines(tmp_path: Path, flag: str = "verbose", extra: str = "") -> set[tuple[str, int]]:
    (tmp_path / "gen.py").write_text(GENERATOR.format(flag=flag) + extra)
    (tmp_path / "graphlint.toml").write_text("")
    return {(f.rule, f.line) for f in check([tmp_path], Config(root=tmp_path), jobs=1).findings}


def test_a_capture_made_only_under_a_configuration_test_makes_the_other_arm_dead(tmp_path):
    found = _generator_lines(tmp_path)
    # The vision arm of the compiled step never runs compiled: the compile is in the `else`.
    assert ("GL101", 16) not in found
    # A configuration test the capture site does not sit under says nothing.
    assert ("GL101", 19) in found


def test_a_second_capture_site_without_the_test_keeps_the_arm(tmp_path):
    extra = '''

def also(gen):
    gen.decode_one_token = torch.compile(gen.decode_one_token, mode="reduce-overhead")
'''
    found = _generator_lines(tmp_path, extra=extra.replace("gen.decode_one_token = torch.compile(gen.decode_one_token",
                                                           "gen.step = torch.compile(Generator.decode_one_token"))
    assert ("GL101", 16) in found


def test_configuration_tests_are_keyed_by_the_last_two_attributes():
    def guards(text):
        return arm_guards.condition_guards(cst.parse_expression(text))
    assert guards("self.model.config.model_type == ModelType.Flamingo") == guards(
        "model.config.model_type == ModelType.Flamingo")
    assert guards("self.config.model_type != 'a'") == ((("cond:config.model_type == 'a'", "F"),),
                                                       (("cond:config.model_type == 'a'", "T"),))
    assert guards("not args.compile") == ((("cond:args.compile", "F"),), (("cond:args.compile", "T"),))
    # A plain name, `self.flag` (one attribute) or a comparison with a computed value is no key.
    assert guards("compile") == ((), ()) and guards("self.compile") == ((), ())
    assert guards("x.shape[0] == n") == ((), ())


BLIND_RUNNER = '''
import importlib

import torch


def load_model(name):
    return getattr(importlib.import_module(name), "Model")()


class Runner:
    def __init__(self, name):
        self.model = load_model(name)

    def capture(self, ids, positions):
        g = torch.cuda.CUDAGraph()
        for _ in range(3):
            self.model(ids, positions)
        with torch.cuda.graph(g):
            self.out = self.model(ids, positions)
        self.g = g

    def run(self):
        self.g.replay()
'''

LOADED_MODEL = '''
import torch
from torch import nn


class Loaded(nn.Module):
    def forward(self, ids, positions, inputs_embeds=None):
        if inputs_embeds is not None:
            print(inputs_embeds.sum().item())
            hidden = inputs_embeds
        else:
            hidden = ids.float()
        return hidden * positions


class Other(nn.Module):
    def forward(self, pixel_batch, inputs_embeds=None, *, scale):
        if inputs_embeds is not None:
            print(inputs_embeds.sum().item())
        return pixel_batch * scale


class Defaulted(nn.Module):
    def forward(self, ids, positions, inputs_embeds=None):
        if inputs_embeds is None:
            inputs_embeds = ids.float()
            print(inputs_embeds.max().item())
        if inputs_embeds is not None:
            print(inputs_embeds.min().item())
        return inputs_embeds * positions
'''


def test_a_forward_taken_as_a_root_is_bound_to_the_capture_call_it_accepts(tmp_path):
    # The captured callee comes from a registry: every module forward is a root. Each takes
    # what the capture's own call passes where that call fits its signature.
    (tmp_path / "runner.py").write_text(BLIND_RUNNER)
    (tmp_path / "loaded.py").write_text(LOADED_MODEL)
    (tmp_path / "graphlint.toml").write_text("")
    found = {(f.rule, f.line) for f in check([tmp_path], Config(root=tmp_path), jobs=1).findings
             if f.path.endswith("loaded.py")}
    assert ("GL101", 9) not in found  # `inputs_embeds` is left out by the capture: None
    assert ("GL101", 19) in found  # Other.forward cannot take `(ids, positions)`: nothing known
    # A test before the function rebinds the parameter holds; one after it says nothing.
    assert ("GL101", 27) in found and ("GL101", 29) in found


COMPILED_STEP = '''
import torch

RAS_TEMP = 1.0


def logits_to_probs(logits, top_k: torch.Tensor):
    mask = logits > 0
    mask[top_k:] = True
    mask[0] = False
    return logits.masked_fill(mask, 0.0)


def sample(logits, top_k: int):
    temp = torch.tensor(RAS_TEMP, device=logits.device)
    return logits_to_probs(logits / temp, top_k=top_k)


def init(compile: bool):
    step = sample
    if compile:
        step = torch.compile(step, mode="reduce-overhead" if torch.cuda.is_available() else None, fullgraph=True)
    return step
'''


def test_a_compiled_step_traces_host_constants_and_trusts_its_callers_over_an_annotation(tmp_path):
    (tmp_path / "step.py").write_text(COMPILED_STEP)
    (tmp_path / "graphlint.toml").write_text("")
    found = check([tmp_path], Config(root=tmp_path), jobs=1).findings
    # The capture is found through a conditional mode; only Inductor captures, so the literal's
    # tensor and the element write are traced into the graph (no copy), and `top_k` is the int
    # every caller passes, whatever its annotation says (no device slice bound).
    assert [(f.rule, f.line) for f in found] == []


def test_the_same_step_under_stream_capture_keeps_the_copies(tmp_path):
    code = COMPILED_STEP.replace(
        '''        step = torch.compile(step, mode="reduce-overhead" if torch.cuda.is_available() else None, fullgraph=True)
    return step''', '''        g = torch.cuda.CUDAGraph()
        x = torch.zeros(8, device="cuda")
        for _ in range(3):
            step(x, 4)
        with torch.cuda.graph(g):
            out = step(x, 4)
        return g, out
    return step''')
    (tmp_path / "step.py").write_text(code)
    (tmp_path / "graphlint.toml").write_text("")
    found = {(f.rule, f.line) for f in check([tmp_path], Config(root=tmp_path), jobs=1).findings}
    assert ("GL402", 15) in found and ("GL404", 10) in found
    assert not any(rule == "GL202" for rule, _ in found)


ENGINE_WITH_LOADER = '''
import torch
from eng import llama  # registers the model classes
from eng.loader import ModelLoader


class Engine:
    def __init__(self, config):
        self.model = ModelLoader(config).load()

    def model_forward(self, input_ids, positions, metadata):
        return self.model.forward(input_ids=input_ids, positions=positions, metadata=metadata)

    def capture(self, input_ids, positions, metadata):
        g = torch.cuda.CUDAGraph()
        for _ in range(2):
            self.model_forward(input_ids, positions, metadata)
        with torch.cuda.graph(g):
            self.out = self.model_forward(input_ids, positions, metadata)
        self.g = g

    def replay(self):
        self.g.replay()
'''

REGISTERED_MODEL = '''
import torch
from torch import nn

MODELS = {}


def register(cls):
    MODELS[cls.__name__] = cls
    return cls


class Norm(nn.Module):
    def forward(self, x):
        return x * 2


class Gate(nn.Module):
    def forward(self, x):
        return x


class Up(nn.Module):
    def forward(self, x):
        return x


class Down(nn.Module):
    def forward(self, x):
        return x


@register
class Llama(nn.Module):
    def __init__(self):
        super().__init__()
        self.norm = Norm()
        self.gate, self.up, self.down = Gate(), Up(), Down()

    def forward(self, input_ids, positions, metadata, inputs_embeds=None):
        if metadata.num_contexts > 0:
            print(input_ids.max().item())  # the context (prefill) arm: eager
        if inputs_embeds is not None:
            print(inputs_embeds.sum().item())  # never passed by the engine
        hidden = self.norm(input_ids.float())
        return hidden + positions.sum().item()
'''


def test_a_model_a_loader_builds_is_checked_through_every_forward_in_its_place(tmp_path):
    # The engine calls `self.model.forward(...)` on what a loader outside the lint returns: every
    # top-level module forward stands in for it, bound to the engine's call. The loader's own
    # module is not linted (eng/loader.py is absent).
    (tmp_path / "eng").mkdir()
    (tmp_path / "eng" / "__init__.py").write_text("")
    (tmp_path / "eng" / "engine.py").write_text(ENGINE_WITH_LOADER)
    (tmp_path / "eng" / "llama.py").write_text(REGISTERED_MODEL)
    (tmp_path / "graphlint.toml").write_text("")
    found = check([tmp_path], Config(root=tmp_path), jobs=1).findings
    lines = {(f.rule, f.line) for f in found if f.path.endswith("llama.py")}
    assert lines == {("GL101", 46)}
    site = [f for f in found if f.rule == "GL905"]
    assert len(site) == 1 and "checked in place of `self.model.forward`" in site[0].message
