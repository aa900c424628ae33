"""The call graph as a specification: which functions an entry point reaches, through which
constructs, in which region, and which calls it admits it cannot resolve."""
from __future__ import annotations

import json
import shutil
import textwrap
from pathlib import Path

import pytest

from graphlint import callgraph
from graphlint.callgraph.module_names import package_module
from graphlint.config import Config
from graphlint.engine import Cache, analyse_all, check, collect_tasks

FIXTURES = Path(__file__).parent / "fixtures" / "regions"


def write(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text), encoding="utf-8")


def build(root: Path, *entries: str, **options) -> callgraph.CallGraph:
    config = Config(root=root, entry_points=tuple(entries), **options)
    files = analyse_all(collect_tasks([root], config), 1, Cache(None))
    return callgraph.build(files, config)


def reached(graph: callgraph.CallGraph) -> dict[str, str]:
    """qualname -> region of every function the entry points reach."""
    return {key[1]: graph.placements[key].region for key in graph.order}


def test_decode_step_reaches_layers_submodules_sequential_super_and_imports():
    graph = build(FIXTURES, "servepkg.model:Decoder.decode_step")
    assert reached(graph) == {
        "capture_decode": "host",             # it captures: orchestration, listed, not followed
        "Decoder.decode_step": "captured",
        "Block.forward": "captured",          # for i, layer in enumerate(self.layers): layer(x)
        "Attention.forward": "captured",      # self.attn = Attention(...) in __init__, self.attn(x)
        "ScaledNorm.forward": "captured",
        "RMSNorm.forward": "captured",        # super().forward(x), and layers.RMSNorm via the module
        "Gelu.forward": "captured",           # for part in self.mlp (nn.Sequential from make_mlp)
        "MoE.forward": "captured",
        "route": "captured",                  # from .moe import route
    }
    assert graph.unresolved == []
    route = next(k for k in graph.order if k[1] == "route")
    assert graph.placements[route].reached_via == ("Decoder.decode_step", "Block.forward", "MoE.forward", "route")
    weights = next(k for k in graph.placements if k[1] == "load_weights")
    assert graph.placements[weights].region == "unreached"


def test_only_reachable_code_is_checked_and_findings_carry_the_chain():
    config = Config(root=FIXTURES, entry_points=("servepkg.model:Decoder.decode_step",))
    result = check([FIXTURES], config, jobs=1)
    assert [(f.rule, f.function) for f in result.findings] == [("GL201", "route")]
    assert result.findings[0].reached_via == ("Decoder.decode_step", "Block.forward", "MoE.forward", "route")
    # In the sweep mode the same files are all per-step code (the grep mode).
    everything = check([FIXTURES], Config(root=FIXTURES, regions="sweep"), jobs=1)
    assert {f.path.rsplit("/", 1)[-1] for f in everything.findings} >= {"weights.py", "moe.py"}


def test_host_marked_sampler_stop_check_and_detokenizer_are_reached_but_not_checked():
    config = Config(root=FIXTURES, entry_points=("servepkg.engine:serve_step",))
    graph = build(FIXTURES, "servepkg.engine:serve_step")
    regions = reached(graph)
    assert {name: regions[name] for name in ("sample", "is_stop", "detokenize")} == dict.fromkeys(
        ("sample", "is_stop", "detokenize"), "host")
    findings = check([FIXTURES], config, jobs=1).findings
    assert {f.function for f in findings} == {"route"}


def test_the_same_sampler_code_reached_without_host_markers_is_checked(tmp_path):
    shutil.copytree(FIXTURES / "servepkg", tmp_path / "servepkg")
    sampling = tmp_path / "servepkg" / "sampling.py"
    sampling.write_text(sampling.read_text().replace("  # graphlint: host", ""))
    config = Config(root=tmp_path, entry_points=("servepkg.engine:serve_step",))
    findings = check([tmp_path], config, jobs=1).findings
    by_function = {(f.function, f.rule) for f in findings}
    assert {("sample", "GL101"), ("is_stop", "GL101"), ("detokenize", "GL102")} <= by_function
    # The sampler is reached from the entry point only; `route` from the capture site as well.
    assert all(f.reached_via[0] == "serve_step" for f in findings if f.function != "route")


