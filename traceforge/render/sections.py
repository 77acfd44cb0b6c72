"""The report sections both report formats share: which columns, in which units, and the
lines that say what each number divides. Formatting only: every value comes from a
:class:`~traceforge.report.analysis.RunAnalysis` table as the analyzers gave it."""

from __future__ import annotations

from typing import cast

import pandas as pd

from traceforge.report.analysis import RunAnalysis

#: Rows of the long roofline tables a report shows.
ROWS = 15

HFU_NOTE = ("HFU (hardware FLOPs utilization) = FLOPs of the step's ops (shapes from the "
            "trace) / (step GPU window x dense datasheet peak of the step's dominant dtype); "
            "the same rows as 'traceforge mfu'. MFU proper needs the model's FLOPs: "
            "'traceforge mfu --model-flops F' or '--params N --tokens T'.")
NEUTRAL_NOTE = ("Families mapped to what they are on either vendor (cuBLAS sm90_xmma and "
                "hipBLASLt Cijk kernels are both library_gemm; FlashAttention and AOTriton "
                "both fused_attention; NCCL and RCCL both collectives), so that runs line up "
                "row by row; library: what ran it here.")


def _pct(v: float) -> str:
    return f"{v:.1f}" if abs(v) >= 10 else f"{v:.2f}"


def hfu_card(r: RunAnalysis) -> tuple[str, str, str] | None:
    """(label, value, what it divides) of the run card's FLOPs utilization, or None."""
    lo, hi = r.facts.get("hfu_min_pct"), r.facts.get("hfu_max_pct")
    if lo is None or hi is None:
        return None
    lo_s, hi_s = _pct(lo), _pct(hi)
    value = f"{lo_s}%" if lo_s == hi_s else f"{lo_s}-{hi_s}%"
    over = "steps and ranks" if r.ranks > 1 else "steps"
    label = "HFU per step" + (f" (range over {over})" if value.count("-") else "")
    what = f"step FLOPs / (GPU window x {r.roofline.peaks()} peak)"
    return label, value, what


def run_time_cards(r: RunAnalysis) -> list[tuple[str, str, str]]:
    """(label, value, what) of the run's step time (traceforge.step_time.run_step_time),
    its throughput and the profiler's overhead, for runs with a capture summary."""
    info = r.run_info
    lat = info.get("latency_ms")
    if lat is None:
        return []
    out = [("run step time", f"{lat:,.2f} ms", str(info.get("source", "")))]
    for key, unit in (("samples_per_s", "samples/s"), ("tokens_per_s", "tokens/s")):
        if info.get(key):
            out.append((unit, f"{info[key]:,.1f}", "per GPU, at the run step time"))
    if info.get("overhead_pct") is not None and info.get("profiled_ms") is not None:
        out.append(("profiled step", f"{info['profiled_ms']:,.2f} ms",
                    f"median of the recorded steps: profiler overhead "
                    f"{info['overhead_pct']:+.1f}%"))
    return out


def roofline_lines(r: RunAnalysis) -> list[str]:
    """The ceilings used and each rank's totals, worded as ``traceforge roofline`` does."""
    rf = r.roofline
    lines = [f"Ceilings: {rf.device}, dense datasheet peaks (source: {rf.device_source})."
             if rf.device else "Ceilings: none (unknown device): achieved rates only."]
    for x in rf.totals.to_dict("records"):
        who = f"Rank {int(x['rank'])}: t" if r.ranks > 1 else "T"
        saved = ("unknown time (no ceilings)" if pd.isna(x["saved_us"])
                 else f"{float(x['saved_us']):,.0f} us")
        lines.append(f"{who}otal GPU time {float(x['time_us']):,.0f} us; modelled "
                     f"{float(x['modelled_us']):,.0f} us; unmodelled "
                     f"{float(x['unmodelled_us']):,.0f} us; at {rf.target_pct:g}% of every "
                     f"bound {saved} would be saved.")
    return lines


def below(r: RunAnalysis) -> pd.DataFrame:
    return r.roofline.below


