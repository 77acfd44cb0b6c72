"""Which profiled launch is which trace kernel: by name, then launch order.

Nsight Compute profiles a run of its own (``--launch-skip``, ``--launch-count`` and
``-k`` filters leave gaps), and writes names its own way (``at::vectorized_elementwise_
kernel<4, ...>`` where Kineto says ``at::native::...``, ``(int)4`` under nsys). Names are
compared by :func:`kernel_key`: namespaces, casts, spaces and the parameter list dropped.
Within one key the i-th profiled launch is the (``skip`` + i)-th trace launch of that key,
in time order; launches beyond either side's count stay unmatched and are counted.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pandas as pd

from traceforge.model import Trace, coded

_NS = re.compile(r"\b[A-Za-z_]\w*::")
_CAST = re.compile(r"\((?:unsigned |signed )?(?:int|long|char|short|bool|long long)\)")
_NUM = re.compile(r"\b(\d+)(?:ul|u|l|ll|ull)\b")


def _params_start(s: str) -> int:
    """Index of the '(' opening the final parameter list (at template depth 0), or -1."""
    depth = 0
    for i, ch in enumerate(s):
        if ch == "<":
            depth += 1
        elif ch == ">":
            depth -= 1
        elif ch == "(" and depth == 0 and i > 0:
            return i
    return -1


def kernel_key(name: str) -> str:
    """A kernel name as ncu, Kineto and nsys all spell it (see the module docstring)."""
    s = str(name).replace("<unnamed>", "").replace("(anonymous namespace)", "")
    s = _CAST.sub("", s)
    s = s.removeprefix("void ").strip()
    cut = _params_start(s)
    if cut > 0:
        s = s[:cut]
    s = _NS.sub("", s)
    s = _NUM.sub(r"\1", s)
    return s.replace(" ", "").lstrip(":")


def base_key(name: str) -> str:
    """The kernel's function name alone (the fallback when template arguments differ)."""
    k = kernel_key(name)
    return k.split("<", 1)[0]


@dataclass(frozen=True)
class Join:
    """``pairs``: trace row label (``row``) -> profiled ``launch`` id, with the key.
    ``by_key``: per key, trace launches, profiled launches and matched pairs.
    ``notes``: what matched and what did not, in words."""

    pairs: pd.DataFrame
    by_key: pd.DataFrame
    notes: tuple[str, ...]


def _each(names: pd.Series, key: Callable[[str], str]) -> np.ndarray:
    """``key`` of every name, computed once per distinct name (a trace repeats a few
    hundred kernel names over tens of thousands of launches), taken through the
    column's codes (no string per row)."""
    codes, labels = coded(names)
    keys = np.array([key(str(u)) for u in labels], dtype=object)
    out: np.ndarray = keys[codes]
    return out


def join(trace: Trace, launches: pd.DataFrame, *, skip: int = 0) -> Join:
    """Match ``launches`` (a counter table's per-launch rows) to ``trace``'s kernels."""
    ev = trace.events
    k = ev[ev["kind"] == "kernel"].sort_values("ts", kind="stable")
    tnames = k["name"]
    tkeys = _each(tnames, kernel_key)
    lk = launches.sort_values("launch", kind="stable")
    lkeys = _each(lk["kernel"], kernel_key)
    # Fall back to the bare function name for profiled keys the trace never spells alike.
    tset = set(tkeys.tolist())
    if not set(lkeys.tolist()) <= tset:
        tb = _each(tnames, base_key)
        lb = _each(lk["kernel"], base_key)
        lkeys = np.where(np.isin(lkeys, list(tset)), lkeys, lb)
        tkeys = np.where(np.isin(tkeys, lkeys), tkeys, tb)
    rows_t = k.index.to_numpy()
    ids_l = lk["launch"].to_numpy()
    pairs: list[tuple[int, int, str]] = []
    stats: list[tuple[str, int, int, int]] = []
    for key in sorted(set(lkeys.tolist()) | set(tkeys.tolist())):
        t_rows = rows_t[tkeys == key][skip:]
        l_ids = ids_l[lkeys == key]
        n = min(len(t_rows), len(l_ids))
        pairs += [(int(r), int(i), key) for r, i in zip(t_rows[:n], l_ids[:n], strict=True)]
        stats.append((key, int((tkeys == key).sum()), len(l_ids), n))
    pdf = pd.DataFrame(pairs, columns=["row", "launch", "key"])
    by = pd.DataFrame(stats, columns=["key", "trace_launches", "profiled", "matched"])
    notes: list[str] = []
    prof = by[by["profiled"] > 0]
    lost = prof[prof["trace_launches"] == 0]
    if len(prof):
        notes.append(f"{int(prof['matched'].sum())} of {int(prof['profiled'].sum())} profiled "
                     f"launches matched trace kernels ({(prof['matched'] > 0).sum()} of "
                     f"{len(prof)} kernel names)")
    else:
        notes.append("the counter file has no profiled launches")
    if len(lost):
        notes.append(f"not in the trace: {len(lost)} profiled kernel name(s), e.g. "
                     f"{lost['key'].iloc[0][:60]}")
    left = by[by["trace_launches"] > by["matched"]]
    if len(left):
        n = int((left["trace_launches"] - left["matched"]).sum())
        notes.append(f"{n} trace launches of {len(left)} kernel name(s) have no profiled launch "
                     "(ncu's launch count, skip or name filter)")
    return Join(pdf, by, tuple(notes))


def top_kernels(trace: Trace, top: int) -> list[str]:
    """Function names (:func:`base_key`) of the ``top`` kernels by total GPU time, most
    first: what ``capture --backend ncu --top N`` profiles. Empty without kernels."""
    ev = trace.events
    k = ev[ev["kind"] == "kernel"]
    if k.empty:
        return []
    tot = k.groupby(k["name"].astype(str).map(base_key))["dur"].sum()
    return [str(n) for n in tot.sort_values(ascending=False).index[:top] if n]
