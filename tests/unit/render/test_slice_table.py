"""The analysis's slices held as columns (:mod:`traceforge.render.slice_table`): written
as the dicts they stand for, after the trace's own rows, never one dict per slice held
for the whole trace."""

from __future__ import annotations

import math

import numpy as np
import pytest

import traceforge as tf
from tests.conftest import REPO, ev, make_trace
from traceforge.render.annotate import CAT, annotated_source, annotation_parts, path_parts
from traceforge.render.chrome_json import ChromeSource
from traceforge.render.critical_path import CAT as PATH_CAT
from traceforge.render.slice_table import SliceTable, column, labelled
from traceforge.report.annotations import annotation_data


def test_events_are_the_dicts_with_optional_args_left_out() -> None:
    names = ["a", "b", None, "", math.nan]  # set: truthy (nan is); left out: None, ""
    codes, labels = labelled(["x", "y", "x", "z", "y"])
    t = SliceTable("c", np.array([1, 1, 2, 2, 2]), np.array([3, 3, 4, 4, 4]),
                   np.array([0, 1_500, 2_001, 3_000, 10**15]), np.array([7, 0, 1, 2, 3]),
                   codes, labels,
                   [column("i", np.arange(5)), column("f", np.arange(5) / 1e3),
                    column("s", np.array([str(v) for v in names], dtype=object),
                           [bool(v) for v in names])])
    assert labels == ["x", "y", "z"]
    want = [{"ph": "X", "cat": "c", "name": n, "pid": p, "tid": tid, "ts": ts / 1000.0,
             "dur": d / 1000.0, "args": {"i": i, "f": i / 1e3,
                                         **({"s": str(names[i])} if names[i] else {})}}
            for i, (n, p, tid, ts, d) in enumerate(zip(
                ["x", "y", "x", "z", "y"], [1, 1, 2, 2, 2], [3, 3, 4, 4, 4],
                [0, 1_500, 2_001, 3_000, 10**15], [7, 0, 1, 2, 3], strict=True))]
    assert t.events() == want
    assert t.events(np.array([4, 0])) == [want[4], want[0]]
    assert [type(v) for v in t.events()[0]["args"].values()] == [int, float, str]


def test_source_rows_then_table_rows_in_any_order() -> None:
    """A batch may hold rows of the trace and of several tables, in any order: each gets
    its own name, cat and args; a trace row without a name still reads ``nan``."""
    trace = make_trace([ev("k1", ts=0, dur=5, corr=1), ev("k2", ts=10, dur=5, corr=2),
                        ev(None, ts=20, dur=5, corr=3)])
    tables = [SliceTable("t1", np.array([9]), np.array([1]), np.array([3]), np.array([1]),
                         *labelled(["one"]), [column("a", np.array([5]))]),
              SliceTable("t2", np.array([9, 9]), np.array([2, 2]), np.array([4, 8]),
                         np.array([1, 2]), *labelled(["two", "three"]),
                         [column("b", np.array(["u", "v"], dtype=object))])]
    plain = ChromeSource(trace)
    src = ChromeSource(trace, tables=tables)
    assert (src.nt, src.n) == (3, 6)
    rows = np.array([5, 0, 3, 2, 4, 1])
    names, cats, args = src.slices(rows)
    own = plain.slices(np.array([0, 2, 1]))
    assert names == ["three", own[0][0], "one", own[0][1], "two", own[0][2]]
    assert own[0][1] == "nan"
    assert cats == ["t2", own[1][0], "t1", own[1][1], "t2", own[1][2]]
    assert args == [{"b": "v"}, own[2][0], {"a": 5}, own[2][1], {"b": "u"}, own[2][2]]
    doc = src.document()["traceEvents"]
    assert doc[:3] == plain.document()["traceEvents"][:3]
    assert doc[3:6] == [*tables[0].events(), *tables[1].events()]


