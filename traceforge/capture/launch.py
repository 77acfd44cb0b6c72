"""``traceforge capture -- torchrun ... train.py``: every rank captures itself in-process.

The launch is rewritten to ``torchrun OPTS -m traceforge capture ... -- python train.py``,
so each worker applies the mode and writes ``NAME.MODE.rankR.pt.trace.json.gz`` (torchrun
sets RANK), and this process only waits and reports.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

from traceforge.capture.options import CaptureOptions, to_args
from traceforge.capture.target import Launch
from traceforge.capture.trace_file import read_summary
from traceforge.errors import CaptureError, UsageError


def launch_command(launch: Launch, opts: CaptureOptions) -> list[str]:
    return [*launch.launcher, *launch.options, "-m", "traceforge", "capture", *to_args(opts),
            "--", sys.executable, *launch.target.command()]


def run(launch: Launch, opts: CaptureOptions) -> tuple[int, list[dict[str, Any]]]:
    """Run the launch; returns its exit status and the rank summaries written."""
    if opts.backend != "torch":
        raise UsageError(f"--backend {opts.backend} with torchrun is not supported; "
                         "wrap a single process, or use --backend torch")
    cmd = launch_command(launch, opts)
    try:
        rc = subprocess.call(cmd)
    except OSError as e:
        raise CaptureError(f"{cmd[0]}: cannot start ({e.strerror or e})") from None
    except KeyboardInterrupt:
        rc = 130
    return rc, rank_summaries(opts.out, f"{opts.name}.{opts.mode}")


def rank_summaries(out: Path, stem: str) -> list[dict[str, Any]]:
    """The summaries of ``stem`` ranks in ``out``, ordered by rank."""
    found = [read_summary(p) for p in out.glob(f"{stem}.rank*.summary.json")]
    return sorted(found, key=lambda s: int(s.get("rank") or 0))
