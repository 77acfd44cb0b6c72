"""Derived tables kept beside a cached trace (formats/derived.py, Trace.derived).

A later process must get exactly what computing gives, and never a table made from other
rows, another step rule, other meta or other code. A hit is proved by making the builder
fail; every verb's output is compared with and without the stored tables.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from tests.conftest import FIXTURES
from traceforge import load
from traceforge.analyzers import critical_path as cp_mod
from traceforge.analyzers.critical_path import rank as cp_rank
from traceforge.analyzers.timeline import core as tl_mod
from traceforge.cli import cli
from traceforge.errors import AnalysisError
from traceforge.formats import cache, derived
from traceforge.formats.multirank import load_run

SRC = FIXTURES / "compiled.pt.trace.json.gz"


@pytest.fixture
def src(tmp_path: Path) -> Path:
    p = tmp_path / "src" / SRC.name
    p.parent.mkdir()
    shutil.copy(SRC, p)
    return p


def _derived(d: Path) -> list[Path]:
    return sorted(d.glob(f"*{derived.SUFFIX}"))


def _no_build(monkeypatch: pytest.MonkeyPatch) -> None:
    def fail(*a: Any) -> Any:
        raise AssertionError("computed again: the stored table was not used")
    monkeypatch.setattr(tl_mod, "_build", fail)


def test_a_later_load_reads_the_timeline_back(cdir: Path, src: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    first = tl_mod.timeline(load(src))  # parse + cache write: the whole table has a store
    assert len(_derived(cdir)) == 1
    _no_build(monkeypatch)
    again = tl_mod.timeline(load(src))
    pd.testing.assert_frame_equal(again.activity, first.activity)
    pd.testing.assert_frame_equal(again.windows, first.windows)
    assert again.notes == first.notes and again.step_source == first.step_source
    # A rank set by load_run (meta and rank column change) is a different table.
    monkeypatch.undo()
    monkeypatch.setenv("TRACEFORGE_CACHE", str(cdir))
    (t,) = load_run([src])
    assert t.store is not None
    tl_mod.timeline(t)
    assert len(_derived(cdir)) == 2


@pytest.mark.parametrize("change", ["steps", "kinds", "code", "source", "rows"])
def test_anything_else_is_a_miss(change: str, cdir: Path, src: Path,
                                 monkeypatch: pytest.MonkeyPatch) -> None:
    tl_mod.timeline(load(src))
    calls: list[int] = []
    build = tl_mod._build

    def counted(t: Any) -> Any:
        calls.append(1)
        return build(t)
    monkeypatch.setattr(tl_mod, "_build", counted)
    t = load(src)
    if change == "steps":
        t = t.with_steps("none")
        assert t.store is not None
    elif change == "kinds":
        t = load(src, kinds=("kernel", "memcpy", "memset", "runtime"))
    elif change == "code":
        monkeypatch.setattr(derived, "_package_print", "another version of the code")
        t = load(src)
    elif change == "source":
        os.utime(src, ns=(src.stat().st_atime_ns, src.stat().st_mtime_ns + 10**9))
        t = load(src)
    else:
        t = replace(t, events=t.events.iloc[: len(t.events) // 2])
        assert t.store is None
    tl_mod.timeline(t)
    assert calls == [1]


def test_damaged_or_foreign_files_are_misses(cdir: Path, src: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    want = tl_mod.timeline(load(src)).activity
    (f,) = _derived(cdir)
    f.write_bytes(f.read_bytes()[:100])
    pd.testing.assert_frame_equal(tl_mod.timeline(load(src)).activity, want)
    assert f.stat().st_size > 100  # rewritten whole
    if hasattr(os, "getuid"):
        monkeypatch.setattr(os, "getuid", lambda: os.stat(f).st_uid + 1)
        calls: list[int] = []
        build = tl_mod._build
        monkeypatch.setattr(tl_mod, "_build", lambda t: calls.append(1) or build(t))
        tl_mod.timeline(load(src))
        assert calls == [1]


def test_unwritable_directory_is_no_store(cdir: Path, src: Path,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    t = load(src)
    assert t.store is not None

    def no_temp(*a: Any, **k: Any) -> Any:
        raise PermissionError("read-only")
    monkeypatch.setattr(derived.tempfile, "mkstemp", no_temp)
    tl_mod.timeline(t)  # no error
    assert _derived(cdir) == []


def test_rank_graph_keeps_steps_and_rank_per_call(cdir: Path, src: Path) -> None:
    load(src)
    t = load(src)
    steps = tl_mod.timeline(t).windows["step"].tolist()
    a = cp_mod.rank_graph(t, index=3, steps=steps[-1:])
    b = cp_mod.rank_graph(load(src), index=0)
    assert a.rank == 3 and b.rank == 0
    assert a.windows["step"].tolist() == steps[-1:] and b.windows["step"].tolist() == steps
    assert (a.u == b.u).all() and a.notes == b.notes


def test_a_stored_rank_graph_is_read_without_the_timeline(
        cdir: Path, src: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The steps' windows come from the stored graph's own: the timeline (1.5 GB at 10M
    events) is neither read nor held while the paths run, and a graph just built keeps
    a copy of the timeline's windows, not a view of its buffer."""
    load(src)
    t = load(src)
    tl = tl_mod.timeline(t)
    built = cp_mod.rank_graph(t)
    assert not np.shares_memory(built.windows["ts"].to_numpy(), tl.windows["ts"].to_numpy())
    steps = tl.windows["step"].tolist()
    with pytest.raises(AnalysisError) as want:
        tl.select([10**6])

    def no_timeline(*a: Any) -> Any:
        raise AssertionError("the timeline was read")
    monkeypatch.setattr(cp_rank, "timeline", no_timeline)
    got = cp_mod.rank_graph(load(src), index=2, steps=steps[-1:])
    assert got.rank == 2 and got.windows["step"].tolist() == steps[-1:]
    pd.testing.assert_frame_equal(cp_mod.rank_graph(load(src)).windows, built.windows)
    missing = cp_mod.rank_graph(load(src), steps=[10**6]).windows
    assert isinstance(missing, AnalysisError) and str(missing) == str(want.value)


