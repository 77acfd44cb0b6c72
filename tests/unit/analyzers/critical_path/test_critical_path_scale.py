"""The critical path at trace size (issue 30 item 2): steps on forked workers give what one
process gives, the summed tables equal pandas groupbys of the segments, the step graph
tables are built when asked for."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import pytest

import traceforge as tf
from tests.conftest import FIXTURES
from traceforge.analyzers.critical_path import critical_path
from traceforge.analyzers.critical_path import segments as seg_mod
from traceforge.analyzers.critical_path import step_paths as sp_mod
from traceforge.forks import ForkError, can_fork, forked_map

FIX = FIXTURES
EAGER = FIX / "eager.pt.trace.json.gz"


@pytest.fixture(scope="module")
def eager() -> tf.Trace:
    return tf.load(EAGER, cache=False)


def _frames(r: tf.CriticalPath) -> list[pd.DataFrame]:
    return [r.steps, r.segments, r.by_category, r.top, r.what_if]


def _same(a: tf.CriticalPath, b: tf.CriticalPath) -> None:
    for x, y in zip(_frames(a), _frames(b), strict=True):
        pd.testing.assert_frame_equal(x, y, check_exact=True)
    assert a.notes == b.notes


def test_forked_steps_equal_one_process(eager: tf.Trace, monkeypatch: pytest.MonkeyPatch
                                        ) -> None:
    if not can_fork():
        pytest.skip("no fork here")
    monkeypatch.setattr(sp_mod, "PARALLEL_EDGES", 10**12)
    here = critical_path(eager, what_if=["gemm=2", "elementwise=1.5"])
    assert len(here.steps) > 1
    monkeypatch.setattr(sp_mod, "PARALLEL_EDGES", 0)
    monkeypatch.setattr(sp_mod, "cores", lambda: 2)
    calls = []
    real = forked_map

    def spy(work, n):  # type: ignore[no-untyped-def]
        calls.append(n)
        return real(work, n)

    monkeypatch.setattr(sp_mod, "forked_map", spy)
    forked = critical_path(eager, what_if=["gemm=2", "elementwise=1.5"])
    assert calls == [2]
    _same(here, forked)


def test_failed_worker_done_here(eager: tf.Trace, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sp_mod, "PARALLEL_EDGES", 10**12)
    here = critical_path(eager)

    def broken(work, n):  # type: ignore[no-untyped-def]
        raise ForkError("a worker died")

    monkeypatch.setattr(sp_mod, "PARALLEL_EDGES", 0)
    monkeypatch.setattr(sp_mod, "cores", lambda: 2)
    monkeypatch.setattr(sp_mod, "can_fork", lambda: True)
    monkeypatch.setattr(sp_mod, "forked_map", broken)
    _same(here, critical_path(eager))


@pytest.mark.parametrize("batch", [1, 2, 3, 7])
def test_path_labelled_in_batches_equals_one_batch(eager: tf.Trace, batch: int,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """A path labelled a few edges at a time (bounded memory at 10M edges) has the same
    pieces as in one batch (the seams: next test)."""
    one = critical_path(eager)
    joins = []
    real = seg_mod._continues

    def spy(a, b, lab):  # type: ignore[no-untyped-def]
        joins.append(real(a, b, lab))
        return joins[-1]

    monkeypatch.setattr(seg_mod, "BATCH", batch)
    monkeypatch.setattr(seg_mod, "_continues", spy)
    _same(one, critical_path(eager))
    assert joins  # seams were looked at


@pytest.mark.parametrize("seed", range(40))
def test_pieces_joined_across_seams_as_within(seed: int) -> None:
    """Pieces merged batch by batch and joined at the seams = merged in one go, on random
    pieces where many continue the one before (same labels, touching) and some labels
    are missing values (never equal): seams inside runs, batches of one piece, a run
    over several whole batches."""
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 60))
    lab: Any = type("Lab", (), {"never_equal": np.array([False, False, True])})()
    labels = [rng.integers(0, 2, n) for _ in range(4)]  # rank, row, pid, tid
    codes = [rng.choice([0, 1, 2], n, p=[0.6, 0.3, 0.1]) for _ in range(3)]
    for c in (*labels, *codes):
        c[1:] = np.where(rng.random(n - 1) < 0.9, c[:-1], c[1:])  # long runs
    w = rng.integers(1, 5, n)
    gap = np.where(rng.random(n) < 0.7, 0, 1)
    ts = np.cumsum(np.concatenate([[0], (w + gap)[:-1]]))
    cols = [labels[0], *codes, ts, w, labels[1], labels[2], labels[3]]
    cols = [np.asarray(c, dtype=np.int64) for c in cols]
    whole = seg_mod._merged([c.copy() for c in cols], lab)
    cuts = np.sort(rng.choice(np.arange(1, n), size=int(rng.integers(0, n)),
                              replace=False)) if n > 1 else np.zeros(0, dtype=np.int64)
    bounds = [0, *cuts.tolist(), n]
    parts = [seg_mod._merged([c[a:b].copy() for c in cols], lab)
             for a, b in zip(bounds[:-1], bounds[1:], strict=True)]
    got = seg_mod._joined(parts, lab)
    for x, y in zip(got, whole, strict=True):
        np.testing.assert_array_equal(x, y)


def test_summed_tables_equal_pandas_groupbys(eager: tf.Trace) -> None:
    """The oracle: the pandas groupbys the code-based sums replaced, on the segments."""
    r = critical_path(eager, top_n=7)
    seg = r.segments
    g = seg.groupby(["step", "for_rank", "category"], sort=False)["dur"].sum().reset_index(
        name="ns")
    tot = g.groupby(["step", "for_rank"])["ns"].transform("sum")
    g["pct"] = np.where(tot > 0, 100.0 * g["ns"] / tot, 0.0)
    g = g.sort_values(["step", "for_rank", "ns"], ascending=[True, True, False], kind="stable")
    pd.testing.assert_frame_equal(r.by_category, g.reset_index(drop=True), check_exact=True)
    keys = ["step", "for_rank"]
    work = seg[seg["kind"].isin(("cpu_op", "kernel", "memcpy", "memset"))]
    tot2 = seg.groupby(keys)["dur"].sum()
    t = work.groupby([*keys, "kind", "name", "category"], sort=False).agg(
        ns=("dur", "sum"), count=("row", "nunique")).reset_index()
    t["pct"] = 100.0 * t["ns"] / tot2.reindex(pd.MultiIndex.from_frame(t[keys])).to_numpy()
    t = t.sort_values([*keys, "ns"], ascending=[True, True, False], kind="stable")
    t = t.groupby(keys, sort=False).head(7)
    cols = ["step", "for_rank", "kind", "name", "category", "ns", "pct", "count"]
    pd.testing.assert_frame_equal(r.top, t[cols].reset_index(drop=True), check_exact=True)
    # Every path's pieces add up to its window.
    lengths = seg.groupby(["step", "for_rank"])["dur"].sum()
    assert (lengths.to_numpy() == r.steps["length_ns"].to_numpy()).all()


def test_graph_tables_built_when_asked(eager: tf.Trace) -> None:
    r = critical_path(eager)
    steps = r.steps["step"].tolist()
    assert list(r.edges) == list(r.nodes) == list(r.graphs) == steps
    s = steps[0]
    e = r.edges[s]
    assert len(e) == int(r.steps.loc[r.steps["step"] == s, "edges"].iloc[0])
    assert r.graphs[s].number_of_edges() == len(e)
    assert len(r.nodes[s]) > 0
    with pytest.raises(KeyError):
        r.edges[10**9]


@pytest.mark.parametrize("names", [
    ["eager.pt.trace.json.gz"], ["compiled.pt.trace.json.gz"],
    ["capture_h100.policy_infer.compiled.pt.trace.json.gz"],
    ["capture_h200x2.ddp_train.sdpa.rank0.pt.trace.json.gz",
     "capture_h200x2.ddp_train.sdpa.rank1.pt.trace.json.gz"],
])
def test_vectorized_paths_equal_the_relaxation(names: list[str],
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """The step graph's topological order comes from the nodes' times, and each path's
    predecessors from the times too (both vectorized); the oracles are what they replaced,
    Kahn's algorithm and the relaxation of every node in topological order: every table
    equal, what-ifs (always relaxed) included, and the vectorized ways were the ones used
    (not their fallbacks)."""
    from traceforge.analyzers.critical_path import step as step_mod

    traces = [tf.load(FIX / n, cache=False) for n in names]
    used: list[bool] = []

    def spy(real: Any) -> Any:
        def call(*args: Any) -> Any:
            out = real(*args)
            used.append(out is not None)
            return out
        return call

    monkeypatch.setattr(step_mod, "_time_order", spy(step_mod._time_order))
    monkeypatch.setattr(step_mod, "_tight", spy(step_mod._tight))
    fast = critical_path(traces, what_if=["gemm=2", "attention=1.5"])
    assert len(used) > len(names) and all(used)
    monkeypatch.setattr(step_mod, "_time_order", lambda *a: None)
    monkeypatch.setattr(step_mod, "_tight", lambda *a: None)
    _same(fast, critical_path(traces, what_if=["gemm=2", "attention=1.5"]))


def test_a_what_if_that_speeds_nothing_up_is_not_relaxed(
        eager: tf.Trace, monkeypatch: pytest.MonkeyPatch) -> None:
    """A what-if whose kernels a step does not run (nccl on one GPU) changes no weight:
    its path is the step's own, found from the times, and its length what the relaxation
    of every node (the oracle, forced) gives; a class that is run is still relaxed."""
    from traceforge.analyzers.critical_path import step as step_mod

    relaxed: list[int] = []
    real = step_mod._relaxed

    def spy(*a: Any) -> Any:
        relaxed.append(1)
        return real(*a)
    monkeypatch.setattr(step_mod, "_relaxed", spy)
    fast = critical_path(eager, what_if=["nccl=1.5", "gemm=2"])
    steps = len(fast.steps)
    # gemm=2 and both together on every step; nccl=1.5 alone on none.
    assert len(relaxed) == 2 * steps
    relaxed.clear()
    critical_path(eager, what_if=["nccl=1.5"])
    assert not relaxed
    nccl = fast.what_if[fast.what_if["scenario"] == "nccl=1.5"]
    assert len(nccl) == steps and (nccl["new_length_ns"] == nccl["length_ns"]).all()
    monkeypatch.setattr(step_mod, "_tight", lambda *a: None)
    _same(fast, critical_path(eager, what_if=["nccl=1.5", "gemm=2"]))


def test_a_time_that_contradicts_its_edges_is_relaxed() -> None:
    """A node later than any of its in-edges reach (a gap no edge explains) is no tight
    path: the relaxation, not the times, gives its distance."""
    from traceforge.analyzers.critical_path import step as step_mod

    def graph(ts: list[int]) -> step_mod.StepGraph:
        u = np.array([-1, 0, 1], dtype=np.int64)  # S -> 0 -> 1 -> T
        v = np.array([0, 1, -2], dtype=np.int64)
        w = np.array([0, 5, 0], dtype=np.int64)
        z = np.zeros(3, dtype=np.int64)
        return step_mod.StepGraph(0, np.array([0]), np.array([ts[1]]), 0, np.arange(2), u, v,
                                  w, z.astype(np.int8), z, z, z, [], np.array(ts))

    ok = graph([0, 5])
    assert step_mod._tight(ok, ok.order(), ok.w[ok.order().into_a]) is not None
    assert step_mod.longest_into(ok, 0).tolist() == [-1, 0, 1, -2]
    late = graph([0, 7])  # 1 is at 7, but 0 -> 1 takes 5
    assert step_mod._tight(late, late.order(), late.w[late.order().into_a]) is None
    assert step_mod.longest_into(late, 0).tolist() == [-1, 0, 1, -2]


def test_time_order_refuses_what_is_no_topological_order() -> None:
    """Both ways a time order can fail: an edge back in time (ranks whose clocks disagree)
    and a chain of equal-time edges deeper than the rounds allowed; a tie chain within
    them is ordered by depth."""
    from traceforge.analyzers.critical_path import step as step_mod

    ts = np.array([0, 5, 5, 5, 9], dtype=np.int64)
    ui = np.array([0, 3, 2, 1], dtype=np.int64)  # 0 -> 3 -> 2 -> 1 -> 4, 3..1 at one time
    vi = np.array([3, 2, 1, 4], dtype=np.int64)
    topo = step_mod._time_order(ui, vi, ts)
    assert topo is not None and topo.tolist() == [0, 3, 2, 1, 4]
    assert step_mod._kahn(5, ui, vi).tolist() == [0, 3, 2, 1, 4]
    back = np.array([0, 5, 5, 5, 4], dtype=np.int64)  # 1 -> 4 goes back in time
    assert step_mod._time_order(ui, vi, back) is None
    n = step_mod._TIE_ROUNDS + 2
    chain = np.arange(n - 1, dtype=np.int64)
    assert step_mod._time_order(chain, chain + 1, np.zeros(n, np.int64)) is None
    assert step_mod._kahn(n, chain, chain + 1).tolist() == list(range(n))


def test_segments_table_made_only_for_the_formats_that_print_it(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The terminal and Markdown tables are summed from the pieces' codes: the segments
    table (a row per piece: 20M rows, ~2.5 GB, for 10M kernels in one window) is made
    for CSV and JSON only."""
    from click.testing import CliRunner

    from traceforge.analyzers.critical_path import totals
    from traceforge.cli import cli

    made: list[int] = []
    frame = totals.PathPieces.frame

    def counted(self: totals.PathPieces) -> pd.DataFrame:
        made.append(1)
        return frame(self)
    monkeypatch.setattr(totals.PathPieces, "frame", counted)
    p = str(FIXTURES / "compiled.pt.trace.json.gz")
    for fmt, want in (("table", 0), ("md", 0), ("csv", 1), ("json", 1)):
        made.clear()
        res = CliRunner().invoke(cli, ["critical-path", p, "--format", fmt])
        assert res.exit_code == 0, res.output
        assert len(made) == want, fmt


