"""Findings: rules that turn a run's measurements into advice, each with its evidence.

Every rule reads a :class:`~traceforge.report.analysis.RunAnalysis` and returns zero or one
:class:`Finding`, whose title names the problem and whose evidence carries the numbers.
Thresholds are module constants so that reports can cite them. :func:`findings` runs every
rule over every run and prints a finding that holds for several runs once, naming them.

The profiled run is not the run: a finding drawn from host time (launch-bound, host waits,
synchronization, low GPU busy) is qualified when the profiler's overhead on the run is
large (:data:`traceforge.step_time.OVERHEAD_LARGE_PCT`) and withheld -- low severity, its
title saying so -- when only outlier steps support it (:func:`qualify`);
:func:`first_step_outlier` says when the first recorded step is an outlier.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

import pandas as pd

from traceforge.analyzers.communication import table as comm_table
from traceforge.analyzers.names.kernel_names import short_name
from traceforge.report import roofline as roofline_tables
from traceforge.report.analysis import RunAnalysis
from traceforge.step_time import OUTLIER_K, OUTLIER_MIN_PCT

BUSY_PCT_MIN = 40.0  # below this the GPU mostly waits: the first thing to fix
EXPOSED_COMM_PCT_MAX = 30.0  # communication not hidden behind compute, % of step time
SYNC_IDLE_PCT_MIN = 1.0  # GPU idle caused by host synchronization, % of step time
SYNC_HOST_PCT_MIN = 5.0  # host time spent blocked in sync calls, % of step time
GEMM_BOUND_PCT_MIN = 30.0  # GEMM kernels' achieved share of their roofline bound
#: Time at stake (saved at the roofline's target % of the bound) of the ops furthest below
#: their bound, as % of the rank's GPU time: below this the ops are close enough.
AT_STAKE_PCT_MIN = 10.0
AT_STAKE_OPS = 3  # ops the finding names
#: GPU idle between the nodes of CUDA/HIP graph replays (cause graph_internal), % of the
#: steps' GPU windows: above this the graph's own gaps cost more than launches would save.
GRAPH_IDLE_PCT_MIN = 10.0

SEVERITIES = ("high", "medium", "low")


@dataclass(frozen=True)
class Finding:
    """One piece of advice: what was seen (evidence, with numbers) and what to try."""

    rule: str
    severity: str  # one of SEVERITIES
    title: str
    evidence: str
    advice: str
    runs: tuple[str, ...] = ()


# -- the profiled run is not the run (issue 24) ------------------------------------
#: Findings drawn from host time: the profiler's host overhead inflates them.
HOST_RULES = frozenset({"launch_bound", "sync_stalls", "gpu_busy_low"})


def first_step_outlier(r: RunAnalysis) -> Finding | None:
    """The run's first recorded step is an outlier step."""
    if not r.outliers or r.first_step is None or r.outliers[0][0] != r.first_step:
        return None
    step, ms = r.outliers[0]
    med = r.median_step_ms or 0.0
    times = f", {ms / med:.1f}x" if med else ""
    return Finding(
        "first_step_outlier", "low",
        "The first recorded step is an outlier: profiler start-up, not the workload",
        f"Step {step} took {ms:,.2f} ms{times} the median step ({med:,.2f} ms; outlier rule: "
        f"more than {OUTLIER_K:g} scaled MADs and {OUTLIER_MIN_PCT:g}% from the median). "
        "It is left out of step statistics; findings it alone supports are withheld.",
        "Record more steps after a longer warm-up (traceforge capture --steps WAIT,WARMUP,"
        "ACTIVE), and judge the run by its unprofiled step time.",
    )


