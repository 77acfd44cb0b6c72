"""The labels a path is named with, as integer codes into one table of values, built once
per run (:func:`run_labels`).

A path's pieces are labelled from the ranks' host ranges and activities (name, kind,
category, track). Those columns are categoricals of a few thousand names over ~1M rows;
turning one into an array of strings costs ~4 ms per column per step (3 s for the 46 steps
of a 288 MB trace). Here each column is converted once, to codes into :attr:`Labels.values`,
so labelling a step is integer indexing, and the strings are looked up only for the
pieces of the path, when its table is made. Equal values share one code (so comparing codes
is comparing values), except missing values, which never equal anything
(:attr:`Labels.never_equal`), as NaN does not.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from traceforge.analyzers.critical_path.run_graph import RunGraph
from traceforge.analyzers.timeline.activity import LAUNCH_APIS

#: Labels a path piece can get besides the trace's names, kinds and classes.
FIXED = ("idle", "", "host idle", "nothing recorded", "sync", "runtime", "cpu_op", "sync wait",
         "launch overhead", "cpu op", "stream wait", "gpu idle", "graph dependency")


class _Table:
    def __init__(self) -> None:
        self.values: list[Any] = []
        self.never: list[bool] = []
        self.ids: dict[Any, int] = {}

    def add(self, v: Any) -> int:
        if v != v:  # NaN: equal to nothing, itself included
            self.values.append(v)
            self.never.append(True)
            return len(self.values) - 1
        try:
            got = self.ids.get(v)
        except TypeError:  # unhashable: a value of its own
            got = None
        if got is None or type(self.values[got]) is not type(v):
            got = len(self.values)
            self.values.append(v)
            self.never.append(False)
            with contextlib.suppress(TypeError):
                self.ids.setdefault(v, got)
        return got

    def codes(self, col: pd.Series) -> np.ndarray:
        """The column's values as codes into the table (int32: a few hundred distinct
        values, one code per activity: 10M of them at 10M events)."""
        if not isinstance(col.dtype, pd.CategoricalDtype):
            col = col.astype("category")
        codes = col.cat.codes.to_numpy()
        cats: Iterable[Any] = col.cat.categories.to_numpy()
        lookup = [self.add(v) for v in cats]
        missing = np.flatnonzero(codes < 0)
        if len(missing):
            # The value a missing entry has as an array (NaN, None or NA, by dtype).
            lookup.append(self.add(col.iloc[missing[:1]].to_numpy()[0]))
        return np.asarray(lookup, dtype=np.int32)[codes] if len(codes) else codes.astype(np.int32)


@dataclass(eq=False)
class RankLabels:
    """One rank's label columns: codes (``*_c``) and the integer columns as arrays."""

    h_row: np.ndarray
    h_pid: np.ndarray
    h_tid: np.ndarray
    h_name: np.ndarray
    h_sync: np.ndarray  # the range is a blocking call
    h_api: np.ndarray  # a runtime or driver call
    h_launch: np.ndarray  # a launch call
    a_row: np.ndarray
    a_stream: np.ndarray
    a_lrow: np.ndarray
    a_ltid: np.ndarray
    a_lpid: np.ndarray  # the launch call's pid (-1: not a host range of the rank)
    a_name: np.ndarray
    a_kind: np.ndarray
    a_cls: np.ndarray
    a_family: np.ndarray
    a_lname: np.ndarray


@dataclass(eq=False)
class Labels:
    values: np.ndarray  # object: the value of each code
    never_equal: np.ndarray  # bool per code: a missing value
    ranks: list[RankLabels]
    fixed: dict[str, int]

    def factors(self, factors: dict[str, float], ri: int) -> np.ndarray:
        """Per activity of rank ``ri``: its speedup (its family's if given, else its
        class's, else 1)."""
        r = self.ranks[ri]
        strs = [str(v) for v in self.values]
        by_cls = np.array([factors.get(s, 1.0) for s in strs], dtype=np.float64)
        by_fam = np.array([factors.get(s, np.nan) for s in strs], dtype=np.float64)
        fam = by_fam[r.a_family] if len(r.a_family) else np.zeros(0)
        cls = by_cls[r.a_cls] if len(r.a_cls) else np.zeros(0)
        return np.asarray(np.where(np.isnan(fam), cls, fam))


def run_labels(run: RunGraph) -> Labels:
    """Every rank's label columns as codes into one table (see the module docstring)."""
    tab = _Table()
    fixed = {s: tab.add(s) for s in FIXED}
    ranks = []
    for r in run.ranks:
        h, a = r.host, r.acts
        hk = tab.codes(h["kind"])
        hn = tab.codes(h["name"])
        hs = tab.codes(h["sync"])
        api = np.isin(hk, [tab.ids.get(k, -2) for k in ("runtime", "driver")])
        launch = api & np.isin(hn, [tab.ids[k] for k in LAUNCH_APIS if k in tab.ids])
        h_row = h["row"].to_numpy()
        h_pid = h["pid"].to_numpy()
        a_lrow = a["launch_row"].to_numpy()
        if len(h) and len(a):
            li = pd.Index(h_row).get_indexer(a_lrow)
            lpid = np.where(li >= 0, h_pid[np.clip(li, 0, None)], -1)
        else:
            lpid = np.full(len(a), -1, dtype=np.int64)
        ranks.append(RankLabels(
            h_row=h_row, h_pid=h_pid, h_tid=h["tid"].to_numpy(), h_name=hn,
            h_sync=hs != fixed[""],
            h_api=api, h_launch=launch, a_row=a["row"].to_numpy(),
            a_stream=a["stream"].to_numpy(), a_lrow=a_lrow, a_ltid=a["launch_tid"].to_numpy(),
            a_lpid=np.asarray(lpid, dtype=np.int64), a_name=tab.codes(a["name"]),
            a_kind=tab.codes(a["kind"]), a_cls=tab.codes(a["cls"]),
            a_family=tab.codes(a["family"]), a_lname=tab.codes(a["launch_name"])))
    values = np.empty(len(tab.values), dtype=object)
    values[:] = tab.values
    return Labels(values, np.asarray(tab.never, dtype=bool), ranks, fixed)
