"""``traceforge convert IN OUT``: any supported trace -> Chrome JSON or Perfetto protobuf."""

from __future__ import annotations

from pathlib import Path

import click

from traceforge import output_file as output
from traceforge.commands.options import trace_argument
from traceforge.formats import load
from traceforge.render.chrome_json import ChromeSource
from traceforge.render.document import output_kind, write_document


def convert(src: str | Path, out: str | Path) -> Path:
    """Read ``src`` (any supported format) and write ``out`` in the format its suffix names."""
    dst = Path(out)
    output_kind(dst)  # an unknown suffix fails before the (long) read
    output.refuse_input(dst, [src])
    output.check(dst)  # before the read: a bad destination is found in a moment
    doc = ChromeSource(load(src))
    return output.stream(dst, lambda f: write_document(doc, dst, f))


@click.command("convert")
@trace_argument
@click.argument("out", type=click.Path(path_type=str))
def command(trace: str, out: str) -> None:
    """Convert TRACE to OUT: .json / .json.gz (Chrome/Kineto) or .pftrace (Perfetto)."""
    dst = convert(trace, out)
    output.wrote(dst, f"{dst.stat().st_size / 1e6:.1f} MB")
