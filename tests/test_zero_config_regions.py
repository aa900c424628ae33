"""Zero-config regions on a vLLM-shaped engine (tests/fixtures/engine/minivllm): the capture
site defines the captured region, the code around the replay is host, the graph follows
`islice` over module lists, overrides of a base-class method and a namespace subpackage, and
one-time branches are not per-step. Markers and entry points add roots without hiding the rest."""
from __future__ import annotations

import json
import shutil
import textwrap
from pathlib import Path

from click.testing import CliRunner

from graphlint import region_audit
from graphlint.callgraph.module_names import package_module
from graphlint.cli import main
from graphlint.config import Config
from graphlint.engine import check

ENGINE = Path(__file__).parent / "fixtures" / "engine"
PLANTED = {("GL101", "StaticKVCache.update"), ("GL301", "silu_and_mul")}


def _findings(root: Path, **options):
    return check([root / "minivllm"], Config(root=root, **options), jobs=1).findings


def test_zero_config_reports_exactly_the_planted_hazards():
    findings = _findings(ENGINE)
    assert {(f.rule, f.function) for f in findings} == PLANTED
    by_rule = {f.rule: f for f in findings}
    # Through the base class's method to the override, and through islice(self.layers, a, b).
    assert by_rule["GL101"].reached_via == ("LlamaForCausalLM.forward", "LlamaModel.forward", "DecoderLayer.forward",
                                            "Attention.forward", "StaticKVCache.update")
    assert by_rule["GL301"].reached_via[-2:] == ("MLP.forward", "silu_and_mul")  # namespace subpackage
    assert {f.region for f in findings} == {"captured"}
    assert {f.region_reason for f in findings} == {"capture site at minivllm/model_runner.py:36 (torch.cuda.graph)"}


def test_the_sweep_mode_keeps_every_function_per_step():
    swept = _findings(ENGINE, regions="sweep")
    rules = {(f.rule, f.function) for f in swept}
    assert PLANTED <= rules
    # What the sweep also reports is host code, one-time code and the eager sampler (the pinned,
    # non_blocking uploads of prepare_inputs are GL402's own fix, so not even the sweep flags them).
    assert ("GL102", "ModelRunner.execute") in rules and ("GL201", "Sampler.forward") in rules
    assert not any(function == "ModelRunner.prepare_inputs" for _, function in rules)
    assert len(swept) > 10


def test_host_orchestration_one_time_code_and_the_eager_sampler_are_not_per_step():
    findings = _findings(ENGINE, regions="sweep")
    regions = {(f.function, f.rule): f.region for f in findings}
    # In the sweep the lazy initialisation and the training-only read are still not per-step.
    assert ("RotaryEmbedding.forward", "GL401") not in regions
    assert ("MLP.forward", "GL101") not in regions
    zero = {(f.function, f.rule) for f in _findings(ENGINE)}
    for host in [("ModelRunner.prepare_inputs", "GL402"), ("ModelRunner.execute", "GL102"),
                 ("ModelRunner.execute", "GL509"), ("ModelRunner.capture_graphs", "GL401"),
                 ("ModelRunner.capture_graphs", "GL505"), ("ModelRunner.capture_graphs", "GL501"),
                 ("ModelRunner.execute", "GL503"), ("ModelRunner.capture_graphs", "GL510"),
                 ("Sampler.forward", "GL201"), ("LlamaForCausalLM.compute_logits", "GL101")]:
        assert host not in zero


def test_audit_lists_every_captured_function_with_its_reason():
    result = region_audit.run([ENGINE / "minivllm"], Config(root=ENGINE), jobs=1)
    captured = {row.function for row in result.rows if row.region == "captured"}
    assert captured == {"LlamaForCausalLM.forward", "LlamaModel.forward", "DecoderLayer.forward", "Attention.forward",
                        "MLP.forward", "RotaryEmbedding.forward", "KVCacheBase.update", "StaticKVCache.update",
                        "SlidingKVCache.update", "silu_and_mul"}
    host = {row.function: row.reason for row in result.rows if row.region == "host"}
    assert host == {"ModelRunner.capture_graphs": "captures a CUDA graph at minivllm/model_runner.py:36 (orchestration)",
                    "ModelRunner.execute": "replays a CUDA graph at minivllm/model_runner.py:53 (orchestration)"}
    assert result.verdict() == "fail" and len(result.blocking()) == 2


