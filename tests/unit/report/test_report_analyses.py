"""The report's roofline, FLOPs utilization, critical path, scaling and vendor-neutral
tables: one definition -- every number equals what the CLI verb (and the library call)
gives for the same trace -- and the cross-vendor rows line up against the raw files."""

from __future__ import annotations

import json
import math
import re
import shutil
import sys
import weakref
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

import traceforge as tf
from tests.conftest import FIXTURES, cli_main
from tests.support import raw_kineto as rk
from tests.unit.analyzers.runs.test_compare import MODELS, oracle_class, pair
from traceforge.analyzers.runs.diff import diff
from traceforge.analyzers.runs.inputs import TraceRun
from traceforge.analyzers.runs.scaling import scaling
from traceforge.render.chrome_json import write_chrome
from traceforge.render.html import render_html
from traceforge.render.markdown import render_markdown
from traceforge.report.analysis import analyze
from traceforge.report.comparison import group_runs, scaling_of
from traceforge.report.findings import findings

EAGER = FIXTURES / "eager.pt.trace.json.gz"
COMPILED = FIXTURES / "compiled.pt.trace.json.gz"
DDP = [FIXTURES / f"capture_h200x2.ddp_train.sdpa.rank{r}.pt.trace.json.gz" for r in (0, 1)]


def _need(*paths: Path) -> None:
    for p in paths:
        if not p.exists():
            pytest.skip(f"{p.name} missing")


def _json(*args: str) -> Any:
    code, out, err = cli_main(*args, "--format", "json")
    assert code == 0, err
    return json.loads(out)


# -- roofline and MFU ---------------------------------------------------------------------
def test_roofline_and_mfu_in_the_report_equal_the_cli() -> None:
    _need(EAGER)
    t = tf.load(EAGER)
    r = analyze(t)
    rf = r.roofline
    # Library: the report's tables are roofline()/mfu() with a rank column.
    lib = tf.roofline(t).table
    pd.testing.assert_frame_equal(rf.by_op.drop(columns="rank"),
                                  lib[[c for c in rf.by_op.columns if c != "rank"]])
    steps = tf.mfu(t).steps
    assert rf.mfu["hfu_pct"].tolist() == steps["hfu_pct"].tolist()
    # CLI: `traceforge roofline` and `traceforge mfu` print the same numbers.
    rows = {x["op"]: x for x in _json("roofline", str(EAGER), "-n", "0")["rows"]}
    assert len(rows) == len(rf.by_op)
    for x in rf.by_op.to_dict("records"):
        cli = rows[x["op"]]
        for col in ("tflops_per_s", "tb_per_s", "pct_of_bound"):
            assert cli[col] == pytest.approx(x[col], rel=1e-12, nan_ok=True), (x["op"], col)
        for col in ("time_us", "saved_us"):  # JSON: integer ns (render.schema)
            want = x[col] if x[col] != x[col] else round(x[col] * 1000)
            assert cli[col[:-3] + "_ns"] == pytest.approx(want, nan_ok=True), (x["op"], col)
    cli_steps = _json("mfu", str(EAGER))["steps"]
    assert [s["hfu_pct"] for s in cli_steps] == pytest.approx(rf.mfu["hfu_pct"].tolist(),
                                                              rel=1e-12)
    # The run card shows the range of those per-step values, and what it divides.
    lo, hi = min(s["hfu_pct"] for s in cli_steps), max(s["hfu_pct"] for s in cli_steps)
    assert (r.facts["hfu_min_pct"], r.facts["hfu_max_pct"]) == (lo, hi)
    md = render_markdown([r], findings(r))
    shown = f"{lo:.2f}" if f"{lo:.2f}" == f"{hi:.2f}" else f"{lo:.2f}-{hi:.2f}"
    peak = cli_steps[0]["peak_tflops"]
    assert "HFU per step" in md and f"{shown}%" in md
    assert f"GPU window x bf16 {peak:,.1f} TFLOP/s peak" in md
    # The finding names the ops furthest below their bound with the CLI's numbers.
    worst = sorted(rows.values(), key=lambda x: -x["saved_ns"])[:3]
    f = {x.rule: x for x in findings(r)}["ops_below_bound"]
    for w in worst:
        assert (f"{w['op']} at {w['pct_of_bound']:.1f}% of its {w['bound']} bound" in f.evidence)
        assert f"{w['saved_ns'] / 1e6:,.2f} ms of its {w['time_ns'] / 1e6:,.2f} ms" in f.evidence
    # The GEMM rule quotes `traceforge roofline --by class`'s gemm row.
    gemm = next(x for x in _json("roofline", str(EAGER), "--by", "class")["rows"]
                if x["class"] == "gemm")
    g = {x.rule: x for x in findings(r)}["gemm_below_peak"]
    assert f"{gemm['pct_of_bound']:.1f}% of their roofline bound" in g.evidence
    page = render_html([r], findings(r))
    assert "Roofline: NVIDIA H100" in page and "Ops furthest below their bound" in page


