"""GL5xx as specifications: the seeds' multi-GPU stream bug and its fix (000 "CRITICAL
MULTI-GPU REQUIREMENT", 001 category 9), cross-GPU copies (001 categories 4 and 8), the
red scalars of the staged-graphs audit (004), and which regions each kind of rule covers."""
from __future__ import annotations

import textwrap
from pathlib import Path

from graphlint.config import Config
from graphlint.engine import check
from graphlint.testing import lint_snippet

# These snippets capture a `self.model` or a `step` that no linted code builds: GL905 says so at
# each capture site (tests/test_engines_zero_config.py); the subject here is the capture rules.
STUB_CAPTURES = ("GL905",)


def gl5(code: str) -> list[tuple[str, int]]:
    return [(f.rule, f.line) for f in lint_snippet(textwrap.dedent(code), prelude=False) if f.rule.startswith("GL5")]


# The bug: capture and replay on cuda:1 chosen with set_device, no explicit stream. On GPU 0 it
# records an empty graph, on GPU 1+ it replays stale capture-time data.
STREAM_BUG = """
import torch

def capture_layer(layer, x_buf, out_buf):  # graphlint: host
    torch.cuda.set_device(1)
    g = torch.cuda.CUDAGraph()
    out_buf.copy_(layer(x_buf))
    with torch.cuda.graph(g):
        out_buf.copy_(layer(x_buf))
    return g

def replay_layer(g, x, x_buf):  # graphlint: host
    torch.cuda.set_device(1)
    x_buf.copy_(x)
    g.replay()
"""

# The fix, as the seed writes it: an explicit stream of the device for capture and replay.
STREAM_FIX = """
import torch

def capture(input_buf, output_buf, device):  # graphlint: host
    # CAPTURE:
    s = torch.cuda.Stream(device=device)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g, stream=s):
        output_buf.copy_(input_buf * 2.0)
    return g, s

def replay(g, s):  # graphlint: host
    # REPLAY:
    with torch.cuda.stream(s):
        g.replay()
"""


def test_the_seeds_stream_bug_is_caught():
    assert sorted(gl5(STREAM_BUG)) == [("GL501", 8), ("GL503", 15), ("GL504", 5), ("GL504", 13)]


def test_the_seeds_fixed_version_passes():
    assert gl5(STREAM_FIX) == []


def test_streams_without_device_in_per_gpu_loops_are_caught():
    bug = """
    import torch

    def make_streams(n_layers):  # graphlint: host
        streams = []
        for li in range(n_layers):
            torch.cuda.set_device(li % torch.cuda.device_count())
            streams.append(torch.cuda.Stream())
        return streams
    """
    fix = """
    import torch

    def make_streams(layer_devices):  # graphlint: host
        return [torch.cuda.Stream(device=dev) for dev in layer_devices]
    """
    assert gl5(bug) == [("GL502", 8)]
    assert gl5(fix) == []


def test_global_synchronize_between_graphs_and_eager_attention():
    """Seed 000, "Stream synchronization between graph and eager paths": events, not synchronize."""
    bug = """
    import torch

    def decode_layer(li, graphs_a, graphs_b, streams, attention):  # graphlint: host
        with torch.cuda.stream(streams[li]):
            graphs_a[li].replay()
        torch.cuda.synchronize()
        attention(li)
        with torch.cuda.stream(streams[li]):
            graphs_b[li].replay()
    """
    fix = """
    import torch

    def decode_layer(li, graphs_a, graphs_b, streams, attention, events):  # graphlint: host
        with torch.cuda.stream(streams[li]):
            graphs_a[li].replay()
        events[li].record(streams[li])
        torch.cuda.current_stream().wait_event(events[li])
        attention(li)
        streams[li].wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(streams[li]):
            graphs_b[li].replay()
    """
    assert [r for r, _ in gl5(bug)] == ["GL505"]
    assert gl5(fix) == []


