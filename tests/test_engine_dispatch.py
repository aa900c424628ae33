"""How engines reach the code they run, zero-config, beyond a plain `self.layer(x)`: layers
written as plain classes in a project with no capture site, a method looked up by a name the
call sites pass as a literal, `super(Base, layer).__call__` skipping a project's `__call__`
override, a setter only another library calls, and a captured block that also calls what a
library's context manager yields."""
from __future__ import annotations

import textwrap
from pathlib import Path

from graphlint.callgraph.values import Project
from graphlint.config import Config
from graphlint.engine import Cache, analyse_all, collect_tasks
from project_checks import check_project, found_in, marked_line

PLAIN_MODEL = '''
import torch


class Attention:
    def __init__(self, dim):
        self.dim = dim

    def forward(self, x):
        if x.max().item() > 0:  # MARK-attn
            x = x * 2
        return x


class Model:
    def __init__(self, dim):
        self.layers = [Attention(dim) for _ in range(4)]

    def forward(self, x):
        for layer in self.layers:
            x = layer.forward(x)
        return x
'''

LOADER = '''
import torch


def load(path):
    state = torch.load(path)
    count = int(state["n"].item())
    return state, count


class Converter:
    def convert(self, t):
        return t.nonzero()
'''


def test_plain_class_layers_without_a_capture_site_are_checked_from_the_top_forward(tmp_path):
    # No capture site and no nn.Module: the model's forward (and the layers it holds) is the
    # step; the loader's and converter's host code is not.
    result = check_project(tmp_path, {"model.py": PLAIN_MODEL, "loader.py": LOADER})
    assert found_in(result, "model.py") == {("GL101", marked_line(PLAIN_MODEL, "MARK-attn"))}
    assert found_in(result, "loader.py") == set()


def _by_name_runner(helper: str, call: str) -> str:
    return f'''
import torch
from torch import nn


class Block(nn.Module):
    def forward(self, x):
        return x * x.sum().item()  # MARK-forward

    def profile(self, x):
        return x.nonzero()


{helper}


class Runner:
    def __init__(self):
        self.block = Block()

    def capture(self, x):
        {call}
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            self.out = {call}
        return g
'''


def test_a_method_looked_up_by_a_name_every_call_passes_as_a_literal_is_that_method(tmp_path):
    # `getattr(obj, name)` with the name a literal at each call site: `forward`, not every method.
    runner = _by_name_runner("def call_method(obj, name, *args):\n    return getattr(obj, name)(*args)",
                             'call_method(self.block, "forward", x)')
    result = check_project(tmp_path, {"runner.py": runner})
    assert found_in(result, "runner.py") == {("GL101", marked_line(runner, "MARK-forward"))}


def test_a_method_name_from_a_literal_default_is_that_method(tmp_path):
    runner = _by_name_runner("def call_method(obj, x, name: str = \"forward\"):\n    return getattr(obj, name)(x)",
                             "call_method(self.block, x)")
    result = check_project(tmp_path, {"runner.py": runner})
    assert found_in(result, "runner.py") == {("GL101", marked_line(runner, "MARK-forward"))}


def test_a_name_chosen_at_run_time_still_reaches_every_method(tmp_path):
    runner = _by_name_runner("def call_method(obj, name, x):\n    return getattr(obj, name)(x)",
                             "call_method(self.block, self.mode, x)")
    result = check_project(tmp_path, {"runner.py": runner})
    assert {rule for rule, _ in found_in(result, "runner.py")} >= {"GL101", "GL301"}


SUPER_CALL = '''
import torch
from torch import nn


class Wrapped(nn.Module):
    def __call__(self, *args):
        return self.manager(self, args)


class Layer(Wrapped):
    def forward(self, x):
        return x * x.sum().item()  # MARK-forward


def eager_call(layer, x):
    return super(Wrapped, layer).__call__(x)


class Runner:
    def __init__(self):
        self.layer = Layer()

    def capture(self, x):
        eager_call(self.layer, x)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            self.out = eager_call(self.layer, x)
        return g
'''


def test_super_of_a_named_instance_calls_nn_module_call_which_runs_its_forward(tmp_path):
    # `super(Wrapped, layer).__call__(x)` skips Wrapped's override: nn.Module's __call__ runs
    # the layer's forward.
    result = check_project(tmp_path, {"runner.py": SUPER_CALL})
    assert found_in(result, "runner.py") == {("GL101", marked_line(SUPER_CALL, "MARK-forward"))}


SETTER = '''
from torch import nn


class Embed(nn.Module):
    def forward(self, ids):
        return ids


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed_tokens = Embed()
        self.norm = None

    def set_input_embeddings(self, value):
        self.embed_tokens = value

    def set_norm(self, value):
        self.norm = value
'''


