"""How serving engines hand their model to the code that captures it, zero-config: a base class
keeps what each subclass's `super().__init__(model=...)` passes, a model class chosen from a
registry spelled as one constructor call per architecture, and captured objects that another
library builds (a logits warper, an attention wrapper kept in a ContextVar), which run that
library's code and are no reason to check every linted forward in their place."""
from __future__ import annotations

from project_checks import check_project, found_in, marked_line

FLASH_NETS = "import torch\nfrom torch import nn\n\n\n" + "\n\n".join(
    f"class Flash{name}(nn.Module):\n    def __init__(self, model_id):\n        super().__init__()\n\n"
    f"    def forward(self, x):\n        return x * 2\n" for name in "BCDEFGHIJ") + '''

class FlashA(nn.Module):
    def __init__(self, model_id):
        super().__init__()

    def forward(self, x):
        return x[: int(x.sum().item())]  # MARK-flash


class EagerOld(nn.Module):
    def __init__(self, model_id):
        super().__init__()

    def forward(self, x):
        return x.max().item()  # MARK-eager
'''

ENGINES = '''
import torch


class Model:
    def __init__(self, model, tokenizer=None):
        self.model = model.eval()
        self.tokenizer = tokenizer


class FlashCausalLM(Model):
    def __init__(self, model_id, model_class):
        model = model_class(model_id)
        super().__init__(model=model)

    def warmup(self, x):
        self.graph = torch.cuda.CUDAGraph()
        for _ in range(2):
            self.model.forward(x)
        with torch.cuda.graph(self.graph):
            self.out = self.model.forward(x)


class CausalLM(Model):
    def __init__(self, model_id, model_class):
        super().__init__(model=model_class(model_id))

    def generate(self, x):
        return self.model(x)
'''

REGISTRY = "from nets import " + ", ".join(f"Flash{n}" for n in "ABCDEFGHIJ") + ", EagerOld\n" + \
    "from engines import CausalLM, FlashCausalLM\n\n\ndef get_model(name):\n" + "".join(
        f"    if name == '{n.lower()}':\n        return FlashCausalLM(model_id=name, model_class=Flash{n})\n"
        for n in "ABCDEFGHIJ") + "    return CausalLM(name, model_class=EagerOld)\n"

UNRELATED = '''
import torch
from torch import nn


class Prefill(nn.Module):
    def forward(self, x):
        return x[: int(x.sum().item())]  # MARK-unrelated
'''

WARPER = '''
import torch
from transformers import TopKLogitsWarper


class StaticWarper:
    def __init__(self, k):
        self.warpers = [TopKLogitsWarper(top_k=k)]
        self.graph = None

    def __call__(self, scores):
        if self.graph is None:
            self.static_scores = scores
            self.graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(self.graph):
                for warper in self.warpers:
                    self.static_scores = warper(None, self.static_scores)
        self.graph.replay()
        return self.static_scores
'''

CONTEXT_WRAPPER = '''
from contextvars import ContextVar

import torch
from torch import nn

decode_state: ContextVar = ContextVar("decode_state")


def attend(q):
    return decode_state.get().forward(q)


class Layer(nn.Module):
    def forward(self, x):
        return attend(x)


class Runner:
    def __init__(self):
        self.layer = Layer()

    def capture(self, x):
        self.layer(x)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            self.out = self.layer(x)
        return g
'''





def test_a_base_class_holds_the_model_its_capturing_subclass_passes_from_a_registry(tmp_path):
    # Ten architectures, one constructor call each (more than a helper's call sites say anything
    # about), all passing a model class: the flash engine captures those models only, and the
    # eager engine's model, passed through the same base class, is no part of its region.
    result = check_project(tmp_path, {"nets.py": FLASH_NETS, "engines.py": ENGINES, "registry.py": REGISTRY})
    assert found_in(result, "nets.py") == {("GL101", marked_line(FLASH_NETS, "MARK-flash"))}
    assert not [f for f in result.findings if f.rule == "GL905"]


def test_a_captured_object_another_library_built_is_said_and_nothing_stands_in_for_it(tmp_path):
    result = check_project(tmp_path, {"warper.py": WARPER, "prefill.py": UNRELATED})
    [warning] = [f for f in result.findings if f.rule == "GL905"]
    assert warning.path.endswith("warper.py") and "another library" in warning.message
    assert found_in(result, "prefill.py") == set()


def test_a_library_object_s_forward_inside_the_region_is_no_module_to_stand_in_for(tmp_path):
    # `decode_state.get().forward(q)` runs the attention library's wrapper, not a linted model:
    # the unrelated prefill module is not checked in its place.
    result = check_project(tmp_path, {"runner.py": CONTEXT_WRAPPER, "prefill.py": UNRELATED})
    assert found_in(result, "prefill.py") == set()
