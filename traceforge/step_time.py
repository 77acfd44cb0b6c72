"""The run's step time, the profiler's overhead and the outlier-step rule: their one home.

A capture summary (``*.summary.json``, also embedded in the trace's metadata as
``traceforge``) lists the wall time of every step the program ran: the warm-up steps
(compilation, autotuning, CUDA-graph recording), the steps the profiler recorded, and the
steps after its window, which ran without it. The definitions every verb, the report and
``tf.*`` show:

* **Step time** (:func:`run_step_time`): the median wall time of the *unprofiled* steps
  after the recorded window, outlier steps left out. Where no step ran after the window,
  the median of the recorded (profiled) steps stands in, labelled ``profiled``; under nsys,
  rocprof or ncu (which profile the whole run; ncu serializes kernels) the steps after the
  schedule's warm-up, labelled with the profiler.
* **Profiler overhead** = (median profiled step / median unprofiled step - 1) x 100 %:
  how much slower the recorded steps ran than the run itself. Where it is at least
  :data:`OVERHEAD_LARGE_PCT`, findings drawn from host time (launch-bound, host waits, a
  CPU-side critical path) are qualified.
* **Outlier step** (:func:`outliers`): a step whose time lies more than :data:`OUTLIER_K`
  scaled MADs from the median of its steps (MAD x 1.4826, the standard deviation of a
  normal sample) *and* more than :data:`OUTLIER_MIN_PCT` % of the median away from it.
  Fewer than three steps have no outliers. The first recorded step (profiler start-up) is
  the usual one.

This module imports nothing from traceforge, so the capture layer, the analyzers and the
report all read the summary through it.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

#: k of the outlier rule: median + k x MAD (scaled by :data:`MAD_SCALE`).
OUTLIER_K = 3.5
#: MAD x 1.4826 estimates the standard deviation of normally distributed steps.
MAD_SCALE = 1.4826
#: An outlier is also at least this far (% of the median) from the median, so that steps
#: of near-identical length (MAD ~ 0) are not flagged for microseconds.
OUTLIER_MIN_PCT = 10.0
#: Profiler overhead (%) from which host-time findings are qualified.
OVERHEAD_LARGE_PCT = 25.0

#: Capture backends under which every step ran profiled (``nvtx``: nsys/rocprof's inner run).
OUTSIDE_PROFILERS = ("nsys", "rocprof", "ncu", "nvtx")

#: Sources of :attr:`StepTime.source`.
UNPROFILED = "unprofiled"
PROFILED = "profiled"


def outliers(values: Sequence[float]) -> list[bool]:
    """Which of ``values`` are outliers by the rule in the module docstring."""
    n = len(values)
    if n < 3:
        return [False] * n
    med = statistics.median(values)
    mad = MAD_SCALE * statistics.median(abs(v - med) for v in values)
    floor = abs(med) * OUTLIER_MIN_PCT / 100.0
    return [abs(v - med) > max(OUTLIER_K * mad, floor) for v in values]


def kept(values: Sequence[float], include_outliers: bool = False) -> list[float]:
    """``values`` without their outliers (all of them with ``include_outliers``)."""
    if include_outliers:
        return list(values)
    flags = outliers(values)
    return [v for v, bad in zip(values, flags, strict=True) if not bad]


@dataclass(frozen=True)
class StepTime:
    """The run's step time from a capture summary (seconds), and what it is over.

    ``seconds``: the step time; ``source``: :data:`UNPROFILED` or :data:`PROFILED`;
    ``steps``: how many steps the median is over; ``profiled_s``/``unprofiled_s``: the
    medians of the recorded steps and of the steps after the window (outliers left out;
    None where there were none); ``recorded``/``after``: 0-based step indices recorded by
    the profiler and run after its window; ``outlier_steps``: recorded or unprofiled step
    indices the outlier rule flags; ``batch``/``tokens``: samples and tokens per step (per
    GPU) when the capture was told them.
    """

    seconds: float
    source: str
    steps: int
    profiled_s: float | None
    unprofiled_s: float | None
    recorded: tuple[int, ...]
    after: tuple[int, ...]
    outlier_steps: tuple[int, ...] = ()
    batch: float | None = None
    tokens: float | None = None
    profiler: str = ""  # set where every step ran under an outside profiler (nsys, rocprof)

    @property
    def ms(self) -> float:
        return self.seconds * 1e3

    @property
    def label(self) -> str:
        """What the number is, the same words wherever it is shown."""
        if self.source == UNPROFILED:
            return f"capture, median of {self.steps} unprofiled steps"
        if self.profiler:
            return f"capture, median of {self.steps} steps, all under {self.profiler}"
        return f"capture, median of {self.steps} profiled steps (none ran unprofiled)"

    @property
    def overhead_pct(self) -> float | None:
        """Profiler overhead: median profiled step over median unprofiled step, - 1, in %."""
        if self.profiled_s is None or not self.unprofiled_s:
            return None
        return 100.0 * (self.profiled_s / self.unprofiled_s - 1.0)

    @property
    def overhead_large(self) -> bool:
        o = self.overhead_pct
        return o is not None and o >= OVERHEAD_LARGE_PCT

    @property
    def samples_per_s(self) -> float | None:
        return self.batch / self.seconds if self.batch and self.seconds else None

    @property
    def tokens_per_s(self) -> float | None:
        return self.tokens / self.seconds if self.tokens and self.seconds else None


def _number(x: Any) -> float | None:
    return float(x) if isinstance(x, (int, float)) and not isinstance(x, bool) else None


def run_step_time(summary: Any, include_outliers: bool = False) -> StepTime | None:
    """The run's step time (the one definition) from a capture summary, or from a trace
    that carries one (``tf.run_step_time(trace)``); None when there are no step times.
    See the module docstring."""
    meta = getattr(summary, "meta", None)
    if meta is not None:
        summary = summary_of(getattr(meta, "extra", {}) or {})
    if not isinstance(summary, Mapping):
        return None
    steps = summary.get("steps")
    if not isinstance(steps, Mapping):
        return None
    walls = [float(x) if _number(x) is not None else float("nan")
             for x in steps.get("wall_s") or []]
    recorded = [int(i) for i in steps.get("recorded") or [] if _number(i) is not None]
    raw_sched = steps.get("schedule")
    sched: Mapping[str, Any] = raw_sched if isinstance(raw_sched, Mapping) else {}
    first_after = (max(recorded) + 1 if recorded else
                   sum(int(sched.get(k, 0) or 0) for k in ("wait", "warmup", "active")))
    after = [i for i in range(first_after, len(walls)) if walls[i] == walls[i]]
    inside = [i for i in recorded if 0 <= i < len(walls) and walls[i] == walls[i]]

    def median_of(idx: list[int]) -> tuple[float | None, list[int]]:
        vals = [walls[i] for i in idx]
        flags = [False] * len(vals) if include_outliers else outliers(vals)
        good = [v for v, bad in zip(vals, flags, strict=True) if not bad]
        bad_idx = [i for i, bad in zip(idx, flags, strict=True) if bad]
        return (statistics.median(good) if good else None), bad_idx

    batch = _number(summary.get("batch_per_gpu"))
    tokens = _number(summary.get("tokens_per_gpu"))
    backend = summary.get("backend")
    if backend in OUTSIDE_PROFILERS:
        # nsys/rocprof profile the whole run: no step ran unprofiled; the steps after the
        # schedule's warm-up are the run's.
        start = sum(int(sched.get(k, 0) or 0) for k in ("wait", "warmup"))
        idx = [i for i in range(start, len(walls)) if walls[i] == walls[i]] or \
            [i for i in range(len(walls)) if walls[i] == walls[i]]
        med, bad = median_of(idx)
        if med is None:
            return None
        name = backend if backend in ("rocprof", "ncu") else "nsys"
        return StepTime(med, PROFILED, len(idx) - len(bad), med, None, tuple(idx), (),
                        tuple(bad), batch, tokens, name)
    unprof, bad_after = median_of(after)
    prof, bad_inside = median_of(inside)
    flagged = tuple(sorted(bad_inside + bad_after))
    if unprof is not None:
        n = len(after) - len(bad_after)
        return StepTime(unprof, UNPROFILED, n, prof, unprof, tuple(inside), tuple(after),
                        flagged, batch, tokens)
    if prof is not None:
        n = len(inside) - len(bad_inside)
        return StepTime(prof, PROFILED, n, prof, None, tuple(inside), tuple(after), flagged,
                        batch, tokens)
    return None


def summary_of(extra: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The capture summary embedded in a trace's metadata (``TraceMeta.extra``), if any."""
    tf = extra.get("traceforge")
    return tf if isinstance(tf, Mapping) else None
