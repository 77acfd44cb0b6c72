"""Many-rank runs on an engine: the local process pool and a Dask LocalCluster give the
same frames, bit for bit, as the one-process analyzers over ``load_run``; worker errors
reach the user as one line naming the file.

One LocalCluster of two worker processes serves the whole module (started once, ~3 s).
"""

from __future__ import annotations

import gzip
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from pandas.testing import assert_frame_equal

import traceforge as tf
from tests.conftest import FIXTURES, SHARED
from traceforge import engine as engine_mod
from traceforge.analyzers.critical_path import critical_path, critical_path_of, rank_graph
from traceforge.analyzers.runs import rank_summaries as rs
from traceforge.analyzers.runs.scaling import RankedRun, scaling, scaling_reduce, scaling_summary
from traceforge.analyzers.timing.kernels import (
    merge_kernel_totals,
    run_kernel_totals,
    top_kernels_of,
)
from traceforge.cli import main
from traceforge.engine import map_ranks, map_runs
from traceforge.errors import UsageError

#: The multi-rank runs: PARAM's 8-rank DLRM (all-to-all + all-reduce) and two 2-rank DDP
#: captures on H200s.
RUNS: dict[str, Any] = {
    "dlrm8": SHARED / "external" / "param" / "dlrm_kineto",
    "capture2": [FIXTURES / f"capture_h200x2.ddp_train.sdpa.rank{r}.pt.trace.json.gz"
                 for r in (0, 1)],
    "ddp2": SHARED / "h200-ddp",
}


def _run(name: str) -> Any:
    p = RUNS[name]
    if not all(Path(x).exists() for x in (p if isinstance(p, list) else [p])):
        pytest.skip(f"{name} fixtures not present")
    return p


@pytest.fixture(scope="module")
def scheduler() -> Iterator[str]:
    distributed = pytest.importorskip("distributed")
    import logging

    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=None,
                                  silence_logs=logging.ERROR) as cluster:
        yield cluster.scheduler_address


def _eq(a: Any, b: Any, where: str) -> None:
    """Frames with check_exact, arrays exactly, containers item by item."""
    if isinstance(a, pd.DataFrame):
        assert_frame_equal(a, b, check_exact=True, obj=where)
    elif isinstance(a, np.ndarray):
        np.testing.assert_array_equal(a, b, err_msg=where)
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            _eq(x, y, f"{where}[{i}]")
    elif isinstance(a, dict):
        assert a.keys() == b.keys(), where
        for k in a:
            _eq(a[k], b[k], f"{where}[{k}]")
    else:
        assert a == b, (where, a, b)


def _timeline_verbs(t: tf.Trace) -> tuple[Any, ...]:
    """overlap, breakdown and top-kernels summaries of one rank: one task per rank for
    the three (the CLI runs one map per verb; the summaries are the same functions)."""
    return (rs.overlap_summary(t), rs.breakdown_summary(t), run_kernel_totals(t))


def _whole_trace_verbs(t: tf.Trace) -> tuple[Any, ...]:
    """idle and critical-path summaries of one rank (they read every kind of event)."""
    return rs.idle_summary(t, per_stream=True, limit=5), rank_graph(t)


#: One what-if scenario: enough to cover the what-if path, a third of the time of three.
WHAT_IF = {"gemm": 2.0}


def _frames(name: str, **engine: Any) -> dict[str, Any]:
    """Every output frame of the multi-rank verbs on one run, computed as the CLI does:
    per-rank summaries on the engine, reduced here."""
    run = _run(name)
    a = map_ranks(run, _timeline_verbs, kinds=rs.TIMELINE_KINDS, **engine)
    b = map_ranks(run, _whole_trace_verbs, **engine)
    out: dict[str, Any] = {}
    o = rs.overlap_reduce([x.value[0] for x in a])
    out["overlap"] = (o.ranks, o.skew, o.notes, o.step_source)
    out["breakdown"] = rs.breakdown_reduce([x.value[1] for x in a])
    i = rs.idle_reduce([(x.rank, x.value[0]) for x in b], limit=5)
    out["idle"] = (i.gaps, i.summary, i.histogram, i.span_ns, i.notes)
    tk = merge_kernel_totals([x.value[2] for x in a])
    out["top_kernels"] = [top_kernels_of(tk, by=by) for by in ("name", "family", "class")]
    c = critical_path_of([x.value[1] for x in b], what_if=WHAT_IF)
    out["critical_path"] = (c.steps, c.segments, c.by_category, c.top, c.what_if, c.notes,
                            {s: (c.nodes[s], c.edges[s]) for s in c.nodes})
    return out


