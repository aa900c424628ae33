"""The text view of `Report.runtime`: phase verdicts first, then what failed, each with path:line.

Rich markup on a terminal, plain text otherwise (the console passed in decides). Renders only;
every number comes from the runtime dict.
"""
from __future__ import annotations

from typing import Any

from rich.markup import escape

VERDICT_STYLE = {"pass": "green", "fail": "bold red", "skipped": "yellow"}
MAX_LISTED = 40


def _verdict(verdict: str | None, width: int = 7) -> str:
    verdict = verdict or "?"
    style = VERDICT_STYLE.get(verdict, "white")
    return f"[{style}]{verdict.upper():<{width}}[/{style}]"


def _bytes(n: int | None) -> str:
    if n is None:
        return "?"
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return str(n)


def _where(record: dict) -> str:
    return escape(f"{record.get('path', '?')}:{record.get('line', 0)}")


def _ms(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3f} ms"


def describe_features(features: dict[str, Any]) -> str:
    """One line of what a target's configuration exercises (hf targets: `hf_target.make`)."""
    parts = []
    if features.get("layers") is not None:
        kinds = features.get("layer_kinds") or {}
        listed = ", ".join(f"{n} {kind}" for kind, n in kinds.items())
        parts.append(f"{features['layers']} layers" + (f" ({listed})" if listed else ""))
    if features.get("moe_layers"):
        parts.append(f"{features['moe_layers']} MoE + {features.get('dense_layers') or 0} dense"
                     + (f", experts={features['experts']}" if features.get("experts") else ""))
    if features.get("sliding_layers"):
        parts.append(f"window {features.get('window')} on {features['sliding_layers']} layer(s)")
    if features.get("attn"):
        parts.append(f"attn={features['attn']}")
    if features.get("prefill"):
        parts.append(f"prefill {features['prefill']} tokens")
    for fallback in ("attn_fallback", "window_fallback", "mask_fallback"):
        if features.get(fallback):
            parts.append(features[fallback])
    return "; ".join(parts)


def render_runtime(runtime: dict[str, Any], console) -> None:
    """Print the runtime half of a report on `console` (a rich Console)."""
    if runtime.get("verdict") == "error":
        console.print(f"[bold red]runtime harness error:[/bold red] {escape(str(runtime.get('error')))}")
        return
    target = runtime.get("target", {})
    options = ", ".join(f"{k}={v}" for k, v in (target.get("options") or {}).items())
    console.print(
        f"[bold]runtime[/bold] {escape(target.get('spec', '?'))}"
        + (f" ({escape(options)})" if options else "")
        + f" on {escape(', '.join(runtime.get('devices', [])))} {escape('[' + runtime.get('mode', '?') + ']')},"
        f" torch {escape(runtime.get('torch', '?'))}"
    )
    features = target.get("features")
    if features:
        console.print(f"  exercises  {escape(describe_features(features))}")
    phases = runtime.get("phases", {})
    for name in ("sync", "allocation", "capture", "replay", "bench"):
        phase = phases.get(name, {})
        console.print(f"  {name:<11}{_verdict(phase.get('verdict'))} {escape(_phase_line(name, phase, runtime))}")
    _sync_events(runtime, console)
    _hazards(runtime, console)
    _captures(runtime, console)
    _replays(runtime, console)
    _allocations(runtime, console)
    if runtime.get("compile"):
        from graphlint.views.sections.compile_text import render_compile

        render_compile(runtime["compile"], console)
    for error in runtime.get("errors", []):
        console.print(f"[red]error:[/red] {escape(error)}")
    console.print(f"runtime verdict: {_verdict(runtime.get('verdict'), 0)}"
                  + (f" ({runtime['duration_s']:.1f} s)" if runtime.get("duration_s") is not None else ""))


def _phase_line(name: str, phase: dict, runtime: dict) -> str:
    if phase.get("error"):
        return str(phase["error"])
    if name == "sync":
        kinds = ", ".join(f"{n} {k}" for k, n in sorted(phase.get("by_kind", {}).items()))
        return f"{phase.get('events', 0)} event site(s) over {phase.get('steps_traced')} step(s)" + (
            f": {kinds}" if kinds else "")
    if name == "allocation":
        static = phase.get("outputs_static")
        out = "outputs are static buffers" if static else "outputs are allocated in the step" if static is False else ""
        growth = "; memory grows step after step" if phase.get("growth") else ""
        return (f"{phase.get('allocations_per_step')} allocation(s), {_bytes(phase.get('bytes_per_step'))} per step "
                f"at {phase.get('sites')} site(s); {out}{growth}")
    if name == "capture":
        if "devices" in phase:
            return "; ".join(f"{c.get('device')}: {c.get('status', 'not run')}" for c in runtime.get("captures", []))
        return f"{phase.get('status')}; emulated checks predict {phase.get('predicted')}"
    if name == "replay":
        hazards = ", ".join(f"{n} {k}" for k, n in sorted(phase.get("by_hazard", {}).items()))
        base = "emulated from traces of consecutive steps" if phase.get("emulated") else ", ".join(
            f"{d}: {v}" for d, v in phase.get("devices", {}).items())
        return f"{base}; {phase.get('hazards', 0)} hazard(s)" + (f": {hazards}" if hazards else "")
    if name == "bench":
        if phase.get("reason"):
            return phase["reason"]
        parts = []
        for b in runtime.get("bench", {}).get("devices", []):
            text = f"{b.get('device')}: eager {_ms(b.get('eager_ms'))}/step, replay {_ms(b.get('replay_ms'))}"
            if b.get("speedup"):
                text += f", {b['speedup']:.2f}x"
            if b.get("note") and runtime.get("mode") == "cpu-emulation":
                text += f" ({b['note'].removeprefix('replay n/a without CUDA; ')})"  # what the eager figure measures
            parts.append(text)
        return "; ".join(parts)
    return ""