def qualify(r: RunAnalysis, f: Finding, steps: list[int] | None = None) -> Finding:
    """``f`` as it should be shown, given what the profiler did to the run. ``steps``:
    the steps the finding rests on (None: the whole run)."""
    if f.rule not in HOST_RULES:
        return f
    bad = {s for s, _ in r.outliers}
    if steps and bad and set(steps) <= bad:
        which = ", ".join(str(s) for s in sorted(steps))
        return replace(f, severity="low", title=f"Withheld: {f.title}",
                       evidence=f"Only outlier step(s) {which} support this (inflated, e.g. "
                                f"by profiler start-up): not a finding about the workload. "
                                f"{f.evidence}")
    overhead = r.run_info.get("overhead_pct")
    if r.run_info.get("overhead_large") and overhead is not None:
        prof = r.run_info.get("profiled_ms")
        return replace(f, title=f"{f.title} (qualified: profiler overhead {overhead:.0f}%)",
                       evidence=f"{f.evidence} Qualified: the profiler slowed the recorded "
                                f"steps by {overhead:.0f}% ({prof or 0:,.2f} ms vs "
                                f"{r.run_info.get('latency_ms', 0):,.2f} ms unprofiled), so "
                                "host time is inflated; confirm on an unprofiled run.")
    return f


def _low_busy(r: RunAnalysis) -> Finding | None:
    busy = r.facts.get("busy_pct")
    if busy is None or busy >= BUSY_PCT_MIN:
        return None
    ranks = f" (mean of {r.ranks} ranks)" if r.ranks > 1 else ""
    return Finding(
        "gpu_busy_low", "high" if busy < BUSY_PCT_MIN / 2 else "medium",
        f"GPU busy below {BUSY_PCT_MIN:.0f}% of step time",
        f"GPU activity covers {busy:.1f}% of the steps' GPU windows{ranks}; the GPU is "
        f"idle {100 - busy:.1f}% of the time.",
        "Find what the GPU waits for in the idle-gap causes below: host-bound gaps mean the "
        "CPU cannot issue work fast enough, sync gaps mean the loop drains the GPU.",
    )


def _launch_bound(r: RunAnalysis) -> Finding | None:
    lo = r.launch
    if lo.empty or "verdict" not in lo:
        return None
    bound = lo[lo["verdict"] == "launch-bound"]
    if bound.empty:
        return None
    wait = float(bound["host_wait_pct"].mean())
    short = float(bound["short_pct"].mean())
    delay = float(bound["median_launch_latency_us"].median())
    queue = float(bound["median_queue_us"].median())
    f = Finding(
        "launch_bound", "high",
        "Steps are launch-bound: the GPU waits on the CPU",
        f"{len(bound)} of {len(lo)} steps launch-bound. In those steps the GPU waited on "
        f"the CPU for {wait:.0f}% of the step; {short:.0f}% "
        f"of kernels ran for less time than their launch call took; median launch latency "
        f"{delay:.1f} us (queue time {queue:.1f} us); {int(bound['kernels'].sum())} kernels "
        f"from {int(bound['launches'].sum())} launch calls.",
        "Launch fewer, bigger kernels: capture the step in a CUDA graph "
        "(torch.compile(mode=\"reduce-overhead\") or torch.cuda.CUDAGraph), or fuse kernels "
        "with torch.compile; a larger batch also amortizes each launch.",
    )
    return qualify(r, f, [int(s) for s in bound["step"]])


def _exposed_comm(r: RunAnalysis) -> Finding | None:
    ov = r.overlap
    if ov.empty or "exposed_comm_pct" not in ov:
        return None
    bad = ov[ov["exposed_comm_pct"].astype(float) > EXPOSED_COMM_PCT_MAX]
    if bad.empty:
        return None
    per = "; ".join(
        f"rank {int(x.rank)}: {float(x.exposed_comm_pct):.0f}% exposed, "
        f"{float(x.overlap_pct):.0f}% of communication overlapped"
        for x in bad.itertuples(index=False)
    )
    skewed = len(ov) > 1 and float(ov["exposed_comm_pct"].min()) < EXPOSED_COMM_PCT_MAX
    advice = ("Overlap communication with compute: DDP bucket_cap_mb / gradient_as_bucket_view, "
              "FSDP forward/backward prefetch, or fewer, larger collectives.")
    if skewed:
        advice += (" Other ranks expose far less: the exposed time here is mostly waiting for "
                   "a slower rank inside the collective, so look for the straggler's extra work.")
    sk = r.skew
    if len(sk) and "last_pct" in sk:
        late = sk[sk["last_pct"].astype(float) >= 75.0]
        per += "".join(
            f"; rank {int(x.rank)} started {float(x.last_pct):.0f}% of collectives last "
            f"(mean lag {float(x.mean_lag_us):,.0f} us)" for x in late.itertuples(index=False)
        )
    return Finding(
        "exposed_comm", "high",
        f"Exposed communication above {EXPOSED_COMM_PCT_MAX:.0f}% of step time",
        per + ".", advice,
    )


