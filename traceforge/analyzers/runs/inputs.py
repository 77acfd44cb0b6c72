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

from traceforge.errors import AnalysisError
from traceforge.model import Trace

#: Keys :attr:`TraceRun.facts` may hold (all optional; None or absent: unknown).
FACT_KEYS = (
    "gpus",  # GPU count the run was launched with (capture --nproc)
    "latency_ms",  # median unprofiled step wall time, slowest rank (capture summary)
    "hz",  # 1000 / latency_ms
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
        """A numeric fact, or None when the run does not have it."""
        return numeric_fact(self.facts, key)


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