def test_audit_pass_says_how_many_reachable_calls_it_could_not_follow(tmp_path):
    (tmp_path / "m.py").write_text(textwrap.dedent("""
        import torch
        from torch import nn

        class Block(nn.Module):
            def forward(self, x: torch.Tensor, hook):
                return hook(x) * 2
        """))
    result = CliRunner().invoke(main, ["audit", str(tmp_path / "m.py"), "--no-cache", "-j", "1"])
    assert result.exit_code == 0, result.output
    assert "PASS" in result.output and "1 reachable call not followed" in result.output
    assert "hook" in result.output and "parameter `hook`" in result.output


def test_text_output_lists_unresolved_reachable_calls(tmp_path):
    (tmp_path / "m.py").write_text("import torch\nfrom torch import nn\n\nclass Block(nn.Module):\n"
                                   "    def forward(self, x: torch.Tensor, hook):\n        return hook(x)\n")
    result = CliRunner().invoke(main, ["check", str(tmp_path / "m.py"), "--no-cache", "-j", "1"])
    assert "unresolved reachable calls (1)" in result.output and "parameter `hook`" in result.output


def test_a_marker_in_another_file_adds_a_root_and_hides_nothing(tmp_path):
    shutil.copytree(ENGINE / "minivllm", tmp_path / "minivllm")
    (tmp_path / "minivllm" / "tools.py").write_text(textwrap.dedent("""
        import torch

        def debug_dump(x: torch.Tensor):  # graphlint: entry
            return x.tolist()
        """))
    findings = _findings(tmp_path)
    assert {(f.rule, f.function) for f in findings} == PLANTED | {("GL102", "debug_dump")}
    assert {f.region_reason for f in findings if f.function == "debug_dump"} == {"`# graphlint: entry` marker"}
    configured = _findings(tmp_path, entry_points=("minivllm.sampler:Sampler.forward",))
    assert PLANTED <= {(f.rule, f.function) for f in configured}
    assert ("GL201", "Sampler.forward") in {(f.rule, f.function) for f in configured}


def test_an_unresolved_capture_callee_falls_back_to_every_module_forward(tmp_path):
    (tmp_path / "runner.py").write_text(textwrap.dedent("""
        import torch
        from torch import nn

        class Layer(nn.Module):
            def forward(self, x: torch.Tensor):
                return x[x > 0]

        class Runner:
            def __init__(self, model):
                self.model = model

            def capture(self, x):
                graph = torch.cuda.CUDAGraph()
                self.model(x)
                with torch.cuda.graph(graph):
                    self.model(x)
                return graph
        """))
    findings = check([tmp_path], Config(root=tmp_path), jobs=1)
    # The fallback is said at the capture site (GL905), never silent.
    assert {(f.rule, f.function) for f in findings.findings} == {("GL303", "Layer.forward"),
                                                                ("GL905", "Runner.capture")}
    by_rule = {f.rule: f for f in findings.findings}
    assert by_rule["GL303"].region_reason.startswith("forward of nn.Module Layer")
    assert by_rule["GL905"].severity == "warning" and by_rule["GL905"].line == 16
    assert "`self.model`" in by_rule["GL905"].message and "every nn.Module forward" in by_rule["GL905"].message
    assert any("capture site" in u["reason"] for u in findings.unresolved_calls)