def test_synchronize_is_reported_once_gl106_in_the_step_gl505_around_it():
    code = textwrap.dedent("""
        import torch

        def step(g):
            torch.cuda.synchronize()
            g.replay()

        def driver(g, s):  # graphlint: host
            with torch.cuda.stream(s):
                g.replay()
            torch.cuda.synchronize()
    """)
    rules = [(f.rule, f.function) for f in lint_snippet(code, prelude=False) if f.rule in ("GL106", "GL505")]
    assert rules == [("GL106", "step"), ("GL505", "driver")]


def test_orchestration_findings_survive_in_unreached_code(tmp_path: Path):
    (tmp_path / "serve.py").write_text(textwrap.dedent("""
        import torch

        def step(x: torch.Tensor, start_pos: int, cache: torch.Tensor):
            cache[:, start_pos] = x
            return x * 2

        def capture(x):
            x = x.to("cuda:1")
            g = torch.cuda.CUDAGraph()
            step(x, 0, x)
            with torch.cuda.graph(g):
                step(x, 0, x)
            return g
        """))
    findings = check([tmp_path], Config(root=tmp_path, entry_points=("serve:step",)), jobs=1).findings
    # The capturing function is orchestration (host): only capture-hygiene rules judge it.
    assert [(f.rule, f.function, f.region) for f in findings] == [
        ("GL508", "step", "captured"), ("GL501", "capture", "host")]
    assert findings[1].region_reason.startswith("captures a CUDA graph at serve.py:")
    # Zero-config: the capture site alone makes `step` the captured region.
    zero = check([tmp_path], Config(root=tmp_path, ignore=STUB_CAPTURES), jobs=1).findings
    assert [(f.rule, f.function, f.region) for f in zero] == [
        ("GL508", "step", "captured"), ("GL501", "capture", "host")]
    assert zero[0].region_reason == "capture site at serve.py:12 (torch.cuda.graph)"


def test_capture_only_rules_do_not_apply_in_eager_breaks_or_host_code():
    code = """
    import torch
    import random

    def attention(x: torch.Tensor, cache: torch.Tensor, start_pos: int):  # graphlint: eager
        cache[:, start_pos] = x
        return x.to("cuda:1") * random.random()

    def sample(logits: torch.Tensor, start_pos: int):  # graphlint: host
        return logits[:, start_pos].to("cuda:1") * random.random()
    """
    assert gl5(code) == []


def test_cross_gpu_copies_in_the_layer_loop():
    """001 categories 4 and 8: X.to(f"cuda:{gpu}") in the layer loop, positions.to(rope_cos.device),
    token_id.to(x.device); fixed with per-GPU buffers filled outside the graph."""
    bug = """
    import torch

    def forward_layers(X: torch.Tensor, layers, layer_gpu, positions: torch.Tensor, rope_cos: torch.Tensor):
        for li, layer in enumerate(layers):
            X = X.to(f"cuda:{layer_gpu[li]}")
            X = layer(X, positions.to(rope_cos.device))
        return X
    """
    fix = """
    import torch

    def forward_layer(x_in_buf: torch.Tensor, layer, dec_pos_per_gpu, gpu: int):
        return layer(x_in_buf, dec_pos_per_gpu[gpu])
    """
    assert sorted(r for r, _ in gl5(bug)) == ["GL506", "GL507"]
    assert gl5(fix) == []


def test_red_scalars_are_frozen_and_device_positions_are_not():
    """004's red scalars (pos0, raw_row, n_comp) as a Python start_pos; the graph-safe form keeps
    the position in a device buffer."""
    bug = """
    import torch

    class Attention:
        def forward(self, x: torch.Tensor, start_pos: int):
            freqs = self.freqs_cis[start_pos:start_pos + 1]
            self.kv_cache[:, start_pos % self.window] = x
            n_comp = (start_pos + 1) // self.ratio
            self.entries[:, :n_comp].mul_(freqs)
            return x
    """
    fix = """
    import torch

    class Attention:
        def forward(self, x: torch.Tensor, pos: torch.Tensor):
            cos = self.cos.index_select(0, pos)
            self.kv_cache.view(-1, x.shape[-1]).index_copy_(0, self.row_base + pos % self.window, x)
            valid = self.slots.unsqueeze(0) < torch.div(pos + 1, self.ratio, rounding_mode="floor").unsqueeze(1)
            return x * cos, valid
    """
    assert [r for r, _ in gl5(bug)] == ["GL508", "GL508", "GL508"]
    assert gl5(fix) == []


