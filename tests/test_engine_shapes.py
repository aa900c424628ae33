"""How engines nobody here wrote build, wire and use their models, zero-config.

A script builds the engine at module level (`if __name__ == "__main__":`), so the model a
runner holds is what the script passes; caches annotated with a base class are the ones the
captured call hands down the layers; a serving engine that imports the model and its
tokenizer runs the tokenizer outside the graph; a package re-exports its ops with
`from .ops import *`."""
from __future__ import annotations

from pathlib import Path

from project_checks import check_project, found_in, marked_line

CACHES = '''
import torch


class Cache:
    def update(self, k):
        raise NotImplementedError


class StaticCache(Cache):
    def update(self, k):
        return k * int(k.max().item())  # MARK-static


class GrowingCache(Cache):
    def update(self, k):
        return k[: int(k.sum().item())]  # MARK-growing
'''

MODEL = '''
import torch
from torch import nn
from caches import Cache


class Attention(nn.Module):
    def forward(self, x, cache: Cache = None, spec=False):
        if spec:
            return cache.update(x)
        print(x.max().item())  # MARK-eager
        return x


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleList([Attention() for _ in range(2)])

    def forward(self, x, cache: Cache = None, spec=False):
        for layer in self.layers:
            x = layer(x, cache=cache, spec=spec)
        return x
'''

ENGINE = '''
import torch


class Engine:
    def __init__(self, model, cache):
        self.model = model
        self.cache = cache

    def step(self, x):
        return self.model(x, cache=self.cache, spec=True)

    def capture(self, x):
        g = torch.cuda.CUDAGraph()
        for _ in range(3):
            self.step(x)
        with torch.cuda.graph(g):
            self.out = self.step(x)
        self.g = g
'''

SCRIPT = '''
import torch
from caches import {cache}
from engine import Engine
from model import Model

if __name__ == "__main__":
    model = Model().cuda().eval()
    engine = Engine(model, {cache}())
    engine.capture(torch.zeros(4, device="cuda"))
'''





def _engine(tmp_path: Path, cache: str = "StaticCache", script: str = SCRIPT):
    return check_project(tmp_path, {"caches.py": CACHES, "model.py": MODEL, "engine.py": ENGINE,
                             "run.py": script.format(cache=cache)})


def test_a_model_the_script_builds_at_module_level_is_what_the_engine_captures(tmp_path):
    result = _engine(tmp_path, cache="GrowingCache")
    assert not [f for f in result.findings if f.rule == "GL905"]  # `self.model` is followed
    assert found_in(result, "caches.py") == {("GL101", marked_line(CACHES, "MARK-growing"))}
    # `spec=True` from the engine makes the eager arm of the layer dead.
    assert ("GL101", marked_line(MODEL, "MARK-eager")) not in found_in(result, "model.py")


def test_a_cache_annotated_with_its_base_class_is_the_one_the_capture_passes(tmp_path):
    result = _engine(tmp_path, cache="StaticCache")
    # GrowingCache.update is never what runs.
    assert found_in(result, "caches.py") == {("GL101", marked_line(CACHES, "MARK-static"))}


def test_a_base_class_parameter_stays_wide_when_the_region_passes_several(tmp_path):
    script = SCRIPT.replace("engine = Engine(model, {cache}())",
                            "engine = Engine(model, {cache}() if model.training else GrowingCache())")
    script = script.replace("from caches import {cache}", "from caches import {cache}, GrowingCache")
    result = _engine(tmp_path, cache="StaticCache", script=script)
    assert found_in(result, "caches.py") == {("GL101", marked_line(CACHES, "MARK-growing")),
                                           ("GL101", marked_line(CACHES, "MARK-static"))}


TOKENIZER = '''
import torch
from torch import nn


class Codec(nn.Module):
    def forward(self, codes):
        return codes[: int(codes.sum().item())]  # MARK-codec
'''

