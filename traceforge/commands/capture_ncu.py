"""``traceforge capture --backend ncu``: pick the kernels, then profile them with ncu.

Kernels come from ``--kernels REGEX``, else the top ``--top N`` kernels by GPU time of a
trace: ``--from TRACE``, else a first capture of the same script (torch backend) into the
output folder. Each kernel is named by its function name (template arguments and
parameters dropped), so ncu's ``-k regex:`` matches it however it spells the rest.
"""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import click

from traceforge.analyzers.counters.join import top_kernels
from traceforge.capture.options import CaptureOptions, to_args
from traceforge.capture.target import Target
from traceforge.errors import CaptureError

#: Profiled launches per chosen kernel (ncu --launch-count is this times the kernels).
LAUNCHES_PER_KERNEL = 3


def first_capture(words: list[str], opts: CaptureOptions) -> Path:
    """A torch capture of the same command (``NAME.first``): the trace's path."""
    first = replace(opts, backend="torch", name=f"{opts.name}.first", profiler_path=None)
    cmd = [sys.executable, "-m", "traceforge", "capture", *to_args(first), "--", *words]
    click.echo(f"traceforge: first capture to choose kernels: {' '.join(cmd[3:])}", err=True)
    rc = subprocess.run(cmd, check=False).returncode
    summary = opts.out / f"{first.name}.{first.mode}.summary.json"
    try:
        trace = json.loads(summary.read_text())["trace"]["path"]
    except (OSError, ValueError, KeyError, TypeError):
        raise CaptureError(f"the first capture (exit {rc}) left no trace in {opts.out}") \
            from None
    return opts.out / str(trace)


def run(target: Target, opts: CaptureOptions, words: list[str], *, kernels: str | None,
        top: int, source: str | None) -> int:
    """Choose the kernels and profile them; prints what ncu changed. The exit status."""
    from traceforge.capture import ncu
    from traceforge.commands.options import load_trace

    if kernels is None:
        path = Path(source) if source else first_capture(words, opts)
        trace = load_trace(str(path), None)
        names = top_kernels(trace, top)
        if not names:
            raise CaptureError(f"{trace.meta.path or 'trace'}: no kernels to profile")
        kernels = ncu.kernel_regex(names)
        click.echo(f"traceforge: ncu will profile the top {len(names)} kernels of {path}: "
                   f"{', '.join(n[:40] for n in names)}", err=True)
        count = LAUNCHES_PER_KERNEL * len(names)
    else:
        count = LAUNCHES_PER_KERNEL * max(top, 1)
    summary = ncu.run(target, opts, kernels, count)
    extra = summary.get("ncu", {})
    for key in ("report", "csv"):
        if extra.get(key):
            click.echo(f"traceforge: ncu {key}: {opts.out / extra[key]}", err=True)
    click.echo("traceforge: ncu changed the run: " + "; ".join(ncu.CHANGES)
               + ". Its durations are not the run's; its counts (FLOPs, bytes) are.", err=True)
    return int(summary.get("exit_status") or 0)
