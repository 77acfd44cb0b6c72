"""``traceforge capture [OPTIONS] -- python infer.py ARGS``: run a program under a profiler.

Also in front of ``torchrun ... train.py`` (one trace per rank), and with several modes
(``--mode eager,fa2,compiled`` or ``all``), one process each, followed by a comparison.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from traceforge.capture.dispatch import dispatch
from traceforge.capture.options import (
    BACKEND_NAMES,
    COMPILE_MODES,
    CaptureOptions,
    parse_modes,
    parse_steps,
)
from traceforge.capture.target import parse_launch, parse_python, torch_missing
from traceforge.capture.trace_file import check_writable
from traceforge.commands.options import emit_frame, format_option
from traceforge.errors import UsageError

if TYPE_CHECKING:
    import pandas as pd


@click.command(
    "capture",
    context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False},
)
@click.option("--mode", "mode_text", default="sdpa", show_default=True,
              help="sdpa: the script as written (SDPA's own dispatch), except that "
                   "torch.compile calls are no-ops; "
                   "eager: SDPA forced to its unfused math backend (slower attention, like "
                   "HF attn_implementation='eager'); fa2: FlashAttention-2 only; compiled: "
                   "torch.compile on. Several comma-separated, or all, to compare.")
@click.option("--backend", type=click.Choice((*BACKEND_NAMES, "nvtx")), default="torch",
              show_default=True,
              help="torch: torch.profiler in-process; nsys, rocprof: wrap the process in that "
                   "profiler; nvtx: only mark steps as NVTX ranges (what runs inside them).")
@click.option("-o", "--out", type=click.Path(file_okay=False, path_type=Path),
              default=Path("traceforge-out"), show_default=True, help="Output directory.")
@click.option("--steps", "steps_text", default=None, metavar="WAIT,WARMUP,ACTIVE",
              help="Profiler schedule in steps [default: 2,2,5; compiled: 5,2,5]; the "
                   "steps after the window run unprofiled and give the run's step time.")
@click.option("--record-shapes/--no-record-shapes", default=True, show_default=True,
              help="Record operator input shapes (torch: record_shapes; nsys: "
                   "--pytorch=autograd-shapes-nvtx, ops with shapes as NVTX ranges, which "
                   "about doubles a CPU-bound step's time under nsys).")
@click.option("--with-stack", is_flag=True, help="Record Python stacks of operators.")
@click.option("--memory", is_flag=True,
              help="Record memory allocations: [memory] events (profile_memory), nsys "
                   "--cuda-memory-usage, rocprofv3 --memory-allocation-trace.")
@click.option("--memory-snapshot", is_flag=True,
              help="Also write NAME.MODE.memory.pickle: a torch.cuda.memory snapshot with "
                   "the allocation history of the recorded steps (traceforge memory reads it).")
@click.option("--compile-mode", type=click.Choice(COMPILE_MODES), default="default",
              show_default=True, help="torch.compile mode for calls that set none (compiled).")
@click.option("--name", default=None, help="Output file stem [default: the script's name].")
@click.option("--nsys", "nsys_path", default=None, metavar="PATH",
              help="nsys executable (else $TRACEFORGE_NSYS, else PATH).")
@click.option("--rocprof", "rocprof_path", default=None, metavar="PATH",
              help="rocprofv3 or rocprof executable (else $TRACEFORGE_ROCPROF, else PATH).")
@click.option("--ncu", "ncu_path", default=None, metavar="PATH",
              help="ncu executable (else $TRACEFORGE_NCU, else PATH, else Nsight Compute's "
                   "install folders).")
@click.option("--kernels", default=None, metavar="REGEX",
              help="--backend ncu: profile kernels whose names match (else the --top ones).")
@click.option("--top", type=click.IntRange(min=1), default=5, show_default=True,
              help="--backend ncu: profile the top N kernels by GPU time of --from TRACE, "
                   "else of a first torch capture of the same script.")
@click.option("--from", "from_trace", default=None, metavar="TRACE",
              help="--backend ncu: the trace whose top kernels to profile.")
@click.option("--nproc", "nproc_text", default=None, metavar="N,N,...",
              help="Sweep a torchrun launch over these GPU counts (its --nproc-per-node "
                   "replaced), one folder OUT/nN each, then print the scaling table.")
@click.option("--batch", type=click.FloatRange(min=0, min_open=True), default=None,
              help="Samples per GPU per step: samples/s beside the step time.")
@click.option("--tokens-per-step", type=click.FloatRange(min=0, min_open=True), default=None,
              help="Tokens per GPU per step: tokens/s beside the step time.")
@format_option
@click.argument("cmd", nargs=-1, type=click.UNPROCESSED)
def command(mode_text: str, backend: str, out: Path, steps_text: str | None,
            record_shapes: bool, with_stack: bool, memory: bool, memory_snapshot: bool,
            compile_mode: str,
            name: str | None, nsys_path: str | None, rocprof_path: str | None,
            ncu_path: str | None, kernels: str | None, top: int, from_trace: str | None,
            nproc_text: str | None, batch: float | None, tokens_per_step: float | None,
            fmt: str, cmd: tuple[str, ...]) -> None:
    """Run a Python program (or torchrun launch) under a profiler in a named mode.

    \b
      traceforge capture --mode fa2 -- python infer.py --batch 1
      traceforge capture --mode all -o runs -- python infer.py
      traceforge capture -- torchrun --nproc-per-node 2 train.py
      traceforge capture --backend nsys -- torchrun --nproc-per-node 2 train.py
      traceforge capture --backend ncu --top 5 -- python train.py
      traceforge capture --nproc 1,2,4,8 -o sweep -- torchrun --nproc-per-node 8 train.py
    """
    words = list(cmd)
    if words and words[0] == "--":
        words = words[1:]
    if not words:
        raise UsageError("no target: put the command after --, e.g. -- python infer.py")
    modes = parse_modes(mode_text)
    no_torch = torch_missing(words)
    if no_torch:
        raise UsageError(no_torch)
    launch_spec = parse_launch(words)
    target = launch_spec.target if launch_spec else parse_python(words)
    opts = CaptureOptions(
        mode=modes[0], backend=backend, out=out,
        steps=parse_steps(steps_text) if steps_text else None,
        record_shapes=record_shapes, with_stack=with_stack, memory=memory,
        memory_snapshot=memory_snapshot, compile_mode=compile_mode, name=name or target.stem,
        profiler_path={"nsys": nsys_path, "ncu": ncu_path}.get(backend, rocprof_path),
        batch=batch, tokens=tokens_per_step,
    )
    opts.check()
    # Fail on an unwritable folder now, not after a long run.
    check_writable(out)

    def ncu() -> int:
        from traceforge.commands import capture_ncu

        return capture_ncu.run(target, opts, words, kernels=kernels, top=top, source=from_trace)

    done = dispatch(words, modes, opts, launch_spec, target, nproc_text=nproc_text,
                    batch=batch, tokens_per_step=tokens_per_step, ncu=ncu)
    for root in done.sweeps:
        _scaling_table(root, fmt)
    if done.compared is not None:
        _comparison_table(modes, done.compared, fmt, out)
    for line in done.messages:
        click.echo(line, err=True)
    rc = done.exit_status
    if done.summary:
        from traceforge.analyzers.names.kernel_names import attention_text

        click.echo("traceforge: attention kernels: "
                   f"{attention_text(kernel_names_of(done.summary))}", err=True)
    if rc:
        # The target's own exit status, so `traceforge capture` composes in scripts and CI.
        raise SystemExit(rc)


def _scaling_table(root: Path, fmt: str) -> None:
    """The sweep's scaling table; a sweep whose runs left nothing to scale says why."""
    from traceforge.analyzers.runs.scaling import scaling
    from traceforge.commands.tables import emit_tables
    from traceforge.errors import TraceforgeError
    from traceforge.render.scaling import scaling_document, scaling_tables
    from traceforge.run_loader import load_runs

    try:
        report = scaling(load_runs([str(root)]))
    except TraceforgeError as e:
        click.echo(f"traceforge: no scaling table for {root}: {e}", err=True)
        return
    emit_tables(scaling_tables(report), fmt, table=None if fmt == "json" else "runs",
                doc=scaling_document(report))
    click.echo(f"traceforge: sweep in {root}; `traceforge scaling {root}` for the loss "
               "breakdown", err=True)


