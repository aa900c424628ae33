"""The text view of `graphlint audit`: one table row per reachable function (class, region,
function, location, findings), the counts per class, the calls the graph could not resolve,
and the verdict. Rich colours on a terminal, plain text otherwise."""
from __future__ import annotations

from typing import TextIO

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from graphlint.region_audit import CAPTURABLE, AuditResult

_STYLE = {CAPTURABLE: "green", "eager": "cyan", "host": "dim", "allocates": "yellow", "capture-hygiene": "yellow"}


def render(result: AuditResult, stream: TextIO, color: bool | None = None) -> None:
    console = Console(file=stream, highlight=False, soft_wrap=False, force_terminal=color,
                      no_color=color is False, width=200 if not stream.isatty() else None)
    entries = ", ".join(result.entry_points) or "(none)"
    console.print(f"[bold]roots:[/] {escape(entries)}")
    table = Table(show_header=True, header_style="bold", box=None, pad_edge=False)
    for column in ("class", "region", "function", "location", "findings", "why"):
        table.add_column(column, no_wrap=column not in ("findings", "why"), overflow="fold")
    for row in result.rows:
        style = _STYLE.get(row.cls, "red")
        findings = " ".join(f"{rule}x{n}" if n > 1 else rule for rule, n in row.findings.items())
        location = f"{row.path}:{row.line}" if row.line else row.path
        # `*`: the region file names it (the step ran it); the others are reached from roots.
        function = escape(row.function) + (" [bold]*[/]" if row.recorded else "")
        table.add_row(f"[{style}]{row.cls}[/]", row.region, function, escape(location), findings,
                      escape(row.reason))
    console.print(table)
    counts = result.counts()
    recorded = sum(1 for row in result.rows if row.recorded)
    if recorded:
        console.print(f"[bold]*[/] {recorded} functions from the region file (they ran inside the recorded step)")
    console.print("[bold]by class:[/] " + ", ".join(f"{name} {count}" for name, count in counts.items()))
    if result.unresolved:
        console.print(f"\n[bold]unresolved calls ({len(result.unresolved)}):[/] not followed; the code they reach is not audited")
        for item in result.unresolved:
            console.print(f"  {escape(item['caller'])}: [bold]{escape(item['call'])}[/] - {escape(item['reason'])}")
    blocking = result.blocking()
    captured = sum(1 for row in result.rows if row.region == "captured")
    # A pass is only as good as the graph: say how many reachable calls it could not follow.
    unfollowed = f"{len(result.unresolved)} reachable call{'s' if len(result.unresolved) != 1 else ''} not followed"
    for site in result.incomplete:
        console.print(f"\n[bold yellow]incomplete capture[/] at {escape(site['path'])}:{site['line']}: "
                      f"{escape(site['message'])}")
    if blocking:
        console.print(f"\n[bold red]FAIL[/]: {len(blocking)} of {captured} captured functions are not capturable "
                      f"({len(result.rows)} reachable, {result.files} files, {unfollowed})")
    elif result.verdict() == "incomplete":
        what = (f"{len(result.incomplete)} capture site{'s' if len(result.incomplete) != 1 else ''} with a region "
                "graphlint could not follow" if result.incomplete else "no function is captured")
        console.print(f"\n[bold yellow]INCOMPLETE[/]: {what}; {captured} captured functions checked "
                      f"({len(result.rows)} reachable, {result.files} files, {unfollowed})")
    elif result.warning_only():
        console.print(f"\n[bold green]PASS[/]: no captured function has an error; {len(result.warning_only())} of "
                      f"{captured} have warnings only ({len(result.rows)} reachable, {result.files} files, "
                      f"{unfollowed})")
    else:
        console.print(f"\n[bold green]PASS[/]: all {captured} captured functions are capturable "
                      f"({len(result.rows)} reachable, {result.files} files, {unfollowed})")
