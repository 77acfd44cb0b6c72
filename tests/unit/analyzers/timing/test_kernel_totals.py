"""Kernel totals per name, summed over the names' codes, against a groupby of the
per-kernel table (every row's name, class and family as strings): the same table."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from tests.conftest import FIXTURES
from traceforge.analyzers.timing.kernels import kernel_table, kernel_totals
from traceforge.formats import load
from traceforge.model import Trace, TraceMeta, normalize_events


def _by_table(t: Trace, include_memory: bool) -> pd.DataFrame:
    """What kernel_totals gave when it grouped kernel_table's rows by name."""
    kt = kernel_table(t, include_memory=include_memory)
    g = kt.groupby("name", sort=False, observed=True)
    agg = g["dur"].agg(["count", "sum", "min", "max"])
    first = g[["class", "family"]].first()
    return pd.DataFrame({"name": agg.index.astype(object), "class": first["class"].to_numpy(),
                         "family": first["family"].to_numpy(),
                         "calls": agg["count"].to_numpy(np.int64),
                         "total_ns": agg["sum"].to_numpy(np.int64),
                         "min_ns": agg["min"].to_numpy(np.int64),
                         "max_ns": agg["max"].to_numpy(np.int64)})


def _same(got: pd.DataFrame, want: pd.DataFrame) -> None:
    assert list(got.columns) == list(want.columns)
    for c in got.columns:
        assert got[c].tolist() == want[c].tolist(), c


@pytest.mark.parametrize("name", ["eager.pt.trace.json.gz",
                                  "capture_h100.memory_train.both.pt.trace.json.gz",
                                  "capture_h200x2.ddp_train.sdpa.rank0.pt.trace.json.gz"])
@pytest.mark.parametrize("include_memory", [False, True])
def test_totals_equal_a_groupby_of_the_kernel_table(name: str, include_memory: bool) -> None:
    t = load(FIXTURES / name)
    _same(kernel_totals(t, include_memory=include_memory), _by_table(t, include_memory))


def test_totals_of_names_shared_by_kinds_and_missing_names(tmp_path: Path) -> None:
    """A copy named like a kernel joins its group (classed by its first row), a missing
    name is the group "nan", order is first appearance."""
    rows = [("gemm_kernel_a", "memcpy", 5), ("gemm_kernel_a", "kernel", 7),
            (None, "kernel", 3), ("elementwise_b", "kernel", 2), (None, "memset", 9),
            ("elementwise_b", "kernel", 4)]
    ev = normalize_events(pd.DataFrame({
        "name": [r[0] for r in rows], "kind": [r[1] for r in rows],
        "ts": np.arange(len(rows)) * 100, "dur": [r[2] for r in rows]}))
    t = Trace(ev, TraceMeta(path="synthetic"))
    for mem in (False, True):
        _same(kernel_totals(t, include_memory=mem), _by_table(t, mem))
    got = kernel_totals(t, include_memory=True)
    assert got["name"].tolist() == ["gemm_kernel_a", "nan", "elementwise_b"]
    assert got["class"].tolist()[0] == "memcpy" and got["calls"].tolist() == [2, 2, 2]
