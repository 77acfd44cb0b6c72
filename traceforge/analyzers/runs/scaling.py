"""Multi-GPU scaling: step time, throughput, efficiency, and where the lost efficiency went.

Each run is one GPU count N (the ranks' ``distributedInfo`` world size, else the run's
``gpus`` fact, else its number of rank traces); the smallest run, N0, is the reference.

**Step time.** A rank's step time T_r is :func:`traceforge.analyzers.timeline.core.step_time_ns`
(mean host step). A synchronous run is as fast as its slowest rank, so the run's step time
is T(N) = max_r T_r.

**Throughput** is steps/s = 1/T(N); with a batch, samples/s = batch x N / T(N) (weak
scaling: ``batch`` is per GPU) or batch / T(N) (strong: ``batch`` is the global batch);
tokens/s likewise. **Speedup** S(N) = throughput(N) / throughput(N0) and **efficiency**
E(N) = S(N) / (N / N0), which is

* weak scaling (the default: DDP with a fixed per-GPU batch; the work per GPU is constant):
  E = T(N0) / T(N);
* strong scaling (a fixed global batch split N ways): E = T(N0) N0 / (T(N) N).

Both read E = T_ideal(N) / T(N) with T_ideal(N) = s T(N0), s = 1 (weak) or N0/N (strong).

**Where the loss went.** Per rank, one step (per-step means, from
:func:`traceforge.analyzers.timing.breakdown.breakdown` over all steps, divided by the number of
steps) partitions as

    T_r = compute + exposed_comm + straggler_wait + idle + memory + unrecorded + host_gap

where ``straggler_wait`` is the part of breakdown's exposed communication during which the
rank's collective had started but the last rank's matching collective had not (collectives
are matched as in :func:`traceforge.analyzers.timing.overlap.overlap`'s skew table: the k-th
communication kernel of every rank inside the steps, absolute start times), so a rank that
arrives early spins inside the NCCL kernel for the straggler; ``exposed_comm`` is the
rest of it; ``host_gap`` = T_r - (GPU window per step), the host step time the GPU windows
do not cover. Adding ``imbalance_r`` = T(N) - T_r (how much sooner this rank finished than
the slowest one) makes each rank's parts sum to T(N). Each loss term is the rank's part
minus s times the reference run's rank-mean part:

    term_r = x_r(N) - s * mean_r x_r(N0)

for compute, exposed_comm, straggler_wait, idle, memory, imbalance (the reference's is
T(N0) - mean T_r(N0)), and ``residual`` = (unrecorded + host_gap) likewise. The terms of
every rank row, and of the mean row (rank -1), add up exactly to the step-time growth over
ideal, T(N) - T_ideal(N); as efficiency points lost, term / T(N) x 100, they add up to
100 - E%.

**Serial fraction.** Amdahl: S(n) = 1 / (f + (1 - f)/n) with n = N/N0, fitted by least
squares on 1/S - 1/n = f (1 - 1/n) over the runs with n > 1 (closed form); with weak
scaling also Gustafson: S(n) = n - s_g (n - 1), least squares on n - S = s_g (n - 1).
Each model projects the efficiency at twice the largest count.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import cast

import numpy as np
import pandas as pd

from traceforge.analyzers.communication.instances import CommRank, comm_summary
from traceforge.analyzers.communication.losses import comm_losses
from traceforge.analyzers.memory import PEAK_COLUMNS, run_peak_memory
from traceforge.analyzers.runs.inputs import Fact, RunInput, as_runs, numeric_fact, step_facts
from traceforge.analyzers.timeline import intervals as iv
from traceforge.analyzers.timeline.core import step_time_ns, timeline
from traceforge.analyzers.timing.breakdown import breakdown, rank_of
from traceforge.errors import AnalysisError
from traceforge.model import Tables, Trace

#: Loss terms in the order tables and stacked bars show them.
TERMS: tuple[str, ...] = ("compute", "exposed_comm", "straggler_wait", "idle", "memory",
                          "imbalance", "residual")
#: Columns of :attr:`ScalingReport.runs`.
RUN_COLUMNS = ("run", "gpus", "ranks_traced", "steps", "step_ms", "slowest_rank",
               "steps_per_s", "samples_per_s", "tokens_per_s", "speedup", "efficiency_pct",
               "ideal_step_ms", "wall_step_ms", "wall_efficiency_pct", *PEAK_COLUMNS)
#: Columns of :attr:`ScalingReport.ranks` (per-step parts of each rank, ns).
RANK_COLUMNS = ("run", "gpus", "rank", "steps", "step_ns", "window_ns", "compute_ns",
                "exposed_comm_ns", "straggler_wait_ns", "idle_ns", "memory_ns",
                "unrecorded_ns", "host_gap_ns", "collectives")
#: Columns of :attr:`ScalingReport.losses`.
LOSS_COLUMNS = ("gpus", "rank", "step_ms", "growth_ms",
                *(f"{t}_ms" for t in TERMS), *(f"{t}_pts" for t in TERMS))
#: Columns of :attr:`ScalingReport.fit`.
FIT_COLUMNS = ("model", "serial_fraction", "rms_error_pts", "projected_gpus",
               "projected_speedup", "projected_efficiency_pct")


@dataclass(frozen=True)
class ScalingReport(Tables):
    """:func:`scaling`'s result.

    ``runs``: one row per GPU count (RUN_COLUMNS), ascending; ``wall_step_ms`` is the
    capture summaries' unprofiled latency where the run has it, with its own efficiency.
    ``ranks``: per run and rank, the per-step parts (RANK_COLUMNS, ns).
    ``losses``: per GPU count, one row per rank and a mean row (rank -1): step time,
    growth over ideal and each loss term in ms per step and in efficiency points.
    ``fit``: Amdahl (and Gustafson for weak scaling) serial fraction and projection.
    ``weak``: which scaling the efficiency formula assumes.
    """

    runs: pd.DataFrame
    ranks: pd.DataFrame
    losses: pd.DataFrame
    fit: pd.DataFrame
    weak: bool = True
    notes: tuple[str, ...] = ()
    step_source: str = ""
    #: Communication per GPU count split into bandwidth (busbw below the link) and wait
    #: (skew): :func:`~traceforge.analyzers.communication.losses.comm_losses`.
    comm: pd.DataFrame = field(default_factory=pd.DataFrame)

    @property
    def formula(self) -> str:
        """The efficiency formula in words, for table notes."""
        if self.weak:
            return ("weak scaling (fixed per-GPU batch, as DDP): efficiency = throughput_N / "
                    "(N/N0 x throughput_N0) = T(N0) / T(N); T = slowest rank's mean step")
        return ("strong scaling (fixed global batch): efficiency = throughput_N / "
                "(N/N0 x throughput_N0) = T(N0) N0 / (T(N) N); T = slowest rank's mean step")

    def mean_losses(self) -> pd.DataFrame:
        """The mean-over-ranks loss rows, one per GPU count."""
        return cast("pd.DataFrame", self.losses[self.losses["rank"] == -1].reset_index(drop=True))

    def chart_data(self) -> pd.DataFrame:
        """What the scaling charts plot, one row per GPU count plus the projection row:
        gpus, measured efficiency %, the fitted models' efficiency %, and the mean loss
        terms in efficiency points (stacked bars)."""
        r = self.runs
        gpus = r["gpus"].to_numpy(dtype=float)
        rows = pd.DataFrame({"gpus": gpus, "efficiency_pct": r["efficiency_pct"].to_numpy(),
                             "projected": False})
        if not self.fit.empty:
            proj = float(self.fit["projected_gpus"].iloc[0])
            rows = pd.concat([rows, pd.DataFrame({"gpus": [proj], "efficiency_pct": [np.nan],
                                                  "projected": [True]})], ignore_index=True)
            n0 = float(gpus[0])
            for m in self.fit.itertuples(index=False):
                f = float(cast(float, m.serial_fraction))
                n = rows["gpus"].to_numpy(dtype=float) / n0
                rows[f"{m.model}_pct"] = 100.0 * _model_speedup(str(m.model), f, n) / n
        ml = self.mean_losses().set_index("gpus")
        for t in TERMS:
            rows[f"{t}_pts"] = ml[f"{t}_pts"].reindex(rows["gpus"].to_numpy()).to_numpy()
        return cast("pd.DataFrame", rows)


def _model_speedup(model: str, f: float, n: np.ndarray) -> np.ndarray:
    if model == "amdahl":
        return 1.0 / (f + (1.0 - f) / n)
    return n - f * (n - 1.0)


@dataclass(frozen=True)
class _Rank:
    rank: int
    steps: int
    step_ns: float
    window_ns: float
    compute_ns: float
    exposed_ns: float  # breakdown's exposed communication (wait included)
    wait_ns: float
    idle_ns: float
    memory_ns: float
    unrecorded_ns: float
    collectives: int


@dataclass(frozen=True)
class ScalingRank:
    """What :func:`scaling` needs of one rank (:func:`scaling_summary`): its step time,
    number of step windows and per-step breakdown parts (ns), and its communication
    kernels in the windows (starts/ends, trace ns, by start) with its exposed
    communication as an interval set, for the straggler wait matched across ranks."""

    rank: int
    world_size: int | None
    base_ns: int
    step_ns: float
    steps: int
    parts: dict[str, float]
    comm_ts: np.ndarray
    comm_end: np.ndarray
    exposed: np.ndarray
    step_source: str
    peak_memory: tuple[float | None, str] = (None, "")  # memory.run_peak_memory of the rank
    #: Its collectives, for the bandwidth/wait split of communication (``comm`` table).
    comm: CommRank | None = None


@dataclass(frozen=True)
class RankedRun:
    """One run as :func:`scaling_reduce` takes it: a label, its ranks' summaries in rank
    order, and its capture facts (see :class:`~traceforge.analyzers.runs.inputs.TraceRun`)."""

    label: str
    ranks: tuple[ScalingRank, ...]
    facts: Mapping[str, Fact] = field(default_factory=dict)

    def fact(self, key: str) -> float | None:
        """A numeric fact, or None when the run does not have it."""
        return numeric_fact(self.facts, key)


def scaling_summary(trace: Trace, *, index: int = 0) -> ScalingRank:
    """One rank's :class:`ScalingRank` (``index``: its place in the run, the rank when
    the trace does not say)."""
    st, n, p = _parts(trace)
    ts, end, exposed = _comm_kernels(trace)
    return ScalingRank(rank_of(trace, index), trace.meta.world_size, int(trace.meta.base_ns),
                       st, n, p, ts, end, exposed, timeline(trace).step_source,
                       run_peak_memory([trace]), comm_summary(trace))


def _peak(ranks: Sequence[ScalingRank], summary_gib: float | None) -> dict[str, object]:
    """The run's peak memory columns (:data:`~traceforge.analyzers.memory.PEAK_COLUMNS`):
    the largest rank's from its memory events, else the capture summary's."""
    known = [r.peak_memory for r in ranks if r.peak_memory[0] is not None]
    if known:
        peak, source = max(known, key=lambda x: x[0] or 0.0)
        return {"peak_memory_bytes": peak, "peak_memory_from": source}
    if summary_gib is not None:
        return {"peak_memory_bytes": summary_gib * 2**30, "peak_memory_from": "capture summary"}
    return {"peak_memory_bytes": float("nan"), "peak_memory_from": ""}


def _parts(t: Trace) -> tuple[float, int, dict[str, float]]:
    """(step time, number of windows, per-step breakdown parts) of one rank."""
    tl = timeline(t)
    st = step_time_ns(tl)
    n = max(1, len(tl.windows))
    bd = breakdown(t)
    keys = ("window_ns", "compute_ns", "exposed_comm_ns", "memory_ns", "idle_ns",
            "unrecorded_ns")
    if bd.empty:
        return float(st or 0.0), n, dict.fromkeys(keys, 0.0)
    tot = bd[bd["step"] == -1] if len(bd) > 1 else bd
    return float(st or 0.0), n, {k: float(tot[k].iloc[0]) / n for k in keys}


def _comm_kernels(t: Trace) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Starts and ends (trace ns) of the rank's communication kernels inside the steps'
    windows, by start, and its exposed communication (interval set)."""
    tl = timeline(t)
    acts = tl.activity
    if acts.empty:
        return np.zeros(0, np.int64), np.zeros(0, np.int64), iv.EMPTY
    win = tl.window_set()
    s = tl.sets()
    exposed = iv.difference(iv.intersect(s.comm, win), iv.intersect(s.compute, win))
    sel = ((acts["cls"] == "communication") & (acts["kind"] == "kernel")).to_numpy()
    ts, end = acts["ts"].to_numpy()[sel], acts["end"].to_numpy()[sel]
    inside = np.zeros(len(ts), dtype=bool)
    if len(win):
        k = np.searchsorted(win[:, 0], ts, side="right") - 1
        ok = k >= 0
        inside[ok] = ts[ok] < win[k[ok], 1]
    order = np.argsort(ts[inside], kind="stable")
    return ts[inside][order], end[inside][order], exposed


