"""One in-process capture: apply a mode, find steps, drive torch.profiler, write the results.

    with traceforge.capture(mode="sdpa", out="traces") as run:
        for batch in loader:
            model(batch)
            traceforge.step()

The ``torch`` backend records a Kineto trace on the schedule ``--steps WAIT,WARMUP,ACTIVE``;
the ``nvtx`` backend only marks steps as NVTX (roctx on ROCm) ranges, for runs that an outer
nsys or rocprof process records.
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
import warnings
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from traceforge.capture import metadata
from traceforge.capture.memory import MemorySnapshot
from traceforge.capture.modes import ModeState, apply_mode, dynamo_counters
from traceforge.capture.options import CaptureOptions, Steps
from traceforge.capture.steps import WHOLE_RUN, StepTracker
from traceforge.capture.trace_file import check_writable, embed_metadata, write_summary
from traceforge.errors import UsageError
from traceforge.model import CAPTURE_STEP_RANGE, UNFINISHED_STEP_MARK, WARMUP_STEP_MARK
from traceforge.step_time import run_step_time

IN_PROCESS_BACKENDS = ("torch", "nvtx")
#: Warnings that traceforge's own machinery causes, not the target: Kineto's note that each
#: schedule cycle clears events (intended), and torch.compile's note that global module hooks
#: (our step detection, which counts only top-level calls) also see the OptimizedModule.
_EXPECTED_WARNINGS = (".*clears events at the end of each cycle",
                      ".*when there are global hooks on modules")


@dataclass
class StepRecord:
    """One finished step: wall time (GPU synchronized) and peak GPU memory during it."""

    index: int
    wall_s: float
    peak_bytes: int | None
    graphs_compiled: int  # dynamo graphs compiled during this step


@dataclass
class Run:
    """A capture in progress, then its outcome; ``summary`` is what went to disk."""

    options: CaptureOptions
    stem: str
    rank: int | None
    command: list[str] = field(default_factory=list)
    script: str | None = None
    steps: list[StepRecord] = field(default_factory=list)
    step_source: str = WHOLE_RUN
    exit_status: int = 0
    error: str | None = None
    interrupted: bool = False
    trace_path: Path | None = None
    summary_path: Path | None = None
    recorded_steps: list[int] = field(default_factory=list)
    mode_state: ModeState | None = None
    notes: list[str] = field(default_factory=list)
    summary: dict[str, Any] = field(default_factory=dict)


def _rank() -> int | None:
    r = os.environ.get("RANK")
    return int(r) if r is not None and r.isdigit() else None


def _schedule_action(steps: Steps, k: int, provisional: bool) -> Any:
    """The profiler action of step ``k``.

    With ``provisional``, step 0 is recorded (and saved): if the program never marks a step,
    the whole run is that one step; if it does, the real window replaces it.
    """
    from torch.profiler import ProfilerAction

    start = steps.wait + steps.warmup
    if k == 0 and steps.wait > 0 and provisional:
        return ProfilerAction.RECORD_AND_SAVE
    if k < steps.wait:
        return ProfilerAction.NONE
    if k < start:
        return ProfilerAction.WARMUP
    if k < start + steps.active - 1:
        return ProfilerAction.RECORD
    if k == start + steps.active - 1:
        return ProfilerAction.RECORD_AND_SAVE
    return ProfilerAction.NONE


class _Recorder:
    """The moving parts of a capture between start and finish."""

    def __init__(self, run: Run, out: Path) -> None:
        self.run = run
        self.out = out
        self.steps = run.options.schedule()
        self.prof: Any = None
        self.raw: Path | None = None  # Kineto JSON of the real window
        self.raw_step0: Path | None = None  # provisional whole-run / step-0 recording
        self.t0 = self.last = time.perf_counter()
        self.graphs0 = self.graphs_seen = dynamo_counters()[0]
        self.nvtx_open = False
        self.provisional = True  # step 0 may be the whole run (see _schedule_action)
        self.discarding = False
        self.tracker = StepTracker(self.on_step)
        self.snapshot = MemorySnapshot(out / f"{run.stem}.memory.pickle", run.notes)

    # -- profiler callbacks --------------------------------------------------------------
    def on_ready(self, prof: Any) -> None:
        if self.discarding:
            return
        k = prof.step_num
        provisional = k == 1 and self.steps.wait > 0 and self.provisional
        path = self.out / f".{self.run.stem}.{'step0' if provisional else 'window'}.raw.json"
        prof.export_chrome_trace(str(path))
        if provisional:
            self.raw_step0 = path
            return
        self.raw = path
        start = self.steps.wait + self.steps.warmup
        if k == 0 and not self.run.steps:
            self.run.recorded_steps = [0]
        else:
            # k is the step in progress when recording stopped: the window's end when it ran
            # to completion, a partial step when the run ended or was interrupted inside it.
            self.run.recorded_steps = list(range(start, min(k + 1, start + self.steps.active)))

    def on_step(self, restart: bool) -> None:
        import torch

        tc: Any = torch.cuda  # some of its functions are untyped
        cuda = tc.is_available() and tc.is_initialized()
        if cuda:
            # Without a sync the wall time would be the launch time, not the step's.
            torch.cuda.synchronize()
        now = time.perf_counter()
        peak: int | None = None
        if cuda:
            peak = int(torch.cuda.max_memory_allocated())
            torch.cuda.reset_peak_memory_stats()
        graphs = dynamo_counters()[0]
        if restart:
            # The weaker source's steps become one step 0, from the start until now.
            peaks = [s.peak_bytes for s in self.run.steps if s.peak_bytes is not None]
            peak = max([*peaks, peak]) if peak is not None else None
            self.run.steps.clear()
            self.last, self.graphs_seen = self.t0, self.graphs0
            self._restart_profiler()
        self.run.steps.append(StepRecord(len(self.run.steps), now - self.last, peak,
                                         graphs - self.graphs_seen))
        if self.run.options.memory_snapshot:
            self.snapshot.on_step(len(self.run.steps), self.steps)
        self.graphs_seen = graphs
        if self.prof is not None:
            self.prof.step()
        # The next step starts after the profiler's own work (a window's export can take
        # seconds), so that work is counted in no step's wall time.
        self.last = time.perf_counter()
        if self.run.options.backend == "nvtx":
            self._nvtx_next()

    def _nvtx_next(self) -> None:
        import torch

        nvtx: Any = torch.cuda.nvtx  # untyped functions
        try:
            if self.nvtx_open:
                done = len(self.run.steps) - 1  # the step whose range is open
                if 0 <= done < self.steps.wait + self.steps.warmup:
                    _mark(nvtx, WARMUP_STEP_MARK.format(n=done))
                nvtx.range_pop()
            nvtx.range_push(CAPTURE_STEP_RANGE.format(n=len(self.run.steps)))
        except RuntimeError:  # a CPU build of torch has no NVTX: run on, unmarked
            if "NVTX unavailable" not in " ".join(self.run.notes):
                self.run.notes.append("NVTX unavailable in this torch build: steps not marked")
            self.nvtx_open = False
            return
        self.nvtx_open = True

    # -- start / stop --------------------------------------------------------------------
    def _new_profiler(self) -> Any:
        import torch
        from torch.profiler import ProfilerActivity, profile

        acts = [ProfilerActivity.CPU]
        if torch.cuda.is_available():
            acts.append(ProfilerActivity.CUDA)
        return profile(
            activities=acts,
            schedule=lambda k: _schedule_action(self.steps, k, self.provisional),
            on_trace_ready=self.on_ready,
            record_shapes=self.run.options.record_shapes,
            profile_memory=self.run.options.memory,
            with_stack=self.run.options.with_stack,
        )

    def _restart_profiler(self) -> None:
        """Start the schedule over, so that its steps are the new source's steps.

        Whatever the old profiler recorded was cut at the weaker source's boundaries; it is
        dropped (the step-0 recording stays as a fallback).
        """
        if self.prof is None:
            return
        self.discarding = True
        try:
            self.prof.__exit__(None, None, None)
        finally:
            self.discarding = False
        if self.raw is not None:
            self.raw.unlink(missing_ok=True)
            self.raw, self.run.recorded_steps = None, []
        self.provisional = False
        self.prof = self._new_profiler()
        self.prof.start()

    def start(self) -> None:
        if self.run.options.backend == "torch":
            self.prof = self._new_profiler()
            self.prof.start()
        else:
            self._nvtx_next()
        self.tracker.install()
        self.last = time.perf_counter()

    def stop(self) -> None:
        self.tracker.remove()
        self.run.step_source = self.tracker.description
        if self.run.options.memory_snapshot:
            self.snapshot.finish()
        if self.prof is not None:
            self.prof.__exit__(None, None, None)  # stop, and release Kineto's step counter
        if self.nvtx_open:
            import torch

            # The open range is the tail after the last step() (exit, teardown): no step.
            # A range cannot be renamed once pushed, so a mark inside it says so, and the
            # reader leaves that range out of the steps (analyzers/timeline/steps.py).
            nvtx: Any = torch.cuda.nvtx
            _mark(nvtx, UNFINISHED_STEP_MARK.format(n=len(self.run.steps)))
            nvtx.range_pop()
            self.nvtx_open = False


def _mark(nvtx: Any, text: str) -> None:
    """An empty NVTX/roctx range named ``text`` inside the open step range. A range, not
    ``nvtx.mark``: readers keep ranges as annotations, which every analysis loads, where
    marks are instants that many-rank loads leave out."""
    nvtx.range_push(text)
    nvtx.range_pop()


#: Infix of the trace of a run that failed: ``NAME.MODE.failed.pt.trace.json.gz``.
FAILED = ".failed"


def _stem(options: CaptureOptions, rank: int | None) -> str:
    suffix = f".rank{rank}" if rank is not None else ""
    return f"{options.name}.{options.mode}{suffix}"


def _finish(rec: _Recorder, t0: float) -> None:
    run = rec.run
    opts = run.options
    state = run.mode_state
    if state is not None:
        state.finish()
    tail = time.perf_counter() - rec.last
    trace_file: dict[str, Any] | None = None
    raw = rec.raw
    if raw is None and rec.raw_step0 is not None:
        raw, run.recorded_steps = rec.raw_step0, [0]
        run.notes.append(
            f"the run ended after {len(run.steps)} step(s), before the window "
            f"--steps {rec.steps}; kept the recording of step 0 instead"
        )
    elif raw is None and opts.backend == "torch":
        run.notes.append("no steps were recorded: the run ended before the profiler's window")
    summary: dict[str, Any] = {
        "version": 1,
        "mode": state.as_dict() if state else {"mode": opts.mode},
        "backend": opts.backend,
        "rank": run.rank,
        "steps": {
            "source": run.step_source,
            "schedule": {"wait": rec.steps.wait, "warmup": rec.steps.warmup,
                         "active": rec.steps.active},
            "recorded": run.recorded_steps,
            "wall_s": [round(s.wall_s, 6) for s in run.steps],
            "peak_memory_bytes": [s.peak_bytes for s in run.steps],
            "graphs_compiled": [s.graphs_compiled for s in run.steps],
            "tail_s": round(tail, 6),
        },
        "batch_per_gpu": opts.batch,
        "tokens_per_gpu": opts.tokens,
        "total_s": round(time.perf_counter() - t0, 6),
        "exit_status": run.exit_status,
        "error": run.error,
        "interrupted": run.interrupted,
        "notes": run.notes,
        **metadata.host_info(run.script, run.command),
        **metadata.torch_info(),
    }
    if state is not None and state.mode == "compiled":
        recorded = [s.graphs_compiled for s in run.steps if s.index in run.recorded_steps]
        if sum(recorded):
            run.notes.append(f"{sum(recorded)} graph(s) compiled inside the recorded steps; "
                             "raise WAIT in --steps to keep compilation out of the trace")
    if raw is not None:
        # A failed run (an exception, a non-zero exit, Ctrl-C) gets its own name, so that
        # re-running a script with a typo never replaces the good trace of an earlier run.
        failed = run.exit_status != 0 or run.interrupted
        dest = rec.out / f"{run.stem}{FAILED if failed else ''}.pt.trace.json.gz"
        if failed and (rec.out / f"{run.stem}.pt.trace.json.gz").exists():
            run.notes.append(f"kept the earlier {run.stem}.pt.trace.json.gz of a run that "
                             "succeeded")
        names = embed_metadata(raw, dest, summary)
        trace_file = {"path": dest.name, "bytes": dest.stat().st_size,
                      "kernel_events": sum(names.values()), "kernel_names": names}
        run.trace_path = dest
    for p in (rec.raw, rec.raw_step0):
        if p is not None:
            p.unlink(missing_ok=True)
    summary["trace"] = trace_file
    if rec.snapshot.written:
        summary["memory_snapshot"] = rec.snapshot.path.name
        run.notes.append(f"wrote {rec.snapshot.path}")
    run.summary_path = rec.out / f"{run.stem}.summary.json"
    write_summary(run.summary_path, summary)
    run.summary = summary


def _span(idx: Sequence[int]) -> str:
    if not idx:
        return "none"
    return f"{idx[0]}-{idx[-1]}" if len(idx) > 1 else str(idx[0])


def step_lines(summary: dict[str, Any] | None) -> list[str]:
    """Which steps the profiler recorded, which ran unprofiled, and the run's step time
    (:func:`traceforge.step_time.run_step_time`) with the profiler's overhead."""
    st = run_step_time(summary)
    if st is None:
        return []
    lines = [f"steps {_span(st.recorded)} recorded (profiled), {_span(st.after)} ran "
             f"unprofiled ({len(st.after)} step(s))"]
    words = f"step time {st.ms:,.2f} ms ({st.label})"
    if st.samples_per_s:
        words += f", {st.samples_per_s:,.1f} samples/s"
    if st.tokens_per_s:
        words += f", {st.tokens_per_s:,.1f} tokens/s"
    if st.overhead_pct is not None and st.profiled_s is not None:
        words += (f"; profiled steps {st.profiled_s * 1e3:,.2f} ms: profiler overhead "
                  f"{st.overhead_pct:+.1f}%")
    lines.append(words)
    if st.outlier_steps:
        lines.append(f"outlier step(s) {', '.join(map(str, st.outlier_steps))} left out of the "
                     "step time")
    if not st.after:
        lines.append("no step ran after the recorded window: run more steps for an "
                     "unprofiled step time")
    return lines