def test_compile_reduce_overhead_is_a_capture_site(tmp_path):
    (tmp_path / "gen.py").write_text(textwrap.dedent("""
        import torch

        def decode_one(model, x: torch.Tensor):
            return sample(x)

        def sample(x: torch.Tensor):
            return x.argmax().item()

        def prefill(x: torch.Tensor):
            return x.sum().item()

        @torch.compile(mode="reduce-overhead")
        def fused(x: torch.Tensor):
            return torch.nonzero(x)

        def main(model, x):
            global decode_one
            decode_one = torch.compile(decode_one, mode="reduce-overhead", fullgraph=True)
            prefill(x)
            return decode_one(model, x).item()
        """))
    findings = check([tmp_path], Config(root=tmp_path), jobs=1).findings
    assert {(f.rule, f.function) for f in findings} == {("GL101", "sample"), ("GL301", "fused")}
    assert {f.region_reason for f in findings} == {
        "capture site at gen.py:19 (torch.compile(mode=reduce-overhead))",
        "capture site at gen.py:13 (@torch.compile(mode=reduce-overhead))"}


def test_compile_with_a_mode_spread_from_a_dict_is_a_capture_site(tmp_path):
    # torchchat's shape: the mode is chosen per device into a dict, then spread into compile;
    # a dict without a graph mode (the CPU arm's) captures nothing.
    (tmp_path / "gen.py").write_text(textwrap.dedent("""
        import torch

        class Generator:
            def decode_one(self, x: torch.Tensor):
                return x.argmax().item()

            def prefill(self, x: torch.Tensor):
                return x.sum().item()

            def setup(self, device: str):
                if device == "cpu":
                    kwargs = {}
                else:
                    kwargs = {"mode": "reduce-overhead"}
                self.decode_one = torch.compile(self.decode_one, fullgraph=True, **kwargs)
                options = dict(dynamic=True)  # no graph mode, no fullgraph: nothing captured
                self.prefill = torch.compile(self.prefill, **options)
        """))
    findings = check([tmp_path], Config(root=tmp_path), jobs=1).findings
    assert {(f.rule, f.function) for f in findings} == {("GL101", "Generator.decode_one")}


def test_namespace_subpackage_is_named_as_python_imports_it():
    assert package_module("minivllm/layers/cache.py", ENGINE) == "minivllm.layers.cache"
    assert package_module("minivllm/models/llama.py", ENGINE) == "minivllm.models.llama"


def test_json_findings_carry_the_region_reason(tmp_path):
    out = tmp_path / "r.json"
    CliRunner().invoke(main, ["check", str(ENGINE / "minivllm"), "--no-cache", "-j", "1", "--format", "json",
                              "-o", str(out)])
    data = json.loads(out.read_text())
    assert all(f["region_reason"].startswith("capture site at") for f in data["static"]["findings"])
    swept = CliRunner().invoke(main, ["check", str(ENGINE / "minivllm"), "--no-cache", "-j", "1", "--sweep", "-q"])
    assert swept.exit_code == 1 and "errors" in swept.output


def test_training_lazy_and_prefill_branches_are_not_per_step(tmp_path):
    (tmp_path / "m.py").write_text(textwrap.dedent("""
        import torch
        from torch import nn

        class Layer(nn.Module):
            def forward(self, x: torch.Tensor, meta):
                if meta.is_decoding:
                    y = x * 2
                else:
                    n = x.sum().item()          # prefill runs eagerly
                if not self.training:
                    y = x
                else:
                    m = x.max().item()          # training only
                if meta.is_prefill:
                    k = x.min().item()          # prefill runs eagerly
                if self.table is None:
                    self.table = torch.zeros(8, device=x.device)   # lazy initialisation
                if not self._initialized:
                    self.setup(x)
                position = None
                if position is None:
                    position = torch.arange(4, device=x.device)    # a default taken every step
                return x.mean().item() + position
        """))
    # The default taken every step is an intermediate (GL405, selected here: off by default).
    findings = check([tmp_path], Config(root=tmp_path, select=("GL1", "GL405")), jobs=1).findings
    assert sorted((f.rule, f.line) for f in findings) == [("GL101", 24), ("GL405", 23)]