def _stack(record: dict) -> str:
    frames = record.get("stack") or []
    return " > ".join(f"{f['path']}:{f['line']} {f['function']}" for f in frames[-4:])


def _sync_events(runtime: dict, console) -> None:
    events = runtime.get("sync_events", [])
    if not events:
        return
    console.print(f"\n[bold]sync events[/bold] ({len(events)})")
    for event in events[:MAX_LISTED]:
        count = f" x{event['count']}" if event.get("count", 1) > 1 else ""
        console.print(f"  {_where(event)}  [red]{escape(event['kind'])}[/red] {escape(event['op'])}{count}"
                      f" in {escape(str(event.get('function')))}")
        console.print(f"      {escape(event.get('detail', ''))}", style="dim")
        _fix(event, console)
        if len(event.get("stack") or []) > 1:
            console.print(f"      via {escape(_stack(event))}", style="dim")
    if len(events) > MAX_LISTED:
        console.print(f"  ... {len(events) - MAX_LISTED} more in the JSON report")


def _fix(record: dict, console, why: bool = False) -> None:
    """The record's fix (and, when asked, its explanation) under it."""
    if why and record.get("explanation"):
        console.print(f"      why: {escape(record['explanation'])}", style="dim")
    if record.get("fix"):
        console.print(f"      fix: {escape(record['fix'])}", style="dim")


def _hazards(runtime: dict, console) -> None:
    found = runtime.get("replay", {}).get("hazards", [])
    if not found:
        return
    console.print(f"\n[bold]replay hazards[/bold] ({len(found)})")
    for hazard in found[:MAX_LISTED]:
        console.print(f"  {_where(hazard)}  [red]{escape(hazard['hazard'])}[/red] {escape(hazard['op'])}")
        console.print(f"      {escape(hazard.get('detail', ''))}", style="dim")
        _fix(hazard, console)


def _captures(runtime: dict, console) -> None:
    for capture in runtime.get("captures", []):
        if capture.get("verdict") != "fail" or capture.get("status", "").startswith("skipped"):
            if capture.get("predicted") == "fail":
                causes = capture.get("causes", [])
                console.print(f"\n[bold]capture[/bold] {escape(capture.get('device', '?'))}: not run (no CUDA);"
                              f" predicted to fail on {len(causes)} cause(s), first at "
                              f"{_where(causes[0]) if causes else '?'}")
            continue
        console.print(f"\n[bold]capture[/bold] {escape(capture.get('device', '?'))}: [red]{escape(capture.get('status', 'failed'))}[/red]"
                      f" {escape(str(capture.get('error') or ''))}")
        cause = capture.get("cause")
        if cause:
            console.print(f"      cause: {_where(cause)} {escape(cause.get('kind', ''))} {escape(cause.get('op', ''))}")
        if capture.get("explanation"):
            console.print(f"      why: {escape(capture['explanation'])}", style="dim")
        _fix(capture, console, why=False)


def _replays(runtime: dict, console) -> None:
    for replay in runtime.get("replay", {}).get("devices", []):
        if replay.get("verdict") != "fail":
            continue
        console.print(f"\n[bold]replay[/bold] {escape(replay.get('device', '?'))}:")
        for problem in replay.get("problems") or [replay.get("reason") or str(replay.get("error"))]:
            console.print(f"  [red]{escape(str(problem))}[/red]")


def _allocations(runtime: dict, console) -> None:
    alloc = runtime.get("allocations", {})
    if alloc.get("growth"):
        console.print("\n[bold]memory held across steps[/bold] (it grows), allocated at:")
        for site in alloc.get("held_sites", [])[:5]:
            console.print(f"  {_where(site)}  {site['count']} x, {_bytes(site['bytes'])}  "
                          f"{escape(', '.join(site['ops'][:3]))}")
    sites = alloc.get("sites", [])
    if not sites:
        return
    console.print(f"\n[bold]allocations per step[/bold] on {escape(str(alloc.get('device')))} (top {min(5, len(sites))})")
    for site in sites[:5]:
        console.print(f"  {_where(site)}  {site['count']} x, {_bytes(site['bytes'])}  "
                      f"{escape(', '.join(site['ops'][:3]))}", style="dim")

