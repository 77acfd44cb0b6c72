"""``capture --nproc 1,2,4,8 -- torchrun --nproc-per-node N ...``: one launch per GPU count.

The launch runs once per count with its ``--nproc-per-node`` (or ``--nproc_per_node``)
value replaced -- added when the command has none -- each into its own folder ``OUT/nN``
(``OUT/MODE/nN`` when several modes are swept), one after another so that every run has
the GPUs to itself. The environment passes through as it is (NCCL_*, TORCH_*, NVSHMEM_*,
CUDA_VISIBLE_DEVICES, ...; see :func:`traceforge.capture.torchrun.launch_env`). The sweep
folder gets ``sweep.summary.json``: the counts, each run's folder, command, exit status
and duration, and the batch and tokens per GPU per step when given, which
``traceforge scaling SWEEP`` reads.
"""

from __future__ import annotations

import json
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from traceforge.capture import torchrun
from traceforge.capture.metadata import relevant_env
from traceforge.capture.options import CaptureOptions
from traceforge.capture.target import Launch
from traceforge.errors import UsageError

#: The file at the top of a sweep folder.
SWEEP_FILE = "sweep.summary.json"
_NPROC = ("--nproc-per-node", "--nproc_per_node")


def parse_counts(text: str) -> tuple[int, ...]:
    """``"1,2,4,8"`` -> (1, 2, 4, 8): positive, distinct, in the given order."""
    try:
        counts = tuple(int(p) for p in text.split(",") if p.strip())
    except ValueError:
        raise UsageError(f"--nproc wants GPU counts such as 1,2,4,8; got {text!r}") from None
    if not counts or min(counts) < 1:
        raise UsageError(f"--nproc {text}: counts must be positive integers")
    if len(set(counts)) != len(counts):
        raise UsageError(f"--nproc {text}: a count is named twice")
    return counts


def with_nproc(launch: Launch, n: int) -> Launch:
    """The launch with ``n`` processes per node (the option replaced, or added)."""
    opts = list(launch.options)
    for i, word in enumerate(opts):
        nodes = (opts[i + 1] if word == "--nnodes" and i + 1 < len(opts)
                 else word.split("=", 1)[1] if word.startswith("--nnodes=") else "1")
        if nodes not in ("1", "1:1"):
            raise UsageError(f"--nproc sweeps one node; the launch has --nnodes {nodes}")
    for i, word in enumerate(opts):
        if word in _NPROC and i + 1 < len(opts):
            opts[i + 1] = str(n)
            return replace(launch, options=tuple(opts))
        for name in _NPROC:
            if word.startswith(f"{name}="):
                opts[i] = f"{name}={n}"
                return replace(launch, options=tuple(opts))
    return replace(launch, options=(*opts, "--nproc-per-node", str(n)))


def check_devices(counts: tuple[int, ...], env: dict[str, str]) -> None:
    """Refuse a count larger than the GPUs CUDA_VISIBLE_DEVICES / HIP_VISIBLE_DEVICES
    leave visible (when set), before anything runs."""
    for var in ("CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES"):
        value = env.get(var)
        if value is None or not value.strip():
            continue
        visible = len([d for d in value.split(",") if d.strip()])
        if max(counts) > visible:
            raise UsageError(f"--nproc {max(counts)}: {var}={value} leaves {visible} GPU(s) "
                             "visible")


def _write(path: Path, data: dict[str, Any]) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(data, indent=1, default=str) + "\n")
    tmp.replace(path)


def run_sweep(launch: Launch, counts: tuple[int, ...], modes: tuple[str, ...],
              opts: CaptureOptions, *, batch: float | None = None,
              tokens: float | None = None) -> tuple[int, list[Path]]:
    """Run the launch at every count in every mode; returns the worst exit status and the
    sweep folders (one per mode), each with its ``sweep.summary.json``."""
    env = torchrun.launch_env()
    check_devices(counts, env)
    worst = 0
    roots: list[Path] = []
    for mode in modes:
        root = opts.out / mode if len(modes) > 1 else opts.out
        root.mkdir(parents=True, exist_ok=True)
        runs: list[dict[str, Any]] = []
        doc = {"version": 1, "mode": mode, "backend": opts.backend, "counts": list(counts),
               "batch_per_gpu": batch, "tokens_per_gpu": tokens, "env": relevant_env(env),
               "runs": runs}
        for n in counts:
            folder = root / f"n{n}"
            folder.mkdir(parents=True, exist_ok=True)
            stem = f"{opts.name}.{mode}"
            for stale in folder.glob(f"{stem}.rank*.summary.json"):
                stale.unlink()  # a rank that fails early is not shown with an old run's numbers
            one = with_nproc(launch, n)
            run_opts = replace(opts, mode=mode, out=folder)
            t0 = time.perf_counter()
            rc, _ = torchrun.run(one, run_opts, env, output_to_stderr=True)
            runs.append({"gpus": n, "folder": folder.name, "mode": mode,
                         "command": torchrun.launch_command(one, run_opts),
                         "exit_status": rc, "seconds": round(time.perf_counter() - t0, 3)})
            _write(root / SWEEP_FILE, doc)  # after every count: a later failure keeps it
            worst = worst or rc
            if rc == 130:
                return rc, [*roots, root]
        roots.append(root)
    return worst, roots