def test_a_run_without_shapes_has_no_hfu_card_but_says_why() -> None:
    _need(COMPILED)
    r = analyze(tf.load(COMPILED))
    assert "hfu_min_pct" not in r.facts
    md = render_markdown([r], [])
    assert "HFU per step" not in md.split("### Overview")[0]
    assert "compiled region" in md  # the roofline's note: why the work is unknown


# -- critical path --------------------------------------------------------------------------
def _cli_path(paths: list[Path], step: int, *what_if: str) -> dict[str, Any]:
    doc = _json("critical-path", *map(str, paths), "--step", str(step),
                *(["--what-if", *what_if] if what_if else []))
    assert len(doc["steps"]) == 1
    return dict(doc["steps"][0])


@pytest.mark.parametrize("case", ["eager", "compiled", "ddp"])
def test_critical_path_in_the_report_equals_the_cli(case: str) -> None:
    paths = {"eager": [EAGER], "compiled": [COMPILED], "ddp": DDP}[case]
    _need(*paths)
    traces = tf.load_run([str(p) for p in paths]) if case == "ddp" else [tf.load(paths[0])]
    r = analyze(traces)
    cp = r.critical_path
    last = max(set.intersection(*(set(tf.timeline(t).windows["step"]) for t in traces)))
    assert cp.step == last
    lib = tf.critical_path(traces, steps=[last])
    crit = lib.steps[lib.steps["critical"]]
    assert cp.length["length_ns"].tolist() == crit["length_ns"].tolist()
    assert cp.length["rank"].tolist() == crit["rank"].tolist()
    scenarios = [s for s in cp.what_if["scenario"] if " " not in s]
    cli = _cli_path(paths, last, *scenarios)
    assert cli["length_ns"] == int(cp.length["length_ns"].iloc[0])
    assert cli["by_category"] == {str(c): int(n) for c, n in zip(cp.bar["category"],
                                                                 cp.bar["ns"], strict=True)}
    new = {w["scenario"]: w["new_length_ns"] for w in cli["what_if"]}
    for w in cp.what_if.to_dict("records"):
        assert new[w["scenario"]] == w["new_length_ns"]
    md = render_markdown([r], [])
    assert f"Path length {int(cli['length_ns']) / 1e6:,.3f} ms" in md
    if case == "ddp":
        assert "communication=2" in set(cp.what_if["scenario"])
        assert "whose window ends last" in md
    if case == "compiled":
        # GEMMs set the compiled step: twice as fast GEMMs shorten it, on the graph.
        gemm = cp.what_if.set_index("scenario").loc["gemm=2"]
        assert 0 < gemm["saved_ns"] < gemm["length_ns"]


# -- vendor-neutral families ----------------------------------------------------------------
@pytest.mark.parametrize("model", MODELS)
def test_diff_lines_up_nvidia_and_amd_by_neutral_family(model: str) -> None:
    paths = pair(model)
    a, b = tf.load(paths[0]), tf.load(paths[1])
    d = diff(a, b)
    nt = d.by_neutral
    # The raw family table cannot line the vendors up (sm90_xmma vs Cijk) ...
    fam = d.by_family
    assert ((fam["a_us"] > 0) & (fam["b_us"] == 0)).any()
    # ... the neutral one has no group on one side only, except memset: cuBLAS zeroes its
    # workspace with cudaMemsetAsync on the H100, the MI300X file has no memset at all.
    one_sided = nt[((nt["a_us"] > 0) != (nt["b_us"] > 0)) & (nt["class"] != "memset")]
    assert one_sided.empty, one_sided
    lib = nt.set_index("family")
    assert "Tensile" in lib.loc["library_gemm", "b_library"]
    assert lib.loc["library_gemm", "a_library"].startswith(("cuBLAS", "CUTLASS"))
    # Per-class totals equal sums from the raw files (in-step GPU work, per step).
    for col, p in (("a_us", paths[0]), ("b_us", paths[1])):
        raw = rk.load(p)
        sums: dict[str, float] = {}
        for g in raw.in_steps():
            c = oracle_class(g)
            sums[c] = sums.get(c, 0.0) + (g.end - g.ts) / 1e3 / len(raw.steps)
        got = nt.groupby("class")[col].sum()
        for c in set(sums) | set(got.index):
            assert got.get(c, 0.0) == pytest.approx(sums.get(c, 0.0), abs=1e-6), (c, col)
    # The same groups as `compare`, which lines runs up the same way.
    cmp = tf.compare([TraceRun("a", (a,)), TraceRun("b", (b,))]).by_family
    for run, col in (("a", "a_us"), ("b", "b_us")):
        ms = cmp[cmp["run"] == run].set_index(["class", "family"])["ms"]
        mine = nt.set_index(["class", "family"])[col]
        assert mine.reindex(ms.index, fill_value=0.0).to_numpy() == pytest.approx(
            ms.to_numpy() * 1e3, abs=1e-6)