def test_host_randomness_and_clocks_in_the_step():
    code = """
    import random
    import time
    import torch

    def step(x: torch.Tensor):
        t0 = time.perf_counter()
        return x * (1.0 if random.random() > 0.5 else 0.0), t0
    """
    # The draw decides a kernel argument; the clock read is timing returned to the host.
    assert sorted(r for r, _ in gl5(code)) == ["GL509"]


def test_zero_config_multi_device_capture_bug_is_caught_and_its_fix_is_clean(tmp_path: Path):
    """The seeds' cuda:1 lesson: set_device in place of explicit per-device streams."""
    (tmp_path / "bug.py").write_text(textwrap.dedent("""
        import torch

        def capture_on(step, devices):
            graphs = []
            for index in range(torch.cuda.device_count()):
                torch.cuda.set_device(index)
                g = torch.cuda.CUDAGraph()
                step()
                with torch.cuda.graph(g):
                    step()
                graphs.append(g)
            return graphs

        def replay_all(graphs):
            for index, g in enumerate(graphs):
                with torch.cuda.device(index):
                    g.replay()
        """))
    (tmp_path / "fixed.py").write_text(textwrap.dedent("""
        import torch

        def capture_on(step, devices):
            graphs = []
            for index in range(torch.cuda.device_count()):
                s = torch.cuda.Stream(device=torch.device("cuda", index))
                g = torch.cuda.CUDAGraph()
                with torch.cuda.stream(s):
                    step()
                with torch.cuda.graph(g, stream=s):
                    step()
                graphs.append((g, s))
            return graphs

        def replay_all(graphs):
            for index, (g, s) in enumerate(graphs):
                with torch.cuda.device(index), torch.cuda.stream(s):
                    g.replay()
        """))
    # The step arrives as a parameter nobody in these files passes: GL905 says so in both; the
    # subject here is the stream rules.
    config = Config(root=tmp_path, ignore=("GL905",))
    bug = check([tmp_path / "bug.py"], config, jobs=1).findings
    assert sorted(f.rule for f in bug) == ["GL501", "GL503", "GL504"]
    assert {f.region for f in bug} == {"host"}
    assert check([tmp_path / "fixed.py"], config, jobs=1).findings == []


def test_single_device_capture_and_replay_are_not_flagged(tmp_path: Path):
    """nano-vllm's model runner: one device per process, default capture side stream."""
    (tmp_path / "runner.py").write_text(textwrap.dedent("""
        import torch

        class Runner:
            def __init__(self, model):
                self.model = model

            def capture(self, sizes):
                self.graphs = {}
                for bs in sizes:
                    graph = torch.cuda.CUDAGraph()
                    self.out[:bs] = self.model(self.x[:bs])
                    with torch.cuda.graph(graph, self.pool):
                        self.out[:bs] = self.model(self.x[:bs])
                    self.graphs[bs] = graph
                    torch.cuda.synchronize()

            def run(self, bs):
                self.graphs[bs].replay()
                return self.out[:bs].tolist()
        """))
    findings = check([tmp_path], Config(root=tmp_path, ignore=STUB_CAPTURES), jobs=1).findings
    assert findings == []


def test_a_warm_up_in_the_caller_satisfies_gl510(tmp_path: Path):
    (tmp_path / "runner.py").write_text(textwrap.dedent("""
        import torch

        class Runner:
            def __init__(self, model):
                self.model = model
                self.warmup_model()
                self.capture()

            def warmup_model(self):
                self.model(self.x)

            def capture(self):
                self.graph = torch.cuda.CUDAGraph()
                with torch.cuda.graph(self.graph):
                    self.out = self.model(self.x)

        class Cold:
            def __init__(self, model):
                self.model = model
                self.capture()

            def capture(self):
                self.graph = torch.cuda.CUDAGraph()
                with torch.cuda.graph(self.graph):
                    self.out = self.model(self.x)
        """))
    findings = check([tmp_path], Config(root=tmp_path, ignore=STUB_CAPTURES), jobs=1).findings
    assert [(f.rule, f.function) for f in findings] == [("GL510", "Cold.capture")]