def test_engine_step_flags_debug_switches_and_early_exits_are_not_the_captured_step(tmp_path):
    # Spellings of the step kind from several engines (graphlint/data/zones.toml), the rest of a
    # body after an early return from the decode arm, debug switches and the not-capturing arm.
    (tmp_path / "m.py").write_text(textwrap.dedent("""
        import logging
        import torch
        from torch import nn

        logger = logging.getLogger(__name__)

        class Layer(nn.Module):
            def forward(self, x: torch.Tensor, meta, cu_seqlen_prefill=None):
                if cu_seqlen_prefill is not None:
                    a = x.sum().item()              # prefill (cu_seqlen_prefill given)
                if meta.forward_mode == ForwardMode.EXTEND:
                    b = x.sum().item()              # prefill (an enum compared)
                if meta.num_prefills > 0:
                    c = x.sum().item()              # prefill (a count)
                if self.debug_dump_folder:
                    d = x.sum().item()              # debug switch
                if logger.isEnabledFor(logging.DEBUG):
                    e = x.sum().item()              # debug switch
                if self.enable_chunked_prefill:
                    f = x.sum().item()              # configuration, not the step kind: flagged
                return self.tail(x, meta)

            def tail(self, x: torch.Tensor, meta):
                if not meta.extend_return_logprob:
                    return x * 2
                return x.max().item()               # after the decode step returned: prefill

            def alloc(self, x: torch.Tensor):
                if self.is_cuda_graph:
                    return self.pool.take(x)
                return x.min().item()               # the eager path, not captured

            def forward_all(self, x: torch.Tensor, meta):
                return self.forward(x, meta) + self.alloc(x)
        """))
    findings = check([tmp_path], Config(root=tmp_path, select=("GL1",)), jobs=1).findings
    assert sorted((f.rule, f.line) for f in findings) == [("GL101", 21)]


def test_another_backends_arm_and_the_arm_a_comment_calls_capturing_are_not_the_captured_step(tmp_path):
    # graphlint/data/zones.toml: platform_flags and capture_comments. Each flagged line is a
    # valid counterpart: the CUDA arm, a comment that explains a sync rather than stating the
    # arm's state, and the arm opposite a "not capturing" comment.
    (tmp_path / "m.py").write_text(textwrap.dedent("""
        import torch
        from torch import nn

        SYSTEM = "cuda"

        class Layer(nn.Module):
            def forward(self, x: torch.Tensor, data):
                if SYSTEM == "ipex":
                    a = x.max().item()              # IPEX only
                if data.use_sgmv and SYSTEM == "ipex":
                    b = x.max().item()              # IPEX only (a conjunction)
                if x.device.type in ("cpu", "mps"):
                    c = x.max().item()              # CPU or MPS only
                if not current_platform.is_npu():
                    pass
                else:
                    d = x.max().item()              # NPU only (the else of a negated test)
                if x.device.type == "cuda":
                    e = x.max().item()              # the CUDA arm: flagged
                return self.meta(x) + self.pick(x)

            def meta(self, x: torch.Tensor):
                if self.tokens_cpu is None:
                    # we are capturing cuda graph
                    return x
                return x.max().item()               # after the capturing arm returned: eager

            def pick(self, x: torch.Tensor):
                if self.flag:
                    # avoid a sync during CUDA graph capture
                    f = 1
                else:
                    g = x.max().item()              # the comment states no arm: flagged
                if self.other:
                    h = x.max().item()              # opposite the capturing arm: eager
                else:
                    # During CUDA Graph capture, all set false
                    h = 0
                if self.third:
                    # not capturing: the eager path
                    i = 1
                else:
                    j = x.max().item()              # a negated comment states nothing: flagged
                return x
        """))
    findings = check([tmp_path], Config(root=tmp_path, select=("GL1",)), jobs=1).findings
    assert sorted((f.rule, f.line) for f in findings) == [("GL101", 20), ("GL101", 34), ("GL101", 44)]