def test_weight_loading_is_checked_once_an_entry_point_reaches_it():
    config = Config(root=FIXTURES, entry_points=("servepkg.weights:load_weights",))
    findings = check([FIXTURES], config, jobs=1).findings
    # Configured entry points combine with the discovered region (the capture site's step).
    assert {f.function for f in findings} == {"load_weights", "route"}
    assert "GL101" in {f.rule for f in findings if f.function == "load_weights"}


def test_eager_break_keeps_syncs_drops_capture_only_rules_and_stays_captured_when_reached_from_captured(tmp_path):
    write(tmp_path, {"pkg/__init__.py": "", "pkg/step.py": """
        import torch

        def step(x: torch.Tensor):
            attention(x)
            dense(x)

        def attention(x: torch.Tensor):  # graphlint: eager
            shared(x)
            gather(x)

        def dense(x: torch.Tensor):
            shared(x)

        def shared(x: torch.Tensor):
            return x * 2

        def gather(x: torch.Tensor):
            n = x.sum().item()
            return torch.zeros(4, device=x.device) + n
        """})
    graph = build(tmp_path, "pkg.step:step")
    assert reached(graph) == {"step": "captured", "attention": "eager", "dense": "captured", "shared": "captured",
                              "gather": "eager"}
    findings = check([tmp_path], Config(root=tmp_path, entry_points=("pkg.step:step",)), jobs=1).findings
    # The sync still matters in an eager break; the per-step allocation (capture-only) does not.
    assert [(f.rule, f.function, f.region) for f in findings] == [("GL101", "gather", "eager")]


def test_configured_eager_and_host_lists_act_like_markers():
    graph = build(FIXTURES, "servepkg.model:Decoder.decode_step", eager=("servepkg.moe:MoE.forward",),
                  host=("Attention.forward",))
    regions = reached(graph)
    assert regions["MoE.forward"] == "eager" and regions["route"] == "eager"
    assert regions["Attention.forward"] == "host"


def test_unresolved_calls_are_listed_with_a_reason_and_few_candidates_are_followed(tmp_path):
    write(tmp_path, {"pkg/__init__.py": "", "pkg/step.py": """
        import torch
        from .missing import helper

        class Cache:
            def update(self, k):
                return k

        def step(x: torch.Tensor, fn, store):
            y = torch.softmax(x, -1).float()
            fn(y)
            store.update(y)
            return helper(y)
        """})
    graph = build(tmp_path, "pkg.step:step")
    calls = {u["call"]: u["reason"] for u in graph.unresolved}
    assert set(calls) == {"fn", "helper"}
    assert "parameter `fn`" in calls["fn"]
    assert "pkg.missing.helper" in calls["helper"] and "outside the linted files" in calls["helper"]
    # A receiver of unknown type: the one linted class with that method is a candidate, and the
    # chain says so.
    assert reached(graph) == {"step": "captured", "Cache.update": "captured"}
    placement = graph.placements[("pkg/step.py", "Cache.update")]
    assert placement.reached_via == ("step", "Cache.update [candidate for `store.update`]")
    assert all(u["caller"] == "step" for u in graph.unresolved)


def test_a_method_many_classes_define_is_not_guessed(tmp_path):
    classes = "".join(f"\n        class Store{i}:\n            def update(self, k):\n                return k\n"
                      for i in range(5))
    write(tmp_path, {"pkg/__init__.py": "", "pkg/step.py": """
        import torch
        """ + classes + """
        def step(x: torch.Tensor, store):
            store.update(x)
        """})
    graph = build(tmp_path, "pkg.step:step")
    assert reached(graph) == {"step": "captured"}
    [entry] = graph.unresolved
    assert entry["call"] == "store.update" and "Store0.update" in entry["reason"]