def roofline_ops(r: RunAnalysis) -> pd.DataFrame:
    return r.roofline.by_op


def roofline_classes(r: RunAnalysis) -> pd.DataFrame:
    return r.roofline.by_class


def mfu(r: RunAnalysis) -> pd.DataFrame:
    return r.roofline.mfu


def path_title(r: RunAnalysis) -> str:
    step = r.critical_path.step
    return "Critical path of " + ("the trace (no steps)" if step < 0 else f"step {step}"
                                  + (" (the last)" if r.facts.get("steps", 0) > 1 else ""))


def path_lines(r: RunAnalysis) -> list[str]:
    """The path's length per step, and where it ran."""
    out = []
    for x in r.critical_path.length.to_dict("records"):
        on = (f" (rank {int(x['rank'])}, whose window ends last; the path runs on "
              f"{int(x['ranks_crossed'])} rank(s))" if r.ranks > 1 else "")
        ms = int(x["length_ns"]) / 1e6
        out.append(f"Path length {ms:,.3f} ms = the step's GPU window{on}; the same as "
                   f"'traceforge critical-path --step {int(x['step'])}'."
                   if int(x["step"]) >= 0 else
                   f"Path length {ms:,.3f} ms = the trace's GPU window.")
    return out


def _ms(df: pd.DataFrame, cols: tuple[str, ...]) -> pd.DataFrame:
    out = df.copy()
    for c in cols:
        if c in out.columns:
            out[c] = out[c].astype(float) / 1e6
    return cast("pd.DataFrame", out.rename(columns={c: c[:-2] + "ms" for c in cols}))


def path_bar(r: RunAnalysis) -> pd.DataFrame:
    return _ms(r.critical_path.bar, ("ns",))


def path_what_if(r: RunAnalysis) -> pd.DataFrame:
    return _ms(r.critical_path.what_if, ("length_ns", "new_length_ns", "saved_ns"))


def path_top(r: RunAnalysis) -> pd.DataFrame:
    from traceforge.analyzers.names.kernel_names import short_name

    top = r.critical_path.top
    if "name" in top.columns and len(top):
        top = top.assign(name=[short_name(n) if len(n) > 60 else n
                               for n in top["name"].astype(str)])
    return _ms(top, ("ns",))


NO_MEMORY = ("No memory events in the trace: `traceforge capture --memory` records them "
             "(torch.profiler profile_memory=True).")
MEMORY_NOTE = ("Allocated: the allocator's Total Allocated after each event (or, where the "
               "trace records only sizes, the growth since the window began: totals = "
               "growth); unused at peak = reserved minus allocated at the peak; the same "
               "numbers as 'traceforge memory'.")


def _mib(df: pd.DataFrame) -> pd.DataFrame:
    """``*_bytes`` columns as MiB (``*_mib``), ``*_at_ns`` as ms, for report tables."""
    out = df.copy()
    for c in list(out.columns):
        if c.endswith("_bytes"):
            out[c] = out[c].astype(float) / 2**20
            out = out.rename(columns={c: c[:-6] + "_mib"})
        elif c.endswith("_at_ns"):
            out[c] = out[c].astype(float) / 1e6
            out = out.rename(columns={c: c[:-3] + "_ms"})
    return cast(pd.DataFrame, out)


def memory_devices(r: RunAnalysis) -> pd.DataFrame:
    cols = ["rank", "device", "totals", "peak_allocated_bytes", "peak_allocated_at_ns",
            "reserved_at_peak_bytes", "unused_at_peak_bytes", "peak_reserved_bytes",
            "allocs", "ooms"]
    d = r.memory.devices
    return _mib(d[[c for c in cols if c in d.columns]])


def memory_steps(r: RunAnalysis) -> pd.DataFrame:
    return _mib(r.memory.steps.drop(columns=["peak_at_ns", "events"], errors="ignore"))


def memory_ops(r: RunAnalysis) -> pd.DataFrame:
    return _mib(r.memory.ops)