def _waits(ranks: Sequence[ScalingRank]) -> tuple[list[float], list[int], tuple[str, ...]]:
    """Per rank: exposed straggler wait (total ns over the steps) and collectives matched."""
    counts = [len(r.comm_ts) for r in ranks]
    zero = ([0.0] * len(ranks), [0] * len(ranks))
    live = [i for i, c in enumerate(counts) if c > 0]
    if len(live) < 2:
        return zero[0], zero[1], ()
    n = min(counts[i] for i in live)
    notes: tuple[str, ...] = ()
    if len({counts[i] for i in live}) > 1:
        notes = (f"ranks ran different numbers of communication kernels "
                 f"({ {ranks[i].rank: counts[i] for i in live} }); straggler wait "
                 f"matches the first {n} of each",)
    base = [ranks[i].base_ns for i in live]
    starts = np.stack([ranks[i].comm_ts[:n] + b for i, b in zip(live, base, strict=True)])
    latest = starts.max(axis=0)
    waits, matched = list(zero[0]), list(zero[1])
    for j, i in enumerate(live):
        r = ranks[i]
        lo = r.comm_ts[:n]
        hi = np.minimum(latest - base[j], r.comm_end[:n])
        keep = hi > lo
        w = iv.merge(lo[keep], hi[keep])
        waits[i] = float(iv.total(iv.intersect(w, r.exposed)))
        matched[i] = n
    return waits, matched, notes