def test_functions_passed_as_arguments_and_partials_are_followed(tmp_path):
    write(tmp_path, {"pkg/__init__.py": "", "pkg/step.py": """
        import functools
        import torch

        def scale(x, s):
            return x * s

        def apply(f, x):
            return f(x)

        def step(x: torch.Tensor):
            half = functools.partial(scale, s=0.5)
            return apply(torch.relu, half(x))
        """})
    regions = reached(build(tmp_path, "pkg.step:step"))
    assert set(regions) == {"step", "scale", "apply"}


def test_annotated_containers_slices_and_module_imports(tmp_path):
    write(tmp_path, {"pkg/__init__.py": "", "pkg/rope.py": """
        import torch

        class Rope:
            def at(self, pos: torch.Tensor):
                return pos
        """, "pkg/step.py": """
        import torch
        import pkg.rope as rope_mod
        from torch import nn

        class Layer(nn.Module):
            def forward(self, x):
                return x

        class Model(nn.Module):
            def __init__(self, n: int):
                super().__init__()
                self.tables: dict[str, rope_mod.Rope] = {}
                self.layers = nn.ModuleList([Layer() for _ in range(n)])
                self.n = n

            def forward(self, x: torch.Tensor, pos: torch.Tensor):
                rope = {name: table.at(pos) for name, table in self.tables.items()}
                for layer in self.layers[: self.n]:
                    x = layer(x)
                return x, rope
        """})
    assert reached(build(tmp_path, "pkg.step:Model.forward")) == {
        "Model.forward": "captured", "Rope.at": "captured", "Layer.forward": "captured"}


def test_entry_points_inherited_methods_classes_and_markers(tmp_path):
    write(tmp_path, {"pkg/__init__.py": "", "pkg/m.py": """
        import torch
        from torch import nn

        class Base(nn.Module):
            def forward(self, x):
                return self.inner(x)

            def inner(self, x):
                return x

        class Sub(Base):
            def inner(self, x):
                return x * 2

        def driver(x):  # graphlint: entry
            return x.sum().item()
        """})
    # Sub.forward is Base.forward with self a Sub: self.inner() is Sub.inner. With no capture
    # site, Base.forward (self a Base) is a root too and reaches Base.inner.
    assert set(reached(build(tmp_path, "pkg.m:Sub.forward"))) == {"Base.forward", "Sub.inner", "Base.inner", "driver"}
    assert set(reached(build(tmp_path, "pkg.m:Sub"))) == {"Base.forward", "Sub.inner", "Base.inner", "driver"}
    # The marker adds a root; it does not switch the run to checking only the marked function.
    findings = check([tmp_path], Config(root=tmp_path), jobs=1).findings
    assert [(f.rule, f.function) for f in findings] == [("GL101", "driver")]


def test_an_entry_point_that_names_nothing_is_a_config_error(tmp_path):
    write(tmp_path, {"m.py": "import torch\ndef step(x):\n    return x\n"})
    with pytest.raises(callgraph.EntryPointError, match="names no function"):
        build(tmp_path, "m:nope")


def test_facts_are_json_and_survive_the_cache(tmp_path):
    config = Config(root=FIXTURES, entry_points=("servepkg.model:Decoder.decode_step",))
    files = analyse_all(collect_tasks([FIXTURES], config), 1, Cache(None))
    with_facts = [file for file in files if file["extra"].get("calls")]
    assert len(with_facts) == 7  # __init__.py never mentions torch, but it imports: parsed for the graph
    for file in with_facts:
        assert json.loads(json.dumps(file["extra"]["calls"])) == file["extra"]["calls"]
    first = check([FIXTURES], config, jobs=1, cache_dir=tmp_path)
    second = check([FIXTURES], config, jobs=1, cache_dir=tmp_path)
    assert second.stats["cache_hits"] == len(second.files)
    assert [f.to_dict() for f in first.findings] == [f.to_dict() for f in second.findings]


