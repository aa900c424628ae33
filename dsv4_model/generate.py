"""Greedy generation with the DSV4 decoder, eager or replayed from one CUDA graph, and the
replay-versus-eager acceptance check. Everything here is host code around the step.

CUDA graph recipe (the seeds' lesson): warm up on `torch.cuda.Stream(device=d)`, reset,
capture with `torch.cuda.graph(g, stream=s)` and replay inside `torch.cuda.stream(s)`, so the
capture never lands on another device's stream (empty graph, stale replay).
"""
from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass

import torch

from .factory import build_weights, forced_tokens
from .model import GraphSafeDSV4
from .reference import ReferenceDSV4

WARMUP_STEPS = 3


def resolve_device(name: str) -> torch.device:  # graphlint: host
    device = torch.device(name)
    if device.type == "cuda":
        if not torch.cuda.is_available():
            raise SystemExit("CUDA requested but torch.cuda.is_available() is False")
        if device.index is None:
            device = torch.device("cuda", torch.cuda.current_device())
    return device


def synchronize(device: torch.device) -> None:  # graphlint: host
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def device_scope(device: torch.device):  # graphlint: host
    return torch.cuda.device(device) if device.type == "cuda" else contextlib.nullcontext()


def make_prompts(vocab: int, batch: int, prompt_len: int, seed: int) -> torch.Tensor:  # graphlint: host
    """[B, prompt_len] deterministic prompt tokens."""
    return forced_tokens(vocab, prompt_len, batch, seed).T.contiguous()


@dataclass
class CapturedStep:
    """A decode step captured in a CUDA graph, with the stream it must be replayed on."""

    graph: torch.cuda.CUDAGraph
    stream: torch.cuda.Stream

    def replay(self, n: int = 1) -> None:  # graphlint: host
        with torch.cuda.stream(self.stream):
            for _ in range(n):
                self.graph.replay()


def capture_step(model: GraphSafeDSV4, warmup: int = WARMUP_STEPS) -> CapturedStep:  # graphlint: host
    """Warm up on a side stream of the model's device, reset, capture one step, reset again.

    On return the model is in its reset state; replaying the graph advances it one step.
    """
    device = model.device
    stream = torch.cuda.Stream(device=device)
    stream.wait_stream(torch.cuda.current_stream(device))
    with torch.cuda.stream(stream):
        for _ in range(warmup):
            model.step()
        model.reset()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, stream=stream):
        model.step()
    with torch.cuda.stream(stream):
        model.reset()
    stream.synchronize()
    return CapturedStep(graph, stream)


def _timed(device: torch.device, fn) -> float:  # graphlint: host
    synchronize(device)
    start = time.perf_counter()
    fn()
    synchronize(device)
    return time.perf_counter() - start


def generate(device_name: str = "cpu", config: str = "tiny", batch: int = 1, seed: int = 0,
             prompt_len: int = 8, steps: int = 16, cuda_graph: bool = False,
             use_reference: bool = False, dtype: str = "bf16", hca_ratio: int | None = None
             ) -> dict:  # graphlint: host
    """Feed the prompt, then generate `steps` greedy tokens per row. The prompt is consumed by
    the decode step itself (prefill = replayed decode), so prompt_len + steps - 1 steps run."""
    device = resolve_device(device_name)
    if cuda_graph and device.type != "cuda":
        raise SystemExit("--cuda-graph needs a CUDA device")
    if cuda_graph and use_reference:
        raise SystemExit("the reference port is the known-bad target: it cannot be captured")
    with device_scope(device):
        weights = build_weights(device, config, seed, dtype, hca_ratio)
        cfg = weights.cfg
        n_steps = prompt_len + steps - 1
        if prompt_len < 1 or steps < 1 or n_steps > cfg.max_seq_len:
            raise SystemExit(f"need prompt_len >= 1, steps >= 1 and prompt_len + steps - 1 <= {cfg.max_seq_len}")
        prompts = make_prompts(cfg.vocab_size, batch, prompt_len, seed)

        if use_reference:
            model = ReferenceDSV4(weights, batch)
            rows: list = []
            elapsed = _timed(device, lambda: rows.append(model.generate(prompts.tolist(), n_steps)))
            tokens = [r[prompt_len - 1:] for r in rows[0]]
            mode = "reference"
        else:
            model = GraphSafeDSV4(weights, batch)
            model.set_prompt(prompts.to(device))
            model.reset()
            if cuda_graph:
                captured = capture_step(model)
                elapsed = _timed(device, lambda: captured.replay(n_steps))
                mode = "cuda-graph"
            else:
                def run() -> None:  # graphlint: host
                    for _ in range(n_steps):
                        model.step()
                elapsed = _timed(device, run)
                mode = "eager"
            tokens = model.out_tokens[:, prompt_len - 1:n_steps].tolist()
    return {
        "mode": mode, "device": str(device), "config": config, "batch": batch, "seed": seed,
        "dtype": dtype, "prompt_len": prompt_len, "steps": steps, "decode_steps": n_steps,
        "ms_per_token": 1000.0 * elapsed / n_steps, "tokens": tokens,
    }