def test_neutral_table_counts_every_row_s_neutral_columns() -> None:
    """The report's neutral table, summed per distinct (class, family, name) through
    their codes (two groupbys on three string columns of every row took ~13 s at 10M
    activities), against a groupby of each row's own neutral columns: calls, time and
    the libraries in order, on an NVIDIA and an AMD run."""
    from traceforge.analyzers.runs.vendor import neutral_columns, vendor_of
    from traceforge.analyzers.timeline.core import timeline

    for p in pair(MODELS[2]):
        t = tf.load(p)
        got = analyze(t).by_neutral.set_index(["class", "family"])
        acts = timeline(t).activity
        nc = neutral_columns(acts, vendor_of(t))
        rows = pd.DataFrame({"class": nc["ncls"].to_numpy(), "family": nc["nfamily"].to_numpy(),
                             "library": nc["library"].to_numpy(),
                             "dur": (acts["end"] - acts["ts"]).to_numpy()})
        want = rows.groupby(["class", "family"])["dur"].agg(["size", "sum"])
        assert sorted(got.index) == sorted(want.index)
        assert (got["calls"] == want["size"].reindex(got.index)).all()
        assert (got["total_us"] == want["sum"].reindex(got.index) / 1e3).all()
        by_lib = rows.groupby(["class", "family", "library"])["dur"].sum()
        for key, lib in got["library"].items():
            ranked = by_lib.loc[key].reset_index().sort_values(
                ["dur", "library"], ascending=[False, True], kind="stable")["library"]
            assert lib == ", ".join(n for n in ranked if n), key


def test_report_tables_line_up_by_neutral_family() -> None:
    paths = pair(MODELS[2])
    runs = [analyze(tf.load(p), label=v) for p, v in zip(paths, ("h100", "mi300"),
                                                            strict=True)]
    keys = [set(zip(r.by_neutral["class"], r.by_neutral["family"], strict=True)) - {
        ("memset", "memset")} for r in runs]
    assert keys[0] == keys[1] and ("gemm", "library_gemm") in keys[0]
    libs = [r.by_neutral.set_index("family").loc["library_gemm", "library"] for r in runs]
    assert "Tensile" in libs[1] and "Tensile" not in libs[0]
    for r in runs:  # the whole trace, as the class table next to it
        assert r.by_neutral["total_us"].sum() == pytest.approx(r.by_class["total_us"].sum())
    d = diff(tf.load(paths[0]), tf.load(paths[1]))
    md = render_markdown(runs, [], diffs=[("h100", "mi300", d)])
    assert "### GPU time per step by vendor-neutral family (us)" in md
    assert "### GPU time per step by kernel family (us)" in md  # the raw table stays


# -- scaling --------------------------------------------------------------------------------
def _one_gpu(tmp_path: Path) -> Path:
    """Rank 0 of the 2-rank run as a 1-GPU run (its NCCL kernels dropped), as a file."""
    t0 = tf.load(DDP[0])
    dist = {**t0.meta.distributed, "world_size": 1}
    single = replace(t0, events=t0.events[~t0.events["name"].astype(str).str.startswith(
        "ncclDevKernel")], meta=replace(t0.meta, world_size=1, distributed=dist))
    out = tmp_path / "n1" / "single.pt.trace.json.gz"
    out.parent.mkdir()
    write_chrome(single, out)
    return out


