"""How engines build the model a capture runs, zero-config: one builder function per
architecture passing its layers to a shared model class, layers that keep a reference to the
model holding them, a capturing helper called through a local alias, and packages beside a
folder of scripts checked from outside the project."""
from __future__ import annotations

import textwrap
from pathlib import Path

from graphlint.config import Config
from graphlint.engine import check
from project_checks import check_project, found_in, marked_line

_BUILDERS = 10  # more than a function's call sites are read for when they pass unknown values


def _builders_project() -> dict[str, str]:
    layers = "\n\n".join(f'''
class Layer{k}(nn.Module):
    def forward(self, x):
        return x * {k + 1}''' for k in range(1, _BUILDERS))
    builders = "\n\n".join(f'''
def build_{k}(n):
    layers = nn.ModuleList()
    for _ in range(n):
        layers.append(Layer{k}())
    return Decoder(layers=layers)''' for k in range(_BUILDERS))
    model = f'''
import torch
from torch import nn


class Layer0(nn.Module):
    def forward(self, x):
        if x.sum().item() > 0:  # MARK-layer
            x = x * 2
        return x

{layers}


class Decoder(nn.Module):
    def __init__(self, *, layers):
        super().__init__()
        self.layers = layers

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        return x

{builders}
'''
    recipe = '''
import torch
from model import Decoder


def next_token(model: Decoder, x):
    return model(x)


class Recipe:
    def setup(self):
        self.step = torch.compile(next_token, mode="reduce-overhead")
'''
    return {"model.py": model, "recipe.py": recipe}


def test_a_model_class_every_builder_passes_its_layers_runs_all_of_them(tmp_path):
    # Ten builders call `Decoder(layers=layers)`, each with a list of its own layer class:
    # the captured `model(x)` may run any of them, as a dict of implementations would.
    files = _builders_project()
    result = check_project(tmp_path, files)
    assert found_in(result, "model.py") == {("GL101", marked_line(files["model.py"], "MARK-layer"))}
    assert not [f for f in result.findings if f.rule == "GL905"]


PLAIN_BACKREF = '''
from __future__ import annotations

import torch


class Module:
    def __init__(self, model: Model, key: str):
        self.model = model  # each layer keeps the model that holds it
        self.key = key

    def forward(self, x):
        raise NotImplementedError


class Attention(Module):
    def __init__(self, model, key):
        super().__init__(model, key)
        self.heads = 8

    def forward(self, x):
        if x.max().item() > 0:  # MARK-attn
            x = x * 2
        return x


class Model:
    def __init__(self):
        self.modules = [Attention(self, f"layers.{i}") for i in range(4)]

    def forward(self, x):
        for module in self.modules:
            x = module.forward(x)
        return x
'''

CONVERTER = '''
import torch


class Quantizer:
    def quantize(self, w):
        return w.abs().max().item()
'''


def test_a_layer_that_keeps_its_model_leaves_the_model_the_top(tmp_path):
    # Plain classes, no capture site: the layers' `self.model = model` is a back-reference,
    # so the model's forward is still the step, and the converter is not.
    result = check_project(tmp_path, {"model.py": PLAIN_BACKREF, "convert.py": CONVERTER})
    assert found_in(result, "model.py") == {("GL101", marked_line(PLAIN_BACKREF, "MARK-attn"))}
    assert found_in(result, "convert.py") == set()


TIMERS = '''
import torch


def timed_with_graph(fn, iters=10):
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        fn()
    for _ in range(iters):
        g.replay()


def timed(fn, iters=10):
    for _ in range(iters):
        fn()
'''

BENCH = '''
import torch
from timers import timed, timed_with_graph


def decode(x):
    return x * x.sum().item()  # MARK-decode


def main(graph: bool):
    x = torch.ones(4, device="cuda")

    def go():
        decode(x)

    time_fn = timed_with_graph if graph else timed
    time_fn(go)
'''


def test_a_capturing_helper_called_through_a_local_alias_captures_what_it_is_passed(tmp_path):
    result = check_project(tmp_path, {"timers.py": TIMERS, "bench.py": BENCH})
    assert ("GL101", marked_line(BENCH, "MARK-decode")) in found_in(result, "bench.py")
    assert not [f for f in result.findings if f.rule == "GL905"]


APP = '''
from infer.engine import Engine
from loaders.load import load_model


def main():
    model = load_model()
    return Engine(model=model)
'''

ENGINE = '''
import torch


class GraphMixin:
    def capture(self, x):
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph):
            self.out = self.model.forward(x)


class Engine(GraphMixin):
    def __init__(self, model):
        self.model = model
'''

LOADER = '''
from infer.model import Model


def load_model():
    return Model()
'''

MODEL = '''
import torch


class Model(torch.nn.Module):
    def forward(self, x):
        return x * x.sum().item()  # MARK-model


class Other(torch.nn.Module):
    def forward(self, x):
        return x.nonzero()
'''