def _copies(r: RunAnalysis) -> Finding | None:
    c = r.copies
    if c.empty:
        return None
    nsteps = c.groupby(["rank", "step"]).ngroups
    by = c.groupby("name")[["count", "total_us"]].sum().sort_values("total_us", ascending=False)
    top = ", ".join(f"{n} x{int(v['count'])} ({v['total_us']:.0f} us)" for n, v in
                    by.head(3).iterrows())
    return Finding(
        "host_device_copies", "medium",
        "Host-device copies inside steps",
        f"{int(c['count'].sum())} copies: {top}; {float(c['total_us'].sum()) / 1e3:.2f} ms "
        f"of copies in {nsteps} step(s).",
        "Keep tensors on the GPU across steps; for inputs, use pinned memory with "
        "non_blocking=True (DataLoader(pin_memory=True)) so that copies overlap compute; "
        "avoid .cpu()/.item()/.tolist() inside the step.",
    )


def _syncs(r: RunAnalysis) -> Finding | None:
    step_ms = r.facts.get("step_ms")
    steps = r.facts.get("steps", 1.0)
    idle = r.idle_summary
    sync_idle_pct = 0.0
    if not idle.empty and "cause" in idle:
        dev = idle[(idle["cause"] == "sync") & (idle["stream"] == -1)]
        sync_idle_pct = float(dev["pct"].max()) if len(dev) else 0.0
    host_ms = float(r.syncs["total_us"].sum()) / 1e3 if not r.syncs.empty else 0.0
    host_pct = 100.0 * host_ms / (step_ms * steps * r.ranks) if step_ms else 0.0
    if sync_idle_pct < SYNC_IDLE_PCT_MIN and host_pct < SYNC_HOST_PCT_MIN:
        return None
    calls = ", ".join(f"{x.name} x{int(x.calls)} ({float(x.total_us) / 1e3:.2f} ms)"
                      for x in r.syncs.head(3).itertuples(index=False)) or "no sync API rows"
    return Finding(
        "sync_stalls", "medium" if sync_idle_pct >= 5 or host_pct >= 20 else "low",
        "Synchronizations stall the GPU",
        f"GPU idle caused by synchronization: {sync_idle_pct:.1f}% of step time; host blocked "
        f"in sync calls inside steps: {host_pct:.1f}% ({calls}).",
        "Remove synchronizing calls from the loop: .item(), .cpu(), print(tensor), "
        "torch.cuda.synchronize(), blocking copies; log metrics every N steps instead.",
    )


