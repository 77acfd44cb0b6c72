"""``traceforge capture -- torchrun ... train.py``: every rank captures itself in-process.

The launch is rewritten to ``torchrun OPTS -m traceforge capture ... -- python train.py``,
so each worker applies the mode and writes ``NAME.MODE.rankR.pt.trace.json.gz`` (torchrun
sets RANK), and this process only waits and reports. With ``--backend nsys`` the whole
rewritten launch runs under one ``nsys profile`` (the launcher's process tree) and the
workers only mark their steps as NVTX ranges (``--backend nvtx``); the report holds every
rank's process and is split into one trace per rank when it is loaded.
"""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

from traceforge.capture.options import CaptureOptions, to_args
from traceforge.capture.target import Launch
from traceforge.capture.trace_file import read_summary
from traceforge.errors import CaptureError, UsageError

#: Variables a torchrun worker inherits from the torchrun that started it. A launch made
#: from inside such a worker (a sweep run under an outer launcher) must not pass them on:
#: the new torchrun sets its own, and stale ones make ranks join the wrong group.
WORKER_VARIABLES = frozenset({
    "RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK", "GROUP_WORLD_SIZE",
    "ROLE_RANK", "ROLE_NAME", "ROLE_WORLD_SIZE", "TORCHELASTIC_RUN_ID",
    "TORCHELASTIC_RESTART_COUNT", "TORCHELASTIC_MAX_RESTARTS", "TORCHELASTIC_USE_AGENT_STORE",
    "TORCHELASTIC_ERROR_FILE",
})


def launch_env(base: dict[str, str] | None = None) -> dict[str, str]:
    """The environment a launch runs in: everything this process has -- NCCL_*, TORCH_*,
    NVSHMEM_*, CUDA_VISIBLE_DEVICES, HIP_VISIBLE_DEVICES, PYTHONPATH, ... pass through as
    set -- except the per-worker variables of an enclosing torchrun (WORKER_VARIABLES)."""
    src = dict(os.environ if base is None else base)
    return {k: v for k, v in src.items() if k not in WORKER_VARIABLES}


def launch_command(launch: Launch, opts: CaptureOptions) -> list[str]:
    return [*launch.launcher, *launch.options, "-m", "traceforge", "capture", *to_args(opts),
            "--", sys.executable, *launch.target.command()]


def run(launch: Launch, opts: CaptureOptions, env: dict[str, str] | None = None, *,
        output_to_stderr: bool = False) -> tuple[int, list[dict[str, Any]]]:
    """Run the launch; returns its exit status and the rank summaries written.
    ``output_to_stderr`` sends the workers' stdout to stderr (a sweep keeps stdout for its
    table)."""
    out = sys.stderr if output_to_stderr else None
    if opts.backend == "rocprof":
        raise UsageError("--backend rocprof with torchrun is not supported; wrap a single "
                         "process, or use --backend torch or nsys")
    env = launch_env() if env is None else env
    if opts.backend == "nsys":
        from traceforge.capture import nsys

        inner = replace(opts, backend="nvtx", profiler_path=None)
        return nsys.run_launch(launch_command(launch, inner), opts, env, stdout=out)
    cmd = launch_command(launch, opts)
    try:
        rc = subprocess.call(cmd, env=env, stdout=out)
    except OSError as e:
        raise CaptureError(f"{cmd[0]}: cannot start ({e.strerror or e})") from None
    except KeyboardInterrupt:
        rc = 130
    return rc, rank_summaries(opts.out, f"{opts.name}.{opts.mode}")


def rank_summaries(out: Path, stem: str) -> list[dict[str, Any]]:
    """The summaries of ``stem`` ranks in ``out``, ordered by rank."""
    found = [read_summary(p) for p in out.glob(f"{stem}.rank*.summary.json")]
    return sorted(found, key=lambda s: int(s.get("rank") or 0))