def _one_process(name: str) -> dict[str, Any]:
    """The same frames from the one-process analyzers on every rank's whole trace."""
    ts = tf.load_run(_run(name))
    out: dict[str, Any] = {}
    o = tf.overlap(ts)
    out["overlap"] = (o.ranks, o.skew, o.notes, o.step_source)
    out["breakdown"] = (tf.breakdown(ts), tf.timeline(ts[0]).step_source)
    reps = [tf.idle_gaps(t, per_stream=True) for t in ts]
    gaps = pd.concat([r.gaps.assign(rank=t.meta.rank) for t, r in zip(ts, reps, strict=True)],
                     ignore_index=True)
    gaps = gaps.sort_values("dur", ascending=False, kind="stable").head(5)
    out["idle"] = (gaps.reset_index(drop=True),
                   pd.concat([r.summary.assign(rank=t.meta.rank)
                              for t, r in zip(ts, reps, strict=True)], ignore_index=True),
                   pd.concat([r.histogram.assign(rank=t.meta.rank)
                              for t, r in zip(ts, reps, strict=True)], ignore_index=True),
                   sum(r.span_ns for r in reps), tuple(n for r in reps for n in r.notes))
    whole = _concat_kernels(ts)
    out["top_kernels"] = [tf.top_kernels(whole, by=by) for by in ("name", "family", "class")]
    c = critical_path(ts, what_if=WHAT_IF)
    out["critical_path"] = (c.steps, c.segments, c.by_category, c.top, c.what_if, c.notes,
                            {s: (c.nodes[s], c.edges[s]) for s in c.nodes})
    return out


def _concat_kernels(ts: list[tf.Trace]) -> tf.Trace:
    """One trace holding every rank's kernel rows (what "all ranks together" means)."""
    k = pd.concat([t.kernels().astype({"name": str, "kind": str, "cat": str}) for t in ts],
                  ignore_index=True)
    return tf.Trace.from_events(k)


@pytest.mark.parametrize("name", list(RUNS))
def test_local_and_dask_give_the_one_process_frames(name: str, scheduler: str) -> None:
    """Bit for bit: the process pool, the Dask cluster and the one-process analyzers."""
    local = _frames(name, engine="local", workers=2)
    dask = _frames(name, engine="dask", scheduler=scheduler)
    _eq(local, dask, f"{name}: local vs dask")
    _eq(_one_process(name), local, f"{name}: one process vs engine")


def test_scaling_on_both_engines(scheduler: str) -> None:
    runs = [_run("ddp2"), _run("dlrm8")]
    labels = ["ddp", "dlrm"]

    def reduce(ranked: list[list[Any]]) -> tf.ScalingReport:
        return scaling_reduce([RankedRun(lab, tuple(x.value for x in r))
                               for lab, r in zip(labels, ranked, strict=True)])

    kw: dict[str, Any] = {"kinds": rs.TIMELINE_KINDS}
    local = reduce(map_runs(runs, scaling_summary, engine="local", workers=2, **kw))
    dask = reduce(map_runs(runs, scaling_summary, engine="dask", scheduler=scheduler, **kw))
    whole = scaling([tf.TraceRun(lab, tuple(tf.load_run(p)))
                     for lab, p in zip(labels, runs, strict=True)])
    for r in (dask, whole):
        _eq((local.runs, local.ranks, local.losses, local.fit, local.notes),
            (r.runs, r.ranks, r.losses, r.fit, r.notes), "scaling")


def _raw_kernel_totals(files: list[Path]) -> dict[str, tuple[int, int]]:
    """Calls and total ns per kernel name summed over the rank files, read with json."""
    out: dict[str, tuple[int, int]] = {}
    for f in files:
        raw = f.read_bytes()
        doc = json.loads(gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw)
        for e in doc["traceEvents"]:
            if e.get("ph") == "X" and e.get("cat") == "kernel":
                n, total = out.get(e["name"], (0, 0))
                # Kineto writes ns-exact microseconds with three decimals.
                out[e["name"]] = (n + 1, total + round(float(e["dur"]) * 1000))
    return out


