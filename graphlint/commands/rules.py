"""`graphlint rules` and `graphlint explain`: the rule list and one rule's (or runtime kind's)
documentation."""
from __future__ import annotations

import click

from graphlint.io.exits import fail


@click.command("rules")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text")
def list_rules(fmt: str) -> None:
    """List every rule: code, name, severity, summary."""
    from graphlint.rules import ALL_RULES

    if fmt == "json":
        import json

        click.echo(json.dumps([{"code": r.code, "name": r.name, "family": r.family(), "severity": r.severity,
                                "summary": r.summary()} for r in ALL_RULES], indent=2))
        return
    for rule in ALL_RULES:
        click.echo(f"{rule.code}  {rule.name:<28} {rule.severity:<8} {rule.summary()}")


@click.command()
@click.argument("rule")
def explain(rule: str) -> None:
    """Print one rule's documentation (by code or name), or a runtime event or hazard kind's
    (`runtime` lists the kinds)."""
    from graphlint.rules import BY_CODE, BY_NAME

    if rule in ("runtime", "runtime/"):
        _list_runtime_kinds()
        return
    found = None if rule.startswith("runtime/") else BY_CODE.get(rule.upper()) or BY_NAME.get(rule)
    if found is None:
        from graphlint.runtime.tracing.kinds import explain as explain_kind

        kind = explain_kind(rule)
        if kind is not None:  # a runtime event or replay hazard kind
            click.echo(f"{kind.name} (runtime {kind.source}, rule family {kind.family})\n")
            click.echo(kind.docs())
            return
        fail(f"unknown rule or runtime kind '{rule}' (see `graphlint rules`)")
        return
    click.echo(f"{found.code} {found.name} ({found.family()}, {found.severity})\n")
    click.echo(found.docs())
    click.echo(f"\nMessage: {found.message}\nFix: {found.fix}")



def _list_runtime_kinds() -> None:
    """Every runtime event and replay hazard kind: name, source, rule family, what it is."""
    from graphlint.runtime.tracing.kinds import KINDS

    width = max(len(name) for name in KINDS)
    click.echo("Runtime kinds (`graphlint explain runtime/KIND` for one):\n")
    for kind in sorted(KINDS.values(), key=lambda k: (k.source, k.name)):
        first = kind.what.split(". ")[0].rstrip(".")
        click.echo(f"{kind.name:<{width}}  {kind.source:<13}  {kind.family:<4}  {first}")
