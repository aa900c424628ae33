"""The text view of `runtime.compile`: the CUDA-graph status, each finding at path:line with its fix,
the eager path's causes and whether torch.compile named them, outputs and timing.

Renders only; every figure comes from the dict that compile_report.py built.
"""
from __future__ import annotations

from rich.markup import escape

MAX_LISTED = 40
KIND_STYLE = {"graph-break": "red", "recompile": "magenta", "cudagraph-skip": "yellow", "cudagraph-warning": "yellow"}


def render_compile(part: dict, console) -> None:
    """Print the compile part of a runtime report on `console` (a rich Console)."""
    verdict = part.get("verdict", "?")
    style = "green" if verdict == "pass" else "bold red"
    console.print(f"\n[bold]compile[/bold] {escape(str(part.get('device')))} "
                  f"{escape(str(part.get('mode', '')))}: [{style}]{verdict.upper()}[/{style}]"
                  f"; CUDA graphs: {escape(str(part.get('cudagraphs', 'not run')))}")
    error = part.get("error")
    if error:
        where = (error.get("stack") or [{}])[-1]
        at = f" at {where['path']}:{where['line']}" if where.get("path") else ""
        step = f" step {error['step']}" if error.get("step") is not None else ""
        console.print(f"  [red]{escape(str(error.get('phase', 'compiled')))}{step} raised:"
                      f"[/red] {escape(str(error.get('error')))}{escape(at)}")
    found = part.get("findings", [])
    for item in found[:MAX_LISTED]:
        kind_style = KIND_STYLE.get(item["kind"], "white")
        message = item["message"]
        for prefix in ("graph break: ", "recompile: "):  # the kind column already says it
            message = message[len(prefix):] if message.startswith(prefix) else message
        console.print(f"  {escape(str(item['path']))}:{item['line']}  [{kind_style}]{escape(item['kind'])}"
                      f"[/{kind_style}] {escape(message)}")
        console.print(f"      fix: {escape(item['fix'])}", style="dim")
    if len(found) > MAX_LISTED:
        console.print(f"  ... {len(found) - MAX_LISTED} more in the JSON report")
    for row in part.get("cross_check", [])[:MAX_LISTED]:
        named = ", ".join(row["named_by"]) if row["named_by"] else "not named"
        console.print(f"  eager {escape(str(row['kind']))} {escape(str(row.get('op')))} at "
                      f"{escape(str(row['path']))}:{row['line']}: {escape(named)}"
                      + (f" ({escape(row['why_not'])})" if row.get("why_not") else ""), style="dim")
    outputs = part.get("outputs")
    if outputs and not outputs.get("compared") and outputs.get("match"):
        console.print("  outputs: not compared (no data: the outputs are meta tensors)")
    elif outputs:
        text = "match eager" if outputs.get("match") else f"differ: {(outputs.get('first_mismatch') or {}).get('detail')}"
        console.print(f"  outputs over {outputs.get('steps')} step(s): {escape(str(text))}")
        for row in outputs.get("per_output", []):
            console.print(f"      output {row['output']} ({row['dtype']}): max |diff| {row['max_abs_diff']:.3g}"
                          f" (max |eager| {row['max_abs_eager']:.3g}), {row['steps_differing']} step(s) outside"
                          f" atol {row['atol']:.3g} rtol {row['rtol']:g}"
                          + (f", {row['near_ties']} flipped near-tie argmax(es)" if row.get("near_ties") else "")
                          + (f", {row['choice_flips']} step(s) match eager with a near-tie choice flipped"
                             if row.get("choice_flips") else ""),
                          style="dim")
        for flip in outputs.get("choice_flips", [])[:MAX_LISTED]:
            console.print(f"      step {flip['step']}: matches eager with its {escape(flip['op'])} at "
                          f"{escape(str(flip['path']))}:{flip['line']} flipped to the runner-up ({flip['margin']:.2g} "
                          "eps x scale from a tie: rounding can flip it)", style="dim")
        if outputs.get("rule"):
            console.print(f"      tolerance: {escape(outputs['rule'])}", style="dim")
    bench = part.get("bench")
    if bench:
        console.print(f"  time: eager {bench['eager_ms']:.3f} ms/step, compiled {bench['compiled_ms']:.3f} ms/step"
                      + (f", {bench['speedup']:.2f}x" if bench.get("speedup") else "")
                      + f" (median of {bench['samples']}"
                      + (f"; {escape(bench['measured'])}" if bench.get("measured") else "") + ")")