def test_query_length_one_is_the_decode_step_and_a_self_cleared_flag_runs_once(tmp_path):
    (tmp_path / "m.py").write_text(textwrap.dedent("""
        import torch
        from torch import nn

        class Attn(nn.Module):
            def forward(self, x: torch.Tensor, position_ids: torch.Tensor):
                q_len = x.shape[1]
                if self.wrapper.need_plan:
                    self.wrapper.need_plan = False
                    n = position_ids[0, -1].item()      # planned once, before capture
                if q_len == 1:
                    y = x * 2
                else:
                    m = position_ids.max().item()       # prefill
                if q_len > 1:
                    k = position_ids.min().item()       # prefill
                if self.dirty:
                    self.dirty = x.sum() > 0            # set again from data: not a one-shot
                    j = x.max().item()                  # flagged
                return x
        """))
    findings = check([tmp_path], Config(root=tmp_path, select=("GL1",)), jobs=1).findings
    assert sorted((f.rule, f.line) for f in findings) == [("GL101", 19)]


def test_a_class_attribute_set_through_the_class_is_followed_and_a_mode_string_names_the_step(tmp_path):
    # ktransformers' shape: a plain-class attention singleton held by the model class
    # (`KLlamaModel.dynamic_sdpa = Attention(...)` in __init__), called through the class, with
    # `mode == "prefill"` choosing the prefill arm inside it.
    (tmp_path / "m.py").write_text(textwrap.dedent("""
        import torch
        from torch import nn

        class Attention:
            def apply(self, x: torch.Tensor, mode: str):
                if mode == "prefill":
                    n = x.max().item()              # prefill
                    return x
                return x * x.sum().item()           # decode: flagged

        class Model(nn.Module):
            shared = None

            def __init__(self):
                super().__init__()
                Model.shared = Attention()

            def forward(self, x: torch.Tensor):
                return Model.shared.apply(x, "generate")

        class Runner:
            def __init__(self):
                self.model = Model()

            def capture(self, x):
                g = torch.cuda.CUDAGraph()
                with torch.cuda.graph(g):
                    self.model(x)
                return g
        """))
    findings = check([tmp_path], Config(root=tmp_path, select=("GL1",)), jobs=1).findings
    assert sorted((f.rule, f.function, f.line) for f in findings) == [("GL101", "Attention.apply", 10)]


def test_multimodal_inputs_are_encoded_with_the_prompt_not_in_the_decode_step(tmp_path):
    # transformers' generate passes pixel_values on the first iteration only; the encoder that
    # needs them (its `raise` guard included) runs at prefill. The decoder's own sync is flagged.
    (tmp_path / "m.py").write_text(textwrap.dedent("""
        import torch
        from torch import nn

        class Vision(nn.Module):
            def forward(self, pixel_values: torch.Tensor):
                return pixel_values.flatten(1)

        class Model(nn.Module):
            def __init__(self):
                super().__init__()
                self.vision = Vision()

            def image_features(self, pixel_values=None, image_sizes=None):
                if pixel_values is None:
                    raise ValueError("pixel_values are required")
                sizes = image_sizes.tolist()            # prefill: only with images
                return self.vision(pixel_values), sizes

            def forward(self, input_ids: torch.Tensor, pixel_values=None, image_sizes=None):
                embeds = input_ids.float()
                if pixel_values is not None:
                    feats, sizes = self.image_features(pixel_values, image_sizes)
                    n = int(feats.sum().item())         # prefill
                return embeds.max().item()              # every step: flagged
        """))
    findings = check([tmp_path], Config(root=tmp_path, select=("GL1",)), jobs=1).findings
    assert sorted((f.rule, f.line) for f in findings) == [("GL101", 25)]