def _gpus(run: RankedRun) -> int:
    ws = max((r.world_size or 0 for r in run.ranks), default=0)
    return int(ws or run.fact("gpus") or len(run.ranks))


def _measure(run: RankedRun) -> tuple[list[_Rank], tuple[str, ...]]:
    waits, matched, notes = _waits(run.ranks)
    out = []
    for i, r in enumerate(run.ranks):
        p = r.parts
        out.append(_Rank(r.rank, r.steps, r.step_ns, p["window_ns"], p["compute_ns"],
                         p["exposed_comm_ns"], waits[i] / r.steps, p["idle_ns"],
                         p["memory_ns"], p["unrecorded_ns"], matched[i]))
    return out, tuple(f"{run.label}: {x}" for x in notes)


def _term_values(r: _Rank, t_run: float) -> dict[str, float]:
    """A rank's parts as loss-term values (they sum to the run's step time)."""
    return {
        "compute": r.compute_ns,
        "exposed_comm": r.exposed_ns - r.wait_ns,
        "straggler_wait": r.wait_ns,
        "idle": r.idle_ns,
        "memory": r.memory_ns,
        "imbalance": t_run - r.step_ns,
        "residual": r.unrecorded_ns + (r.step_ns - r.window_ns),
    }


def _fit(n: np.ndarray, s: np.ndarray, weak: bool, n0: float) -> pd.DataFrame:
    """Amdahl (and Gustafson when weak) by closed-form least squares over runs with n > 1."""
    sel = n > 1
    rows = []
    if sel.sum() == 0:
        return cast("pd.DataFrame", pd.DataFrame(columns=list(FIT_COLUMNS)))
    x, y = n[sel], s[sel]
    proj_n = 2.0 * float(n.max())
    models = [("amdahl", 1.0 - 1.0 / x, 1.0 / y - 1.0 / x)]
    if weak:
        models.append(("gustafson", x - 1.0, x - y))
    for name, a, b in models:
        f = float(np.clip((a * b).sum() / (a * a).sum(), 0.0, 1.0))
        model_e = 100.0 * _model_speedup(name, f, x) / x
        rms = float(np.sqrt(np.mean((model_e - 100.0 * y / x) ** 2)))
        ps = float(_model_speedup(name, f, np.array([proj_n]))[0])
        rows.append({"model": name, "serial_fraction": f, "rms_error_pts": rms,
                     "projected_gpus": int(round(proj_n * n0)), "projected_speedup": ps,
                     "projected_efficiency_pct": 100.0 * ps / proj_n})
    return cast("pd.DataFrame", pd.DataFrame(rows, columns=list(FIT_COLUMNS)))