def test_gl106_inside_the_capture_block_gl505_around_a_replay_and_not_after_set_up(tmp_path: Path):
    (tmp_path / "serve.py").write_text(textwrap.dedent("""
        import torch

        def capture(step):
            g = torch.cuda.CUDAGraph()
            step()
            with torch.cuda.graph(g):
                step()
                torch.cuda.synchronize()
            torch.cuda.synchronize()
            return g

        def run(g, attention):
            g.replay()
            torch.cuda.synchronize()
            attention()
        """))
    findings = check([tmp_path], Config(root=tmp_path, ignore=STUB_CAPTURES), jobs=1).findings
    assert [(f.rule, f.line, f.region) for f in findings] == [("GL106", 9, "captured"), ("GL505", 15, "host")]
    assert "every stream of the current device" in findings[1].message


def test_multi_device_evidence_is_what_code_does_with_devices_never_a_name():
    """A timer named `gpu_time`, parameters named `devices`, `world_size`, `rank`: one device.
    set_device(d) and then work on d: one device. A loop that uses its variable as a device,
    `cuda:1` and device_count(): several."""
    single = """
    import time
    import torch

    class Runner:
        def setup(self, devices, world_size, rank):  # graphlint: host
            torch.cuda.set_device(self.device)
            self.stream = torch.cuda.Stream()
            self.graph = torch.cuda.CUDAGraph()
            self.step()
            with torch.cuda.graph(self.graph):
                self.step()

        def bench(self, n):  # graphlint: host
            start = time.perf_counter()
            for _ in range(n):
                self.graph.replay()
            gpu_time = (time.perf_counter() - start) / n
            return gpu_time
    """
    assert gl5(single) == []
    several = """
    import torch

    def streams_for(devices):  # graphlint: host
        out = []
        for d in devices:
            torch.cuda.set_device(d)
            out.append(torch.cuda.Stream())
        return out

    def on_second_gpu(step):  # graphlint: host
        s = torch.cuda.Stream()
        x = torch.zeros(4, device="cuda:1")
        return s, x
    """
    found = [(f.rule, f.line, f.message) for f in lint_snippet(textwrap.dedent(several), prelude=False)
             if f.rule.startswith("GL5")]
    assert [(rule, line) for rule, line, _ in found] == [("GL502", 8), ("GL502", 12)]
    assert "a loop over devices (`d`)" in found[0][2] and "`cuda:1`" in found[1][2]


def test_gl505_only_between_replays_not_in_warm_up_set_up_or_timing(tmp_path: Path):
    (tmp_path / "runner.py").write_text(textwrap.dedent("""
        import time
        import torch

        class Runner:
            def __init__(self, model):
                self.model = model

            def capture(self):
                for _ in range(3):
                    self.model(self.x)
                torch.cuda.synchronize()
                self.graph = torch.cuda.CUDAGraph()
                with torch.cuda.graph(self.graph):
                    self.out = self.model(self.x)
                torch.cuda.synchronize()
                self.graph.replay()
                torch.cuda.synchronize()

            def warmup_replays(self):
                for _ in range(2):
                    self.graph.replay()
                torch.cuda.synchronize()

            def benchmark(self, n):
                torch.cuda.synchronize()
                start = time.perf_counter()
                for _ in range(n):
                    self.graph.replay()
                torch.cuda.synchronize()
                return (time.perf_counter() - start) / n

            def generate(self, n):
                tokens = []
                for _ in range(n):
                    self.graph.replay()
                    torch.cuda.synchronize()
                    tokens.append(self.out.argmax(-1))
                return tokens
        """))
    findings = check([tmp_path], Config(root=tmp_path), jobs=1).findings
    assert [(f.rule, f.function, f.line) for f in findings if f.rule == "GL505"] == [("GL505", "Runner.generate", 37)]
