"""Roofline rows of compiled runs and CUDA-graph replays (issue 25, item 12).

A replayed kernel records no op and no shapes: it takes the work of the same kernel (name,
grid, block) launched outside the graph with shapes, only where every such launch did
the same work; ``--flops-from EAGER`` gives the compiled kernels the eager run's FLOPs per
step; anything else says ``work unknown: graph replay, no shapes recorded``. Both failure
modes are tested on synthetic traces (what the rule must catch, what it must leave alone),
then the real compiled fixtures.
"""

from __future__ import annotations

import json
from typing import Any

import pandas as pd
import pytest

import traceforge as tf
from tests.conftest import FIXTURES, cli_main, ev
from traceforge.analyzers.costs.mfu import mfu
from traceforge.analyzers.costs.replays import COMPILED, FLOPS_FROM, REPLAY
from traceforge.analyzers.costs.roofline import roofline
from traceforge.model import Device, Trace, TraceMeta

H100 = Device(0, "NVIDIA H100 80GB HBM3", "nvidia", 132, 80 * 2**30, "9.0")
BF = "c10::BFloat16"
G1, G2, BLOCK = [8, 1, 1], [16, 1, 1], [128, 1, 1]
REGION = "Torch-Compiled Region: 0/0"


def _mm(n: int) -> dict[str, Any]:
    return {"Input Dims": [[n, n], [n, n]], "Input type": [BF, BF],
            "Concrete Inputs": ["", ""]}


def graphs() -> Trace:
    """Step 1 (warm-up, run eagerly): aten::mm 256^3 -> gemm_k (grid G1), twice; aten::mm
    512^3 -> wide_k (G1) and aten::mm 128^3 -> wide_k (G1): the same launch, two works.
    Step 2 (replay): one cudaGraphLaunch in the compiled region replays gemm_k (G1, must
    match), gemm_k (G2, another grid: must not), wide_k (G1, launches disagree: must not),
    triton_k (never launched outside a graph: must not) and a memset."""
    rows: list[dict[str, Any]] = []
    args: list[dict[str, Any]] = []

    def add(row: dict[str, Any], a: dict[str, Any] | None = None) -> None:
        rows.append(row)
        args.append(a or {})

    add(ev("ProfilerStep#1", "user_annotation", 0, 1_000_000, pid=1, tid=1))
    add(ev("ProfilerStep#2", "user_annotation", 1_000_000, 1_000_000, pid=1, tid=1))
    warm = [(1, 256, "gemm_k"), (2, 256, "gemm_k"), (3, 512, "wide_k"), (4, 128, "wide_k")]
    for i, (c, n, name) in enumerate(warm):
        t0 = 10_000 + i * 100_000
        add(ev("aten::mm", "cpu_op", t0, 50, pid=1, tid=1, ext=c), _mm(n))
        add(ev("cudaLaunchKernel", "runtime", t0 + 10, 5, pid=1, tid=1, corr=c, ext=c))
        add(ev(name, "kernel", t0 + 1_000, 10_000, corr=c, ext=c),
            {"grid": G1, "block": BLOCK})
    add(ev(REGION, "cpu_op", 1_010_000, 100_000, pid=1, tid=1, ext=50))
    add(ev("cudaGraphLaunch", "runtime", 1_020_000, 20, pid=1, tid=1, corr=100, ext=100))
    replayed = [("gemm_k", G1, 10_000), ("gemm_k", G2, 20_000), ("wide_k", G1, 30_000),
                ("triton_k", G1, 40_000)]
    for i, (name, grid, dur) in enumerate(replayed):
        add(ev(name, "kernel", 1_100_000 + i * 50_000, dur, corr=100),
            {"grid": grid, "block": BLOCK})
    add(ev("Memset (Device)", "memset", 1_400_000, 1_000, corr=100), {"bytes": 4096})
    return Trace.from_events(rows, TraceMeta(format="synthetic", devices=(H100,)), args=args)


def _replays(r: Any) -> pd.DataFrame:
    k = r.kernels
    return k[(k["replay"] >= 0) & (k["kind"] == "kernel")].reset_index(drop=True)


def test_a_replayed_kernel_takes_the_work_of_the_same_launch_with_shapes() -> None:
    k = _replays(roofline(graphs()))
    hit = k[(k["name"] == "gemm_k")].iloc[0]  # grid G1, the first one replayed
    assert hit["modelled"] and hit["flops"] == 2.0 * 256**3
    assert hit["bytes"] == 3 * 256 * 256 * 2 and hit["dtype"] == "bf16"
    assert any("1 replayed kernels" in n for n in roofline(graphs()).notes)


def test_what_the_match_must_leave_alone() -> None:
    k = _replays(roofline(graphs())).set_index(["name", "dur"])
    # another grid, launches that disagree, a kernel only ever replayed: unknown, said so
    for key in (("gemm_k", 20_000), ("wide_k", 30_000), ("triton_k", 40_000)):
        assert not k.loc[key, "modelled"], key
        assert k.loc[key, "reason"] == REPLAY
        assert pd.isna(k.loc[key, "flops"])