def test_a_step_finds_the_nodes_and_edges_a_pass_over_the_run_finds() -> None:
    """RunGraph.by_time: a step's nodes and edges by binary search, as the masks over
    every node and edge of the run give them (times with ties, unsorted ids)."""
    from traceforge.analyzers.critical_path.run_graph import RunGraph

    rng = np.random.default_rng(3)
    ts = rng.integers(0, 50, 400)
    u, v = rng.integers(0, 400, 900), rng.integers(0, 400, 900)
    z = np.zeros(900, np.int64)
    run = RunGraph([], np.zeros(1, np.int64), np.zeros(1, np.int64), ts,
                   np.zeros(400, np.int64), u, v, z, z, z, z, z, [])
    ix = run.by_time()
    used = np.zeros(400, bool)
    used[u] = used[v] = True
    assert (ix.used == used).all()
    for lo, hi in [(0, 49), (10, 10), (7, 31), (60, 70), (-5, -1)]:
        inside = (ts >= lo) & (ts <= hi)
        assert ix.nodes(lo, hi).tolist() == np.flatnonzero(inside).tolist()
        assert ix.edges(lo, hi).tolist() == np.flatnonzero(inside[v]).tolist()


def test_each_paths_json_segments_are_the_rows_a_mask_selects(eager: tf.Trace) -> None:
    """critical-path --format json takes each path's segments as a slice of the frame
    (its pieces come in one run); a frame whose paths are not in runs falls back to the
    mask, and a path without segments is an empty frame with the columns."""
    from traceforge.commands.critical_path import _path_rows

    r = critical_path(eager)
    seg = r.segments
    shuffled = seg.sample(frac=1, random_state=0)
    cols = ["rank", "kind", "name", "category", "ts", "dur", "row", "pid", "tid"]
    for frame in (seg, shuffled):
        rows = _path_rows(frame)
        keys = [*zip(r.steps["step"].tolist(), r.steps["rank"].tolist(), strict=True),
                (10**6, 0)]
        for s, k in keys:
            want = frame.loc[(frame["step"] == s) & (frame["for_rank"] == k), cols]
            pd.testing.assert_frame_equal(rows(s, k), want)
    assert len(r.steps) > 1