def test_per_step_names_and_attributes_travel_through_the_calls(tmp_path):
    # A loop advances a keyword argument and an attribute of a passed object; the functions that
    # receive them (under the same name, or reading the attribute) freeze a per-step value.
    (tmp_path / "gen.py").write_text(textwrap.dedent("""
        import torch
        from model import Model

        def next_token(model: Model, x: torch.Tensor, input_pos_maxp1=None, params=None):
            return model(x, input_pos_maxp1=input_pos_maxp1, params=params)

        def compiled():
            return torch.compile(next_token, mode="reduce-overhead")

        def generate(model: Model, x: torch.Tensor, params, n: int):
            input_pos_maxp1 = 4
            for _ in range(n):
                x = next_token(model, x, input_pos_maxp1=input_pos_maxp1, params=params)
                input_pos_maxp1 += 1
                params.seqlen_offset += 1
            return x
        """))
    (tmp_path / "model.py").write_text(textwrap.dedent("""
        import torch
        from torch import nn

        class Attention(nn.Module):
            def __init__(self):
                super().__init__()
                self.cache = torch.zeros(2, 8, device="cuda")

            def forward(self, x: torch.Tensor, input_pos_maxp1=None, params=None):
                if input_pos_maxp1 is not None:           # present or not: the same every step
                    x = x[..., :input_pos_maxp1]          # frozen per-step bound
                if params is not None and params.seqlen_offset > 0:
                    self.cache[:, params.seqlen_offset] = x.sum()   # frozen per-step index
                return x

        class Model(nn.Module):
            def __init__(self):
                super().__init__()
                self.attn = Attention()

            def forward(self, x: torch.Tensor, input_pos_maxp1=None, params=None):
                return self.attn(x, input_pos_maxp1, params=params)
        """))
    findings = check([tmp_path], Config(root=tmp_path), jobs=1).findings
    assert sorted((f.rule, f.path.rsplit("/", 1)[-1], f.line) for f in findings) == [
        ("GL508", "model.py", 12), ("GL508", "model.py", 14)]


def test_generic_containers_subscripted_bases_and_sequential_are_followed():
    # tests/fixtures/engine/streamer: layers in a Generic[T] container typed by a TypeVar, the
    # override of a hook in a subclass of a subscripted base, an element of an nn.Sequential; a
    # plan guarded by `if state.planned: return` runs once; `range` in the capture is no callee.
    findings = check([ENGINE / "streamer"], Config(root=ENGINE / "streamer"), jobs=1).findings
    assert sorted((f.rule, f.function) for f in findings) == [
        ("GL101", "Attention.step"), ("GL102", "Norm.forward"), ("GL301", "Gate.forward")]


def test_a_callable_parameter_runs_what_the_reaching_caller_passes(tmp_path):
    # `_apply(fn)` is called by the captured step with one closure and by set-up with another:
    # the captured region holds the step's closure only.
    (tmp_path / "m.py").write_text(textwrap.dedent("""
        import torch
        from torch import nn

        class Block(nn.Module):
            def _apply_all(self, fn):
                for name, child in self.named_children():
                    fn(name, child)

            def setup(self):
                def _init(name, child):
                    child.buf = torch.zeros(int(child.size.sum().item()))   # set-up, eager
                self._apply_all(_init)

            def step(self):
                def _step(name, child):
                    child.out.copy_(child.x * 2)
                self._apply_all(_step)

        class Runner:
            def __init__(self):
                self.block = Block()
                self.graph = torch.cuda.CUDAGraph()

            def capture(self):
                self.block.step()
                with torch.cuda.graph(self.graph):
                    self.block.step()
        """))
    assert check([tmp_path], Config(root=tmp_path), jobs=1).findings == []
    regions = {row.function: row.region for row in region_audit.run([tmp_path], Config(root=tmp_path), jobs=1).rows}
    assert regions["Block.step._step"] == "captured" and regions.get("Block.setup._init") != "captured"