def _comparison_table(modes: tuple[str, ...], summaries: list[dict[str, Any]],
                      fmt: str, out: Path) -> None:
    """One row per mode: latency, peak memory, ... (``capture.compare.comparison``)."""
    import pandas as pd

    from traceforge.analyzers.names.kernel_names import attention_text
    from traceforge.capture import compare

    rows = compare.comparison(summaries)
    for row, s in zip(rows, summaries, strict=True):
        row["kernels_per_step"] = _kernels_per_step(out, s, row["kernels_per_step"])
    df = _with_peaks(pd.DataFrame(rows, columns=list(compare.COLUMNS)), summaries, out)
    df["attention"] = [attention_text(kernel_names_of(s)) for s in summaries]
    # Throughput and overhead columns only where some mode has them.
    optional = ["samples_per_s", "tokens_per_s", "profiled_ms", "overhead_pct"]
    df = df.drop(columns=[c for c in optional if df[c].isna().all()])
    emit_frame(df, fmt, title=f"traceforge capture: {' vs '.join(modes)}",
               digits=2, notes=mode_notes(summaries))


def _kernels_per_step(out: Path, summary: dict[str, object], fallback: object) -> object:
    """The mode's kernels per step by the one definition
    (:func:`traceforge.analyzers.timeline.core.kernels_per_step`), read from its trace; the
    capture's estimate where the trace cannot be read."""
    from traceforge.analyzers.timeline.core import kernels_per_step, timeline
    from traceforge.errors import TraceforgeError
    from traceforge.formats import load

    trace = summary.get("trace")
    path = trace.get("path") if isinstance(trace, dict) else None
    if not isinstance(path, str) or not (out / path).is_file():
        return fallback
    try:
        return kernels_per_step(timeline(load(out / path)))
    except TraceforgeError:
        return fallback


