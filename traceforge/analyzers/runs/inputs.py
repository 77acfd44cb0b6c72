"""Runs: what the multi-run analyses (scaling, compare) take in.

A run is the traces of one job -- one per rank, or one for a single-GPU run -- with a
label for tables and the facts its capture summaries give (unprofiled latency, peak
memory, batch): plain numbers, read by whoever loaded the run
(:func:`traceforge.commands.runs.load_runs` reads capture output folders). A bare
:class:`~traceforge.model.Trace` or a list of rank traces is a run too.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from traceforge.errors import AnalysisError
from traceforge.model import Trace
from traceforge.step_time import run_step_time, summary_of

#: Keys :attr:`TraceRun.facts` may hold (all optional; None or absent: unknown).
FACT_KEYS = (
    "gpus",  # GPU count the run was launched with (capture --nproc)
    "latency_ms",  # the run's step time, slowest rank (traceforge.step_time.run_step_time)
    "hz",  # 1000 / latency_ms
    "latency_from",  # what latency_ms is over (StepTime.label)
    "samples_per_s",  # batch_per_gpu / step time
    "tokens_per_s",  # tokens_per_gpu / step time
    "profiled_ms",  # median profiled step, slowest rank
    "overhead_pct",  # profiler overhead, slowest rank
    "peak_gib",  # peak GPU memory allocated, largest rank
    "first_step_s",  # wall time of the first step (compilation, warm-up)
    "batch_per_gpu",  # samples per GPU per step
    "tokens_per_gpu",  # tokens per GPU per step
    "mode",  # capture mode (eager, sdpa, fa2, compiled)
    "device",  # GPU name from the capture summary
)

Fact = float | int | str | None


@dataclass(frozen=True, eq=False)
class TraceRun:
    """The traces of one run (ordered by rank), a label, and capture facts."""

    label: str
    traces: tuple[Trace, ...]
    facts: Mapping[str, Fact] = field(default_factory=dict)
    path: str = ""

    def fact(self, key: str) -> float | None:
        """A numeric fact, or None when the run does not have it. Step-time facts the
        loader did not give come from the capture summaries the traces carry."""
        got = numeric_fact(self.facts, key)
        if got is None and key in STEP_FACTS and "latency_ms" not in self.facts:
            got = numeric_fact(step_facts(self.traces), key)
        return got

    def text(self, key: str) -> str | None:
        """A text fact (e.g. ``latency_from``), or None."""
        v = self.facts.get(key)
        if v is None and key in STEP_FACTS and "latency_ms" not in self.facts:
            v = step_facts(self.traces).get(key)
        return v if isinstance(v, str) else None


#: The facts :func:`step_facts` gives.
STEP_FACTS = ("latency_ms", "hz", "latency_from", "samples_per_s", "tokens_per_s",
              "profiled_ms", "overhead_pct")


def step_facts(traces: Sequence[Trace] | Sequence[Mapping[str, Any]]) -> dict[str, Fact]:
    """The run's step-time facts from its rank traces' capture summaries (or from the
    summaries themselves): :func:`traceforge.step_time.run_step_time` of the slowest rank,
    its label, throughput, profiled step and overhead. Empty without summaries."""
    times = []
    for t in traces:
        summary = summary_of(t.meta.extra) if isinstance(t, Trace) else t
        st = run_step_time(summary)
        if st is not None:
            times.append(st)
    if not times:
        return {}
    st = max(times, key=lambda x: x.seconds)
    return {"latency_ms": st.ms, "hz": 1.0 / st.seconds if st.seconds else None,
            "latency_from": st.label, "samples_per_s": st.samples_per_s,
            "tokens_per_s": st.tokens_per_s,
            "profiled_ms": st.profiled_s * 1e3 if st.profiled_s is not None else None,
            "overhead_pct": st.overhead_pct}


def numeric_fact(facts: Mapping[str, Fact], key: str) -> float | None:
    """The fact ``key`` as a number, or None when it is absent or not a number."""
    v = facts.get(key)
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


RunInput = TraceRun | Trace | Sequence[Trace]


def _label_of(traces: Sequence[Trace], i: int) -> str:
    path = traces[0].meta.path if traces else ""
    if not path:
        return f"run{i}"
    name = Path(path).name
    for suffix in (".pt.trace.json.gz", ".pt.trace.json", ".json.gz", ".json", ".sqlite"):
        if name.endswith(suffix):
            return name[: -len(suffix)]
    return name


def as_runs(runs: Sequence[RunInput] | RunInput) -> list[TraceRun]:
    """Normalize the arguments of :func:`~traceforge.analyzers.runs.scaling.scaling` and
    :func:`~traceforge.analyzers.runs.compare.compare` into runs; an empty run or an empty list
    is an AnalysisError."""
    if isinstance(runs, (TraceRun, Trace)):
        items: list[RunInput] = [runs]
    elif runs and all(isinstance(r, Trace) for r in runs):
        # A flat list of traces is ambiguous; read it as one run per trace (compare).
        items = list(runs)
    else:
        items = list(runs)
    if not items:
        raise AnalysisError("no runs given")
    out: list[TraceRun] = []
    auto: list[int] = []  # runs labelled here, from their file names
    for i, r in enumerate(items):
        if isinstance(r, TraceRun):
            run = r
        else:
            ts = (r,) if isinstance(r, Trace) else tuple(r)
            run = TraceRun(_label_of(ts, i), ts, path=ts[0].meta.path if ts else "")
            auto.append(i)
        if not run.traces:
            raise AnalysisError(f"{run.label}: a run without traces")
        out.append(run)
    names = [out[i].label for i in auto]
    if len(set(names)) < len(names):
        # Same file names (h100/model.json.gz, mi300/model.json.gz): their folders' names.
        parents = [Path(out[i].path).parent.name for i in auto]
        if len(set(parents)) < len(parents) or not all(parents):
            parents = [f"{n}#{k}" for k, n in enumerate(names)]
        for i, label in zip(auto, parents, strict=True):
            out[i] = replace(out[i], label=label)
    labels = [r.label for r in out]
    if len(set(labels)) < len(labels):
        dup = next(x for x in labels if labels.count(x) > 1)
        raise AnalysisError(f"two runs are labelled {dup!r}: give them distinct labels")
    return out