SERVER = '''
import torch
from engine import Engine
from model import Model
from audio.codec import Codec


class Server:
    def __init__(self):
        self.engine = Engine(Model(), None)

    def generate(self, x):
        self.engine.capture(x)
        return Codec()(self.engine.out)
'''

OTHER_MODEL = '''
import torch
from torch import nn


class Other(nn.Module):
    def forward(self, x):
        return x[: int(x.sum().item())]  # MARK-other
'''


def test_modules_the_serving_application_runs_around_the_graph_are_not_roots(tmp_path):
    files = {"caches.py": CACHES, "model.py": MODEL, "engine.py": ENGINE, "server.py": SERVER,
             "audio/__init__.py": "", "audio/codec.py": TOKENIZER,
             "audio/old_codec.py": TOKENIZER,  # imported by nothing, beside the codec
             "zoo/__init__.py": "", "zoo/other.py": OTHER_MODEL}
    result = check_project(tmp_path, files)
    assert not found_in(result, "codec.py") and not found_in(result, "old_codec.py")
    # A model that nothing of the captured application imports is still checked on its own.
    assert ("GL101", marked_line(OTHER_MODEL, "MARK-other")) in found_in(result, "other.py")


def test_a_function_a_package_re_exports_with_a_star_import_is_followed(tmp_path):
    ops = '''
    import torch


    def gather(x):
        return x[: int(x.sum().item())]  # MARK-gather
    '''
    model = '''
    import torch
    from torch import nn
    from kernels import gather


    class Model(nn.Module):
        def forward(self, x):
            return gather(x)
    '''
    runner = '''
    import torch
    from model import Model


    def capture(x):
        model = Model()
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            out = model(x)
        return g, out
    '''
    files = {"kernels/__init__.py": "from .ops import *\n", "kernels/ops.py": ops, "model.py": model,
             "runner.py": runner}
    result = check_project(tmp_path, files)
    assert not [f for f in result.findings if f.rule == "GL905"]
    assert ("GL101", marked_line(ops, "MARK-gather")) in found_in(result, "ops.py")


HF_RUNNER = '''
import torch
from transformers import AutoModelForCausalLM


class Generator:
    def __init__(self, model):
        self.model = model

    def decode_one(self, ids):
        return self.model(ids).logits

    def capture(self, ids):
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            self.out = self.decode_one(ids)
        self.g = g


if __name__ == "__main__":
    model = AutoModelForCausalLM.from_pretrained("some/model").cuda()
    Generator(model).capture(torch.zeros(1, 1, dtype=torch.long, device="cuda"))
'''


def test_a_model_another_library_loads_leaves_the_capture_incomplete_and_says_so(tmp_path):
    result = check_project(tmp_path, {"runner.py": HF_RUNNER})
    [warning] = [f for f in result.findings if f.rule == "GL905"]
    assert warning.path.endswith("runner.py")
    assert any("outside the linted files" in u["reason"] and "from_pretrained" in u["reason"]
               for u in result.unresolved_calls)


APP = '''
import torch
from engine import build
from audio.codec import Codec


def serve(x):
    engine = build(x)
    return Codec()(engine.out)
'''


def test_with_the_captured_model_unknown_the_applications_modules_are_checked(tmp_path):
    # The engine's model comes from a loader graphlint cannot follow: the capture may run any
    # module the application holds, the codec's included. With the model known, it does not.
    def found(model: str) -> set:
        engine = ENGINE + f"\n\ndef build(x):\n    engine = Engine({model}, None)\n    engine.capture(x)\n    return engine\n"
        files = {"caches.py": CACHES, "model.py": MODEL, "engine.py": "from model import Model\n" + engine,
                 "app.py": APP, "audio/__init__.py": "", "audio/codec.py": TOKENIZER}
        return found_in(check_project(tmp_path / model.replace("()", ""), files), "codec.py")

    assert ("GL101", marked_line(TOKENIZER, "MARK-codec")) in found("load_model()")
    assert not found("Model()")


