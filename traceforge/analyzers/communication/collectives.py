"""Collectives across the rank traces of one run: which NCCL/RCCL kernel of each rank is
the same collective.

Every rank of a process group issues the group's collectives in the same order, on the
group's own stream. So the k-th communication kernel of a group on one rank is the k-th on
every other rank. The group is the kernel's ``Process Group Name`` arg when the trace has
it (Kineto writes it with ``Collective name`` since PyTorch 2.4), else the stream's place
among the rank's communication streams in order of first use (stream ids differ between
ranks, so they cannot be compared directly). The ``Collective name`` arg, where both ranks
have it, must agree; instances where it does not are not matched, and a note says so.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import cast

import numpy as np
import pandas as pd

from traceforge.model import Trace

#: Columns of :attr:`Collectives.members`.
MEMBER_COLUMNS = ("instance", "rank", "act", "group", "seq", "collective")


@dataclass(frozen=True)
class Collectives:
    """``members``: one row per rank's kernel of a matched collective (MEMBER_COLUMNS):
    ``instance`` numbers the collective across the run, ``act`` is the kernel's row in
    that rank's ``timeline(trace).activity``, ``group``/``seq`` say how it was matched,
    ``collective`` is its ``Collective name`` arg ("" when the trace lacks it).
    ``notes``: what could not be matched, in plain words."""

    members: pd.DataFrame
    notes: tuple[str, ...] = ()


def _empty() -> pd.DataFrame:
    return cast("pd.DataFrame", pd.DataFrame({
        c: pd.Series([], dtype=object if c in ("group", "collective") else np.int64)
        for c in MEMBER_COLUMNS}))


def comm_kernels(trace: Trace, acts: pd.DataFrame, rank: int) -> pd.DataFrame:
    """The communication kernels of one rank with the group and order they match on.

    ``acts`` is the rank's timeline activity table. Columns: rank, act, group, seq,
    collective.
    """
    sel = np.flatnonzero((acts["cls"].to_numpy() == "communication")
                         & (acts["kind"].to_numpy() == "kernel"))
    if len(sel) == 0:
        return cast("pd.DataFrame", _empty().drop(columns="instance"))
    a = acts.iloc[sel]
    args = trace.args(a["row"].to_numpy())
    pg = np.array([str(x.get("Process Group Name", "")) for x in args], dtype=object)
    coll = np.array([str(x.get("Collective name", "")) for x in args], dtype=object)
    stream = a["stream"].to_numpy()
    # Streams in order of first use: the k-th communication stream of every rank.
    first = pd.Series(a["ts"].to_numpy()).groupby(stream).min().sort_values(kind="stable")
    ordinal = {int(s): i for i, s in enumerate(first.index)}
    by_stream = np.array([f"stream#{ordinal[int(s)]}" for s in stream], dtype=object)
    group = np.array([f"pg:{p}" if p else b for p, b in zip(pg, by_stream, strict=True)],
                     dtype=object)
    # Order of issue: launch time where the launch call is in the trace, else start.
    issue = np.where(a["launch_ts"].to_numpy() >= 0, a["launch_ts"].to_numpy(),
                     a["ts"].to_numpy())
    out = pd.DataFrame({"rank": rank, "act": sel.astype(np.int64), "group": group,
                        "issue": issue, "collective": coll})
    out = out.sort_values(["group", "issue"], kind="stable")
    out["seq"] = out.groupby("group").cumcount().astype(np.int64)
    return cast("pd.DataFrame", out.drop(columns="issue"))


def match(kernels: Sequence[pd.DataFrame]) -> Collectives:
    """Match the :func:`comm_kernels` tables of the ranks of one run."""
    tables = [k for k in kernels if len(k)]
    if len(tables) < 2:
        return Collectives(_empty())
    allk = pd.concat(tables, ignore_index=True)
    notes: list[str] = []
    counts = allk.groupby(["group", "rank"]).size().unstack(fill_value=0)
    for group, row in counts.iterrows():
        present = row[row > 0]
        if len(present) > 1 and present.nunique() > 1:
            notes.append(f"collectives of {group}: ranks ran different numbers "
                         f"({present.to_dict()}); the first {int(present.min())} matched")
    # Only instances every participating rank reached: the first min-count of the group.
    reach = allk.groupby(["group", "rank"])["seq"].transform("size")
    least = allk.assign(n=reach).groupby("group")["n"].transform(
        lambda s: s[s > 0].min())
    allk = allk[allk["seq"].to_numpy() < least.to_numpy()]
    size = allk.groupby(["group", "seq"])["rank"].transform("size")
    allk = allk[size.to_numpy() > 1]
    # A named collective must be the same one on every rank that names it.
    named = allk[allk["collective"] != ""]
    kinds = named.groupby(["group", "seq"])["collective"].nunique()
    bad = kinds[kinds > 1]
    if len(bad):
        notes.append(f"{len(bad)} collective instances have different 'Collective name' "
                     "on different ranks: left unmatched")
        key = pd.MultiIndex.from_frame(allk[["group", "seq"]])
        allk = allk[~key.isin(bad.index)]
    if allk.empty:
        return Collectives(_empty(), tuple(notes))
    inst = allk.groupby(["group", "seq"]).ngroup().to_numpy().astype(np.int64)
    members = allk.assign(instance=inst)[list(MEMBER_COLUMNS)]
    members = members.sort_values(["instance", "rank"], kind="stable").reset_index(drop=True)
    return Collectives(cast("pd.DataFrame", members), tuple(notes))
