"""The launch -> GPU flows of a trace without its own (``render.flow_table.flow_events``),
found on row positions, are those the frame operations found before (the oracle below):
one per launch with GPU work, from the first launch of the correlation id to its first
GPU activity by time (ties in time, a graph launch's many kernels, launches without GPU
work and GPU work without a launch, ids of -1)."""

from __future__ import annotations

from itertools import chain
from typing import Any

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.conftest import ev, make_trace
from traceforge.model import GPU_KINDS, Trace
from traceforge.render.flow_table import flow_events, us


def _oracle(trace: Trace) -> tuple[list[Any], ...]:
    ev_ = trace.events
    gpu = ev_[ev_["kind"].isin(GPU_KINDS) & (ev_["corr"] >= 0)]
    launch = ev_[ev_["kind"].isin(("runtime", "driver")) & (ev_["corr"] >= 0)]
    out: tuple[list[Any], ...] = ([], [], [], [], [], [])
    if gpu.empty or launch.empty:
        return out
    first = gpu.sort_values("ts").drop_duplicates("corr")
    lq = launch.drop_duplicates("corr").set_index("corr")
    first = first[first["corr"].isin(lq.index)]
    if first.empty:
        return out
    lrow = lq.loc[first["corr"].to_numpy()]
    n = len(first)

    def pairs(a: list[Any], b: list[Any]) -> list[Any]:
        return list(chain.from_iterable(zip(a, b, strict=True)))

    corr = first["corr"].tolist()
    return (["s", "f"] * n, pairs(corr, corr),
            pairs(lrow["pid"].tolist(), first["pid"].tolist()),
            pairs(lrow["tid"].tolist(), first["tid"].tolist()),
            pairs(us(lrow["ts"].to_numpy()), us(first["ts"].to_numpy())), ["ac2g"] * (2 * n))


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_launch_flows_are_the_frame_operations(data: st.DataObject) -> None:
    rows = []
    for _ in range(data.draw(st.integers(0, 30))):
        kind = data.draw(st.sampled_from(["kernel", "memcpy", "runtime", "driver", "cpu_op"]))
        rows.append(ev(f"e{len(rows)}", kind, data.draw(st.integers(0, 6)), 1,
                       corr=data.draw(st.integers(-1, 5)), pid=data.draw(st.integers(1, 3)),
                       tid=data.draw(st.integers(1, 3))))
    if not rows:
        return
    t = make_trace(rows)
    got = flow_events(t)
    want = _oracle(t)
    assert (got.ph, got.id, got.pid, got.tid, got.ts, got.cat) == want
    assert np.all(np.asarray(got.id, dtype=np.int64) >= 0)


def test_many_rows_with_ties_are_the_frame_operations() -> None:
    """Thousands of rows, most times shared (the sort's ties past its small-array path)."""
    rng = np.random.default_rng(5)
    kinds = ["kernel", "memcpy", "runtime", "driver", "cpu_op"]
    rows = [ev(f"e{i}", kinds[int(k)], int(ts), 1, corr=int(c), pid=int(p), tid=int(p))
            for i, (k, ts, c, p) in enumerate(zip(rng.integers(0, 5, 5000),
                                                  rng.integers(0, 50, 5000),
                                                  rng.integers(-1, 800, 5000),
                                                  rng.integers(1, 4, 5000), strict=True))]
    t = make_trace(rows)
    got = flow_events(t)
    assert len(got) > 500
    assert (got.ph, got.id, got.pid, got.tid, got.ts, got.cat) == _oracle(t)


_IDS = st.one_of(st.integers(-3, 4), st.booleans(), st.sampled_from([2**70, "7", 1.0, 1.5, None]))


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_points_threads_and_flow_ids_are_the_dict_lookups(data: st.DataObject) -> None:
    """Each flow point's thread (``keys.get((pid, tid), -1)``) and each bound point's flow
    id ((cat, id) pairs numbered from 1 as first met), as int arrays where the ids allow,
    are the dict lookups they replace, whatever the ids hold (bools equal to ints, big
    ints, text, floats, None)."""
    from traceforge.render import pftrace_layout as lay

    n = data.draw(st.integers(0, 25))
    simple = data.draw(st.booleans())
    ids = st.integers(-3, 4) if simple else _IDS
    pid = data.draw(st.lists(ids, min_size=n, max_size=n))
    tid = data.draw(st.lists(ids, min_size=n, max_size=n))
    fid = data.draw(st.lists(ids, min_size=n, max_size=n))
    cat = data.draw(st.lists(st.sampled_from(["ac2g", "fwdbwd", "x"]) if simple else
                             st.one_of(st.sampled_from(["ac2g", "x"]), st.none()),
                             min_size=n, max_size=n))
    keys: dict[tuple[Any, Any], int] = {}
    for k in data.draw(st.lists(st.tuples(ids, ids), max_size=8)):
        keys.setdefault(k, data.draw(st.integers(0, 9)))
    points = lay.FlowPoints(pid, tid, np.zeros(n, np.int64), cat, fid, np.zeros(n, bool))
    want = [keys.get((p, t), -1) for p, t in zip(pid, tid, strict=True)]
    assert lay._thread_of(keys, points).tolist() == want
    bound = np.asarray(sorted(data.draw(st.sets(st.integers(0, max(n - 1, 0)))))
                       if n else [], dtype=np.int64)
    pairs = [(cat[i], fid[i]) for i in bound.tolist()]
    number = {k: j + 1 for j, k in enumerate(dict.fromkeys(pairs))}
    assert lay._flow_numbers(points, bound).tolist() == [number[p] for p in pairs]