def test_report_adds_scaling_for_runs_at_different_gpu_counts(tmp_path: Path) -> None:
    _need(*DDP)
    one = _one_gpu(tmp_path)
    n2 = tmp_path / "n2"
    n2.mkdir()
    for p in DDP:
        shutil.copy(p, n2 / p.name)
    want = scaling([TraceRun("n1", (tf.load(one),)), TraceRun("n2", tuple(tf.load_run(
        [str(p) for p in DDP])))])
    eff = float(want.runs.set_index("gpus").loc[2, "efficiency_pct"])
    cli = _json("scaling", str(one.parent), str(n2))
    assert cli["runs"][1]["efficiency_pct"] == pytest.approx(eff, rel=1e-12)
    for args, out in (([str(one.parent), str(n2)], "r.md"),
                      ([str(one), *map(str, DDP)], "r.html")):  # files group by world size
        code, _, err = cli_main("report", *args, "-o", str(tmp_path / out))
        assert code == 0, err
        text = (tmp_path / out).read_text()
        assert "Scaling per GPU count" in text and f"{eff:,.2f}" in text
        assert "Where the efficiency went" in text
    assert (tmp_path / "r.html").read_text().count("<svg") >= 2 + 1  # scaling chart too
    # One GPU count twice (eager vs compiled): compared, not scaled.
    ts = [tf.load(EAGER), tf.load(COMPILED)]
    runs = [analyze(t) for t in ts]
    assert scaling_of(runs, [[t] for t in ts]) is None
    assert [len(g) for g in group_runs([tf.load(one), *tf.load_run(list(map(str, DDP)))])] == [
        1, 2]


