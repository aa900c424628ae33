"""The text view of the report's `crosscheck` section: what the runtime saw that no rule flagged
comes first (those are the gaps), then what both halves saw, then the findings the step ran
without an event and those it never ran."""
from __future__ import annotations

from typing import Any

from rich.markup import escape

MAX_LISTED = 25


def render_crosscheck(crosscheck: dict[str, Any], console) -> None:
    counts = crosscheck.get("counts") or {}
    unlinted = f"{counts['not_linted']} not linted, " if counts.get("not_linted") else ""
    console.print(f"\n[bold]cross-check[/bold] (static x runtime): {counts.get('missed_by_static', 0)} missed by static, "
                  f"{unlinted}{counts.get('confirmed', 0)} confirmed, {counts.get('not_confirmed', 0)} not confirmed, "
                  f"{counts.get('not_exercised', 0)} not exercised")
    missed = crosscheck.get("missed_by_static") or []
    if missed:
        console.print("[bold red]missed by static[/bold red] (the runtime saw it, no rule fired):")
    for entry in missed[:MAX_LISTED]:
        where = escape(f"{entry.get('path')}:{entry.get('line')}")
        family = f"{entry.get('family')} {entry.get('family_name', '')}".strip()
        outside = "" if entry.get("linted", True) else " [dim](file not linted)[/dim]"
        console.print(f"  {where}  [red]{escape(str(entry.get('kind')))}[/red] {escape(str(entry.get('op')))}"
                      f"  -> {escape(family)}{outside}")
    _more(console, missed)
    unseen = crosscheck.get("not_linted") or []
    if unseen:
        console.print("[bold yellow]not linted[/bold yellow] (the runtime saw it where the static half did not look):")
    for entry in unseen[:MAX_LISTED]:
        where = escape(f"{entry.get('path')}:{entry.get('line')}")
        console.print(f"  {where}  [yellow]{escape(str(entry.get('kind')))}[/yellow] {escape(str(entry.get('op')))}"
                      f"  [dim]{escape(str(entry.get('reason')))}[/dim]")
    _more(console, unseen)
    confirmed = crosscheck.get("confirmed") or []
    if confirmed:
        console.print("[bold]confirmed[/bold] (a finding and a runtime record on the same statement):")
    for entry in confirmed[:MAX_LISTED]:
        seen = ", ".join(f"{s.get('kind')} {s.get('op')}" for s in (entry.get("runtime") or [])[:3])
        console.print(f"  {escape(str(entry.get('path')))}:{entry.get('line')}  [bold]{escape(str(entry.get('rule')))}[/bold]"
                      f" {escape(str(entry.get('name') or ''))}  <- {escape(seen)}")
    _more(console, confirmed)
    for name, title in (("not_confirmed", "not confirmed (the step ran it, the runtime saw nothing there)"),
                        ("not_exercised", "not exercised (the step never ran it)")):
        items = crosscheck.get(name) or []
        if not items:
            continue
        listed = ", ".join(f"{e.get('path')}:{e.get('line')} {e.get('rule')}" for e in items[:8])
        more = f", ... {len(items) - 8} more" if len(items) > 8 else ""
        console.print(f"[dim]{escape(title)}: {escape(listed + more)}[/dim]")


def _more(console, items: list) -> None:
    if len(items) > MAX_LISTED:
        console.print(f"  ... {len(items) - MAX_LISTED} more in the JSON report")


def render_third_party(section: dict[str, Any], console) -> None:
    """`static.third_party`: the findings in the third-party code the step ran, one line each."""
    findings = [f for f in section.get("findings") or [] if isinstance(f, dict) and not f.get("suppressed")]
    files = section.get("files") or []
    gating = "gating (--gate-third-party)" if section.get("gates") else "not gating"
    packages = ", ".join(section.get("packages") or [])
    console.print(f"[bold]third-party code the step ran[/bold] ({escape(packages)}: {len(files)} files, "
                  f"{len(findings)} findings, {gating}):")
    for finding in findings[:MAX_LISTED]:
        console.print(f"  {escape(str(finding.get('path')))}:{finding.get('line')}:{finding.get('col')} "
                      f"[bold]{escape(str(finding.get('rule')))}[/bold] {escape(str(finding.get('message')))} "
                      f"[dim]\\[{escape(str(finding.get('name')))}][/dim]")
    _more(console, findings)
    console.print()
