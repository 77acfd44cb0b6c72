"""Kernel tables: GPU time per kernel, family or class."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from traceforge.analyzers.names.kernel_names import classify, display_names
from traceforge.model import Trace, distinct

#: Columns of :func:`top_kernels`, in order (``full_name`` only when grouping by name).
TOP_KERNEL_COLUMNS = (
    "name", "class", "family", "calls", "total_us", "pct", "avg_us", "min_us", "max_us"
)

BY = ("name", "family", "class")


def _name_codes(names: pd.Series) -> tuple[np.ndarray, pd.Index]:
    """Each row's code into the distinct names (-1: missing): a categorical column's own
    codes, else the names as ``str`` numbered by first appearance."""
    if isinstance(names.dtype, pd.CategoricalDtype):
        return np.asarray(names.cat.codes, dtype=np.int64), names.cat.categories
    codes, cats = pd.factorize(names.astype(str))
    return np.asarray(codes, dtype=np.int64), pd.Index(cats)


def kernel_table(trace: Trace, *, include_memory: bool = False) -> pd.DataFrame:
    """One row per GPU kernel (and copies/memsets if asked) with class, family, short name.

    Columns: row, name (full), short, class, family, ts, dur, device, stream, corr, ext, graph.
    """
    kinds = ("kernel", "memcpy", "memset") if include_memory else ("kernel",)
    k = trace.of_kind(*kinds)
    # Names are classified once per distinct name and spread to rows through the integer
    # codes of the categorical column: per-row Python work on ~1M strings cost more than
    # the whole analysis. String columns stay plain objects (one dtype on pandas 2 and 3).
    codes, cats = _name_codes(k["name"])
    used = distinct(codes[codes >= 0])
    labels = np.empty(len(cats) + 1, dtype=object)  # the last slot: missing name (code -1)
    short_c, cls_c, fam_c = (np.empty(len(cats) + 1, dtype=object) for _ in range(3))
    for c in [*used.tolist(), -1]:
        n = str(cats[c]) if c >= 0 else "nan"
        info = classify(n)
        labels[c], short_c[c], cls_c[c], fam_c[c] = n, info.short, info.cls, info.family
    kind_s = k["kind"]
    if isinstance(kind_s.dtype, pd.CategoricalDtype):
        kind_labels = np.array([str(c) for c in kind_s.cat.categories] + ["nan"], dtype=object)
        kind = kind_labels[np.asarray(kind_s.cat.codes)]
    else:
        kind = np.asarray(kind_s.astype(str), dtype=object)
    is_kernel = kind == "kernel"
    # A memcpy/memset row is classed by its kind, whatever its name says.
    cls = np.where(is_kernel, cls_c[codes], kind)
    fam = np.where(is_kernel, fam_c[codes], kind)

    def text(values: np.ndarray) -> pd.Series:
        col: pd.Series = pd.Series(values, dtype=object, copy=False)
        return col

    result: pd.DataFrame = pd.DataFrame(
        {
            "row": k.index.to_numpy(),
            "name": text(labels[codes]),
            "short": text(short_c[codes]),
            "class": text(cls),
            "family": text(fam),
            "ts": k["ts"].to_numpy(),
            "dur": k["dur"].to_numpy(),
            "device": k["device"].to_numpy(),
            "stream": k["stream"].to_numpy(),
            "corr": k["corr"].to_numpy(),
            "ext": k["ext"].to_numpy(),
            "graph": k["graph"].to_numpy(),
        }
    )
    return result


#: Columns of :func:`kernel_totals`: one row per full kernel name (ns, exact integers).
TOTAL_COLUMNS = ("name", "class", "family", "calls", "total_ns", "min_ns", "max_ns")


def kernel_totals(trace: Trace, *, include_memory: bool = False) -> pd.DataFrame:
    """Calls and total/min/max GPU time (int ns) per full kernel name, in order of first
    appearance: all :func:`top_kernels` needs of a trace, and what one rank of a run
    sends to be merged with the others (:func:`merge_kernel_totals`). A name's class and
    family are its first row's (a copy or memset is classed by its kind)."""
    kinds = ("kernel", "memcpy", "memset") if include_memory else ("kernel",)
    # The three columns it reads, then the rows, and every sum over the names' codes:
    # not :func:`kernel_table`'s twelve columns of every kernel (four of them strings)
    # grouped by name (at 10M kernels ~5 s and a GB, twice in a report).
    ev = trace.events[["name", "kind", "dur"]]
    ev = ev[ev["kind"].isin(kinds).to_numpy()]
    if ev.empty:
        return _no_totals()
    codes, cats = _name_codes(ev["name"])
    # Groups by name as ``str`` writes it (a missing name is "nan"), first appearance.
    seen, at = pd.factorize(codes)
    label = np.array([str(cats[c]) if c >= 0 else "nan" for c in at.tolist()], dtype=object)
    merged, names = pd.factorize(label)
    group = np.asarray(merged, dtype=np.int64)[seen]
    n = len(names)
    dur = ev["dur"].to_numpy(dtype=np.int64)
    first = np.full(n, len(group), dtype=np.int64)
    np.minimum.at(first, group, np.arange(len(group)))
    lo = np.full(n, np.iinfo(np.int64).max, dtype=np.int64)
    hi = np.full(n, np.iinfo(np.int64).min, dtype=np.int64)
    np.minimum.at(lo, group, dur)
    np.maximum.at(hi, group, dur)
    total = np.zeros(n, dtype=np.int64)
    np.add.at(total, group, dur)  # (int64: exact)
    kind = ev["kind"].to_numpy()[first]
    info = [classify(str(nm)) for nm in names.tolist()]
    is_kernel = kind == "kernel"
    out: pd.DataFrame = pd.DataFrame({
        "name": _text(names),
        "class": _text(np.where(is_kernel, np.array([i.cls for i in info], dtype=object),
                                kind)),
        "family": _text(np.where(is_kernel, np.array([i.family for i in info], dtype=object),
                                 kind)),
        "calls": np.bincount(group, minlength=n).astype(np.int64),
        "total_ns": total, "min_ns": lo, "max_ns": hi})
    return out