@pytest.mark.parametrize("args", [
    ["report", "@SRC", "-o", "@OUT.md"],
    ["critical-path", "@SRC", "--format", "json"],
    ["roofline", "@SRC", "--format", "json"],
    ["mfu", "@SRC", "--format", "json"],
    ["ops", "@SRC", "--format", "json"],
    ["idle", "@SRC", "--format", "json"],
    ["overlap", "@SRC", "--format", "json"],
    ["launch", "@SRC", "--format", "json"],
    ["launch", "@SRC", "--format", "json", "--bound-pct", "5", "--steps", "2"],
])
def test_verbs_say_the_same_with_stored_tables(args: list[str], cdir: Path, src: Path,
                                               tmp_path: Path) -> None:
    def run(tag: str, *pre: str) -> str:
        out = tmp_path / tag
        argv = [*pre, *(a.replace("@SRC", str(src)).replace("@OUT", str(out)) for a in args)]
        r = CliRunner().invoke(cli, argv)
        assert r.exit_code == 0, r.output
        return Path(f"{out}.md").read_text() if "report" in args else r.output

    fresh = run("fresh", "--no-cache")
    first = run("first")  # computes and stores
    stored = len(_derived(cdir))
    assert stored > 0
    assert run("warm") == first == fresh
    assert len(_derived(cdir)) == stored