def test_annotate_holds_its_slices_as_columns() -> None:
    """Idle gaps, step windows, top kernels and path pieces are tables (none of them a
    dict in ``extra``), in the order the dicts had; the other events stay dicts."""
    t = tf.load(REPO / "fixtures" / "compiled.pt.trace.json.gz")
    ann = annotation_data(t)
    src = annotated_source(t, ann)
    assert not [e for e in src.extra if e["ph"] == "X"]
    tables, _ = annotation_parts(t, ann)
    gaps, windows, top = tables
    assert gaps.n == len(ann.gaps) > 0 and windows.n == len(ann.windows) > 0 and top.n > 0
    assert {tb.cat for tb in src.tables} == {CAT, PATH_CAT}
    path = path_parts(t, ann)[0]
    assert [tb.n for tb in src.tables] == [gaps.n, windows.n, top.n, *(p.n for p in path)]
    first = gaps.events(np.array([0]))[0]
    g = ann.gaps.iloc[0]
    assert first["name"] == first["args"]["cause"] == str(g["cause"])
    assert first["ts"] == int(g["ts"]) / 1000.0 and first["args"]["gap_us"] == int(g["dur"]) / 1e3
    # Each path table's slices add up to the path's time on that rank.
    from traceforge.analyzers.critical_path import critical_only, critical_path

    r = critical_path(t)
    seg = critical_only(r, r.segments)
    for tb, track in zip(path, ann.path, strict=True):
        assert int(tb.dur_ns.sum()) == int(seg.loc[seg["rank"] == track.rank, "dur"].sum())


def test_rows_whose_tags_are_empty_are_skipped_with_the_same_args(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Rows of the roofline table with no rate and no bound (a kernel of unknown work)
    tag nothing: skipping them up front gives every row the args it had."""
    from traceforge.render import annotate

    t = tf.load(REPO / "fixtures" / "compiled.pt.trace.json.gz")
    ann = annotation_data(t)
    rows = np.arange(len(t.events))
    src = ChromeSource(t, tags=annotate.RowTags(t, ann))
    skipped = annotate._tags_something(ann.rates)
    assert 0 < int(skipped.sum()) < len(skipped)  # both kinds of row are there
    got = src.slices(rows)[2]
    monkeypatch.setattr(annotate, "_tags_something",
                        lambda table: np.ones(len(table), dtype=bool))
    assert got == ChromeSource(t, tags=annotate.RowTags(t, ann)).slices(rows)[2]


@pytest.mark.parametrize("name", ["compiled.pt.trace.json.gz",
                                  "capture_h200x2.ddp_train.sdpa.rank0.pt.trace.json.gz",
                                  "counters/probe.pt.trace.json.gz"])
def test_row_tags_as_columns_are_its_dicts(name: str) -> None:
    """The Perfetto writer takes ``annotate``'s tags as columns: each row gets the keys
    and values (of the same types) the dicts get, in the same order: kernel classes and
    top kernels, roofline rates (a kernel of unknown work among them), a collective's
    kind and bandwidths (the DDP rank), profiled counters (the probe, with its ncu
    export)."""
    from dataclasses import replace

    from traceforge.analyzers.counters.measured import measured_kernels
    from traceforge.formats.counter_files import read_counters
    from traceforge.render import annotate

    t = tf.load(REPO / "fixtures" / name)
    ann = annotation_data(t)
    if name.startswith("counters/"):
        c = read_counters(REPO / "fixtures" / "counters" / "probe.ncu-raw.csv")
        m = measured_kernels(t, c.launches, counter_notes=c.notes)
        ann = replace(ann, counters=m.per_launch.set_index("row"))
    tags = annotate.RowTags(t, ann)
    src = ChromeSource(t)
    rows = np.arange(len(t.events))
    names = [src.names[c] for c in src.name_codes[rows].tolist()]
    cats = [src.cats[c] for c in src.cat_codes[rows].tolist()]
    want: list[dict[str, object]] = [{} for _ in rows]
    tags(rows, names, cats, want)
    got: list[dict[str, object]] = [{} for _ in rows]
    for col in tags.columns(rows, names, cats):
        has = np.ones(len(rows), bool) if col.present is None else col.present
        for i, v in zip(np.flatnonzero(has).tolist(), col.values[has].tolist(), strict=True):
            got[i][col.key] = v
    assert [[(k, type(v), v) for k, v in d.items()] for d in got] == \
        [[(k, type(v), v) for k, v in d.items()] for d in want]
    keys = {k for d in want for k in d}
    assert {"class", "family", "top_kernel"} <= keys
    assert ("collective_kind" in keys) == ("ddp" in name)
    assert any(k.startswith("ncu_") for k in keys) == name.startswith("counters/")


def test_a_trace_forgets_its_derived_tables_and_makes_them_again() -> None:
    """``annotate`` lets the analysis' tables go before its write: the trace keeps its
    rows, and a table asked for again is made again, equal."""
    from traceforge.analyzers.timeline.core import timeline

    t = tf.load(REPO / "fixtures" / "compiled.pt.trace.json.gz", cache=False)
    first = timeline(t).activity
    assert t.memo
    t.forget_derived()
    assert not t.memo and len(t.events)
    again = timeline(t).activity
    assert again is not first and again.equals(first)
