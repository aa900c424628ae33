"""Lockstep comparison of the graph-safe step with the eager reference port (the oracle).

Both decoders are built on one weights object and fed the same prompt; every step compares
the logits and the token each feeds itself next. Rows may be (re)started at different steps,
so they sit at different positions, which is what catches host-side position bugs.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import torch

from .model import GraphSafeDSV4
from .reference import ReferenceDSV4
from .weights import DSV4Weights


@dataclass
class LockstepReport:
    steps: int
    max_logit_diff: float = 0.0
    step_diffs: list[float] = field(default_factory=list)    # max |diff| over rows, per step
    first_token_mismatch: int | None = None                 # global step index
    token_agreement: float = 1.0                             # fraction of (row, step) agreeing
    positions: list[list[int]] = field(default_factory=list)  # [row][step] position, -1 idle


def lockstep(weights: DSV4Weights, prompts: torch.Tensor, steps: int,
             row_starts: list[int] | None = None, teacher_force: bool = False) -> LockstepReport:  # graphlint: host
    """Run `steps` global steps of a batch-B graph-safe decoder beside one reference per row.

    prompts: [B, P] tokens. Row b is reset (`GraphSafeDSV4.reset(row=b)`) at global step
    row_starts[b] and compared from then on. With teacher_force the graph-safe decoder is fed
    the reference's token, so one flipped argmax (bf16) does not make the sequences diverge.
    """
    B, P = prompts.shape
    row_starts = row_starts or [0] * B
    device = weights.device
    graph = GraphSafeDSV4(weights, B)
    graph.set_prompt(prompts.to(device))
    graph.reset()
    refs = [ReferenceDSV4(weights, 1) for _ in range(B)]
    ref_pos = [-1] * B
    report = LockstepReport(steps=steps, positions=[[] for _ in range(B)])
    agree = total = 0
    for t in range(steps):
        for b in range(B):
            if t == row_starts[b]:
                if t:
                    graph.reset(row=b)
                refs[b].reset()
                refs[b].set_tokens([int(prompts[b, 0])])
                ref_pos[b] = 0
        logits, _ = graph.step()
        worst = 0.0
        for b in range(B):
            p = ref_pos[b]
            report.positions[b].append(p)
            if p < 0:
                continue
            ref_logits = refs[b].forward(refs[b].tok_buf, p)[0]
            worst = max(worst, float((logits[b] - ref_logits).abs().max()))
            nxt = int(prompts[b, p + 1]) if p + 1 < P else int(ref_logits.argmax())
            total += 1
            if int(graph.tok[b]) == nxt:
                agree += 1
            elif report.first_token_mismatch is None:
                report.first_token_mismatch = t
            if teacher_force:
                graph.tok[b] = nxt
            refs[b].set_tokens([nxt])
            ref_pos[b] = p + 1
        report.step_diffs.append(worst)
        report.max_logit_diff = max(report.max_logit_diff, worst)
    report.token_agreement = agree / max(total, 1)
    return report