def report_lines(run: Run) -> list[str]:
    """What the capture did, in a few lines for the terminal."""
    state = run.mode_state
    lines = [f"mode {run.options.mode}: " + "; ".join(state.actions if state else [])]
    if state is not None and state.mode == "compiled":
        graphs, breaks = state.compile_counts()
        lines.append(f"compiled {graphs} graph(s), {breaks} graph break(s)")
    lines += state.warnings if state else []
    done = len(run.steps)
    if run.options.backend == "nvtx":
        lines.append(f"steps from {run.step_source}: {done} step(s) finished, "
                     "each an NVTX range 'step N'")
    else:
        lines.append(f"steps from {run.step_source}: {done} step(s) finished, "
                     f"recorded {run.recorded_steps or 'none'}")
    lines += step_lines(run.summary)
    if run.error:
        lines.append(f"target: {run.error} (exit status {run.exit_status})")
    lines += run.notes
    if run.trace_path is not None:
        lines.append(f"wrote {run.trace_path}")
    elif run.options.backend == "torch":
        lines.append("no trace written")
    if run.summary_path is not None:
        lines.append(f"wrote {run.summary_path}")
    return lines


@contextlib.contextmanager
def capture(
    mode: str = "sdpa",
    out: str | Path = "traceforge-out",
    *,
    backend: str = "torch",
    steps: Steps | str | None = None,
    name: str = "capture",
    record_shapes: bool = True,
    with_stack: bool = False,
    memory: bool = False,
    memory_snapshot: bool = False,
    compile_mode: str = "default",
    quiet: bool = False,
    command: list[str] | None = None,
    script: str | None = None,
) -> Iterator[Run]:
    """Capture the block under ``torch.profiler`` in ``mode``; mark steps with ``step()``.

    Writes ``OUT/NAME.MODE[.rankR].pt.trace.json.gz`` (with a top-level ``traceforge`` key)
    and ``...summary.json`` beside it, also when the block raises or is interrupted.
    """
    from traceforge.capture.options import parse_steps

    if backend not in IN_PROCESS_BACKENDS:
        raise UsageError(f"backend {backend!r} wraps a whole process: use `traceforge capture "
                         f"--backend {backend} -- python SCRIPT` instead of the Python API")
    opts = CaptureOptions(
        mode=mode, backend=backend, out=Path(out),
        steps=parse_steps(steps) if isinstance(steps, str) else steps,
        record_shapes=record_shapes, with_stack=with_stack, memory=memory,
        memory_snapshot=memory_snapshot, compile_mode=compile_mode, name=name,
    )
    opts.check()
    check_writable(opts.out)
    rank = _rank()
    run = Run(opts, _stem(opts, rank), rank, command=command or list(sys.argv), script=script)
    t0 = time.perf_counter()
    with warnings.catch_warnings(), apply_mode(opts.mode, opts.compile_mode) as state:
        for message in _EXPECTED_WARNINGS:
            warnings.filterwarnings("ignore", message=message)
        run.mode_state = state
        rec = _Recorder(run, opts.out)
        if not quiet:
            _say(report_lines(run)[0])
        rec.start()
        try:
            yield run
        except KeyboardInterrupt:
            run.interrupted, run.exit_status = True, 130
            raise
        except BaseException as e:
            run.exit_status = run.exit_status or 1
            run.error = run.error or f"{type(e).__name__}: {e}"
            raise
        finally:
            rec.stop()
            _finish(rec, t0)
            if not quiet:
                for line in report_lines(run)[1:]:
                    _say(line)


def _say(line: str) -> None:
    print(f"traceforge: {line}", file=sys.stderr, flush=True)