LAMBDA_BACKEND = '''
import torch
from torch import nn


class Model(nn.Module):
    def verify(self, x):
        return x[: int(x.sum().item())]  # MARK-verify


class Other(nn.Module):
    def verify(self, x):
        return x


class Backend:
    def __init__(self):
        self.model = Model()
        self.model_forward = lambda model, x: model.verify(x)
        self.draft_forward = {n: (lambda model, x: model(x)) for n in (1, 2)}

    def compile(self):
        self.model_forward = torch.compile(self.model_forward, mode="reduce-overhead")

    def step(self, x):
        return self.model_forward(model=self.model, x=x)
'''


def test_a_compiled_lambda_runs_what_its_callers_hand_it(tmp_path):
    # Several linted classes define `verify`: the lambda's parameter holds what `step` passes.
    result = check_project(tmp_path, {"backend.py": LAMBDA_BACKEND})
    assert not [f for f in result.findings if f.rule == "GL905"]
    assert ("GL101", marked_line(LAMBDA_BACKEND, "MARK-verify")) in found_in(result, "backend.py")


CUDAGRAPH_MODELS = '''
import torch
from caches import GrowingCache, StaticCache


class Llama:
    def alloc(self):
        self.kv_cache = GrowingCache()

    def step(self, x):
        return self.kv_cache.update(x)


class LlamaCudagraph(Llama):
    def alloc(self):
        {body}

    def capture(self, x):
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            self.out = self.step(x)
        self.g = g
'''


def test_an_attribute_a_subclass_sets_in_its_own_override_is_the_only_one_it_holds(tmp_path):
    own = CUDAGRAPH_MODELS.format(body="self.kv_cache = StaticCache()")
    assert found_in(check_project(tmp_path / "own", {"caches.py": CACHES, "models.py": own}), "caches.py") == {
        ("GL101", marked_line(CACHES, "MARK-static"))}
    # Calling the base's alloc too: both caches.
    chained = CUDAGRAPH_MODELS.format(body="super().alloc()\n        self.kv_cache = StaticCache()")
    assert found_in(check_project(tmp_path / "chained", {"caches.py": CACHES, "models.py": chained}), "caches.py") == {
        ("GL101", marked_line(CACHES, "MARK-static")), ("GL101", marked_line(CACHES, "MARK-growing"))}


PATCHER = '''
import torch


def patch(model, compile=True):
    if compile:
        forward = torch.compile(model.forward, mode="reduce-overhead")
    else:
        forward = model.forward
    return forward


def main(model):
    return patch(model, compile={flag})
'''


def test_a_capture_every_call_rules_out_is_no_capture_site(tmp_path):
    never = check_project(tmp_path / "never", {"patch.py": PATCHER.format(flag="False")})
    assert not [f for f in never.findings if f.rule == "GL905"]
    sometimes = check_project(tmp_path / "sometimes", {"patch.py": PATCHER.format(flag="True")})
    assert [f.line for f in sometimes.findings if f.rule == "GL905"] == [marked_line(PATCHER, "torch.compile")]


RL_SCRIPT = '''
import torch
from torch import nn
from tensordict.nn import CudaGraphModule


def layer_init(layer, std=1.0):
    torch.nn.init.orthogonal_(layer.weight, std)
    return layer


class Head(nn.Module):
    def forward(self, x):
        return x[: int(x.sum().item())]  # MARK-head


class Agent(nn.Module):
    def __init__(self):
        super().__init__()
        self.actor = layer_init(Head(), std=0.01)

    def act(self, x):
        return self.actor(x)


class Evaluator(nn.Module):
    def forward(self, x):
        return x[: int(x.max().item())]  # MARK-eval


def update(x):
    return x[: int(x.mean().item())]  # MARK-update


agent = Agent()
policy = CudaGraphModule(agent.act)
train = CudaGraphModule(update, warmup=5)
'''


