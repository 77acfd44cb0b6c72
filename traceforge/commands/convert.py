"""``traceforge convert IN OUT``: any supported trace -> Chrome JSON or Perfetto protobuf."""

from __future__ import annotations

from pathlib import Path

import click

from traceforge.commands import output
from traceforge.commands.options import emit, trace_argument
from traceforge.errors import UsageError
from traceforge.formats import load
from traceforge.render.chrome_json import dumps_chrome, trace_to_chrome

#: Output suffixes and what they write.
OUTPUTS = {".json": "chrome", ".json.gz": "chrome", ".pftrace": "perfetto",
           ".perfetto-trace": "perfetto"}


def output_kind(out: Path) -> str:
    """``chrome`` or ``perfetto`` from OUT's suffix, or a usage error listing the choices."""
    for suffix, kind in OUTPUTS.items():
        if out.name.endswith(suffix):
            return kind
    raise UsageError(f"{out}: unknown output type (use one of {', '.join(OUTPUTS)})")


def convert(src: str | Path, out: str | Path) -> Path:
    """Read ``src`` (any supported format) and write ``out`` in the format its suffix names."""
    import gzip

    dst = Path(out)
    kind = output_kind(dst)
    if Path(src).resolve() == dst.resolve():
        raise UsageError(f"{dst}: output would overwrite the input")
    output.check(dst)  # before the read: a bad destination is found in a moment
    doc = trace_to_chrome(load(src))
    if kind == "perfetto":
        from traceforge.render.perfetto import chrome_to_pftrace

        data = chrome_to_pftrace(doc)
    else:
        data = dumps_chrome(doc)
        if dst.name.endswith(".gz"):
            data = gzip.compress(data, compresslevel=6)
    return output.write(dst, data)


@click.command("convert")
@trace_argument
@click.argument("out", type=click.Path(path_type=str))
def command(trace: str, out: str) -> None:
    """Convert TRACE to OUT: .json / .json.gz (Chrome/Kineto) or .pftrace (Perfetto)."""
    dst = convert(trace, out)
    emit(f"wrote {dst} ({dst.stat().st_size / 1e6:.1f} MB)")
