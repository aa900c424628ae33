"""The graph-safe DSV4 step on CUDA: captured whole in one graph and replayed, it matches eager.

Recipe under test (the seeds' multi-GPU lesson): warm up on s = torch.cuda.Stream(device=d),
reset, capture with torch.cuda.graph(g, stream=s), replay inside torch.cuda.stream(s).
"""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from dsv4_model import GraphSafeDSV4, target
from dsv4_model.factory import build_weights
from dsv4_model.oracle import lockstep
from dsv4_model.testing import prompts

pytestmark = [pytest.mark.cuda,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")]

ROOT = Path(__file__).resolve().parents[1]
STEPS = 300


def _devices():
    n = torch.cuda.device_count() if torch.cuda.is_available() else 0
    return [pytest.param(i, marks=[pytest.mark.multigpu] if i else []) for i in range(max(n, 1))]


def _eager(model, steps):
    model.reset()
    logits = torch.stack([model.step()[0].clone() for _ in range(steps)])
    return logits, model.out_tokens[:, :steps].clone()


def _capture(model, device):
    s = torch.cuda.Stream(device=device)
    s.wait_stream(torch.cuda.current_stream(device))
    with torch.cuda.stream(s):
        for _ in range(3):
            model.step()
        model.reset()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g, stream=s):
        model.step()
    return g, s


def _replay(model, g, s, steps, prepare=None):
    out = torch.empty(steps, *model.logits.shape, device=model.device)
    with torch.cuda.stream(s):
        model.reset()
        for i in range(steps):
            if prepare is not None:
                prepare(i)
            g.replay()
            out[i].copy_(model.logits)
    s.synchronize()
    return out, model.out_tokens[:, :steps].clone()


@pytest.mark.parametrize("index", _devices())
@pytest.mark.parametrize("dtype", ["bf16", "fp32"])
def test_whole_step_replay_matches_eager(index, dtype):
    if index >= torch.cuda.device_count():
        pytest.skip("needs more CUDA devices")
    device = torch.device("cuda", index)
    with torch.cuda.device(device):
        model = GraphSafeDSV4(build_weights(device, "tiny", seed=0, dtype=dtype, hca_ratio=16), batch=2)
        model.set_prompt(prompts(2).to(device))
        eager_logits, eager_tokens = _eager(model, STEPS)
        g, s = _capture(model, device)
        graph_logits, graph_tokens = _replay(model, g, s, STEPS)
    assert torch.equal(graph_tokens, eager_tokens)
    assert (graph_logits - eager_logits).abs().max() < 1e-3
    # A stale or empty graph would repeat the capture-time step; the logits must move.
    assert not torch.equal(graph_logits[0], graph_logits[-1])


def test_replay_follows_inputs_prepared_between_replays():
    device = torch.device("cuda", 0)
    t = target.graph_safe(device, config="tiny", batch=2, seed=1)
    t.reset()
    eager = []
    for i in range(64):
        t.prepare(i)
        eager.append(t.step()[0].clone())
    g, s = _capture(t.model, device)
    replayed, _ = _replay(t.model, g, s, 64, prepare=t.prepare)
    assert (replayed - torch.stack(eager)).abs().max() < 1e-3


def test_replays_allocate_nothing():
    device = torch.device("cuda", 0)
    model = GraphSafeDSV4(build_weights(device, "tiny", seed=0), batch=1)
    model.set_prompt(prompts(1).to(device))
    model.reset()
    g, s = _capture(model, device)
    with torch.cuda.stream(s):
        model.reset()
        g.replay()
    s.synchronize()
    after_one = torch.cuda.memory_allocated(device)
    with torch.cuda.stream(s):
        for _ in range(200):
            g.replay()
    s.synchronize()
    assert torch.cuda.memory_allocated(device) == after_one


def test_graph_safe_matches_reference_on_cuda():
    weights = build_weights(torch.device("cuda", 0), "tiny", seed=3, dtype="fp32", hca_ratio=16)
    report = lockstep(weights, prompts(1, seed=4), steps=140)
    assert report.max_logit_diff < 1e-3 and report.first_token_mismatch is None


def _command(*args):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([sys.executable, "-m", "dsv4_model", "generate", *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_cuda_graph_command_generates_the_eager_tokens():
    eager = _command("--device", "cuda", "--steps", "40")
    replayed = _command("--device", "cuda", "--steps", "40", "--cuda-graph")
    assert replayed["mode"] == "cuda-graph" and replayed["tokens"] == eager["tokens"]


def test_check_eager_acceptance_over_512_steps():
    result = _command("--device", "cuda", "--check-eager", "--steps", "512")
    assert result["tokens_match"] and result["mem_growth_bytes"] == 0 and result["ok"]