def test_packages_beside_a_folder_of_scripts_resolve_from_outside_the_project(tmp_path):
    # `python app.py` runs from src/, which holds scripts and folders without an __init__.py:
    # `infer.engine` is a top-level module there, wherever the configuration lies.
    src = tmp_path / "src"
    for name, text in {"app.py": APP, "infer/engine.py": ENGINE, "loaders/load.py": LOADER,
                       "infer/model.py": MODEL}.items():
        (src / name).parent.mkdir(parents=True, exist_ok=True)
        (src / name).write_text(textwrap.dedent(text))
    elsewhere = tmp_path / "config"
    elsewhere.mkdir()
    (elsewhere / "graphlint.toml").write_text("")
    result = check([src], Config(root=elsewhere), jobs=1)
    assert found_in(result, "model.py") == {("GL101", marked_line(MODEL, "MARK-model"))}
    assert not [f for f in result.findings if f.rule == "GL905"]


def test_the_project_root_does_not_change_a_resolved_capture(tmp_path: Path):
    # The same tree checked with the configuration beside it gives the same findings.
    files = {"app.py": APP, "infer/engine.py": ENGINE, "loaders/load.py": LOADER, "infer/model.py": MODEL}
    result = check_project(tmp_path, files)
    assert found_in(result, "model.py") == {("GL101", marked_line(MODEL, "MARK-model"))}


def _cache_project(passed: str) -> dict[str, str]:
    builders = "\n\n".join(f'''
def build_{k}(dim):
    return Attention(dim=dim{passed if k == 0 else ""})''' for k in range(_BUILDERS))
    model = f'''
from typing import Optional

import torch
from torch import nn


class KVCache(nn.Module):
    def update(self, k):
        if k.sum().item() > 0:  # MARK-cache
            k = k * 2
        return k


class ExportKVCache(KVCache):
    def update(self, k):
        return k[k.nonzero()]  # MARK-export


class Attention(nn.Module):
    def __init__(self, dim: int, kv_cache: Optional[KVCache] = None):
        super().__init__()
        self.kv_cache = kv_cache

    def setup_cache(self):
        self.kv_cache = KVCache()

    def forward(self, x):
        return self.kv_cache.update(x)

{builders}


def step(layer: Attention, x):
    return layer(x)


compiled = torch.compile(step, mode="reduce-overhead")
'''
    return {"model.py": model}


def test_a_parameter_annotated_with_a_base_holds_what_its_call_sites_pass(tmp_path):
    # `kv_cache: Optional[KVCache] = None`, which no builder passes: the parameter holds no
    # subclass of KVCache, and the cache the layer sets up itself is the base class.
    files = _cache_project("")
    result = check_project(tmp_path, files)
    assert found_in(result, "model.py") == {("GL101", marked_line(files["model.py"], "MARK-cache"))}


def test_a_call_site_passing_the_subclass_keeps_it(tmp_path):
    files = _cache_project(", kv_cache=ExportKVCache()")
    result = check_project(tmp_path, files)
    assert found_in(result, "model.py") == {("GL101", marked_line(files["model.py"], "MARK-cache")),
                                            ("GL301", marked_line(files["model.py"], "MARK-export"))}


GRAPHS = '''
import torch


def capture(fn):
    fn()  # warm-up
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = fn()
    return graph, out


class Flow:
    def loop(self, x, steps):
        for _ in range(steps):
            x = x + x.sum().item()  # MARK-loop
        return x

    def run(self, x, steps):
        static = x.clone()
        return capture(lambda: self.loop(static, steps))
'''

OTHER_MODEL = '''
import torch
from torch import nn


class Unrelated(nn.Module):
    def forward(self, x):
        return x.nonzero()
'''


def test_a_lambda_handed_to_a_capturing_helper_is_the_step(tmp_path):
    # `capture(lambda: self.loop(static, steps))`: the lambda's call is what is captured, so
    # the capture is resolved and no nn.Module forward stands in for it.
    result = check_project(tmp_path, {"graphs.py": GRAPHS, "other.py": OTHER_MODEL})
    assert ("GL101", marked_line(GRAPHS, "MARK-loop")) in found_in(result, "graphs.py")
    assert not [f for f in result.findings if f.rule == "GL905"]


def _conditional_graph_project() -> dict[str, str]:
    calls = "\n".join(f"    check(cudart.cudaOp{k}(graph))" for k in range(_BUILDERS))
    decoder = f'''
import torch
from cuda import cudart


def check(result):
    error, *others = result
    if error != cudart.cudaError_t.cudaSuccess:
        raise RuntimeError(error)
    return tuple(others)


def setup(graph):
{calls}


class Decoder:
    def step(self, x):
        return x * x.sum().item()  # MARK-step

    def capture(self, x):
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph):
            (handle,) = check(cudart.cudaGraphConditionalHandleCreate(self.graph, 0, 0))
            args = [handle.getPtr()]
            self.out = self.step(x)
'''
    return {"decoder.py": decoder, "other.py": OTHER_MODEL}


def test_a_helper_many_sites_hand_library_results_returns_the_library_s(tmp_path):
    # `check(cudart.X(...))` at many call sites: what `check` returns is cuda-python's, so
    # `handle.getPtr()` in the captured block is a library call, not a lost callee that every
    # nn.Module forward (other.py's) would stand in for.
    files = _conditional_graph_project()
    result = check_project(tmp_path, files)
    assert ("GL101", marked_line(files["decoder.py"], "MARK-step")) in found_in(result, "decoder.py")
    assert not [f for f in result.findings if f.rule == "GL905"]