def _text(values: pd.Index | pd.Series | np.ndarray) -> pd.Series:
    """Plain object strings (pandas 3 would infer its string dtype from an array)."""
    col: pd.Series = pd.Series(np.asarray(values, dtype=object), dtype=object, copy=False)
    return col


def _no_totals() -> pd.DataFrame:
    out: pd.DataFrame = pd.DataFrame({c: pd.Series([], dtype=object if i < 3 else np.int64)
                                      for i, c in enumerate(TOTAL_COLUMNS)})
    return out


def merge_kernel_totals(parts: Sequence[pd.DataFrame]) -> pd.DataFrame:
    """The :func:`kernel_totals` of several traces (the ranks of a run, in rank order) as
    one table: the totals of all their kernels together."""
    parts = [p for p in parts if len(p)]
    if not parts:
        return _no_totals()
    if len(parts) == 1:
        one: pd.DataFrame = parts[0].reset_index(drop=True)
        return one
    allp = pd.concat(parts, ignore_index=True)
    g = allp.groupby("name", sort=False)
    first = g[["class", "family"]].first()
    out: pd.DataFrame = pd.DataFrame({
        "name": _text(first.index), "class": _text(first["class"]),
        "family": _text(first["family"]),
        "calls": g["calls"].sum().to_numpy(np.int64),
        "total_ns": g["total_ns"].sum().to_numpy(np.int64),
        "min_ns": g["min_ns"].min().to_numpy(np.int64),
        "max_ns": g["max_ns"].max().to_numpy(np.int64)})
    return out


def top_kernels(
    trace: Trace, n: int | None = None, *, by: str = "name", include_memory: bool = False
) -> pd.DataFrame:
    """Kernels by total GPU time: calls, total/avg/min/max (us) and % of all kernel time.

    ``by`` groups by full kernel ``name`` (default), ``family`` or ``class``. By name, the
    ``name`` column holds one distinct display name per full name (the short name, plus
    the template argument that tells apart kernels sharing it: see
    :func:`~traceforge.analyzers.names.kernel_names.display_names`) and ``full_name`` the name.
    Durations are summed in integer ns and converted once, so totals are exact.
    """
    if by not in BY:
        raise ValueError(f"by must be one of {BY}")
    return top_kernels_of(kernel_totals(trace, include_memory=include_memory), n, by=by)


