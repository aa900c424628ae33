"""`graphlint server`: the language server on stdin/stdout (graphlint/server/), for any LSP
client; needs the `server` extra (pygls)."""
from __future__ import annotations

import click

from graphlint.io.exits import fail

SERVER_HINT = "install it with pip install 'graphlint-cuda[server]'"


@click.command("server")
def server_command() -> None:
    """Run the language server (LSP over stdin and stdout): diagnostics as you type, hovers with
    the rule docs, and quick fixes that insert a suppression."""
    try:
        from graphlint.server.app import serve
    except ImportError as error:  # pygls or lsprotocol missing
        fail(f"the language server needs pygls ({error}); {SERVER_HINT}")
    serve()
