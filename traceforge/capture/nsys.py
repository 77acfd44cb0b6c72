"""The nsys backend: ``nsys profile`` around the target, then a SQLite export beside it."""

from __future__ import annotations

from pathlib import Path
from typing import IO, Any

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
#: With shapes recorded (the default), nsys turns on PyTorch's emit_nvtx(record_shapes=True):
#: one NVTX range per op call with its input sizes, which the nsys reader makes ops of.
#: Measured on an H100 (nsys 2025.3.1, torch 2.11, a small bf16 transformer's training
#: step, CPU-bound): 16.5 ms/step under nsys without it, 33 ms/step with it (10.6 plain).
SHAPES_FLAG = "--pytorch=autograd-shapes-nvtx"


def profile_command(nsys: str, report: str, opts: CaptureOptions, inner: list[str],
                    *, process_tree: bool = False) -> list[str]:
    cmd = [nsys, "profile", "-t", TRACES, "--cuda-graph-trace=node", "--force-overwrite=true",
           "-o", report]
    if opts.record_shapes:
        cmd.append(SHAPES_FLAG)
    if process_tree:
        # torchrun's workers, and anything they fork without exec (data loaders).
        cmd.append("--trace-fork-before-exec=true")
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
    _export(nsys, rep, stem, opts, extra)
    summary = complete_summary(opts.out / f"{stem}.summary.json", "nsys", extra, rc)
    if extra.get("report") is None and rc == 0:
        raise CaptureError(f"{nsys} ran but wrote no report {rep}")
    return summary


def _export(nsys: str, rep: Path, stem: str, opts: CaptureOptions, extra: dict[str, Any]) -> None:
    """``nsys export --type sqlite`` of ``rep`` beside it; records what it wrote in ``extra``."""
    if not rep.exists():
        extra["report"] = None
        return
    sqlite = opts.out / f"{stem}.sqlite"
    # --include-blobs keeps NVTX payloads (NCCL's message sizes for `comm`); nsys before
    # 2024 lacks it, so a refusal is retried without.
    exp = [nsys, "export", "--type", "sqlite", "--include-blobs=true", "--force-overwrite=true",
           "-o", str(sqlite), str(rep)]
    erc = run_outer(exp)
    if erc != 0:
        exp = [x for x in exp if x != "--include-blobs=true"]
        erc = run_outer(exp)
    extra.update(report=rep.name, export_command=exp,
                 sqlite=sqlite.name if erc == 0 and sqlite.exists() else None)


def run_launch(launch_cmd: list[str], opts: CaptureOptions,
               env: dict[str, str] | None = None, stdout: IO[str] | None = None
               ) -> tuple[int, list[dict[str, Any]]]:
    """One nsys report of a whole torchrun process tree (launcher and every worker, each
    marking its steps with NVTX), exported to SQLite; the loader splits it into one trace
    per rank (:func:`traceforge.formats.nsys.split_processes`). ``launch_cmd`` is the
    launch whose workers run ``traceforge capture --backend nvtx``. Returns the exit status
    and the rank summaries, each completed with the report's facts."""
    nsys = find_profiler(NSYS, opts.profiler_path)
    stem = f"{opts.name}.{opts.mode}"
    rep = opts.out / f"{stem}.nsys-rep"
    cmd = profile_command(nsys, str(rep), opts, launch_cmd, process_tree=True)
    rc = run_outer(cmd, env=env, stdout=stdout)
    extra: dict[str, Any] = {"command": cmd, "version": tool_version(nsys), "exit_status": rc}
    _export(nsys, rep, stem, opts, extra)
    paths = sorted(opts.out.glob(f"{stem}.rank*.summary.json")) or [
        opts.out / f"{stem}.summary.json"]
    summaries = [complete_summary(p, "nsys", extra, rc) for p in paths]
    if extra.get("report") is None and rc == 0:
        raise CaptureError(f"{nsys} ran but wrote no report {rep}")
    return rc, summaries