def check_eager(device_name: str = "cuda", config: str = "tiny", batch: int = 1, seed: int = 0,
                prompt_len: int = 8, steps: int = 512, dtype: str = "bf16",
                hca_ratio: int | None = None) -> dict:  # graphlint: host
    """Run `steps` decode steps eagerly, then the same steps by replaying one captured graph
    from the same reset state; compare greedy tokens and logits, and check that replays do not
    allocate (memory after 1 replayed step vs after all of them)."""
    device = resolve_device(device_name)
    if device.type != "cuda":
        raise SystemExit("--check-eager needs a CUDA device")
    with device_scope(device):
        weights = build_weights(device, config, seed, dtype, hca_ratio)
        cfg = weights.cfg
        if steps < 2 or steps > cfg.max_seq_len:
            raise SystemExit(f"--check-eager needs 2 <= steps <= {cfg.max_seq_len}")
        model = GraphSafeDSV4(weights, batch)
        model.set_prompt(make_prompts(cfg.vocab_size, batch, prompt_len, seed).to(device))
        eager_logits = torch.empty(steps, batch, cfg.vocab_size, device=device)
        graph_logits = torch.empty_like(eager_logits)

        # Eager on the default stream (first a warm-up pass so both timings are warm).
        model.reset()
        for _ in range(WARMUP_STEPS):
            model.step()
        model.reset()

        def eager_run() -> None:  # graphlint: host
            for i in range(steps):
                model.step()
                eager_logits[i].copy_(model.logits)
        eager_s = _timed(device, eager_run)
        eager_tokens = model.out_tokens[:, :steps].clone()

        captured = capture_step(model)
        with torch.cuda.stream(captured.stream):
            captured.graph.replay()
            graph_logits[0].copy_(model.logits)
        captured.stream.synchronize()
        mem_after_1 = torch.cuda.memory_allocated(device)

        def graph_run() -> None:  # graphlint: host
            with torch.cuda.stream(captured.stream):
                for i in range(1, steps):
                    captured.graph.replay()
                    graph_logits[i].copy_(model.logits)
            captured.stream.synchronize()
        graph_s = _timed(device, graph_run)
        mem_after_n = torch.cuda.memory_allocated(device)
        graph_tokens = model.out_tokens[:, :steps]

        mismatch = (graph_tokens != eager_tokens).nonzero()
        first_mismatch = int(mismatch[0, 1]) if mismatch.numel() else None
        max_diff = float((graph_logits - eager_logits).abs().max())
    ms_graph = 1000.0 * graph_s / (steps - 1)
    ms_eager = 1000.0 * eager_s / steps
    return {
        "mode": "check-eager", "device": str(device), "device_name": torch.cuda.get_device_name(device),
        "torch": torch.__version__, "config": config, "batch": batch, "seed": seed, "dtype": dtype,
        "prompt_len": prompt_len, "steps": steps,
        "tokens_match": first_mismatch is None, "first_token_mismatch_step": first_mismatch,
        "max_logit_diff": max_diff,
        "mem_after_1_step": mem_after_1, "mem_after_n_steps": mem_after_n,
        "mem_growth_bytes": mem_after_n - mem_after_1,
        "ms_per_token_eager": ms_eager, "ms_per_token_graph": ms_graph,
        "speedup": ms_eager / ms_graph if ms_graph > 0 else None,
        "ok": first_mismatch is None and mem_after_n == mem_after_1,
    }
