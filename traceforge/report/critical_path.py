"""What a report shows of the critical path: one step of the run, across its ranks.

The report analyses the last step every rank has (warm-up effects are most likely gone,
and one step keeps report time flat however many steps were recorded): the numbers are
those ``traceforge critical-path --step N --what-if gemm=2 attention=2
communication=2`` prints for the same traces, from
:func:`traceforge.analyzers.critical_path.report_data`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import cast

import pandas as pd

from traceforge.analyzers.critical_path import critical_only, critical_path, report_data
from traceforge.analyzers.timeline.core import timeline
from traceforge.model import Trace

#: The speedups the what-if table tries, each alone and all together (classes the step
#: has no kernel of are left out).
WHAT_IF: dict[str, float] = {"gemm": 2.0, "attention": 2.0, "communication": 2.0}


def _empty(cols: Sequence[str]) -> pd.DataFrame:
    out: pd.DataFrame = pd.DataFrame({c: pd.Series([], dtype=object) for c in cols})
    return out


@dataclass(frozen=True)
class PathTables:
    """The critical path of one step (``step``; -1: the whole trace, which has no steps).

    ``length``: the step's path per rank whose window ends last (step, rank, length_ns,
    ranks_crossed). ``bar``: time on the path by category (category, ns, pct). ``what_if``:
    scenario, length_ns, new_length_ns, saved_ns, saved_pct. ``top``: the ops and kernels
    on the path with their share.
    """

    step: int = -1
    length: pd.DataFrame = field(default_factory=lambda: _empty(["step", "rank", "length_ns"]))
    bar: pd.DataFrame = field(default_factory=lambda: _empty(["category", "ns", "pct"]))
    what_if: pd.DataFrame = field(default_factory=lambda: _empty(["scenario"]))
    top: pd.DataFrame = field(default_factory=lambda: _empty(["kind", "name"]))
    notes: tuple[str, ...] = ()

    @property
    def empty(self) -> bool:
        return self.length.empty


def last_step(traces: Sequence[Trace]) -> int | None:
    """The last step every rank has, or None when the traces have no steps."""
    common: set[int] | None = None
    for t in traces:
        tl = timeline(t)
        have = set(tl.windows["step"].tolist()) if not tl.steps.empty else set()
        common = have if common is None else common & have
    return max(common) if common else None


def what_if_for(traces: Sequence[Trace], step: int | None) -> dict[str, float]:
    """:data:`WHAT_IF`, less the classes without a kernel in the step on any rank."""
    have: set[str] = set()
    for t in traces:
        a = timeline(t).activity
        if step is not None:
            a = a[a["step"] == step]
        have |= set(a["cls"].astype(str).unique().tolist())
    return {k: v for k, v in WHAT_IF.items() if k in have}


def gather(traces: Sequence[Trace]) -> PathTables:
    """The critical path of the runs' last step, with the what-ifs of :data:`WHAT_IF`."""
    step = last_step(traces)
    r = critical_path(list(traces), steps=None if step is None else [step],
                      what_if=what_if_for(traces, step))
    d = report_data(r)
    crit = r.steps[r.steps["critical"]]
    length = cast("pd.DataFrame", crit[["step", "rank", "length_ns", "ranks_crossed"]]
                  .reset_index(drop=True))
    wi = critical_only(r, r.what_if)
    wi = wi[["scenario", "length_ns", "new_length_ns", "saved_ns", "saved_pct"]]
    top = d.top.drop(columns=["step", "for_rank"], errors="ignore")
    return PathTables(step=-1 if step is None else step, length=length, bar=d.bar,
                      what_if=cast("pd.DataFrame", wi.reset_index(drop=True)),
                      top=cast("pd.DataFrame", top.reset_index(drop=True)), notes=d.notes)
