"""The ncu backend: Nsight Compute around the target, on a few chosen kernels.

``ncu --set roofline -k regex:NAMES --launch-count N`` profiles the kernels whose names
match (the caller picks them: the top kernels by time of a first capture of the same
script), a bounded number of launches so the run finishes in minutes, and the report is
exported beside it as a raw-page CSV (``NAME.MODE.ncu-raw.csv``) that traceforge reads
without Nsight Compute. ncu changes the run it measures: it locks the GPU clocks to base
(``--clock-control base``, its default), serializes kernels, and replays each profiled
kernel once per pass (caches flushed between passes): durations under ncu are not the
run's; counts (FLOPs, bytes) are. The run summary says so.
"""

from __future__ import annotations

import re
from pathlib import Path
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
from traceforge.executables import NCU

#: The section set: SOL, roofline charts' metrics (instruction counts, DRAM bytes).
SECTION_SET = "roofline"
#: What ncu does to the run, for the summary.
CHANGES = ("clocks locked to base (--clock-control base)",
           "kernels serialized, each profiled kernel replayed once per metric pass",
           "caches flushed between passes (--cache-control all)")


def kernel_regex(names: list[str]) -> str:
    """ncu's ``-k regex:`` for exactly these kernel function names."""
    return "|".join(re.escape(n) for n in names)


def profile_command(ncu: str, report: Path, kernels: str, launch_count: int,
                    inner: list[str]) -> list[str]:
    """``ncu --set roofline -k regex:KERNELS --launch-count N -o REPORT INNER``."""
    return [ncu, "--set", SECTION_SET, "-k", f"regex:{kernels}",
            "--launch-count", str(launch_count), "--target-processes", "all",
            "-f", "-o", str(report.with_suffix("")), *inner]


def run(target: Target, opts: CaptureOptions, kernels: str, launch_count: int
        ) -> dict[str, Any]:
    """Profile ``target``'s kernels matching ``kernels``; returns the completed summary."""
    ncu = find_profiler(NCU, opts.profiler_path)
    stem = f"{opts.name}.{opts.mode}"
    rep = opts.out / f"{stem}.ncu-rep"
    opts.out.mkdir(parents=True, exist_ok=True)
    cmd = profile_command(ncu, rep, kernels, launch_count, inner_command(target, opts))
    rc = run_outer(cmd)
    extra: dict[str, Any] = {"command": cmd, "version": tool_version(ncu), "exit_status": rc,
                             "kernels": kernels, "launch_count": launch_count,
                             "changes": list(CHANGES)}
    extra["report"] = rep.name if rep.exists() else None
    extra["csv"] = _export(ncu, rep, opts.out / f"{stem}.ncu-raw.csv") if rep.exists() else None
    summary = complete_summary(opts.out / f"{stem}.summary.json", "ncu", extra, rc)
    if extra["report"] is None and rc == 0:
        raise CaptureError(f"{ncu} ran but wrote no report {rep}")
    return summary


def _export(ncu: str, rep: Path, csv: Path) -> str | None:
    """``ncu --import REP --csv --page raw > CSV``; the CSV's name, or None on failure."""
    tmp = csv.with_suffix(".csv.part")
    with tmp.open("w") as fh:
        rc = run_outer([ncu, "--import", str(rep), "--csv", "--page", "raw"], stdout=fh)
    if rc != 0:
        tmp.unlink(missing_ok=True)
        return None
    tmp.replace(csv)  # a failed export never overwrites a good one
    return csv.name
