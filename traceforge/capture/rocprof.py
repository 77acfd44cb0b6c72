"""The rocprof backend: ``rocprofv3`` around the target, else legacy ``rocprof``."""

from __future__ import annotations

import os
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
from traceforge.executables import ROCPROF


def v3_command(exe: str, opts: CaptureOptions, stem: str, inner: list[str]) -> list[str]:
    memory = ["--memory-allocation-trace"] if opts.memory else []
    return [exe, "--kernel-trace", "--hip-trace", "--memory-copy-trace", "--marker-trace",
            *memory, "--output-format", "csv", "json", "pftrace", "-d", str(opts.out), "-o", stem,
            "--", *inner]


def legacy_command(exe: str, opts: CaptureOptions, stem: str, inner: list[str]) -> list[str]:
    return [exe, "--hip-trace", "--roctx-trace", "-d", str(opts.out),
            "-o", str(opts.out / f"{stem}.csv"), *inner]


def run(target: Target, opts: CaptureOptions) -> dict[str, Any]:
    """Profile ``target`` with rocprofv3 (or legacy rocprof); returns the run summary."""
    exe = find_profiler(ROCPROF, opts.profiler_path)
    v3 = "rocprofv3" in os.path.basename(exe)
    stem = f"{opts.name}.{opts.mode}"
    inner = inner_command(target, opts)
    cmd = v3_command(exe, opts, stem, inner) if v3 else legacy_command(exe, opts, stem, inner)
    rc = run_outer(cmd)
    extra = {"command": cmd, "version": tool_version(exe), "exit_status": rc,
             "outputs": sorted(p.name for p in opts.out.glob(f"{stem}*")
                               if not p.name.endswith(".summary.json"))}
    return complete_summary(opts.out / f"{stem}.summary.json", "rocprof", extra, rc)
