"""Command line of the bundled model: `python -m dsv4_model generate ...`.

Prints the greedy tokens and the time per decode step, then one JSON line with the figures
(the last line of output, for scripts to parse).
"""
from __future__ import annotations

import argparse
import json
import sys

from .config import CONFIGS
from .generate import check_eager, generate


def build_parser() -> argparse.ArgumentParser:  # graphlint: host
    parser = argparse.ArgumentParser(prog="python -m dsv4_model", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    gen = sub.add_parser("generate", help="greedy generation, eager or replayed from a CUDA graph")
    gen.add_argument("--prompt-len", type=int, default=8, help="prompt tokens per row (default 8)")
    gen.add_argument("--steps", type=int, default=16, help="tokens to generate per row (default 16)")
    gen.add_argument("--device", default="cpu", help="cpu, cuda or cuda:N (default cpu)")
    gen.add_argument("--cuda-graph", action="store_true", help="capture one step and replay it")
    gen.add_argument("--config", choices=sorted(CONFIGS), default="tiny")
    gen.add_argument("--batch", type=int, default=1)
    gen.add_argument("--seed", type=int, default=0)
    gen.add_argument("--dtype", choices=["bf16", "fp32"], default="bf16", help="activation dtype")
    gen.add_argument("--hca-ratio", type=int, default=None, help="replace the HCA ratio (e.g. 16)")
    gen.add_argument("--reference", action="store_true",
                     help="run the eager reference port (the known-bad target) instead")
    gen.add_argument("--check-eager", action="store_true",
                     help="CUDA acceptance: replay --steps steps (e.g. 512) and compare with eager")
    return parser


def main(argv: list[str] | None = None) -> int:  # graphlint: host
    args = build_parser().parse_args(argv)
    common = dict(device_name=args.device, config=args.config, batch=args.batch, seed=args.seed,
                  prompt_len=args.prompt_len, steps=args.steps, dtype=args.dtype,
                  hca_ratio=args.hca_ratio)
    if args.check_eager:
        result = check_eager(**common)
        print(f"{result['device_name']} {args.config} batch {args.batch}: {args.steps} steps, "
              f"tokens match: {result['tokens_match']}, max |logit diff| {result['max_logit_diff']:.3g}")
        print(f"memory allocated after 1 step {result['mem_after_1_step']} B, "
              f"after {args.steps} steps {result['mem_after_n_steps']} B")
        print(f"eager {result['ms_per_token_eager']:.3f} ms/token, "
              f"graph {result['ms_per_token_graph']:.3f} ms/token")
        print(json.dumps(result))
        return 0 if result["ok"] else 1
    result = generate(cuda_graph=args.cuda_graph, use_reference=args.reference, **common)
    for row, tokens in enumerate(result["tokens"]):
        print(f"row {row}: {' '.join(map(str, tokens))}")
    print(f"{result['mode']} on {result['device']}: {result['ms_per_token']:.3f} ms/token "
          f"over {result['decode_steps']} decode steps")
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