def kernel_names_of(summary: dict[str, Any]) -> dict[str, int]:
    """The kernel names and counts a capture summary recorded of its trace ({} without)."""
    trace = summary.get("trace")
    names = trace.get("kernel_names") if isinstance(trace, dict) else None
    return {str(k): int(v) for k, v in names.items()} if isinstance(names, dict) else {}


def mode_notes(summaries: list[dict[str, Any]]) -> tuple[str, ...]:
    """The capture table's notes: what its columns mean and what each mode changed."""
    notes = ["latency: the run's step time, the median wall time (GPU synchronized) of the "
             "unprofiled steps after the recorded window, outlier steps left out (timed_steps "
             "says over which); profiled_ms: median of the recorded steps; overhead_pct: "
             "profiled / unprofiled - 1",
             "attention: the attention kernels that ran, by SDPA backend (from their names; "
             "math: the unfused path's softmax kernels)"]
    for s in summaries:
        mode = s.get("mode")
        m = mode if isinstance(mode, dict) else {}
        actions = m.get("actions")
        if isinstance(actions, list) and actions:
            notes.append(f"{m.get('mode')} changed: {'; '.join(map(str, actions))}")
        for w in m.get("warnings", []) if isinstance(m.get("warnings"), list) else []:
            notes.append(f"{m.get('mode')}: {w}")
    return tuple(notes)


def _with_peaks(df: pd.DataFrame, summaries: list[dict[str, Any]], out: Path) -> pd.DataFrame:
    """The capture table with each mode's peak memory in place of ``peak_gib``: from its
    trace's memory events (``--memory``), else the summary's max_memory_allocated, and
    which (:func:`traceforge.analyzers.memory.peak_columns`)."""
    import pandas as pd

    from traceforge.analyzers.memory import PEAK_COLUMNS, peak_columns
    from traceforge.errors import TraceforgeError
    from traceforge.formats import load

    rows = []
    for s, gib in zip(summaries, df["peak_gib"].tolist(), strict=True):
        name = (s.get("trace") or {}).get("path")
        traces = []
        if name and (out / name).is_file():
            try:
                traces = [load(out / name)]
            except TraceforgeError:
                traces = []
        rows.append(peak_columns(traces, None if gib is None or gib != gib else gib * 2**30))
    at = list(df.columns).index("peak_gib")
    peaks = pd.DataFrame(rows, columns=list(PEAK_COLUMNS), index=df.index)
    joined: pd.DataFrame = pd.concat([df.iloc[:, :at], peaks, df.iloc[:, at + 1:]], axis=1)
    return joined
