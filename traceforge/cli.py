"""The ``traceforge`` command line: parse, call the library, render, exit.

Each verb lives in its own small module under ``traceforge/commands/`` and is listed once
in :data:`COMMANDS`. Only :func:`main` maps ``TraceforgeError`` to exit codes and one-line
messages on stderr (2: bad input or usage, 1: other failures).
"""

from __future__ import annotations

import importlib
import os
import sys
from typing import Any

import click

from traceforge.errors import TraceforgeError

#: Modules under traceforge.commands, each exposing a click command named ``command``.
COMMANDS: tuple[str, ...] = (
    "top_kernels",
    "ops",
    "info",
    "convert",
    "capture",
    "diff",
    "open",
    "report",
    "annotate",
    "idle",
    "overlap",
    "breakdown",
    "launch",
    "scaling",
    "compare",
)


class _LazyGroup(click.Group):
    """Imports a verb's module only when that verb runs (or help lists them all).

    A cold ``traceforge top-kernels`` then pays for what top-kernels needs, not for the
    HTTP server, report templates or capture machinery of other verbs.
    """

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(n.replace("_", "-") for n in COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        mod = cmd_name.replace("-", "_")
        if mod not in COMMANDS:
            return None
        command: click.Command = importlib.import_module(f"traceforge.commands.{mod}").command
        return command


@click.group(cls=_LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="traceforge")
def cli() -> None:
    """Analyze GPU traces of ML workloads: Kineto JSON, Nsight Systems, rocprof, Perfetto."""


def main(argv: list[str] | None = None) -> Any:
    """Run the CLI; errors become one line on stderr and an exit code, never a traceback."""
    try:
        return cli.main(args=argv, prog_name="traceforge", standalone_mode=False)
    except TraceforgeError as e:
        click.echo(f"traceforge: error: {e}", err=True)
        sys.exit(e.exit_code)
    except click.exceptions.Abort:
        click.echo("traceforge: aborted", err=True)
        sys.exit(130)
    except click.ClickException as e:
        e.show()
        sys.exit(e.exit_code)
    except BrokenPipeError:
        sys.exit(0)
    except KeyboardInterrupt:
        click.echo("traceforge: interrupted", err=True)
        sys.exit(130)
    except Exception as e:  # noqa: BLE001 - last resort: one line, not a traceback
        if os.environ.get("TRACEFORGE_DEBUG"):
            raise
        click.echo(
            f"traceforge: internal error: {type(e).__name__}: {e} "
            "(set TRACEFORGE_DEBUG=1 for a traceback, and please report it)",
            err=True,
        )
        sys.exit(1)


if __name__ == "__main__":
    main()