def test_a_script_that_graphs_its_policy_at_module_level_is_captured(tmp_path):
    # tensordict's CudaGraphModule captures what it wraps; `layer_init` hands its layer back.
    result = check_project(tmp_path, {"rl.py": RL_SCRIPT})
    # The evaluator's forward is no root: the graphed callables say what is captured.
    assert found_in(result, "rl.py") == {("GL101", marked_line(RL_SCRIPT, "MARK-head")),
                                       ("GL101", marked_line(RL_SCRIPT, "MARK-update"))}
    assert not [f for f in result.findings if f.rule == "GL905"]


ACCELERATOR = '''
import torch


class Accelerator:
    def capture_to_graph(self, graph, pool=None, stream=None):
        return torch.cuda.graph(graph, pool, stream)

    def replay_graph(self, graph):
        graph.replay()


def get_accelerator():
    return Accelerator()
'''

WRAPPER = '''
import torch
from torch import nn
from accelerator import get_accelerator


class Block(nn.Module):
    def forward(self, x):
        return x[: int(x.sum().item())]  # MARK-block


class Wrapper(nn.Module):
    def __init__(self):
        super().__init__()
        self.block = Block()

    def _create_graph(self, x):
        self.graph = torch.cuda.CUDAGraph()
        self.static_x = x
        self.block(self.static_x)  # warm-up
        with get_accelerator().capture_to_graph(self.graph):
            self.static_out = self.block(self.static_x)

    def forward(self, x):
        if not hasattr(self, "graph"):
            self._create_graph(x)
        self.static_x.copy_(x)
        get_accelerator().replay_graph(self.graph)
        torch.cuda.synchronize()  # MARK-sync
        return self.static_out
'''


def test_a_capture_through_an_accelerator_s_context_is_a_capture_site(tmp_path):
    result = check_project(tmp_path, {"accelerator.py": ACCELERATOR, "wrapper.py": WRAPPER})
    # The block is captured; the wrapper's forward drives the graph and is no root of its own.
    assert found_in(result, "wrapper.py") == {("GL101", marked_line(WRAPPER, "MARK-block"))}


SCRIPT_CAPTURE = '''
import torch
from mylib import load

model = load()
x = torch.zeros(4, device="cuda")
g = torch.cuda.CUDAGraph()
for _ in range(3):
    model(x)
with torch.cuda.graph(g):
    out = model(x)
'''


def test_a_script_capturing_what_a_library_loaded_says_it_is_not_checked(tmp_path):
    result = check_project(tmp_path, {"script.py": SCRIPT_CAPTURE})
    assert [(f.rule, f.line) for f in result.findings] == [("GL905", marked_line(SCRIPT_CAPTURE, "torch.cuda.graph"))]


PACKAGE_IMPORTING_ITS_EXTENSION = '''
import torch

try:
    import pkg._C as _C
except ImportError:
    print("pkg._C is not built")
    raise


def step(x):
    return x.sum().item()  # MARK-item
'''


PACKAGE_HOLDER = '''
import torch
from torch import nn
import pkg


class Holder(nn.Module):
    def __init__(self, module):
        super().__init__()
        self.kind = pkg._C.kind_of(module)

    def forward(self, x):
        return pkg.step(x)


def graphed(fn, x):
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        fn(x)
    return g
'''


def test_a_package_that_imports_its_own_submodule_by_its_full_name_is_checked(tmp_path):
    # `import pkg._C as _C` in pkg/__init__ names itself through the package: resolving
    # `pkg._C` must reach the submodule, not the package's own name again (a RecursionError
    # once, when the blind capture below made every module's attributes be evaluated).
    result = check_project(tmp_path, {"pkg/__init__.py": PACKAGE_IMPORTING_ITS_EXTENSION, "pkg/holder.py": PACKAGE_HOLDER})
    assert found_in(result, "pkg/__init__.py") == {("GL101", marked_line(PACKAGE_IMPORTING_ITS_EXTENSION, "MARK-item"))}