def test_a_package_under_a_plain_source_folder_is_imported_by_its_own_name(tmp_path):
    # python/eng/ has no __init__.py, and nor has python/: `from eng.layers import ...` names the
    # file python/eng/layers.py; a folder that holds code (eng/kernel/triton/) is no import root.
    root = tmp_path / "python" / "eng"
    (root / "kernel" / "triton").mkdir(parents=True)
    (root / "kernel" / "__init__.py").write_text("")
    (root / "kernel" / "triton" / "cdiv.py").write_text("def cdiv(a, b):\n    return (a + b - 1) // b\n")
    (root / "layers.py").write_text(textwrap.dedent("""
        import torch
        from torch import nn

        class Layer(nn.Module):
            def forward(self, x: torch.Tensor) -> torch.Tensor:
                return x * x.max().item()   # planted
        """))
    (root / "runner.py").write_text(textwrap.dedent("""
        import torch
        import triton
        from eng.layers import Layer

        def run(x):
            layer = Layer()
            layer(x)
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                y = layer(x) + triton.cdiv(4, 2)
            return g
        """))
    findings = check([tmp_path], Config(root=tmp_path), jobs=1).findings
    assert sorted((f.rule, f.function) for f in findings) == [("GL101", "Layer.forward")]
    assert findings[0].region_reason.startswith("capture site at python/eng/runner.py")


def test_a_one_time_branch_is_not_followed_by_the_call_graph(tmp_path):
    (tmp_path / "m.py").write_text(textwrap.dedent("""
        import torch
        from torch import nn

        def build_table(x: torch.Tensor):
            return torch.zeros(int(x.max().item()))

        class Layer(nn.Module):
            def forward(self, x: torch.Tensor):
                if self.table is None:
                    self.table = build_table(x)
                return x * 2
        """))
    assert check([tmp_path], Config(root=tmp_path), jobs=1).findings == []


def test_capture_begin_end_and_graphed_callables_are_capture_sites(tmp_path):
    (tmp_path / "sites.py").write_text(textwrap.dedent("""
        import torch
        from torch import nn

        class Head(nn.Module):
            def forward(self, x: torch.Tensor):
                return x.max().item()

        def inner(x: torch.Tensor):
            return torch.nonzero(x)

        def unused(x: torch.Tensor):
            return x.sum().item()

        def capture(x, head: Head):
            g = torch.cuda.CUDAGraph()
            inner(x)
            g.capture_begin()
            inner(x)
            g.capture_end()
            return torch.cuda.make_graphed_callables(head, (x,))
        """))
    findings = check([tmp_path], Config(root=tmp_path), jobs=1).findings
    assert {(f.rule, f.function) for f in findings} == {("GL301", "inner"), ("GL101", "Head.forward")}
    reasons = {f.function: f.region_reason for f in findings}
    assert reasons["inner"] == "capture site at sites.py:18 (capture_begin)"
    assert reasons["Head.forward"] == "capture site at sites.py:21 (make_graphed_callables)"


def test_the_report_is_the_same_whatever_the_hash_seed(tmp_path):
    # Class-hierarchy dispatch reaches several overrides from one call; the chain a finding
    # records must not follow the order of a set (which changes with PYTHONHASHSEED).
    import os
    import subprocess
    import sys

    subclasses = "".join(f"class Impl{i}(Layer):\n    def update(self, x):\n        return helper(x)\n\n\n"
                         for i in range(8))
    (tmp_path / "layers.py").write_text(
        "import torch\nfrom torch import nn\n\n\ndef helper(x: torch.Tensor):\n    return x * x.max().item()\n\n\n"
        "class Layer(nn.Module):\n    def update(self, x):\n        return x\n\n\n" + subclasses
        + "class Model(nn.Module):\n    def forward(self, x: torch.Tensor, layer: Layer):\n"
          "        return layer.update(x)\n")
    reports = []
    for seed in ("1", "2", "3", "4"):
        out = tmp_path / f"seed{seed}.json"
        subprocess.run([sys.executable, "-m", "graphlint", "check", "layers.py", "--no-cache", "--format", "json",
                        "-o", str(out)], cwd=tmp_path, env={**os.environ, "PYTHONHASHSEED": seed},
                       capture_output=True, timeout=300)
        report = json.loads(out.read_text())
        report["static"].pop("stats", None)
        reports.append(report)
    assert [f["rule"] for f in reports[0]["static"]["findings"]] == ["GL101"]
    assert all(report == reports[0] for report in reports)
