"""Is the compiled bundled step's difference from eager rounding or a divergence? Teacher-forced runs
of the DSV4 step: eager bf16, eager float32 (the same bf16 weights, upcast) and torch.compile in bf16.

    python bench/compile_tolerance.py [--device cuda:0] [--steps 20] [--config tiny]
        [--variants inductor,inductor-emulate,aot_eager] [--json OUT]

Every run starts from reset() and is fed the same forced token at every step (`prepare(i)`), so a
flipped argmax cannot cascade. Per step it prints max|diff| of the logits of each bf16 run against
the float32 run and of each compiled run against eager bf16, also in units of eps(bf16) x max|logits
of the float32 run| over all steps (the scale of bf16 rounding, as the harness's tolerance), and which next tokens differ. On CUDA it also says
whether Inductor recorded CUDA graphs or skipped them (and why).
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from contextlib import nullcontext

import torch

VARIANTS = {  # name -> (torch.compile kwargs, Inductor config overrides)
    "inductor": ({"mode": "reduce-overhead"}, {}),
    "inductor-emulate": ({"mode": "reduce-overhead"}, {"emulate_precision_casts": True}),
    "aot_eager": ({"backend": "aot_eager"}, {}),
}
EPS = torch.finfo(torch.bfloat16).eps


def build(device: torch.device, config: str, dtype: str, seed: int):
    from dsv4_model.target import graph_safe

    return graph_safe(device, config=config, seed=seed, dtype=dtype)


def upcast_weights(fp32_target, bf16_target) -> None:
    """Give the float32 target the bf16 target's weights, upcast: the runs then differ by compute
    rounding only, not by the rounding of the weights."""
    src = dict(bf16_target.model.weights.named_parameters())
    for name, param in fp32_target.model.weights.named_parameters():
        param.data.copy_(src[name].data.to(param.dtype))


def drive(target, fn, steps: int, mark_step: bool) -> list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]]:
    """reset, then prepare(i) and one step per i; the (logits, next_tok, expert loads) of every step,
    cloned. The loads ([layers, experts], written by the step into a buffer) show the MoE routing."""
    outs = []
    target.reset()
    for i in range(steps):
        target.prepare(i)
        if mark_step:
            torch.compiler.cudagraph_mark_step_begin()
        logits, nxt = fn()
        loads = torch.stack([block.ffn.expert_load for block in target.model.blocks])
        outs.append((logits.detach().float().clone(), nxt.detach().clone(), loads.clone()))
    return outs


def record_router_margins(target) -> list[list[dict | None]]:
    """Wrap each MoE's route() (eager runs only): per call, the gap between the k-th and (k+1)-th
    selection score over the rows (how near the expert choice is to a tie), also in units of
    eps(bf16) x the top score; None for a hash-routed layer."""
    margins: list[list[float]] = []
    for layer, block in enumerate(target.model.blocks):
        moe = block.ffn

        def route(x, tok, moe=moe, layer=layer, original=moe.route):
            if layer == 0:
                margins.append([])
            if moe.hash_routed:
                margins[-1].append(None)
            else:
                scores = torch.nn.functional.softplus(torch.nn.functional.linear(x.float(), moe.w.gate)).sqrt()
                top = (scores + moe.w.bias).topk(moe.k + 1, dim=-1).values
                gap = float((top[:, -2] - top[:, -1]).min())
                margins[-1].append({"gap": gap, "in_eps_x_score": gap / (EPS * float(top[:, 0].abs().max()))})
            return original(x, tok)
        moe.route = route
    return margins


def compiled_run(target, variant: str, steps: int, device: torch.device) -> tuple[list, dict]:
    """The target's step through torch.compile as `variant`; its outputs and what Inductor said."""
    import torch._dynamo
    import torch._inductor.config as inductor_config

    from graphlint.runtime.torch_compile import compile_run

    kwargs, overrides = VARIANTS[variant]
    torch._dynamo.reset()
    cudagraphs = device.type == "cuda" and kwargs.get("mode") == "reduce-overhead"
    started = time.perf_counter()
    with inductor_config.patch(overrides) if overrides else nullcontext(), compile_run.listening() as log:
        outs = drive(target, torch.compile(target.step, **kwargs), steps, mark_step=cudagraphs)
    info = {"seconds": round(time.perf_counter() - started, 1),
            "cudagraph_skips": [m.split(". Found from")[0][:300] for m in log.skips] if cudagraphs else None,
            "cudagraphs_recorded": compile_run.recorded_cudagraphs(device) if cudagraphs else None}
    torch._dynamo.reset()
    return outs, info


def near_tie(logits: torch.Tensor, a: torch.Tensor, b: torch.Tensor) -> float:
    """|logit(a) - logit(b)| in the reference's logits where the two argmaxes differ (0 if none)."""
    differ = a != b
    if not differ.any():
        return 0.0
    la = logits.gather(-1, a.unsqueeze(-1)).squeeze(-1)
    lb = logits.gather(-1, b.unsqueeze(-1)).squeeze(-1)
    return float((la - lb).abs()[differ].max())


