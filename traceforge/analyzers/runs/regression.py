"""A CI performance gate: is run B slower than run A, beyond a threshold and beyond noise?

:func:`decide` is the rule, a pure function of the two runs' per-step times:

* the statistic is the **median step time** of each run (host step ranges,
  :attr:`traceforge.analyzers.timeline.core.Timeline.steps`; a trace without steps is one
  step, its GPU window, as :func:`~traceforge.analyzers.timeline.core.step_time_ns` defines);
* **noise** of a run is its step-to-step spread, estimated robustly as 1.4826 x the median
  absolute deviation of its step times (the standard deviation for normal noise, not
  moved by one outlier step such as a checkpoint); the noise of the comparison is the sum
  of both runs' noise. A run of one step has unknown noise and adds none; when neither
  run has two steps the noise is unknown and the threshold alone decides (and says so);
* B **fails** when median_B - median_A > PCT % of median_A *and* > the noise.

:func:`gate` applies it to two traces and lists the kernel classes and kernels whose time
per step grew most (GPU activity each run's steps launched, per step, as in
:mod:`traceforge.analyzers.runs.diff`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import cast

import numpy as np
import pandas as pd

from traceforge.analyzers.names.kernel_names import classify
from traceforge.analyzers.timeline.core import Timeline, step_time_ns, timeline
from traceforge.errors import AnalysisError
from traceforge.model import Tables, Trace

#: Scale from median absolute deviation to standard deviation under normal noise.
MAD_TO_SIGMA = 1.4826
#: Columns of :attr:`GateReport.classes` and :attr:`GateReport.kernels`.
GROWTH_COLUMNS = ("name", "a_us", "b_us", "delta_us")


@dataclass(frozen=True)
class Decision:
    """The verdict and the numbers behind it (ns)."""

    slower: bool
    a_median_ns: float
    b_median_ns: float
    delta_ns: float
    delta_pct: float
    threshold_pct: float
    noise_ns: float | None  # None: unknown (no run has two steps)
    a_steps: int
    b_steps: int

    @property
    def reason(self) -> str:
        """One line saying what was compared and why it passes or fails."""
        noise = ("noise unknown (fewer than two steps in each run; threshold alone)"
                 if self.noise_ns is None
                 else f"noise {self.noise_ns / 1e6:.3f} ms (1.4826 x MAD of step times, "
                      "A + B)")
        head = (f"median step A {self.a_median_ns / 1e6:.3f} ms ({self.a_steps} steps), "
                f"B {self.b_median_ns / 1e6:.3f} ms ({self.b_steps} steps): "
                f"{self.delta_pct:+.2f}% vs threshold {self.threshold_pct:g}%, {noise}")
        if self.slower:
            return f"SLOWER: {head}"
        why = ("within the threshold" if self.delta_pct <= self.threshold_pct
               else "within the noise")
        return f"ok ({why}): {head}"


def noise_ns(steps: np.ndarray) -> float | None:
    """Robust step-to-step standard deviation (1.4826 x MAD), None for < 2 steps."""
    x = np.asarray(steps, dtype=float)
    if len(x) < 2:
        return None
    return MAD_TO_SIGMA * float(np.median(np.abs(x - np.median(x))))


def decide(a_steps: np.ndarray, b_steps: np.ndarray, pct: float) -> Decision:
    """Is B slower than A by more than ``pct`` % of A's median step and by more than the
    noise of both runs? (See the module doc for the estimator.)"""
    a, b = np.asarray(a_steps, dtype=float), np.asarray(b_steps, dtype=float)
    if len(a) == 0 or len(b) == 0:
        raise ValueError("both runs need at least one step time")
    ma, mb = float(np.median(a)), float(np.median(b))
    delta = mb - ma
    known = [n for n in (noise_ns(a), noise_ns(b)) if n is not None]
    noise = float(sum(known)) if known else None
    over_pct = delta > pct / 100.0 * ma
    over_noise = noise is None or delta > noise
    return Decision(bool(over_pct and over_noise), ma, mb, delta,
                    100.0 * delta / ma if ma else float("inf"), pct, noise, len(a), len(b))


def step_durations(tl: Timeline) -> np.ndarray:
    """Per-step host durations (ns); a trace without steps is one step (its GPU window)."""
    r = tl.steps.ranges
    if len(r):
        return (r["end"] - r["ts"]).to_numpy(dtype=float)
    st = step_time_ns(tl)
    return np.array([] if st is None else [st], dtype=float)


@dataclass(frozen=True)
class GateReport(Tables):
    """:func:`gate`'s result: the decision, and what grew most (us per step)."""

    decision: Decision
    classes: pd.DataFrame
    kernels: pd.DataFrame


def _per_step(tl: Timeline, key: str) -> pd.Series:
    acts = tl.in_steps()
    n = max(1, len(tl.steps.ranges))
    names = (acts["cls"].astype(str) if key == "class"
             else acts["name"].astype(str).map(lambda s: classify(s).short))
    d = pd.Series((acts["end"] - acts["ts"]).to_numpy(dtype=float) / 1e3 / n,
                  index=names.to_numpy())
    return cast("pd.Series", d.groupby(level=0).sum())


def _growth(a: Timeline, b: Timeline, key: str, limit: int) -> pd.DataFrame:
    sa, sb = _per_step(a, key), _per_step(b, key)
    j = pd.concat([sa.rename("a_us"), sb.rename("b_us")], axis=1).fillna(0.0)
    j["delta_us"] = j["b_us"] - j["a_us"]
    j = j[j["delta_us"] > 0].sort_values(["delta_us"], ascending=False).head(limit)
    out = j.rename_axis("name").reset_index()
    return cast("pd.DataFrame", out[list(GROWTH_COLUMNS)])


def gate(a: Trace, b: Trace, pct: float, *, limit: int = 5) -> GateReport:
    """The gate on two traces (A = baseline), with the ``limit`` classes and kernels
    whose GPU time per step grew most."""
    ta, tb = timeline(a), timeline(b)
    pa, pb = step_durations(ta), step_durations(tb)
    if len(pa) == 0 or len(pb) == 0:
        which = a if len(pa) == 0 else b
        raise AnalysisError(f"{which.meta.path or 'trace'}: no steps and no GPU activity: "
                            "no step time to gate on")
    return GateReport(decide(pa, pb, pct), _growth(ta, tb, "class", limit),
                      _growth(ta, tb, "kernel", limit))


__all__ = ["Decision", "GateReport", "decide", "gate", "noise_ns", "step_durations"]
