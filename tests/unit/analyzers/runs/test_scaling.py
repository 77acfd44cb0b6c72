"""Scaling: efficiency, each loss term and the serial-fraction fit against hand values
(synthetic runs) and against arithmetic on the raw files (the 2-rank H200 DDP capture)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import traceforge as tf
from tests.conftest import EXTERNAL, FIXTURES, ev, make_trace
from tests.support import raw_kineto as rk
from traceforge.analyzers.runs.inputs import TraceRun
from traceforge.analyzers.runs.scaling import TERMS, scaling
from traceforge.errors import AnalysisError

NCCL = "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)"
GEMM = "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64"


def rank_trace(rank: int, world: int, steps: list[tuple[int, int]],
               kernels: list[tuple[str, int, int]]) -> tf.Trace:
    rows: list[dict[str, Any]] = [
        ev(f"ProfilerStep#{i + 1}", "user_annotation", lo, hi - lo, pid=1, tid=1)
        for i, (lo, hi) in enumerate(steps)]
    rows += [ev(n, "kernel", a, b - a, stream=9 if n == NCCL else 7) for n, a, b in kernels]
    return make_trace(rows, rank=rank, world_size=world, base_ns=0)


def one_gpu() -> TraceRun:
    # T = 1000; without launch calls the GPU windows are the host steps: per step compute
    # 600, idle 400.
    t = rank_trace(0, 1, [(0, 1000), (1000, 2000)], [(GEMM, 0, 600), (GEMM, 1000, 1600)])
    return TraceRun("n1", (t,))


def two_gpus() -> TraceRun:
    # Rank 0 computes 500 per step and starts its all-reduce first (500, 1700); rank 1,
    # the straggler, computes 700 and starts it at 700 and 1950: rank 0 waits 200 and 250.
    r0 = rank_trace(0, 2, [(0, 1200), (1200, 2400)],
                    [(GEMM, 0, 500), (NCCL, 500, 900), (GEMM, 1200, 1700), (NCCL, 1700, 2100)])
    r1 = rank_trace(1, 2, [(0, 1250), (1250, 2500)],
                    [(GEMM, 0, 700), (NCCL, 700, 900), (GEMM, 1250, 1950), (NCCL, 1950, 2150)])
    return TraceRun("n2", (r0, r1))


#: Hand values per rank and step (ns) for two_gpus() against one_gpu(), weak scaling:
#: T(2) = 1250 (rank 1), T(1) = 1000; reference parts: compute 600, idle 400.
#: rank 0 (T 1200): compute 500, exposed comm 400 of which wait (200 + 250) / 2 = 225,
#: idle 300. rank 1 (T 1250): compute 700, comm 200, idle 350.
HAND = {
    0: {"compute": -100, "exposed_comm": 175, "straggler_wait": 225, "idle": -100,
        "memory": 0, "imbalance": 50, "residual": 0},
    1: {"compute": 100, "exposed_comm": 200, "straggler_wait": 0, "idle": -50,
        "memory": 0, "imbalance": 0, "residual": 0},
}


def test_weak_scaling_terms_equal_the_hand_values() -> None:
    r = scaling([one_gpu(), two_gpus()])
    runs = r.runs.set_index("gpus")
    assert runs.loc[2, "step_ms"] == pytest.approx(1250e-6)
    assert runs.loc[2, "slowest_rank"] == 1
    assert runs.loc[2, "efficiency_pct"] == pytest.approx(80.0)
    assert runs.loc[2, "speedup"] == pytest.approx(1.6)
    loss = r.losses[r.losses["gpus"] == 2].set_index("rank")
    for rank, terms in HAND.items():
        for t, v in terms.items():
            assert loss.loc[rank, f"{t}_ms"] * 1e6 == pytest.approx(v, abs=1e-6), (rank, t)
    mean = loss.loc[-1]
    for t in TERMS:
        assert mean[f"{t}_ms"] * 1e6 == pytest.approx((HAND[0][t] + HAND[1][t]) / 2, abs=1e-6)
    # Every row adds up to the growth over ideal; points add up to the lost efficiency.
    for _, row in loss.iterrows():
        assert sum(row[f"{t}_ms"] for t in TERMS) == pytest.approx(row["growth_ms"])
        assert row["growth_ms"] * 1e6 == pytest.approx(250)
        assert sum(row[f"{t}_pts"] for t in TERMS) == pytest.approx(20.0)
    assert mean["exposed_comm_pts"] == pytest.approx(15.0)
    assert mean["straggler_wait_pts"] == pytest.approx(9.0)


def test_parts_agree_with_breakdown_and_skew() -> None:
    run = two_gpus()
    r = scaling([one_gpu(), run])
    ranks = r.ranks[r.ranks["gpus"] == 2].set_index("rank")
    bd = tf.breakdown(list(run.traces))
    tot = bd[bd["step"] == -1].set_index("rank")
    for rank in (0, 1):
        # exposed_comm + straggler_wait is breakdown's exposed communication (per step).
        got = ranks.loc[rank, "exposed_comm_ns"] + ranks.loc[rank, "straggler_wait_ns"]
        assert got == pytest.approx(tot.loc[rank, "exposed_comm_ns"] / 2)
    # Matched as overlap's skew table matches collectives: rank 1 lags 200 and 250 ns.
    skew = tf.overlap(list(run.traces)).skew.set_index("rank")
    assert skew.loc[1, "mean_lag_us"] == pytest.approx(0.225)
    assert ranks.loc[0, "straggler_wait_ns"] == pytest.approx((200 + 250) / 2)


def test_strong_scaling_compares_with_the_split_reference() -> None:
    r = scaling([one_gpu(), two_gpus()], weak=False, batch=64)
    runs = r.runs.set_index("gpus")
    assert runs.loc[2, "efficiency_pct"] == pytest.approx(100 * 1000 * 1 / (1250 * 2))
    assert runs.loc[2, "speedup"] == pytest.approx(0.8)
    # batch is the global batch under strong scaling: samples/s = 64 / 1250 ns.
    assert runs.loc[2, "samples_per_s"] == pytest.approx(64 / 1250e-9)
    mean = r.losses.set_index(["gpus", "rank"]).loc[(2, -1)]
    assert mean["growth_ms"] * 1e6 == pytest.approx(1250 - 500)
    assert mean["compute_ms"] * 1e6 == pytest.approx(600 - 300)
    assert sum(mean[f"{t}_pts"] for t in TERMS) == pytest.approx(60.0)


def test_fit_and_projection_on_two_runs() -> None:
    fit = scaling([one_gpu(), two_gpus()]).fit.set_index("model")
    # S(2) = 1.6: Amdahl 1/1.6 = f + (1-f)/2 -> f = 0.25; S(4) = 1/(0.25 + 0.75/4).
    assert fit.loc["amdahl", "serial_fraction"] == pytest.approx(0.25)
    assert fit.loc["amdahl", "projected_gpus"] == 4
    assert fit.loc["amdahl", "projected_efficiency_pct"] == pytest.approx(100 / 0.4375 / 4)
    # Gustafson: 1.6 = 2 - s -> s = 0.4; S(4) = 4 - 0.4 * 3 = 2.8.
    assert fit.loc["gustafson", "serial_fraction"] == pytest.approx(0.4)
    assert fit.loc["gustafson", "projected_efficiency_pct"] == pytest.approx(70.0)


def test_published_mi350x_curve_and_least_squares_fit() -> None:
    # The MI350X write-up's 7B DDP run: 100 / 77.6 / 85.7 / 48.3 % on 1 / 2 / 4 / 8 GPUs.
    eff = {1: 100.0, 2: 77.6, 4: 85.7, 8: 48.3}
    runs = []
    for n, e in eff.items():
        step = int(round(1_000_000 * 100 / e))
        ranks = tuple(rank_trace(r, n, [(0, step)], [(GEMM, 0, 500_000)]) for r in range(n))
        runs.append(TraceRun(f"n{n}", ranks, {"batch_per_gpu": 4}))
    r = scaling(runs)
    got = r.runs.set_index("gpus")["efficiency_pct"]
    for n, e in eff.items():
        assert got[n] == pytest.approx(e, abs=1e-3)
    assert r.runs.set_index("gpus").loc[8, "samples_per_s"] == pytest.approx(
        4 * 8 / (1e-3 * 100 / 48.3), rel=1e-5)
    # Oracle: numpy's least squares on the linearized Amdahl law over n = 2, 4, 8.
    n = np.array([2.0, 4.0, 8.0])
    s = n * np.array([eff[2], eff[4], eff[8]]) / 100
    f = np.linalg.lstsq((1 - 1 / n)[:, None], 1 / s - 1 / n, rcond=None)[0][0]
    fit = r.fit.set_index("model")
    assert fit.loc["amdahl", "serial_fraction"] == pytest.approx(f, rel=1e-4)
    assert fit.loc["amdahl", "projected_gpus"] == 16
    assert fit.loc["amdahl", "projected_efficiency_pct"] == pytest.approx(
        100 / (f + (1 - f) / 16) / 16, rel=1e-4)
    g = np.linalg.lstsq((n - 1)[:, None], n - s, rcond=None)[0][0]
    assert fit.loc["gustafson", "serial_fraction"] == pytest.approx(g, rel=1e-4)


def test_one_run_per_gpu_count() -> None:
    with pytest.raises(AnalysisError, match="both ran on 1 GPU"):
        scaling([one_gpu(), replace(one_gpu(), label="again")])


def test_chart_data_and_charts(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    from traceforge.render.scaling import scaling_report

    r = scaling([one_gpu(), two_gpus()])
    data = r.chart_data()
    assert data["gpus"].tolist() == [1.0, 2.0, 4.0]
    assert data["projected"].tolist() == [False, False, True]
    assert data.loc[1, "straggler_wait_pts"] == pytest.approx(9.0)
    for name in ("r.md", "r.html"):
        files = scaling_report(r, tmp_path / name)
        assert [p.suffix for p in files] == [Path(name).suffix, ".png", ".svg"]
        assert all(p.stat().st_size > 0 for p in files)
    assert (tmp_path / "r.html").read_text().count("<svg") == 1
    assert "![scaling](r.scaling.png)" in (tmp_path / "r.md").read_text()


# -- the 2-rank H200 DDP capture against a 1-rank run made from its rank 0 -----------------

DDP = [FIXTURES / f"capture_h200x2.ddp_train.sdpa.rank{r}.pt.trace.json.gz" for r in (0, 1)]


def _is_nccl(g: rk.Gpu) -> bool:
    return g.cat == "kernel" and g.name.startswith(("ncclDevKernel", "ncclKernel"))


def _oracle(raw: rk.Raw, drop_nccl: bool = False) -> dict[str, float]:
    """Per-step parts of one rank from the raw file (ns)."""
    gpu = [g for g in raw.gpu if not (drop_nccl and _is_nccl(g))]
    sub = rk.Raw(raw.steps, gpu, raw.base_ns)
    lo, hi = sub.span()
    win = [(lo, hi)]
    comp = rk.intersect(rk.union([(g.ts, g.end) for g in gpu
                                  if g.cat == "kernel" and not _is_nccl(g)]), win)
    comm = rk.intersect(rk.union([(g.ts, g.end) for g in gpu if _is_nccl(g)]), win)
    mem = rk.intersect(rk.union([(g.ts, g.end) for g in gpu if g.cat != "kernel"]), win)
    busy = rk.union(comp + comm + mem)
    n = len(raw.steps)
    return {"step": raw.step_ns, "window": (hi - lo) / n, "compute": rk.total(comp) / n,
            "exposed": rk.total(rk.minus(comm, comp)) / n,
            "memory": rk.total(rk.minus(mem, rk.union(comp + comm))) / n,
            "idle": (hi - lo - rk.total(busy)) / n,
            "exposed_set": rk.minus(comm, comp), "span": (lo, hi)}  # type: ignore[dict-item]


def _waits(raws: list[rk.Raw], parts: list[dict[str, Any]]) -> list[float]:
    """Exposed straggler wait per rank and step: the k-th NCCL kernels of the ranks matched."""
    starts = []
    for raw, p in zip(raws, parts, strict=True):
        lo, hi = p["span"]
        ks = sorted((g.ts, g.end) for g in raw.gpu if _is_nccl(g) and lo <= g.ts < hi)
        starts.append(ks)
    n = min(len(s) for s in starts)
    latest = [max(s[k][0] for s in starts) for k in range(n)]
    out = []
    for ks, raw, p in zip(starts, raws, parts, strict=True):
        w = rk.union([(ks[k][0], min(latest[k], ks[k][1])) for k in range(n)])
        out.append(rk.total(rk.intersect(w, p["exposed_set"])) / len(raw.steps))
    return out


def test_ddp_fixture_terms_equal_sums_from_the_raw_files() -> None:
    for p in DDP:
        if not p.exists():
            pytest.skip(f"{p.name} missing")
    ranks = tf.load_run([str(p) for p in DDP])
    t0 = ranks[0]
    single = replace(t0, events=t0.events[~t0.events["name"].astype(str).str.startswith(
        "ncclDevKernel")], meta=replace(t0.meta, world_size=1))
    r = scaling([TraceRun("n1", (single,)), TraceRun("n2", tuple(ranks))])

    raws = [rk.load(p) for p in DDP]
    assert all(len(x.in_steps()) == len(x.gpu) for x in raws)  # every activity is in a step
    ref = _oracle(raws[0], drop_nccl=True)
    parts = [_oracle(x) for x in raws]
    waits = _waits(raws, parts)
    t_run = max(p["step"] for p in parts)
    ref_vals = {"compute": ref["compute"], "exposed_comm": 0.0, "straggler_wait": 0.0,
                "idle": ref["idle"], "memory": ref["memory"], "imbalance": 0.0,
                "residual": ref["step"] - ref["window"]}
    loss = r.losses[r.losses["gpus"] == 2].set_index("rank")
    for k, (p, w) in enumerate(zip(parts, waits, strict=True)):
        mine = {"compute": p["compute"], "exposed_comm": p["exposed"] - w, "straggler_wait": w,
                "idle": p["idle"], "memory": p["memory"], "imbalance": t_run - p["step"],
                "residual": p["step"] - p["window"]}
        for t in TERMS:
            want = (mine[t] - ref_vals[t]) / 1e6
            assert loss.loc[k, f"{t}_ms"] == pytest.approx(want, abs=1e-6), (k, t)
    assert r.runs.set_index("gpus").loc[2, "efficiency_pct"] == pytest.approx(
        100 * ref["step"] / t_run)
    assert waits[0] > 0 and waits[1] == 0  # rank 1 starts its collectives last


def test_param_dlrm_eight_ranks_match_the_raw_files() -> None:
    # 8 ranks of one DLRM job (V100s, NCCL all-to-all and all-reduce), one step each.
    folder = EXTERNAL / "param" / "dlrm_kineto"
    if not folder.exists():
        pytest.skip("PARAM DLRM traces not present")
    files = sorted(folder.glob("*.json"))
    r = scaling([TraceRun("n8", tuple(tf.load_run([str(p) for p in files])))])
    raws = [rk.load(p) for p in files]
    parts = [_oracle(x) for x in raws]
    waits = _waits(raws, parts)
    ranks = r.ranks.set_index("rank")
    # These files hold absolute epoch microseconds (1.69e15); as float64 nanoseconds their
    # spacing is 256 ns, so the reader's times can be ~128 ns off the exact decimal ones
    # the oracle uses: sums over a few boundaries agree within 1 us.
    tol = 1000
    for k, (p, w) in enumerate(zip(parts, waits, strict=True)):
        got = ranks.loc[k]
        assert got["window_ns"] == pytest.approx(p["window"], abs=tol)
        assert got["compute_ns"] == pytest.approx(p["compute"], abs=tol)
        assert got["straggler_wait_ns"] == pytest.approx(w, abs=tol)
        assert got["exposed_comm_ns"] == pytest.approx(p["exposed"] - w, abs=tol)
        assert got["idle_ns"] == pytest.approx(p["idle"], abs=tol)
        assert got["memory_ns"] == pytest.approx(p["memory"], abs=tol)
        assert got["step_ns"] == pytest.approx(p["step"])
    assert r.runs["step_ms"].iloc[0] == pytest.approx(max(p["step"] for p in parts) / 1e6)
    assert sum(waits) > 0


def test_cli_scaling_on_rank_folders(tmp_path: Path) -> None:
    import shutil
    import subprocess
    import sys

    for p in DDP:
        if not p.exists():
            pytest.skip(f"{p.name} missing")
    n2 = tmp_path / "n2"
    n2.mkdir()
    for p in DDP:
        shutil.copy(p, n2 / p.name)
    n1 = tmp_path / "n1"
    n1.mkdir()
    shutil.copy(DDP[0], n1 / "single.pt.trace.json.gz")
    r = subprocess.run([sys.executable, "-m", "traceforge", "scaling", str(n1), str(n2),
                        "--format", "json"], capture_output=True, text=True, timeout=120)
    # n1 is rank 0 of the 2-rank run: the same world size twice is refused in one line.
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "both ran on 2 GPU" in r.stderr
    r = subprocess.run([sys.executable, "-m", "traceforge", "scaling", str(n2), "--table",
                        "runs", "--format", "csv"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[0].startswith("run,gpus,ranks_traced,steps,step_ns")