def _graph_gaps(r: RunAnalysis) -> Finding | None:
    idle = r.idle_summary
    if idle.empty or "cause" not in idle:
        return None
    rows = idle[idle["cause"] == "graph_internal"]
    if rows.empty:
        return None
    worst = rows.loc[rows["pct"].astype(float).idxmax()]
    pct = float(worst["pct"])
    if pct < GRAPH_IDLE_PCT_MIN:
        return None
    gaps, idle_ns = int(worst["gaps"]), int(worst["idle_ns"])
    where = _rank_prefix(r, worst["rank"]) if "rank" in rows else ""
    top = r.idle_gaps
    top = top[top["cause"] == "graph_internal"] if "cause" in top else top.iloc[:0]
    by_next = (top.assign(kernel=top["next_name"].map(lambda n: short_name(str(n))))
               .groupby("kernel", sort=False)["dur"].agg(["count", "max"])
               .sort_values("max", ascending=False, kind="stable").head(3))
    largest = ", ".join(f"{k} ({int(x['count'])} of the {len(top)} longest listed, up to "
                        f"{float(x['max']) / 1e3:.1f} us)" for k, x in by_next.iterrows())
    return Finding(
        "graph_gaps", "high" if pct >= 2 * GRAPH_IDLE_PCT_MIN else "medium",
        "The GPU idles between the nodes of CUDA-graph replays",
        f"{where}GPU idle inside graph replays (cause graph_internal): {pct:.1f}% of the "
        f"steps' GPU windows, {idle_ns / 1e6:.2f} ms in {gaps:,} gaps "
        f"({idle_ns / max(gaps, 1) / 1e3:.2f} us each on average)"
        + (f"; the longest come before {largest}." if largest else "."),
        "A replayed graph still pays a small launch gap per node and waits on its "
        "dependencies: with many short kernels that adds up. Fuse kernels (torch.compile "
        "fuses elementwise chains), make each kernel do more (batch), or capture independent "
        "branches on separate streams so the graph's nodes can overlap.",
    )


def _rank_prefix(r: RunAnalysis, rank: object) -> str:
    return f"rank {int(str(rank))}: " if r.ranks > 1 else ""


def _gemm(r: RunAnalysis) -> Finding | None:
    """GEMM kernels (class ``gemm``) whose roofline row reaches less than the threshold of
    their bound: the same numbers as ``traceforge roofline --by class``."""
    rf = r.roofline
    if rf.by_class.empty or not rf.device:
        return None
    g = rf.by_class[(rf.by_class["class"] == "gemm")
                    & rf.by_class["pct_of_bound"].astype(float).notna()]
    low = g[g["pct_of_bound"].astype(float) < GEMM_BOUND_PCT_MIN]
    if low.empty:
        return None
    parts = []
    for x in low.itertuples(index=False):
        ops = r.gemm[r.gemm["rank"] == x.rank].sort_values("time_us", ascending=False)
        per = "; ".join(
            f"{o.op} {float(o.tflops_per_s):,.1f} TFLOP/s ({float(o.pct_of_bound):.1f}% of its "
            f"{o.bound} bound) over {float(o.time_us) / 1e3:,.2f} ms"
            for o in ops.head(3).itertuples(index=False))
        parts.append(
            f"{_rank_prefix(r, x.rank)}GEMM kernels run at {float(x.tflops_per_s):,.1f} TFLOP/s, "
            f"{float(x.pct_of_bound):.1f}% of their roofline bound, over "
            f"{float(x.time_us) / 1e3:,.2f} ms" + (f" ({per})" if per else ""))
    return Finding(
        "gemm_below_peak", "medium",
        f"GEMMs run below {GEMM_BOUND_PCT_MIN:.0f}% of the device's ceilings",
        f"{rf.device}, dense datasheet peaks: " + "; ".join(parts) + ".",
        "Small or skinny GEMMs leave tensor cores idle: raise the batch size, keep dims "
        "multiples of 64, run in bf16/fp8, or let torch.compile(mode=\"max-autotune\") "
        "pick tiles and fuse epilogues.",
    )


def _below_bound(r: RunAnalysis) -> Finding | None:
    """The ops with the most time at stake against their roofline bound."""
    rf = r.roofline
    stake = roofline_tables.at_stake_pct(rf, AT_STAKE_OPS)
    hot = stake[stake >= AT_STAKE_PCT_MIN]
    if hot.empty:
        return None
    total = rf.totals.set_index("rank")["time_us"].astype(float)
    parts = []
    for rank in hot.index:
        ops = rf.below[rf.below["rank"] == rank].head(AT_STAKE_OPS)
        per = "; ".join(
            f"{o.op} at {float(o.pct_of_bound):.1f}% of its {o.bound} bound "
            f"({float(o.tflops_per_s):,.1f} TFLOP/s, {float(o.tb_per_s):,.2f} TB/s): "
            f"{float(o.saved_us) / 1e3:,.2f} ms of its {float(o.time_us) / 1e3:,.2f} ms at stake"
            for o in ops.itertuples(index=False))
        parts.append(f"{_rank_prefix(r, rank)}{per} (GPU time {total[rank] / 1e3:,.2f} ms)")
    return Finding(
        "ops_below_bound", "medium" if float(hot.max()) >= 2 * AT_STAKE_PCT_MIN else "low",
        "Ops run far below their roofline bound",
        f"{rf.device or 'unknown device'}; time at stake = what running at "
        f"{rf.target_pct:g}% of the bound would save: " + "; ".join(parts) + ".",
        "Memory-bound ops: fuse them (torch.compile) so that data is read once; "
        "compute-bound ops: larger batches and tiles, bf16/fp8, dims multiples of 64. "
        "'traceforge roofline --by kernel' shows which kernels of each op lose the time.",
    )


