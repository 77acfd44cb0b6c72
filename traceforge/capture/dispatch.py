"""Which way a ``traceforge capture`` command line runs: a ``--nproc`` sweep, several modes
(one process each, then a comparison), a torchrun launch (one trace per rank), a program
under ncu, nsys or rocprof, or the program in this process under torch.profiler. The CLI
parses the options and shows what :func:`dispatch` returns.

Imports nothing heavy at module level: the in-process path loads only what the capture
session needs (no pandas, no numpy), since the target runs in this very process.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from traceforge.capture.options import CaptureOptions
from traceforge.capture.target import Launch, Target
from traceforge.errors import CaptureError, UsageError


@dataclass
class Dispatched:
    """What a capture left to show: the exit status to return (the target's), the sweep
    folders written (``sweeps``), the run summaries of a mode comparison (``compared``),
    lines for stderr saying where things went (``messages``) and the in-process run's
    summary (``summary``)."""

    exit_status: int
    sweeps: list[Path] = field(default_factory=list)
    compared: list[dict[str, Any]] | None = None
    messages: list[str] = field(default_factory=list)
    #: The in-process run's summary (what the CLI reports of its kernels), else None.
    summary: dict[str, Any] | None = None


def dispatch(words: list[str], modes: tuple[str, ...], opts: CaptureOptions,
             launch_spec: Launch | None, target: Target, *, nproc_text: str | None,
             batch: float | None, tokens_per_step: float | None,
             ncu: Callable[[], int] | None = None) -> Dispatched:
    """Run the capture ``words`` (the target command line) ask for, as parsed by the CLI.
    ``ncu`` runs ``--backend ncu`` and returns its exit status: choosing the kernels to
    profile reads a trace, which the CLI does (this layer reads none)."""
    out, backend = opts.out, opts.backend
    if nproc_text is not None:
        if launch_spec is None:
            raise UsageError("--nproc sweeps a torchrun launch: -- torchrun "
                             "--nproc-per-node N SCRIPT ...")
        from traceforge.capture.sweep import parse_counts, run_sweep

        rc, roots = run_sweep(launch_spec, parse_counts(nproc_text), modes, opts,
                              batch=batch, tokens=tokens_per_step)
        return Dispatched(rc, sweeps=list(roots))
    if len(modes) > 1:
        from traceforge.capture import compare

        rc, summaries = compare.run_modes(modes, opts, words)
        return Dispatched(rc, compared=list(summaries))
    if launch_spec is not None:
        from traceforge.capture import torchrun

        rc, summaries = torchrun.run(launch_spec, opts)
        lines = []
        for s in summaries:
            trace = (s.get("trace") or {}).get("path")
            where = (out / trace if trace else "in the nsys report" if backend == "nsys"
                     else "no trace")
            lines.append(f"traceforge: rank {s.get('rank')}: {where} "
                         f"(exit {s.get('exit_status')})")
        extra = summaries[0].get("nsys", {}) if summaries else {}
        for key in ("report", "sqlite"):
            if extra.get(key):
                lines.append(f"traceforge: nsys {key} (all ranks): {out / extra[key]}")
        return Dispatched(rc, messages=lines)
    if backend == "ncu":
        if ncu is None:
            raise CaptureError("--backend ncu: the kernels to profile are chosen by the CLI")
        return Dispatched(ncu())
    if backend in ("nsys", "rocprof"):
        from traceforge.capture import nsys, rocprof

        summary = (nsys if backend == "nsys" else rocprof).run(target, opts)
        extra = summary.get(backend, {})
        return Dispatched(int(summary.get("exit_status") or 0), messages=[
            f"traceforge: {backend} {key}: {extra[key]}"
            for key in ("report", "sqlite", "outputs") if extra.get(key)])
    from traceforge.capture.runner import run_target

    run = run_target(target, opts, ["traceforge", "capture", *sys.argv[2:]]
                     if sys.argv[1:2] == ["capture"] else list(sys.argv))
    return Dispatched(run.exit_status, summary=run.summary or None)