def test_the_region_row_says_its_work_is_unknown_in_json_and_terminal() -> None:
    t = roofline(graphs()).table.set_index("op")
    row = t.loc[REGION]
    assert row["work"] == REPLAY
    # its known part is the matched GEMM (and the memset): FLOPs of that part only
    assert row["gflops"] == pytest.approx(2.0 * 256**3 / 1e9)
    assert t.loc["aten::mm", "work"] == ""


def test_flops_from_an_eager_run_fills_the_step_less_its_own_ops() -> None:
    eager = graphs()  # its steps: 2 x 256^3 + 512^3 + 128^3 GEMMs in step 1, 1 in step 2
    per_step = mfu(eager).steps.set_index("step")["gflops"] * 1e9
    mean = float(per_step[per_step > 0].mean())
    r = roofline(graphs(), flops_from=eager)
    k = _replays(r)
    filled = k[k["flops_only"]]
    own_step2 = 2.0 * 256**3  # the matched replay's own FLOPs in step 2
    assert set(filled["name"]) == {"gemm_k", "wide_k", "triton_k"}
    assert filled["flops"].sum() == pytest.approx(mean - own_step2)
    # in proportion to time
    assert (filled["flops"] / filled["dur"]).std() / (filled["flops"] / filled["dur"]).mean() \
        < 1e-9
    assert (filled["reason"] == FLOPS_FROM).all() and not filled["modelled"].any()
    row = r.table.set_index("op").loc[REGION]
    assert row["gflops"] == pytest.approx((mean - own_step2 + own_step2) / 1e9)
    assert row["work"] == FLOPS_FROM
    # bytes unknown: no intensity, bound or % of bound for the row
    assert pd.isna(row["intensity"]) and row["bound"] == "" and pd.isna(row["pct_of_bound"])
    assert r.totals["flops_from_eager"] == pytest.approx(mean - own_step2)
    # only the per-op table counts them: a kernel's share of a step's FLOPs is made up
    by_kernel = roofline(graphs(), by="kernel", flops_from=eager).table
    assert pd.isna(by_kernel.set_index("full_name").loc["triton_k", "gflops"])


def test_flops_from_leaves_a_run_with_its_own_work_alone() -> None:
    # An eager trace with every kernel modelled has nothing compiled or replayed to fill.
    eager = tf.load("sample:h100-eager")
    r = roofline(eager, flops_from=eager)
    assert r.totals["flops_from_eager"] == 0
    assert not r.kernels["flops_only"].any()
    assert (r.kernels["reason"] != COMPILED).all()


def test_compiled_fixtures_match_mfu_and_say_why() -> None:
    compiled = tf.load(FIXTURES / "compiled.pt.trace.json.gz")
    eager = tf.load(FIXTURES / "eager.pt.trace.json.gz")
    plain = roofline(compiled).table.set_index("op").loc[REGION]
    assert plain["work"] == REPLAY and pd.isna(plain["gflops"])
    r = roofline(compiled, flops_from=eager)
    m = mfu(compiled, flops_from=eager)
    # The FLOPs the roofline gives the run's kernels are mfu's per step, step for step.
    k = r.kernels
    own = k[k["modelled"]].groupby("step")["flops"].sum()
    got = k[k["flops_only"]].groupby("step")["flops"].sum().add(own, fill_value=0)
    want = m.steps.set_index("step")["gflops"] * 1e9
    assert got.reindex(want.index).to_numpy() == pytest.approx(want.to_numpy(), rel=1e-9)


def test_cli_and_report_show_the_work(tmp_path: Any) -> None:
    comp = str(FIXTURES / "compiled.pt.trace.json.gz")
    eager = str(FIXTURES / "eager.pt.trace.json.gz")
    code, out, err = cli_main("roofline", comp, "--format", "json")
    assert code == 0, err
    rows = {r["op"]: r for r in json.loads(out)["rows"]}
    assert rows[REGION]["work"] == REPLAY and rows[REGION]["gflops"] is None
    code, out, err = cli_main("roofline", comp, "--width", "200")
    assert code == 0, err
    line = next(ln for ln in out.splitlines() if ln.startswith("Torch-Compiled"))
    assert "unknown: replay" in line
    assert "graph replay, no shapes recorded" in out  # the unmodelled table, in full
    code, out, err = cli_main("roofline", comp, "--flops-from", eager, "--format", "json")
    assert code == 0, err
    doc = json.loads(out)
    rows = {r["op"]: r for r in doc["rows"]}
    assert rows[REGION]["work"] == FLOPS_FROM and rows[REGION]["gflops"] > 0
    md = tmp_path / "r.md"
    code, _, err = cli_main("report", comp, "--flops-from", eager, "-o", str(md))
    assert code == 0, err
    text = md.read_text(encoding="utf-8")
    assert FLOPS_FROM in text
    code, _, err = cli_main("report", comp, "-o", str(md))
    assert code == 0, err
    assert REPLAY in md.read_text(encoding="utf-8")