def _comm_below_link(r: RunAnalysis) -> Finding | None:
    """Large collectives far below the link (synchronized time: several ranks only, since
    one rank's kernel time counts its wait for the others)."""
    t = r.comm
    if t.empty or r.ranks < 2 or "ceiling_pct" not in t:
        return None
    bad = t[(t["min_bytes"] >= comm_table.LARGE_BYTES)
            & (t["ceiling_pct"] < comm_table.SLOW_PCT)]
    if bad.empty:
        return None
    per = "; ".join(f"{x.kind} {x.size}+: median busbw {float(x.busbw_median_gbps):.0f} "
                    f"GB/s, {float(x.ceiling_pct):.0f}% of {float(x.ceiling_gbps):g} GB/s "
                    f"({int(x.count)} collectives)" for x in bad.itertuples(index=False))
    return Finding(
        "comm_below_link", "medium",
        f"Large collectives below {comm_table.SLOW_PCT:.0f}% of the link's bandwidth",
        per + " (nccl-tests busbw on synchronized time).",
        "Check the transport NCCL/RCCL picked (NCCL_DEBUG=INFO: NVLink/P2P or SHM/PCIe, "
        "NIC for inter-node groups), the algorithm and protocol, and whether compute "
        "kernels running beside the collectives take its SMs/CUs; compare with nccl-tests "
        "on the same machine ('traceforge calibrate --comm').",
    )


RULES: tuple[Callable[[RunAnalysis], Finding | None], ...] = (
    _low_busy, _launch_bound, _exposed_comm, _copies, _syncs, _gemm, _below_bound,
    first_step_outlier,
    _comm_below_link,
    _graph_gaps,
)


def findings(runs: RunAnalysis | Sequence[RunAnalysis]) -> list[Finding]:
    """Every rule's finding for the runs, most severe first.

    A rule that fires for several runs gives one finding naming them, with each run's
    evidence, at the most severe of their severities.
    """
    rs = [runs] if isinstance(runs, RunAnalysis) else list(runs)
    by_rule: dict[str, list[Finding]] = {}
    for run in rs:
        for rule in RULES:
            f = rule(run)
            if f is not None and f.rule != "launch_bound":
                f = qualify(run, f)  # launch_bound qualifies itself, by its steps
            if f is not None:
                by_rule.setdefault(f.rule, []).append(replace(f, runs=(run.label,)))
    out = []
    for items in by_rule.values():
        if len(items) == 1:
            out.append(items[0])
            continue
        sev = min((f.severity for f in items), key=SEVERITIES.index)
        evidence = " ".join(f"[{f.runs[0]}] {f.evidence}" for f in items)
        out.append(replace(items[0], severity=sev, evidence=evidence,
                           runs=tuple(f.runs[0] for f in items)))
    return sorted(out, key=lambda f: SEVERITIES.index(f.severity))


def findings_frame(items: list[Finding]) -> pd.DataFrame:
    """Findings as a table: runs, severity, rule, title, evidence, advice."""
    cols = ["runs", "severity", "rule", "title", "evidence", "advice"]
    rows = [[", ".join(f.runs), f.severity, f.rule, f.title, f.evidence, f.advice]
            for f in items]
    df: pd.DataFrame = pd.DataFrame(rows, columns=cols)
    return df