def scaling(runs: Sequence[RunInput], *, weak: bool = True, batch: float | None = None,
            tokens_per_step: float | None = None) -> ScalingReport:
    """Scaling of ``runs`` (one per GPU count) against the smallest; see the module doc.

    A run is a :class:`~traceforge.analyzers.runs.inputs.TraceRun` or a list of its rank traces.
    ``batch`` / ``tokens_per_step``: samples / tokens per GPU per step (weak) or per step
    of the whole run (strong); default: the runs' ``batch_per_gpu`` / ``tokens_per_gpu``
    facts (weak only).
    """
    rs = as_runs(runs)
    # The run's step time from the capture summaries its traces carry, where the loader
    # gave none (traceforge.step_time.run_step_time).
    ranked = [RankedRun(r.label, tuple(scaling_summary(t, index=i)
                                       for i, t in enumerate(r.traces)),
                        r.facts if "latency_ms" in r.facts
                        else {**step_facts(r.traces), **r.facts})
              for r in rs]
    return scaling_reduce(ranked, weak=weak, batch=batch, tokens_per_step=tokens_per_step)


def scaling_reduce(runs: Sequence[RankedRun], *, weak: bool = True,
                   batch: float | None = None, tokens_per_step: float | None = None
                   ) -> ScalingReport:
    """:func:`scaling` from the runs' per-rank summaries (:func:`scaling_summary`), as
    the engine computes them where the files are."""
    if not runs:
        raise AnalysisError("no runs given")
    rs = list(runs)
    by_n: dict[int, RankedRun] = {}
    for r in rs:
        n = _gpus(r)
        if n in by_n:
            raise AnalysisError(f"{by_n[n].label} and {r.label} both ran on {n} GPU(s): "
                                "give one run per GPU count")
        by_n[n] = r
    counts = sorted(by_n)
    notes: list[str] = []
    measured: dict[int, list[_Rank]] = {}
    sources = set()
    for n in counts:
        run = by_n[n]
        measured[n], extra = _measure(run)
        notes += extra
        sources |= {r.step_source for r in run.ranks}
        if len(run.ranks) < n:
            notes.append(f"{run.label}: {len(run.ranks)} of {n} ranks traced; the slowest "
                         "traced rank stands for the run")
        if not any(m.step_ns for m in measured[n]):
            raise AnalysisError(f"{run.label}: no steps and no GPU activity: no step time")
    n0 = counts[0]
    t_run = {n: max(m.step_ns for m in measured[n]) for n in counts}
    ref = measured[n0]
    ref_terms = {k: float(np.mean([_term_values(m, t_run[n0])[k] for m in ref]))
                 for k in TERMS}
    run_rows, loss_rows, rank_rows = [], [], []
    for n in counts:
        run, ms = by_n[n], measured[n]
        tn = t_run[n]
        s = 1.0 if weak else n0 / n
        ideal = s * t_run[n0]
        slowest = max(ms, key=lambda m: m.step_ns)
        speedup = (n / n0) * t_run[n0] / tn if weak else t_run[n0] / tn
        b = batch if batch is not None else (run.fact("batch_per_gpu") if weak else None)
        k = (tokens_per_step if tokens_per_step is not None
             else (run.fact("tokens_per_gpu") if weak else None))
        per = n if weak else 1
        wall = run.fact("latency_ms")
        run_rows.append({
            "run": run.label, "gpus": n, "ranks_traced": len(run.ranks),
            "steps": min(m.steps for m in ms), "step_ms": tn / 1e6,
            "slowest_rank": slowest.rank, "steps_per_s": 1e9 / tn,
            "samples_per_s": b * per * 1e9 / tn if b else float("nan"),
            "tokens_per_s": k * per * 1e9 / tn if k else float("nan"),
            "speedup": speedup, "efficiency_pct": 100.0 * speedup / (n / n0),
            "ideal_step_ms": ideal / 1e6,
            "wall_step_ms": wall if wall is not None else float("nan"),
            "wall_efficiency_pct": float("nan"),
            **_peak(run.ranks, run.fact("peak_gib")),
        })
        per_rank = []
        for m in ms:
            vals = _term_values(m, tn)
            terms = {t: vals[t] - s * ref_terms[t] for t in TERMS}
            per_rank.append(terms)
            loss_rows.append(_loss_row(n, m.rank, tn, ideal, terms))
            rank_rows.append({
                "run": run.label, "gpus": n, "rank": m.rank, "steps": m.steps,
                "step_ns": m.step_ns, "window_ns": m.window_ns, "compute_ns": m.compute_ns,
                "exposed_comm_ns": m.exposed_ns - m.wait_ns, "straggler_wait_ns": m.wait_ns,
                "idle_ns": m.idle_ns, "memory_ns": m.memory_ns,
                "unrecorded_ns": m.unrecorded_ns, "host_gap_ns": m.step_ns - m.window_ns,
                "collectives": m.collectives,
            })
        mean = {t: float(np.mean([p[t] for p in per_rank])) for t in TERMS}
        loss_rows.append(_loss_row(n, -1, tn, ideal, mean))
    runs_df = pd.DataFrame(run_rows, columns=list(RUN_COLUMNS))
    _wall_efficiency(runs_df, weak)
    for row in runs_df[runs_df["efficiency_pct"] > 105.0].itertuples(index=False):
        notes.append(f"{row.run}: efficiency {row.efficiency_pct:.0f}% (above ideal): "
                     f"the {by_n[n0].label} reference steps are slow for their work -- "
                     "compilation, warm-up or profiler start inside its recorded steps?")
    n_rel = runs_df["gpus"].to_numpy(dtype=float) / n0
    fit = _fit(n_rel, runs_df["speedup"].to_numpy(dtype=float), weak, float(n0))
    if len(counts) == 1:
        notes.append("one GPU count: nothing to scale against")
    ranks_df = pd.DataFrame(rank_rows, columns=list(RANK_COLUMNS))
    split = comm_losses([(n, [r.comm for r in by_n[n].ranks if r.comm is not None],
                          float(np.mean([m.exposed_ns - m.wait_ns for m in measured[n]])),
                          float(np.mean([m.wait_ns for m in measured[n]]))) for n in counts])
    return ScalingReport(runs_df, ranks_df,
                         pd.DataFrame(loss_rows, columns=list(LOSS_COLUMNS)), fit, weak,
                         tuple(notes), ", ".join(sorted(sources)), split)


def _loss_row(n: int, rank: int, tn: float, ideal: float, terms: dict[str, float]
              ) -> dict[str, float | int]:
    row: dict[str, float | int] = {"gpus": n, "rank": rank, "step_ms": tn / 1e6,
                                   "growth_ms": (tn - ideal) / 1e6}
    for t in TERMS:
        row[f"{t}_ms"] = terms[t] / 1e6
    for t in TERMS:
        row[f"{t}_pts"] = 100.0 * terms[t] / tn if tn else 0.0
    return row


def _wall_efficiency(df: pd.DataFrame, weak: bool) -> None:
    """Efficiency of the capture summaries' unprofiled step times, where all runs have one
    from the reference on (the profiler's own overhead does not scale like the work)."""
    w = df["wall_step_ms"].to_numpy(dtype=float)
    if len(w) == 0 or np.isnan(w[0]):
        return
    n = df["gpus"].to_numpy(dtype=float)
    s = np.ones_like(n) if weak else n[0] / n
    df["wall_efficiency_pct"] = 100.0 * s * w[0] / w


__all__ = ["RankedRun", "ScalingRank", "ScalingReport", "scaling", "scaling_reduce",
           "scaling_summary"]