def test_module_names_follow_packages_on_disk(tmp_path):
    write(tmp_path, {"a/b/__init__.py": "", "a/b/c.py": "", "a/__init__.py": "", "script.py": ""})
    assert package_module("a/b/c.py", tmp_path) == "a.b.c"
    assert package_module("a/b/__init__.py", tmp_path) == "a.b"
    assert package_module(str(tmp_path / "a" / "b" / "c.py"), Path("/elsewhere")) == "a.b.c"
    assert package_module("script.py", tmp_path) == "script"
    assert package_module("not/on/disk.py", tmp_path) == "not.on.disk"


def test_a_reexport_through_a_package_init_is_followed(tmp_path):
    write(tmp_path, {"pkg/__init__.py": "from .impl import step_impl\n", "pkg/impl.py": """
        import torch

        def step_impl(x: torch.Tensor):
            return x
        """, "app.py": """
        import torch
        from pkg import step_impl

        def step(x: torch.Tensor):
            return step_impl(x)
        """})
    # The `__init__.py` never mentions torch, but it imports: it is parsed, so its re-export resolves.
    graph = build(tmp_path, "app:step")
    assert reached(graph) == {"step": "captured", "step_impl": "captured"}
    assert graph.unresolved == []


def test_a_transformers_style_decoder_resolves_layers_and_attention_and_names_what_it_cannot(tmp_path):
    """The shape of transformers' modeling_llama.py: relative imports from modules not linted,
    a decoder layer whose base class is outside the lint, decorated forwards, a sliced
    ModuleList and attention dispatched through a registry."""
    write(tmp_path, {"tf/__init__.py": "", "tf/models/__init__.py": "", "tf/models/llama/__init__.py": "",
                     "tf/models/llama/modeling_llama.py": """
        from collections.abc import Callable

        import torch
        from torch import nn

        from ...cache_utils import Cache
        from ...modeling_layers import GradientCheckpointingLayer
        from ...modeling_utils import ALL_ATTENTION_FUNCTIONS
        from ...utils import auto_docstring


        def eager_attention_forward(module, query, key, value):
            return torch.matmul(query, key.transpose(2, 3)) @ value


        class LlamaAttention(nn.Module):
            def __init__(self, config, layer_idx: int):
                super().__init__()
                self.q_proj = nn.Linear(8, 8)
                self.layer_idx = layer_idx

            def forward(self, hidden_states: torch.Tensor, cache: Cache | None = None):
                q = self.q_proj(hidden_states)
                if cache is not None:
                    q, _ = cache.update(q, q, self.layer_idx)
                attention_interface: Callable = ALL_ATTENTION_FUNCTIONS.get_interface("eager", eager_attention_forward)
                return attention_interface(self, q, q, q)


        class LlamaDecoderLayer(GradientCheckpointingLayer):
            def __init__(self, config, layer_idx: int):
                super().__init__()
                self.self_attn = LlamaAttention(config=config, layer_idx=layer_idx)

            @auto_docstring
            def forward(self, hidden_states: torch.Tensor, cache: Cache | None = None) -> torch.Tensor:
                return hidden_states + self.self_attn(hidden_states, cache=cache)


        class LlamaModel(nn.Module):
            def __init__(self, config):
                super().__init__()
                self.config = config
                self.layers = nn.ModuleList([LlamaDecoderLayer(config, i) for i in range(config.num_hidden_layers)])

            @auto_docstring
            def forward(self, hidden_states: torch.Tensor, cache: Cache | None = None):
                for decoder_layer in self.layers[: self.config.num_hidden_layers]:
                    hidden_states = decoder_layer(hidden_states, cache=cache)
                return hidden_states
        """})
    graph = build(tmp_path, "tf.models.llama.modeling_llama:LlamaModel.forward")
    assert set(reached(graph)) == {"LlamaModel.forward", "LlamaDecoderLayer.forward", "LlamaAttention.forward",
                                   "eager_attention_forward"}  # the last one: passed to get_interface
    reasons = {u["call"]: u["reason"] for u in graph.unresolved}
    assert set(reasons) == {"cache.update", "ALL_ATTENTION_FUNCTIONS.get_interface", "attention_interface"}
    assert "`tf.cache_utils.Cache.update` is outside the linted files" in reasons["cache.update"]