# -- without matplotlib ---------------------------------------------------------------------
def test_report_without_matplotlib_says_how_to_get_charts(
        monkeypatch: pytest.MonkeyPatch) -> None:
    _need(EAGER)
    r = analyze(tf.load(EAGER))
    for name in [m for m in sys.modules if m == "matplotlib" or m.startswith("matplotlib.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib: ImportError
    page = render_html([r], findings(r))
    assert re.search(r"charts need matplotlib: pip install \S*traceforge\[charts\]", page)
    assert "Roofline by operator" in page and "FLOPs utilization per step" in page
    assert not math.isnan(r.facts["hfu_min_pct"])


def test_charts_are_matplotlib_svg_and_reproducible() -> None:
    pytest.importorskip("matplotlib")
    from traceforge.render import charts

    svg = charts.hbar(["gemm", "elementwise"], [10.0, 2.5], unit="us")
    assert svg == charts.hbar(["gemm", "elementwise"], [10.0, 2.5], unit="us")
    assert "<svg" in svg and "Matplotlib" in svg  # drawn by the library, not by hand
    assert ">10 us<" in svg and ">2.50 us<" in svg and ">gemm<" in svg  # text stays text
    _need(COMPILED)
    r = analyze(tf.load(COMPILED))
    page = render_html([r], findings(r))
    assert page == render_html([r], findings(r))  # same run, same bytes
    assert page.count("<svg") >= 5


def test_charts_drawn_on_several_cores_equal_one_core(monkeypatch: pytest.MonkeyPatch) -> None:
    """The page's charts are drawn together once it is laid out, dealt out to forked
    children: byte for byte the page drawn in this process alone."""
    pytest.importorskip("matplotlib")
    from traceforge import forks
    from traceforge.formats import cache_texts

    _need(COMPILED)
    monkeypatch.setattr(cache_texts, "text_store", lambda name, inputs: None)  # drawn each time
    r = analyze(tf.load(COMPILED))
    monkeypatch.setattr(forks, "can_fork", lambda: False)
    alone = render_html([r], findings(r))
    monkeypatch.setattr(forks, "can_fork", lambda: True)
    monkeypatch.setattr(forks, "cores", lambda: 3)
    assert render_html([r], findings(r)) == alone
    assert alone.count("<svg") >= 5 and "<tf-chart" not in alone


def test_draw_all_shares_out_in_order_and_redraws_a_failed_part_here(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Each process takes the next chart not yet taken: every chart is drawn once, the
    texts come back in order; where a child fails or dies, its charts are drawn here."""
    import os
    import time

    from traceforge import forks
    from traceforge.render.figures import draw_all

    if not forks.can_fork():
        pytest.skip("no fork here")
    monkeypatch.setattr(forks, "cores", lambda: 3)
    here = os.getpid()
    log = tmp_path / "drawn"

    def chart(i: int) -> tuple[int, int]:
        time.sleep(0.02)
        with log.open("a") as f:  # a child's memory is its own: it writes what it drew
            f.write(f"{i}\n")
        return i, os.getpid()

    got = draw_all([lambda i=i: chart(i) for i in range(12)])  # type: ignore[misc]
    assert [i for i, _ in got] == list(range(12))
    assert sorted(int(x) for x in log.read_text().split()) == list(range(12))  # once each

    def only_here(i: int) -> int:
        if os.getpid() != here:
            raise RuntimeError("a chart that fails in a child")
        time.sleep(0.02)
        return i

    def dies(i: int) -> int:
        if os.getpid() != here:
            os._exit(3)
        time.sleep(0.02)
        return i

    for make in (only_here, dies):
        assert draw_all([partial(make, i) for i in range(6)]) == list(range(6))


def test_critical_path_beside_the_other_analyses_changes_nothing(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The report works out the critical path in a forked child (a thread where it may
    not fork) while the other analyses run: the tables are those of a report made
    without either (one core); an error there leaves the section empty with the same
    reason; a child that dies has the path worked out in the report's process."""
    import os
    import threading

    from traceforge import forks
    from traceforge.errors import AnalysisError
    from traceforge.report import analysis as run_mod

    def tables(r: run_mod.RunAnalysis) -> dict[str, str]:
        frames = {**vars(r), **{f"path.{k}": v for k, v in vars(r.critical_path).items()}}
        return {k: v.to_csv() for k, v in frames.items() if isinstance(v, pd.DataFrame)}

    def cores(n: int) -> None:
        monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(n)), raising=False)
        monkeypatch.setattr(os, "cpu_count", lambda: n)

    real = run_mod.path_tables.gather
    log = tmp_path / "where"

    def watched(ts: Any) -> Any:
        with log.open("a") as f:  # a child's memory is its own: it writes where it ran
            f.write(f"{os.getpid()} {threading.current_thread().name}\n")
        return real(ts)

    def where() -> str:
        last = log.read_text().splitlines()[-1].split()
        return "here" if last == [str(os.getpid()), threading.current_thread().name] else \
            "thread" if last[0] == str(os.getpid()) else "child"

    def report() -> run_mod.RunAnalysis:
        return run_mod.analyze(tf.load(EAGER, cache=False))

    monkeypatch.setattr(run_mod.path_tables, "gather", watched)
    cores(1)
    alone = tables(report())
    assert where() == "here"
    cores(2)
    ahead = report()
    assert where() == ("child" if forks.can_fork() else "thread")
    assert tables(ahead) == alone and len(ahead.critical_path.length)
    monkeypatch.setattr(forks, "can_fork", lambda: False)
    assert tables(report()) == alone and where() == "thread"
    monkeypatch.undo()
    monkeypatch.setattr(run_mod.path_tables, "gather", watched)
    cores(2)

    if forks.can_fork():
        parent = os.getpid()

        def dies(ts: Any) -> Any:
            if os.getpid() != parent:
                os._exit(3)
            return watched(ts)

        monkeypatch.setattr(run_mod.path_tables, "gather", dies)
        assert tables(report()) == alone and where() == "here"

    def fails(ts: Any) -> Any:
        raise AnalysisError("no path here")

    monkeypatch.setattr(run_mod.path_tables, "gather", fails)
    got = report()
    cores(1)
    want = report()
    assert got.unavailable == want.unavailable and got.unavailable["critical_path"] == \
        "no path here"
    assert tables(got) == tables(want)


def test_a_rank_s_per_row_tables_are_let_go_once_summarised(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The launch report (a row per kernel) and the idle gaps are summarised into the
    report's tables and freed before the run-wide analyses (roofline, critical path,
    overlap) run: at 10M kernels each is about a gigabyte."""
    from traceforge.report import analysis as mod

    refs: list[weakref.ref[Any]] = []

    def watched(real: Any) -> Any:
        def run(*args: Any, **kwargs: Any) -> Any:
            got = real(*args, **kwargs)
            refs.append(weakref.ref(got))
            return got
        return run

    alive_at_roofline: list[bool] = []
    gather = mod.roofline_tables.gather

    def roofline_gather(*args: Any, **kwargs: Any) -> Any:
        alive_at_roofline.extend(r() is not None for r in refs)
        return gather(*args, **kwargs)

    monkeypatch.setattr(mod, "launch_overhead", watched(mod.launch_overhead))
    monkeypatch.setattr(mod, "idle_gaps", watched(mod.idle_gaps))
    monkeypatch.setattr(mod.roofline_tables, "gather", roofline_gather)
    r = analyze(tf.load(EAGER, cache=False))  # (a cached trace reads its analysis back)
    assert len(alive_at_roofline) == 2 and not any(alive_at_roofline)
    assert len(r.launch) and len(r.idle_gaps)  # and their summaries are in the report