def test_launch_report_is_read_back_per_options(cdir: Path, src: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """``launch`` (and the report's launch section) read a stored launch report: the
    same frames, and a miss for other steps or another bound."""
    from traceforge.analyzers.timing import launch as launch_mod

    load(src)
    first = launch_mod.launch_overhead(load(src))
    other = launch_mod.launch_overhead(load(src), bound_pct=5.0, steps=[2])

    def fail(*a: Any) -> Any:
        raise AssertionError("computed again: the stored table was not used")
    monkeypatch.setattr(launch_mod, "_launch_overhead", fail)
    again = launch_mod.launch_overhead(load(src))
    pd.testing.assert_frame_equal(again.steps, first.steps)
    pd.testing.assert_frame_equal(again.kernels, first.kernels)
    assert again.step_source == first.step_source
    back = launch_mod.launch_overhead(load(src), bound_pct=5.0, steps=[2])
    pd.testing.assert_frame_equal(back.steps, other.steps)
    assert back.steps["step"].tolist() == [2]
    with pytest.raises(AssertionError, match="computed again"):
        launch_mod.launch_overhead(load(src), bound_pct=6.0)


def test_cache_info_counts_and_clear_removes_them(cdir: Path, src: Path) -> None:
    tl_mod.timeline(load(src))
    (entry,) = cache.entries()
    files = sorted(cdir.iterdir())
    assert entry.size == sum(f.stat().st_size for f in files)
    n, b = cache.clear()
    assert (n, b) == (1, entry.size) and list(cdir.iterdir()) == []


def test_stored_tables_are_data_and_round_trip_exactly(cdir: Path, tmp_path: Path) -> None:
    """Issue 31 item 9: a derived table file holds data only. What a verb stores comes
    back equal, dtypes included (pandas 3 would otherwise turn object strings into str);
    a value the format does not hold is not stored; a file naming a class outside this
    package, or a pickle planted at a table's path, is a miss and runs nothing."""
    import pickle

    import numpy as np

    from traceforge.errors import AnalysisError

    frame = pd.DataFrame({
        "i": np.arange(3), "f": [1.5, np.nan, 3.0],
        "o": pd.Series(["a", None, "a"], dtype=object),
        "mixed": pd.Series([1, "x", None], dtype=object),
        "cat": pd.Categorical(["p", "q", "p"]),
        "s": pd.Series(["u", "v", None], dtype="string"),
    }, index=[5, 6, 7])
    value = {
        "frame": frame, "rows": frame.iloc[1:], "empty": frame.iloc[:0],
        ("tuple", 1): (1, 2.5, float("nan"), None, True, 2**70),
        "arrays": [np.arange(6).reshape(2, 3), np.array(["x", "y", "x"], dtype=object),
                   np.float32(1.5)],
        "error": AnalysisError("no steps"), "series": pd.Series([1.0], index=["k"], name="n"),
    }
    t = load(SRC)
    t = load(SRC)  # a cache hit: the trace has a store
    store = t.store
    assert isinstance(store, derived.DiskStore)
    store.put("v", value)
    back = store.get("v")
    assert back is not None and back is not value
    for k in ("frame", "rows", "empty"):
        pd.testing.assert_frame_equal(back[k], value[k])
        assert list(back[k].dtypes) == list(value[k].dtypes)
    got = back[("tuple", 1)]
    assert got[:2] == (1, 2.5) and np.isnan(got[2]) and got[3:] == (None, True, 2**70)
    for a, b in zip(back["arrays"], value["arrays"], strict=True):
        assert np.asarray(a).dtype == np.asarray(b).dtype and (np.asarray(a) == b).all()
    assert isinstance(back["error"], AnalysisError) and str(back["error"]) == "no steps"
    pd.testing.assert_series_equal(back["series"], value["series"])
    # Timeline and the critical-path graph (dataclasses of frames) are stored whole.
    tl = tl_mod.timeline(t)
    files = _derived(cdir)
    assert files and all(f.read_bytes().startswith(derived.MAGIC) for f in files)
    store.put("lambda", lambda: 0)
    store.put("set", {1, 2})
    assert store.get("lambda") is None and store.get("set") is None
    # A header naming another module's class is refused, never imported or called.
    full = f"{store.prefix}|evil"
    head = derived.encode(full, tl)
    name = b'"traceforge.analyzers.timeline.core"'
    evil = head.replace(name, b'"os"'.ljust(len(name)))  # same length: the header's stays
    assert evil != head
    store._file(full).write_bytes(evil)
    assert store.get("evil") is None
    # A pickle at a table's path (a regular file of the user's) is not loaded.
    marker = tmp_path / "pwned"
    store._file(full).write_bytes(pickle.dumps((full, _Touch(marker))))
    assert store.get("evil") is None and not marker.exists()


class _Touch:
    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[object, tuple[str]]:
        return (Path.touch, (str(self.marker),))  # type: ignore[return-value]


def test_a_warm_report_reads_its_analysis_and_charts_back(
        cdir: Path, src: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 30 item 3: a report of one cached trace stores its whole analysis and each
    chart's SVG (keyed by the chart's data); the next one computes and draws nothing and
    writes the same bytes."""
    from traceforge.render import figures
    from traceforge.report import analysis

    def run(name: str) -> bytes:
        out = tmp_path / name
        r = CliRunner().invoke(cli, ["report", str(src), "-o", str(out)])
        assert r.exit_code == 0, r.output
        return out.read_bytes()

    first = run("a.html")

    def fail(*a: Any, **k: Any) -> Any:
        raise AssertionError("computed or drawn again")

    monkeypatch.setattr(analysis, "_analyze_all", fail)
    monkeypatch.setattr(figures, "new_figure", fail)
    assert run("b.html") == first


def test_a_warm_comm_reads_each_ranks_collectives_back(
        cdir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 30 item 5: a rank's collective table (sizes decoded from the kernels' args in
    the source file) is stored with the cached trace; the next ``comm`` decodes nothing
    and prints the same bytes."""
    from traceforge.analyzers.communication import instances

    ranks = []
    for r in (0, 1):
        name = f"capture_h200x2.ddp_train.sdpa.rank{r}.pt.trace.json.gz"
        ranks.append(tmp_path / name)
        shutil.copy(FIXTURES / name, ranks[-1])

    def run() -> str:
        r = CliRunner().invoke(cli, ["comm", *map(str, ranks), "--format", "json",
                                     "--workers", "1"])
        assert r.exit_code == 0, r.output
        return r.output

    first = run()

    def fail(*a: Any) -> Any:
        raise AssertionError("collectives computed again: the stored table was not used")

    monkeypatch.setattr(instances, "_comm_summary", fail)
    assert run() == first


def test_a_warm_memory_reads_its_tables_back(cdir: Path, tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 30 item 5: the memory verb's tables are stored with the cached trace (warm
    `memory` on a 290 MB training trace: +0.25 -> +0.08 s above the pandas+pyarrow
    import); the next run computes nothing and prints the same bytes."""
    from traceforge.analyzers.memory import analysis

    src = tmp_path / "memory_train.pt.trace.json.gz"
    shutil.copy(FIXTURES / "capture_h100.memory_train.both.pt.trace.json.gz", src)

    def run() -> str:
        r = CliRunner().invoke(cli, ["memory", str(src), "--format", "json"])
        assert r.exit_code == 0, r.output
        return r.output

    fresh = CliRunner().invoke(cli, ["--no-cache", "memory", str(src), "--format", "json"])
    first = run()
    assert first == fresh.output

    def fail(*a: Any) -> Any:
        raise AssertionError("memory computed again: the stored tables were not used")

    monkeypatch.setattr(analysis, "_memory", fail)
    assert run() == first


def test_a_warm_roofline_reads_its_tables_back(cdir: Path, src: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 30 item 5: the roofline of a cached trace is stored per options (warm
    `roofline` on the 290 MB training trace: +0.43 -> +0.19 s above the import floor);
    other options are another table, computed."""
    from traceforge.analyzers.costs import roofline as rl

    def run(*extra: str) -> str:
        r = CliRunner().invoke(cli, ["roofline", str(src), "--format", "json", *extra])
        assert r.exit_code == 0, r.output
        return r.output

    first = run()
    by_kernel = run("--by", "kernel")

    def fail(*a: Any) -> Any:
        raise AssertionError("roofline computed again: the stored table was not used")

    monkeypatch.setattr(rl, "_roofline", fail)
    assert run() == first and run("--by", "kernel") == by_kernel
    with pytest.raises(AssertionError, match="computed again"):
        rl.roofline(load(src), device="h100")


@pytest.fixture
def probe(tmp_path: Path) -> tuple[Path, Path]:
    """A copy of the counters fixtures' trace and its ncu raw CSV."""
    trace, raw = tmp_path / "probe.pt.trace.json.gz", tmp_path / "probe.ncu-raw.csv"
    shutil.copy(FIXTURES / "counters" / trace.name, trace)
    shutil.copy(FIXTURES / "counters" / raw.name, raw)
    return trace, raw


def _spy_reads(monkeypatch: pytest.MonkeyPatch, module: Any) -> list[str]:
    """``module.read_counters`` records each path it reads; returns the record."""
    real = module.read_counters
    read: list[str] = []

    def reading(path: Any) -> Any:
        read.append(str(path))
        return real(path)

    monkeypatch.setattr(module, "read_counters", reading)
    return read


def test_warm_counters_read_neither_the_file_nor_join_again(
        cdir: Path, probe: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    """`top-kernels --counters`: the join is stored with the cached trace, keyed by the
    counters file (path, size, mtime, inode); a changed file is joined again."""
    from traceforge.formats import counter_files

    trace, raw = probe

    def run() -> str:
        r = CliRunner().invoke(cli, ["top-kernels", str(trace), "--counters", str(raw),
                                     "--format", "csv"])
        assert r.exit_code == 0, r.output
        return r.output

    fresh = CliRunner().invoke(cli, ["--no-cache", "top-kernels", str(trace), "--counters",
                                     str(raw), "--format", "csv"]).output
    first = run()
    assert first == fresh and "sm_pct" in first
    read = _spy_reads(monkeypatch, counter_files)
    assert run() == first and read == []
    os.utime(raw, ns=(raw.stat().st_atime_ns, raw.stat().st_mtime_ns + 10**9))
    assert run() == first and read == [str(raw)]


def test_warm_roofline_measured_reads_neither_the_file_nor_joins_again(
        cdir: Path, probe: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    """`roofline --measured`: the join is stored keyed by the counters file and by the
    roofline it was joined to; other ceilings (another `--device`) join again."""
    from traceforge.commands import roofline as roofline_cmd

    trace, raw = probe

    def run(*extra: str) -> str:
        r = CliRunner().invoke(cli, ["roofline", str(trace), "--by", "kernel", "--measured",
                                     str(raw), "--format", "json", *extra])
        assert r.exit_code == 0, r.output
        return r.output

    fresh = CliRunner().invoke(cli, ["--no-cache", "roofline", str(trace), "--by", "kernel",
                                     "--measured", str(raw), "--format", "json"]).output
    first = run()
    assert first == fresh and '"measured"' in first
    read = _spy_reads(monkeypatch, roofline_cmd)
    assert run() == first and read == []
    run("--device", "a100")
    assert read == [str(raw)]


@pytest.mark.parametrize("name", ["eager.pt.trace.json.gz", "compiled.pt.trace.json.gz"])
def test_roofline_keeps_only_its_own_columns_and_reads_back_equal(
        name: str, cdir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The roofline's per-activity table and the work per activity are stored without the
    timeline's columns (the timeline is stored once: at 1M tiny kernels the two tables
    were 381 + 245 MB beside a 156 MB timeline), and come back whole: ``kernels`` equal
    (columns, order, dtypes, index) to what computing gives, for all steps and for one."""
    from traceforge.analyzers.costs import activity_work as aw
    from traceforge.analyzers.costs import roofline as rf
    from traceforge.analyzers.timeline.core import timeline

    p = tmp_path / name
    shutil.copy(FIXTURES / name, p)
    load(p)
    t = load(p)
    last = tuple(timeline(t).windows["step"].tolist()[-1:])
    cases: list[tuple[int, ...] | None] = [None, last]
    fresh = [rf._roofline(t, "op", s, None, None, 80.0, None) for s in cases]
    first = [rf.roofline(t, steps=s) for s in cases]

    def fail(*a: Any) -> Any:
        raise AssertionError("computed again: the stored table was not used")
    monkeypatch.setattr(rf, "_roofline", fail)
    monkeypatch.setattr(aw, "_work_of", fail)
    for s, want, made in zip(cases, fresh, first, strict=True):
        for got in (made, rf.roofline(load(p), steps=s)):
            pd.testing.assert_frame_equal(got.kernels, want.kernels)
            pd.testing.assert_frame_equal(got.table, want.table)
            pd.testing.assert_frame_equal(got.unmodelled, want.unmodelled)
            assert repr(got.totals) == repr(want.totals) and got.notes == want.notes
    again = load(p)
    rf.roofline(again)
    (key,) = [k for k in again.memo if k.startswith("roofline|")]
    kept = again.memo[key].kernels
    assert kept.columns[0] == "row" and "name" not in kept and "ts" not in kept
    assert {"flops", "family", "ceiling", "saved_ns"} <= set(kept.columns)
    work, _ = aw.activity_work(again, aw.timeline(again)[0])  # read back, not made
    assert list(again.memo["roofline.activity_work"][0].columns) == ["row", *aw.WORK_COLUMNS]
    assert len(work) == len(aw.timeline(again)[0])