def _attribute(tmp_path: Path, files: dict[str, str], cls: str, attr: str) -> set:
    for name, text in files.items():
        (tmp_path / name).write_text(textwrap.dedent(text))
    config = Config(root=tmp_path)
    project = Project(analyse_all(collect_tasks([tmp_path], config), 1, Cache(None)), tmp_path)
    key = next(k for k in project.classes if k[1] == cls)
    return project.member(key, attr, key)


def test_a_setter_no_linted_code_calls_says_nothing_of_what_the_constructor_assigned(tmp_path):
    # HF's `set_input_embeddings(self, value)`, which only another library calls: the
    # constructor's Embed is what the model holds.
    assert {v[0] for v in _attribute(tmp_path, {"model.py": SETTER}, "Model", "embed_tokens")} == {"inst"}


def test_a_setter_is_what_an_attribute_holds_when_nothing_else_assigns_it(tmp_path):
    # `self.norm = None` is a constant and not recorded: the setter's parameter is all there is.
    values = _attribute(tmp_path, {"model.py": SETTER}, "Model", "norm")
    assert values and all(v[0] == "dyn" for v in values)


def test_a_setter_some_linted_code_calls_adds_what_it_passes(tmp_path):
    caller = "from model import Model, Embed\n\n\nclass Other(Embed):\n    pass\n\n\n" \
             "def swapped():\n    model = Model()\n    model.set_input_embeddings(Other())\n    return model\n"
    values = _attribute(tmp_path, {"model.py": SETTER, "swap.py": caller}, "Model", "embed_tokens")
    assert {v[1][1] for v in values if v[0] == "inst"} == {"Embed", "Other"}


LIBRARY_CONTEXT = '''
import torch
from torch import nn
from commlib import comm_context


class Layer(nn.Module):
    def forward(self, x):
        return x * 2


def capture(layer, x):
    layer(x)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph), comm_context() as comms:
        comms.barrier()
        out = layer(x)
    return graph, out


def build(x):
    return capture(Layer(), x)
'''


def test_a_call_on_what_a_library_context_yields_inside_the_captured_block_is_no_lost_model(tmp_path):
    # `comms.barrier()` on what another library's context manager yields is not a model
    # another library built: no GL905 saying so.
    result = check_project(tmp_path, {"runner.py": LIBRARY_CONTEXT})
    assert not [f for f in result.findings if f.rule == "GL905"]


ACCELERATOR = '''
import torch
from torch import nn
from accel import get_accelerator


class Layer(nn.Module):
    def forward(self, x):
        return x * x.sum().item()  # MARK-forward


class Engine(nn.Module):
    def __init__(self):
        super().__init__()
        self.layer = Layer()
        self._graphs = None

    def _create_graph(self, x):
        self.static_x = x.clone()
        for _ in range(3):
            self.layer(self.static_x)
        self._graphs = get_accelerator().create_graph()
        with get_accelerator().capture_to_graph(self._graphs):
            self.static_out = self.layer(self.static_x)

    def _replay(self, x):
        self.static_x.copy_(x)
        get_accelerator().replay_graph(self._graphs)
        return self.static_out

    def forward(self, x):
        if int(x.max().item()) > 8:  # MARK-host: the engine's host code, around the replay
            return self.layer(x)
        if self._graphs is None:
            self._create_graph(x)
        return self._replay(x)
'''


def test_an_accelerator_layer_s_capture_context_and_replay_are_a_capture_site_and_a_replay(tmp_path):
    # `capture_to_graph(graph)` wraps torch.cuda.graph: its block is captured, and the engine's
    # forward, which captures and replays through its own methods, is host code.
    result = check_project(tmp_path, {"engine.py": ACCELERATOR})
    assert found_in(result, "engine.py") == {("GL101", marked_line(ACCELERATOR, "MARK-forward"))}


FULLGRAPH = '''
import torch
from torch import nn


class Decoder(nn.Module):
    def forward(self, x, start_pos: int):
        if x.sum().item() > 0:  # MARK-sync: a graph break, an error under fullgraph=True
            x = x * 2
        return x[:, start_pos:start_pos + 1]  # a Python position: guarded, not frozen


class Runner:
    def __init__(self, compile: bool):
        self.model = Decoder()
        self.step = self.decode_one_token
        if compile:
            self.step = torch.compile(self.decode_one_token, mode="default", fullgraph=True)

    def decode_one_token(self, x, start_pos: int):
        return self.model(x, start_pos)
'''


def test_a_fullgraph_compile_is_a_site_whose_region_keeps_the_graph_break_rules_only(tmp_path):
    # torch.compile(fullgraph=True) without CUDA graphs: a sync breaks the graph (an error), but
    # a per-step Python position is guarded, not frozen, and nothing is replayed.
    result = check_project(tmp_path, {"decode.py": FULLGRAPH})
    assert found_in(result, "decode.py") == {("GL101", marked_line(FULLGRAPH, "MARK-sync"))}
    [finding] = result.findings
    assert finding.region == "eager" and "fullgraph=True" in finding.region_reason