def top_kernels_of(totals: pd.DataFrame, n: int | None = None, *, by: str = "name"
                   ) -> pd.DataFrame:
    """:func:`top_kernels` from a :func:`kernel_totals` table (one trace's, or the merged
    totals of a run's ranks: every rank's kernels counted together)."""
    if by not in BY:
        raise ValueError(f"by must be one of {BY}")
    if totals.empty:
        cols = list(TOP_KERNEL_COLUMNS) + (["full_name"] if by == "name" else [])
        result2: pd.DataFrame = pd.DataFrame({c: pd.Series([], dtype=object) for c in cols})
        return result2
    if by == "name":
        agg = totals.set_index("name")[["calls", "total_ns", "min_ns", "max_ns"]]
        first = totals.set_index("name")[["class", "family"]]
    else:
        g = totals.groupby(by, sort=False)
        agg = pd.DataFrame({"calls": g["calls"].sum(), "total_ns": g["total_ns"].sum(),
                            "min_ns": g["min_ns"].min(), "max_ns": g["max_ns"].max()})
        first = g[["class", "family"]].first()
    agg.columns = pd.Index(["count", "sum", "min", "max"])
    total = int(totals["total_ns"].sum())
    if by == "name":
        # Display names are chosen among every kernel of the table, so a row's name does not
        # depend on how many rows are shown.
        shown = display_names(agg.index.astype(str))
        names = np.array([shown[str(n)] for n in agg.index], dtype=object)
    else:
        names = agg.index.to_numpy()
    out = pd.DataFrame(
        {
            "name": names,
            "class": first["class"] if by != "family" else first["class"],
            "family": first["family"] if by != "class" else "",
            "calls": agg["count"].astype(np.int64),
            "total_us": agg["sum"] / 1e3,
            "pct": 100.0 * agg["sum"] / total if total else 0.0,
            "avg_us": agg["sum"] / agg["count"] / 1e3,
            "min_us": agg["min"] / 1e3,
            "max_us": agg["max"] / 1e3,
        }
    )
    if by == "class":
        out["class"] = agg.index.to_numpy()
        out["name"] = agg.index.to_numpy()
        # The families that make up each class, by time: "nvjet_sm90, cutlass".
        fam_time = totals.groupby(["class", "family"])["total_ns"].sum()
        out["family"] = [
            ", ".join(fam_time.loc[c].sort_values(ascending=False).index.astype(str))
            for c in agg.index
        ]
    if by == "family":
        out["family"] = agg.index.to_numpy()
    if by == "name":
        out["full_name"] = agg.index.to_numpy()
    out = out.reset_index(drop=True)
    out = out.sort_values(["total_us", "name"], ascending=[False, True], kind="stable")
    out = out.reset_index(drop=True)
    result3: pd.DataFrame = out if n is None else out.head(n)
    return result3


def run_kernel_totals(trace: Trace, *, include_memory: bool = False,
                      steps: Sequence[int] | None = None) -> pd.DataFrame:
    """One rank's summary for ``top-kernels`` over a run: :func:`kernel_totals` of the
    kernels its ``steps`` launched (all kernels when None). Reduce with
    :func:`merge_kernel_totals` and :func:`top_kernels_of`."""
    if steps:
        from traceforge.analyzers.timeline.core import select_steps

        trace = select_steps(trace, steps)
    return kernel_totals(trace, include_memory=include_memory)


#: Launch-configuration fields decoded by :func:`launch_config` (Kineto arg names).
_LAUNCH_ARGS = {
    "registers per thread": "registers",
    "shared memory": "shared_mem_bytes",
    "blocks per SM": "blocks_per_sm",
    "warps per SM": "warps_per_sm",
    "est. achieved occupancy %": "occupancy_pct",
}


def launch_config(trace: Trace) -> pd.DataFrame:
    """Grid, block, registers and shared memory of every kernel (from the source's args).

    Columns: row, name, grid_x/y/z, block_x/y/z, threads, registers, shared_mem_bytes,
    blocks_per_sm, warps_per_sm, occupancy_pct. Values a source does not record are NaN.
    """
    k = trace.kernels()
    rows = []
    for row, name, a in zip(k.index, k["name"].astype(str), trace.args(k.index.to_numpy()),
                            strict=True):
        grid, block = _xyz(a.get("grid")), _xyz(a.get("block"))
        rec: dict[str, object] = {"row": row, "name": name}
        for axis, g, b in zip("xyz", grid, block, strict=True):
            rec[f"grid_{axis}"] = g
            rec[f"block_{axis}"] = b
        for src, dst in _LAUNCH_ARGS.items():
            rec[dst] = a.get(src)
        rows.append(rec)
    cols = ["row", "name", "grid_x", "grid_y", "grid_z", "block_x", "block_y", "block_z",
            *_LAUNCH_ARGS.values()]
    df = pd.DataFrame(rows, columns=cols)
    for c in cols[2:]:
        df[c] = pd.to_numeric(df[c], errors="coerce")
    df.insert(8, "threads", df["block_x"] * df["block_y"] * df["block_z"])
    out: pd.DataFrame = df
    return out


def _xyz(v: object) -> list[object]:
    """Three components of a grid/block arg, None where absent."""
    vals: list[object] = list(v) if isinstance(v, list) else []
    return (vals + [None, None, None])[:3]
