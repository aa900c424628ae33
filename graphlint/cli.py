"""The `graphlint` command group: every subcommand (graphlint/commands/; runtime only where
torch is installed) under one error policy. Exit codes, as ruff: 0 no unsuppressed error;
1 violations; 2 usage, config or internal error.
"""
from __future__ import annotations

import signal
import sys
import threading
import traceback
from typing import Any

import click

from graphlint import __version__
from graphlint.commands.audit import audit_command, clean
from graphlint.commands.baseline import baseline_group
from graphlint.commands.check import check
from graphlint.commands.gate import gate
from graphlint.commands.common.options import COLOR, FORMATS, exit_code  # noqa: F401 - the public names of before
from graphlint.commands.rules import explain, list_rules
from graphlint.commands.server import server_command
from graphlint.config import ConfigError
from graphlint.io.exits import EXIT_ERROR, EXIT_OK, fail
from graphlint.views.output import silence_stdout


# As a shell reports a command ended by SIGINT / SIGTERM.
EXIT_INTERRUPTED, EXIT_TERMINATED = 128 + signal.SIGINT, 128 + signal.SIGTERM


class _Terminated(BaseException):
    """SIGTERM, raised where the run is, so every `finally` (the worker pool's) runs."""


def _terminated(signum: int, frame: Any) -> None:
    signal.signal(signal.SIGTERM, signal.SIG_DFL)  # a second SIGTERM ends the process at once
    raise _Terminated()


class GraphlintGroup(click.Group):
    """Turns any unexpected exception into a one-line message and exit code 2."""

    def invoke(self, ctx: click.Context):  # type: ignore[override]
        # SIGTERM unwinds like Ctrl-C, so worker processes are stopped on the way out.
        previous = None
        if threading.current_thread() is threading.main_thread():
            previous = signal.signal(signal.SIGTERM, _terminated)
        try:
            return super().invoke(ctx)
        except KeyboardInterrupt:  # click would say "Aborted!" and exit 1, which reads as violations
            click.echo("graphlint: interrupted", err=True)
            sys.exit(EXIT_INTERRUPTED)
        except _Terminated:
            click.echo("graphlint: terminated", err=True)
            sys.exit(EXIT_TERMINATED)
        except (click.exceptions.Exit, click.exceptions.Abort, click.ClickException, SystemExit):
            raise
        except BrokenPipeError:  # stdout closed by its reader: nothing more to say to anyone
            silence_stdout()
            sys.exit(EXIT_OK)
        except ConfigError as error:  # e.g. an entry point that names no linted function
            fail(str(error))
        except Exception as error:  # noqa: BLE001 - the promise is: never a traceback
            click.echo(f"graphlint: internal error: {type(error).__name__}: {error}", err=True)
            if "GRAPHLINT_DEBUG" in __import__("os").environ:
                traceback.print_exc()
            sys.exit(EXIT_ERROR)
        finally:
            if previous is not None:  # embedded (tests, another program): give SIGTERM back
                signal.signal(signal.SIGTERM, previous)

    # The runtime command imports torch and the harness (a third of a warm `check`'s time on a
    # 500-file tree): it is loaded when it is named or listed, not for every other command.
    def get_command(self, ctx: click.Context, name: str):  # type: ignore[override]
        if name in _LAZY_COMMANDS and name not in self.commands:
            _LAZY_COMMANDS[name]()
        return super().get_command(ctx, name)

    def list_commands(self, ctx: click.Context) -> list[str]:  # type: ignore[override]
        return sorted(set(super().list_commands(ctx)) | set(_LAZY_COMMANDS))


@click.group(cls=GraphlintGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="graphlint")
def main() -> None:
    """Find every reason a PyTorch decode step cannot be captured in a CUDA graph."""


for _command in (check, baseline_group, gate, list_rules, explain, clean, audit_command, server_command):
    main.add_command(_command)


def _register_optional_commands() -> None:
    """Commands whose modules may be absent in a partial install (torch for runtime)."""
    try:
        from graphlint.commands.runtime import runtime_command
    except ImportError as error:  # torch missing: say how to get it when called
        missing = str(error)

        @main.command("runtime", context_settings={"ignore_unknown_options": True})
        @click.argument("args", nargs=-1, type=click.UNPROCESSED)
        def runtime_unavailable(args: tuple[str, ...]) -> None:
            """Run the runtime harness (needs torch: pip install 'graphlint-cuda[runtime]')."""
            fail(f"the runtime harness needs torch ({missing}); install it with pip install 'graphlint-cuda[runtime]'")
    else:
        main.add_command(runtime_command)


_LAZY_COMMANDS = {"runtime": _register_optional_commands}

if __name__ == "__main__":
    main()
