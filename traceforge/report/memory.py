"""The report's memory section: per-device peaks, per-step allocated memory and the series
its chart draws, from :mod:`traceforge.analyzers.memory` (the numbers ``traceforge memory``
prints with its defaults)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import cast

import pandas as pd

from traceforge.analyzers.memory import memory, series
from traceforge.analyzers.timeline.steps import host_steps
from traceforge.model import Trace


@dataclass(frozen=True)
class MemoryTables:
    """``devices``/``steps``/``ops``: ``traceforge memory``'s tables with a ``rank``
    column; ``series``: allocated and reserved over time (rank, device, ts, ...);
    ``steps_ns``: the step ranges of each rank (rank, step, ts, end) for the chart;
    ``source``: what recorded them. Empty when the traces have no memory events."""

    devices: pd.DataFrame = field(default_factory=pd.DataFrame)
    steps: pd.DataFrame = field(default_factory=pd.DataFrame)
    ops: pd.DataFrame = field(default_factory=pd.DataFrame)
    series: pd.DataFrame = field(default_factory=pd.DataFrame)
    steps_ns: pd.DataFrame = field(default_factory=pd.DataFrame)
    source: str = ""
    notes: tuple[str, ...] = ()

    @property
    def empty(self) -> bool:
        return self.devices.empty


def gather(traces: Sequence[Trace], top: int = 10) -> MemoryTables:
    """The memory tables of one run's ranks."""
    parts: dict[str, list[pd.DataFrame]] = {}
    notes: list[str] = []
    source = ""
    for i, t in enumerate(traces):
        rank = i if t.meta.rank is None else int(t.meta.rank)
        rep = memory(t, top=top)
        if rep.empty:
            continue
        source = source or rep.source
        notes += [n for n in rep.notes if n not in notes]
        for key, df in (("devices", rep.devices), ("steps", rep.steps), ("ops", rep.ops),
                        ("series", series(t, max_points=1500)),
                        ("steps_ns", host_steps(t).ranges)):
            parts.setdefault(key, []).append(df.assign(rank=rank))

    def cat(key: str) -> pd.DataFrame:
        got = parts.get(key)
        if not got:
            return cast(pd.DataFrame, pd.DataFrame())
        df = pd.concat(got, ignore_index=True)
        return cast(pd.DataFrame, df[["rank", *[c for c in df.columns if c != "rank"]]])

    return MemoryTables(cat("devices"), cat("steps"), cat("ops").drop(columns=["stack"],
                        errors="ignore"), cat("series"), cat("steps_ns"), source, tuple(notes))