def compare(runs: dict[str, list], steps: int) -> tuple[list[dict], dict]:
    """Per step and over all steps: max|diff| of every pair that involves fp32 or eager bf16."""
    names = [n for n in runs if n != "fp32"]
    pairs = [(n, "fp32") for n in names] + [(n, "bf16") for n in names if n != "bf16"]
    scale = max(float(out[0].abs().max()) for out in runs["fp32"])
    rows, summary = [], {"scale": scale, "eps_x_scale": EPS * scale, "pairs": {}}
    for i in range(steps):
        ref = runs["fp32"][i][0]
        row = {"step": i, "eps_x_max_out": EPS * float(ref.abs().max())}
        for a, b in pairs:
            la, ta, ra = runs[a][i]
            lb, tb, rb = runs[b][i]
            key = f"{a}-{b}"
            diff = float((la - lb).abs().max())
            row[key] = diff
            flips = int((ta != tb).sum())
            entry = summary["pairs"].setdefault(key, {"max_abs_diff": 0.0, "token_flips": 0, "flip_gap": 0.0})
            entry["max_abs_diff"] = max(entry["max_abs_diff"], diff)
            entry["token_flips"] += flips
            entry["flip_gap"] = max(entry["flip_gap"], near_tie(ref, ta, tb))
            rerouted = [layer for layer in range(ra.shape[0]) if not torch.equal(ra[layer], rb[layer])]
            if rerouted:
                entry.setdefault("rerouted", []).append({"step": i, "layers": rerouted})
                row[key + " rerouted"] = rerouted
        rows.append(row)
    for entry in summary["pairs"].values():
        entry["in_eps_x_scale"] = entry["max_abs_diff"] / summary["eps_x_scale"]
    return rows, summary


def print_table(rows: list[dict], summary: dict, margins: dict, out=sys.stdout) -> None:
    keys = list(summary["pairs"])
    # Each difference also in units of eps(bf16) x max|fp32 logits| over all steps (the harness's scale).
    unit = summary["eps_x_scale"]
    print("step  eps*max|out|  " + "  ".join(f"{k:>22}" for k in keys), file=out)
    for row in rows:
        cells = "  ".join(f"{row[k]:10.5f} ({row[k] / unit:5.2f} eps)" for k in keys)
        print(f"{row['step']:4d}  {row['eps_x_max_out']:12.5f}  {cells}", file=out)
    print(f"over all steps: eps(bf16) x max|fp32 logits| = {summary['eps_x_scale']:.5f} "
          f"(max|logits| {summary['scale']:.4f})", file=out)
    for key, entry in summary["pairs"].items():
        print(f"  {key:>24}: max|diff| {entry['max_abs_diff']:.5f} = {entry['in_eps_x_scale']:.2f} eps x scale; "
              f"next tokens differing {entry['token_flips']}, largest fp32 logit gap between them "
              f"{entry['flip_gap']:.5f}", file=out)
        for where in entry.get("rerouted", []):
            notes = [f"layer {layer} (fp32 router margin {_margin(margins['fp32'], where['step'], layer)}, "
                     f"bf16 {_margin(margins['bf16'], where['step'], layer)})" for layer in where["layers"]]
            print(f"      step {where['step']}: expert choice differs at " + "; ".join(notes), file=out)


def _margin(margins: list, step: int, layer: int) -> str:
    m = margins[step][layer] if step < len(margins) and layer < len(margins[step]) else None
    return "hash-routed" if m is None else f"{m['gap']:.2e} = {m['in_eps_x_score']:.2f} eps x top score"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda:0" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--config", default="tiny")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--variants", default="inductor")
    parser.add_argument("--threads", type=int, default=None, help="intra-op threads on the CPU")
    parser.add_argument("--json", default=None, help="also write the figures to this file")
    args = parser.parse_args(argv)
    variants = [v for v in args.variants.split(",") if v]
    unknown = [v for v in variants if v not in VARIANTS]
    if unknown:
        parser.error(f"unknown variant(s) {unknown}; choose from {sorted(VARIANTS)}")
    import torch._inductor.config as inductor_config

    missing = [v for v in variants if any(not hasattr(inductor_config, key) for key in VARIANTS[v][1])]
    if missing:
        print(f"skipping {missing}: this torch's Inductor config lacks their settings", file=sys.stderr)
        variants = [v for v in variants if v not in missing]
    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        parser.error("CUDA requested but torch.cuda.is_available() is False")
    if args.threads:
        torch.set_num_threads(args.threads)
    torch.set_float32_matmul_precision("highest")  # the float32 run must not use TF32
    with torch.no_grad(), (torch.cuda.device(device) if device.type == "cuda" else nullcontext()):
        bf16 = build(device, args.config, "bf16", args.seed)
        fp32 = build(device, args.config, "fp32", args.seed)
        upcast_weights(fp32, bf16)
        margins = {"fp32": record_router_margins(fp32), "bf16": record_router_margins(bf16)}
        runs = {"fp32": drive(fp32, fp32.step, args.steps, False), "bf16": drive(bf16, bf16.step, args.steps, False)}
        compiled = {}
        for variant in variants:
            runs[variant], compiled[variant] = compiled_run(build(device, args.config, "bf16", args.seed), variant,
                                                            args.steps, device)
    rows, summary = compare(runs, args.steps)
    settings = {"device": str(device), "torch": torch.__version__, "config": args.config, "steps": args.steps,
                "threads": torch.get_num_threads()}
    if device.type == "cuda":
        settings["gpu"] = torch.cuda.get_device_name(device)
        settings["bf16_reduced_precision_reduction"] = torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction
    print(json.dumps(settings))
    for variant, info in compiled.items():
        print(f"{variant}: {json.dumps(info)}")
    print_table(rows, summary, margins)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as handle:
            json.dump({"settings": settings, "compiled": compiled, "steps": rows, "summary": summary,
                       "router_margins": margins}, handle, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