def test_top_kernels_over_a_run_sums_every_rank_file(scheduler: str,
                                                     capsys: pytest.CaptureFixture[str]
                                                     ) -> None:
    run = _run("dlrm8")
    files = sorted(Path(run).iterdir())
    raw = _raw_kernel_totals(files)
    for extra in ([], ["--engine", "dask", "--scheduler", scheduler]):
        main(["top-kernels", str(run), "-n", "0", "--format", "json", *extra])
        rows = json.loads(capsys.readouterr().out)
        got = {r["full_name"]: (r["calls"], r["total_ns"]) for r in rows}
        assert got == raw
        assert sum(r["pct"] for r in rows) == pytest.approx(100.0)


@pytest.mark.parametrize("verb", ["overlap", "breakdown", "idle", "critical-path",
                                  "top-kernels"])
def test_cli_output_is_the_same_on_both_engines(verb: str, scheduler: str,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    run = str(_run("ddp2"))
    main([verb, run, "--format", "json"])
    local = capsys.readouterr().out
    main([verb, run, "--format", "json", "--scheduler", scheduler])
    assert capsys.readouterr().out == local
    assert local.strip()


def test_scaling_cli_on_dask(scheduler: str, capsys: pytest.CaptureFixture[str]) -> None:
    runs = [str(_run("ddp2")), str(_run("dlrm8"))]
    main(["scaling", *runs, "--format", "json"])
    local = capsys.readouterr().out
    main(["scaling", *runs, "--format", "json", "--engine", "dask", "--scheduler", scheduler])
    assert capsys.readouterr().out == local


def _cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    try:
        main(list(args))
        rc = 0
    except SystemExit as e:
        rc = int(e.code or 0)
    return rc, capsys.readouterr().err


@pytest.mark.parametrize("engine", ["local", "dask"])
def test_a_worker_error_is_one_line_naming_the_file(engine: str, scheduler: str,
                                                    tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    good = FIXTURES / "capture_h200x2.ddp_train.sdpa.rank0.pt.trace.json.gz"
    bad = tmp_path / "rank1.pt.trace.json"
    bad.write_text('{"traceEvents": [{"ph": "X", "name": "k", "ts": 1')  # truncated
    extra = ["--scheduler", scheduler] if engine == "dask" else ["--workers", "2"]
    rc, err = _cli(capsys, "overlap", str(good), str(bad), *extra)
    assert rc == 2, err
    assert err.startswith("traceforge: error: ") and err.count("\n") == 1, err
    assert str(bad) in err


def test_two_files_of_one_rank_are_refused_on_dask(scheduler: str, tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    src = FIXTURES / "capture_h200x2.ddp_train.sdpa.rank0.pt.trace.json.gz"
    a, b = tmp_path / "a.pt.trace.json.gz", tmp_path / "b.pt.trace.json.gz"
    a.write_bytes(src.read_bytes())
    b.write_bytes(src.read_bytes())
    rc, err = _cli(capsys, "breakdown", str(a), str(b), "--scheduler", scheduler)
    assert rc == 2 and "both claim rank 0" in err and err.count("\n") == 1, err


def test_missing_dask_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "distributed", None)  # import fails
    with pytest.raises(UsageError, match=r"pip install 'traceforge\[dask\]'"):
        map_ranks(RUNS["capture2"], rs.breakdown_summary, engine="dask")


def test_unreachable_scheduler_is_one_line(capsys: pytest.CaptureFixture[str],
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("distributed")
    monkeypatch.setattr(engine_mod, "CONNECT_TIMEOUT", "1s")
    rc, err = _cli(capsys, "breakdown", str(RUNS["capture2"][0]), "--scheduler",
                   "tcp://127.0.0.1:9")
    assert rc == 2 and "cannot reach the Dask scheduler at tcp://127.0.0.1:9" in err, err
    assert err.count("\n") == 1


def test_scheduler_with_local_engine_is_a_usage_error(capsys: pytest.CaptureFixture[str]
                                                      ) -> None:
    rc, err = _cli(capsys, "overlap", str(RUNS["capture2"][0]), "--engine", "local",
                   "--scheduler", "tcp://127.0.0.1:9")
    assert rc == 2 and "--engine dask" in err, err


def test_driver_receives_summaries_not_event_tables() -> None:
    """What crosses from a worker: small per-rank summaries (the rank's event table is
    ~100x larger pickled), and never a Trace."""
    import pickle

    run = _run("capture2")
    t = tf.load(run[0])
    table = len(pickle.dumps(t.events))
    for fn in (rs.overlap_summary, rs.breakdown_summary, scaling_summary):
        got = map_ranks(run, fn, kinds=rs.TIMELINE_KINDS)
        size = len(pickle.dumps(got[0]))
        assert size * 50 < table, (fn, size, table)
        assert not isinstance(got[0].value, tf.Trace)
    # The critical path needs the rank's graph, O(events), sent narrowed and compressed.
    graph = map_ranks(run, rank_graph)[0]
    assert len(pickle.dumps(graph)) * 2 < table


def _reads(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, ...]]:
    """The kinds of each read the step verbs' engine makes (a list the spy fills)."""
    from traceforge.commands.engine import Engine

    seen: list[tuple[str, ...]] = []
    runs = Engine.runs

    def spy(self: Engine, *a: Any, kinds: Any = None, **kw: Any) -> Any:
        seen.append(tuple(kinds))
        return runs(self, *a, kinds=kinds, **kw)

    monkeypatch.setattr(Engine, "runs", spy)
    return seen


def test_step_verbs_read_no_ops_unless_the_steps_are_ops(monkeypatch: pytest.MonkeyPatch
                                                         ) -> None:
    """overlap, breakdown and scaling read their ranks without the framework ops (most of a
    Kineto trace's rows) and give what the one-process analyzers give on the whole trace;
    an old Kineto trace whose ProfilerStep#N rows are ops is read again with them."""
    from traceforge.commands.engine import Engine

    old = SHARED / "external/kineto/tb_plugin/samples/resnet50_num_workers_0/" \
        "worker0.1623143089861.pt.trace.json.gz"
    if not old.exists():
        pytest.skip("tb_plugin sample not present")
    seen = _reads(monkeypatch)
    for path, reads in ((FIXTURES / "eager.pt.trace.json.gz", [rs.STEP_KINDS]),
                        (old, [rs.STEP_KINDS, rs.TIMELINE_KINDS])):
        seen.clear()
        got = Engine().step_runs([str(path)], rs.breakdown_summary, steps_from=None,
                                 source=lambda v: v.step_source)[0][0].value
        assert seen == reads
        want = rs.breakdown_summary(tf.load(path))
        assert got.step_source == want.step_source == "ProfilerStep#N"
        assert got.rows == want.rows
    # A --steps-from regex may name an op: the ops are read from the start.
    seen.clear()
    Engine().step_runs([str(FIXTURES / "eager.pt.trace.json.gz")], rs.breakdown_summary,
                       steps_from="policy_inference", source=lambda v: v.step_source)
    assert seen == [rs.TIMELINE_KINDS]


def test_a_step_less_trace_is_read_once_when_no_op_can_be_a_step(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A trace without step markers whose ops hold no ProfilerStep#N (the cache entry's
    names say so) is not read again with the ops: the same summaries, from one read. With
    the cache off nothing tells, and it is read again as before."""
    from traceforge.commands.engine import Engine

    with gzip.open(FIXTURES / "eager.pt.trace.json.gz", "rt") as f:
        doc = json.load(f)
    doc["traceEvents"] = [e for e in doc["traceEvents"]
                          if not str(e.get("name", "")).startswith("ProfilerStep")]
    path = tmp_path / "no_steps.json"
    path.write_text(json.dumps(doc))
    seen = _reads(monkeypatch)
    want = rs.breakdown_summary(tf.load(path))
    assert want.step_source.startswith("none")
    for cache_off, reads in ((False, [rs.STEP_KINDS]),
                             (True, [rs.STEP_KINDS, rs.TIMELINE_KINDS])):
        if cache_off:
            monkeypatch.setenv("TRACEFORGE_NO_CACHE", "1")
        seen.clear()
        got = Engine().step_runs([str(path)], rs.breakdown_summary, steps_from=None,
                                 source=lambda v: v.step_source)[0][0].value
        assert seen == reads
        assert got.step_source == want.step_source and got.rows == want.rows


def _die(_: object) -> None:
    import os

    os._exit(3)  # a worker killed (out of memory, a signal): no exception comes back


def test_a_dying_worker_is_one_error_naming_the_files() -> None:
    from traceforge.errors import AnalysisError
    from traceforge.formats.multirank import pool_map

    with pytest.raises(AnalysisError, match=r"^a\.json, b\.json: a worker process died"):
        pool_map(_die, [1, 2], 2, files=["a.json", "b.json"],
                 hint="a worker process died (out of memory?); try fewer --workers")
