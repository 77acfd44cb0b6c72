"""The nsys backend: ``nsys profile`` around the target, then a SQLite export beside it."""

from __future__ import annotations

from typing import Any

from traceforge.capture.options import CaptureOptions
from traceforge.capture.target import Target
from traceforge.capture.wrapper import (
    complete_summary,
    find_profiler,
    inner_command,
    run_outer,
    tool_version,
)
from traceforge.errors import CaptureError
from traceforge.executables import NSYS

#: CUDA, NVTX, OS runtime, cuBLAS and cuDNN: the API layers a PyTorch run goes through.
TRACES = "cuda,nvtx,osrt,cublas,cudnn"


def profile_command(nsys: str, report: str, opts: CaptureOptions, inner: list[str]) -> list[str]:
    cmd = [nsys, "profile", "-t", TRACES, "--cuda-graph-trace=node", "--force-overwrite=true",
           "-o", report]
    if opts.memory:
        cmd.append("--cuda-memory-usage=true")
    return cmd + inner


def run(target: Target, opts: CaptureOptions) -> dict[str, Any]:
    """Profile ``target`` with nsys; returns the completed run summary."""
    nsys = find_profiler(NSYS, opts.profiler_path)
    stem = f"{opts.name}.{opts.mode}"
    rep = opts.out / f"{stem}.nsys-rep"
    cmd = profile_command(nsys, str(rep), opts, inner_command(target, opts))
    rc = run_outer(cmd)
    extra: dict[str, Any] = {"command": cmd, "version": tool_version(nsys), "exit_status": rc}
    if rep.exists():
        sqlite = opts.out / f"{stem}.sqlite"
        exp = [nsys, "export", "--type", "sqlite", "--force-overwrite=true", "-o", str(sqlite),
               str(rep)]
        erc = run_outer(exp)
        extra.update(report=rep.name, export_command=exp,
                     sqlite=sqlite.name if erc == 0 and sqlite.exists() else None)
    else:
        extra["report"] = None
    summary = complete_summary(opts.out / f"{stem}.summary.json", "nsys", extra, rc)
    if extra.get("report") is None and rc == 0:
        raise CaptureError(f"{nsys} ran but wrote no report {rep}")
    return summary
