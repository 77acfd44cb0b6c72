"""Roofline: how far each op, kernel and kernel class runs from the device's ceilings.

Every GPU activity gets the work (FLOPs, bytes, dtype) of the op call that launched it
(:mod:`traceforge.analyzers.flops`); an op call that launched several kernels shares its
work among them in proportion to their durations. Device-to-device copies and memsets
carry their own byte counts. An activity's *ideal time* is the roofline's lower bound
``max(FLOPs / peak, bytes / bandwidth)`` for its dtype; it is compute-bound when the first
term is the larger (its intensity is past the dtype's ridge point ``peak / bandwidth``).

* ``pct_of_bound`` = ideal time / measured time: the share of the ceiling it reaches
  (= achieved TFLOP/s over peak when compute-bound, TB/s over bandwidth when memory-bound).
* ``saved_us`` = what running at ``target_pct`` % of the ceiling would save:
  ``max(0, time - ideal / target)`` summed over activities.
* Activities whose work is unknown (no launching op, no shapes, an op outside the model)
  count as *unmodelled time*: shown in every table, never dropped.

Peaks come from the shipped datasheet table (:mod:`traceforge.analyzers.devices`) and,
when given, from a measured peaks file (``traceforge calibrate``): ``pct_of_measured`` and
``saved_measured_us`` use those. Which op launched an activity and which step it belongs
to come from the shared timeline model, in :func:`timeline` only.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, cast

import numpy as np
import pandas as pd

from traceforge.analyzers.devices import (
    DevicePeaks,
    MeasuredPeaks,
    device_peaks,
    match_device,
)
from traceforge.analyzers.flops import DTYPES, TENSOR_FAMILIES, Work, op_work, unknown
from traceforge.analyzers.kernel_names import short_name
from traceforge.analyzers.op_calls import op_calls
from traceforge.analyzers.timeline import timeline as shared_timeline
from traceforge.errors import AnalysisError, UsageError
from traceforge.model import Tables, Trace

#: Default ``target_pct``: the share of the ceiling a well-tuned kernel reaches.
TARGET_PCT = 80.0
#: ``by`` values of :func:`roofline`.
BY: tuple[str, ...] = ("op", "kernel", "class")
#: An fp32 matrix product faster than this multiple of the FP32 (non-tensor) peak must
#: have run on TF32 tensor cores (torch.backends.cuda.matmul.allow_tf32).
TF32_EVIDENCE = 1.05

_METRICS = ("time_us", "modelled_pct", "gflops", "gbytes", "intensity", "tflops_per_s",
            "tb_per_s", "dtype", "ridge", "bound", "pct_of_bound", "pct_of_measured",
            "saved_us", "saved_measured_us")
#: Columns of :attr:`RooflineReport.table` per ``by``.
COLUMNS: dict[str, tuple[str, ...]] = {
    "op": ("op", "calls", "kernels", *_METRICS),
    "kernel": ("kernel", "op", "op_share_pct", "kernels", *_METRICS, "full_name"),
    "class": ("class", "kernels", *_METRICS),
}


def timeline(trace: Trace) -> tuple[pd.DataFrame, pd.DataFrame]:
    """GPU activities with ``dur`` and ``step``, and the step windows.

    The one place this module touches the shared timeline model
    (:func:`traceforge.analyzers.timeline.timeline`: launching op in ``op_row``/``op_name``,
    ``step`` membership and the steps' GPU ``windows``).
    """
    tl = shared_timeline(trace)
    acts = tl.activity
    return acts.assign(dur=(acts["end"] - acts["ts"]).astype(np.int64)), tl.windows


def select(acts: pd.DataFrame, win: pd.DataFrame, steps: Sequence[int] | None,
           path: str = "") -> tuple[pd.DataFrame, pd.DataFrame]:
    """Activities and windows of the given steps (all when None); unknown steps raise."""
    if not steps:
        return acts, win
    have = set(win["step"].tolist())
    missing = sorted(set(steps) - have)
    if missing:
        listed = ", ".join(str(s) for s in sorted(have) if s >= 0) or "none"
        raise AnalysisError(f"{path or 'trace'}: no step {missing[0]} (steps: {listed})")
    return acts[acts["step"].isin(list(steps))], win[win["step"].isin(list(steps))]


# -- ceilings ----------------------------------------------------------------------------
def resolve_device(trace: Trace, device: str | DevicePeaks | None,
                   acts: pd.DataFrame | None = None) -> tuple[DevicePeaks | None, list[str]]:
    """The datasheet peaks for a trace: ``device`` (a key, a name, or peaks) or its metadata.

    Never raises: an unknown device comes back as None with a note saying so.
    """
    if isinstance(device, DevicePeaks):
        return device, []
    if device:
        try:
            return device_peaks(device), []
        except UsageError as e:
            return None, [f"--device: {e}; showing achieved rates only"]
    devs = {d.id: d for d in trace.meta.devices}
    if not devs:
        return None, ["The trace names no GPU model: pass --device (e.g. h100-sxm) for "
                      "ceilings; showing achieved rates only."]
    busiest = None
    if acts is not None and len(acts):
        busiest = int(cast(int, acts.groupby("device")["dur"].sum().idxmax()))
    dev = devs.get(busiest if busiest is not None else -1) or next(iter(devs.values()))
    notes = []
    names = {d.name for d in devs.values()}
    if len(names) > 1:
        notes.append(f"Devices differ ({', '.join(sorted(names))}); ceilings of "
                     f"device {dev.id} ({dev.name}), which ran the most GPU time.")
    peaks = match_device(dev)
    if peaks is None:
        notes.append(f"Device {dev.name!r} is not in traceforge's table: showing achieved "
                     "rates only (pass --device KEY, or --peaks from traceforge calibrate).")
    return peaks, notes


def _ceiling_key(family: str, dtype: str, peaks: dict[str, float], fast: bool) -> str | None:
    """The peaks key whose ceiling applies to work of ``family`` in ``dtype``.

    ``fast``: the work ran faster than the FP32 non-tensor peak allows (see TF32_EVIDENCE).
    """
    if family in TENSOR_FAMILIES:
        if dtype in ("bf16", "fp16", "fp8", "fp4", "int8"):
            return dtype
        if dtype == "fp64":
            return "fp64_tensor" if "fp64_tensor" in peaks else "fp64"
        if dtype == "fp32":
            if "fp32_tensor" in peaks:
                return "fp32_tensor"
            if "tf32" in peaks and (family == "conv" or fast):
                return "tf32"  # cuDNN allows TF32 by default; matmuls only when this fast
            return "fp32"
        return None
    return "fp64" if dtype == "fp64" else "fp32"


def measured_key(key: str) -> str:
    """The peaks-file key measuring a ceiling key (calibrate's fp32 matmul is AMD's
    fp32 matrix rate)."""
    return "fp32" if key == "fp32_tensor" else key


def _ceilings(k: pd.DataFrame, device: DevicePeaks | None,
              measured: MeasuredPeaks | None) -> pd.DataFrame:
    """Per modelled activity: ceiling key, peak TFLOP/s and TB/s, datasheet and measured."""
    n = len(k)
    out = {c: np.full(n, np.nan) for c in ("peak", "bw", "mpeak", "mbw")}
    key = np.full(n, "", dtype=object)
    dsheet = dict(device.tflops) if device else {}
    known = dsheet or (dict(measured.tflops) if measured else {})
    dur = k["dur"].to_numpy().astype(float)
    with np.errstate(divide="ignore", invalid="ignore"):
        rate = np.where(dur > 0, k["flops"].to_numpy(dtype=float) / dur / 1e3, 0.0)
    # Only the TF32 test depends on the rate: rows are classed by (family, dtype, fast).
    fast = rate > known.get("fp32", math.inf) * TF32_EVIDENCE
    combos = pd.DataFrame({"family": k["family"].to_numpy(), "dtype": k["dtype"].to_numpy(),
                           "fast": fast, "m": k["modelled"].to_numpy()})
    for (fam, dt, fst), idx in combos[combos["m"]].groupby(
            ["family", "dtype", "fast"]).groups.items():
        kk = _ceiling_key(str(fam), str(dt), known, bool(fst))
        if kk is None:
            continue
        rows = combos.index.get_indexer(idx)
        key[rows] = kk
        if device is not None:
            out["peak"][rows] = device.peak(kk) or np.nan
            out["bw"][rows] = device.hbm_tb_s
        mp = measured.peak(measured_key(kk)) if measured else None
        # Ceilings calibrate does not measure (vector units, fp64) stay the datasheet's.
        out["mpeak"][rows] = mp if mp else out["peak"][rows]
        mb = measured.memory_tb_s if measured else None
        out["mbw"][rows] = mb if mb else out["bw"][rows]
    res: pd.DataFrame = pd.DataFrame(out, index=k.index)
    res["ceiling"] = key
    if measured is None:
        res[["mpeak", "mbw"]] = np.nan
    return res


def _ideal(flops: np.ndarray, nbytes: np.ndarray, peak: np.ndarray,
           bw: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Compute-time and memory-time lower bounds in ns (NaN where a ceiling is missing)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        comp = np.where(flops > 0, flops / (peak * 1e3), 0.0)
        mem = np.where(nbytes > 0, nbytes / (bw * 1e3), 0.0)
    comp = np.where(np.isnan(peak) & (flops > 0), np.nan, comp)
    mem = np.where(np.isnan(bw) & (nbytes > 0), np.nan, mem)
    return comp, mem


# -- work per activity -------------------------------------------------------------------
def _list_dtype(args: list[dict[str, Any]], calls: np.ndarray) -> str | None:
    """The most common floating tensor type among the ops' inputs (for TensorList args):
    ``args`` are the distinct calls' arguments, ``calls`` how many op calls made each."""
    seen: Counter[str] = Counter()
    for a, n in zip(args, calls.tolist(), strict=True):
        for t in a.get("Input type") or []:
            if t in DTYPES and DTYPES[t][0] in ("bf16", "fp16", "fp32", "fp64"):
                seen[t] += n
    return seen.most_common(1)[0][0] if seen else None


#: Ops that stand for a whole torch.compile graph; their kernels have no per-op shapes.
_COMPILED_OPS = ("Torch-Compiled Region", "CompiledFunction", "## Call CompiledFxGraph")
_COMPILED = "compiled region: no per-op shapes recorded (MFU: --flops-from an eager trace)"
_COMM = "communication: bound by the interconnect, not HBM (see traceforge overlap)"


def _copy_work(name: str, kind: str, args: dict[str, Any]) -> Work:
    nbytes = args.get("bytes")
    if not isinstance(nbytes, (int, float)) or isinstance(nbytes, bool) or nbytes < 0:
        return unknown(f"{kind} without a byte count")
    if kind == "memset":
        return Work(0.0, float(nbytes), "", "memset")
    if "PtoP" not in name and ("DtoD" in name or "Device-to-Device" in name
                               or "Device -> Device" in name):
        return Work(0.0, 2.0 * nbytes, "", "copy")  # read and written in the same HBM
    return unknown("host-device or peer copy (bound by the link, not HBM)")


#: The columns :func:`activity_work` adds.
WORK_COLUMNS = ("flops", "bytes", "dtype", "family", "modelled", "reason", "op_share",
                "op_kernels")


def activity_work(trace: Trace, acts: pd.DataFrame) -> tuple[pd.DataFrame, list[str]]:
    """``acts`` (rows of the trace's timeline activity) with the work each activity did:
    flops, bytes, dtype, family, modelled, reason, op_share (its share of its op call's
    work) and op_kernels.

    The work of every activity of the trace is worked out once and memoized on the trace
    (roofline, MFU and the report each ask for it; decoding the ops' args is most of the
    cost), and ``acts`` takes its rows from it."""
    full, notes = trace.derived("roofline.activity_work",
                                lambda: _work_of(trace, timeline(trace)[0]))
    pos = pd.Index(full["row"].to_numpy()).get_indexer(acts["row"].to_numpy())
    if (pos < 0).any():  # not the timeline's rows: work them out on their own
        return _work_of(trace, acts)
    return acts.assign(**{c: full[c].to_numpy()[pos] for c in WORK_COLUMNS}), list(notes)


def _work_of(trace: Trace, acts: pd.DataFrame) -> tuple[pd.DataFrame, list[str]]:
    notes: list[str] = []
    n = len(acts)
    flops, nbytes = np.full(n, np.nan), np.full(n, np.nan)
    dtype, family = np.full(n, "", dtype=object), np.full(n, "", dtype=object)
    reason = np.full(n, "", dtype=object)
    share, per_op = np.full(n, np.nan), np.zeros(n, dtype=np.int64)
    kind = acts["kind"].to_numpy()
    is_k = kind == "kernel"
    op_row = acts["op_row"].to_numpy()
    cls = acts["cls"].to_numpy()
    dur = acts["dur"].to_numpy().astype(float)
    if is_k.any():
        rows = np.unique(op_row[is_k & (op_row >= 0)])
        calls = op_calls(trace, rows)
        ld = _list_dtype(calls.args, calls.counts)
        per_call = [op_work(nm, a, list_dtype=ld)
                    for nm, a in zip(calls.names, calls.args, strict=True)]
        works = dict(zip(rows.tolist(), map(per_call.__getitem__, calls.codes.tolist()),
                         strict=True))
        kk = pd.DataFrame({"op_row": op_row[is_k], "dur": dur[is_k]})
        g = kk.groupby("op_row")["dur"]
        tot = g.transform("sum").to_numpy()
        cnt = g.transform("count").to_numpy()
        sh = np.where(tot > 0, kk["dur"].to_numpy() / np.where(tot > 0, tot, 1), 1.0 / cnt)
        idx = np.flatnonzero(is_k)
        for j, i in enumerate(idx):
            r = int(op_row[i])
            if r < 0:
                reason[i] = _COMM if cls[i] == "communication" else "no launching op in the trace"
                continue
            w = works[r]
            share[i], per_op[i] = sh[j], cnt[j]
            if not w.known:
                reason[i] = (_COMM if cls[i] == "communication" else _COMPILED
                             if str(acts["op_name"].iat[int(i)]).startswith(_COMPILED_OPS)
                             else w.reason)
                continue
            flops[i], nbytes[i] = w.flops * sh[j], w.bytes * sh[j]
            dtype[i], family[i] = w.dtype, w.family
        if any(w.known and w.family == "copy" for w in works.values()) and ld:
            lists = [nm for nm in set(calls.names) if nm in ("aten::cat", "aten::stack")]
            if lists:
                notes.append(f"{', '.join(sorted(lists))}: tensor-list dtypes are not "
                             f"recorded; assumed {ld!r}, the trace's most common.")
    cp = np.flatnonzero(~is_k)
    if len(cp):
        ccodes, cuniq = trace.distinct_args(acts["row"].to_numpy()[cp], ("bytes",))
        for i, a in zip(cp, map(cuniq.__getitem__, ccodes.tolist()), strict=True):
            w = _copy_work(str(acts["name"].iat[int(i)]), str(kind[i]), a)
            reason[i] = w.reason
            if w.known:
                flops[i], nbytes[i], family[i] = w.flops, w.bytes, w.family
            share[i], per_op[i] = 1.0, 1
    out = acts.assign(flops=flops, bytes=nbytes, dtype=dtype, family=family,
                      modelled=reason == "", reason=reason, op_share=share,
                      op_kernels=per_op)
    return out, notes


# -- the report --------------------------------------------------------------------------
@dataclass(frozen=True)
class RooflineReport(Tables):
    """:func:`roofline`'s result.

    ``table``: one row per op / kernel / class (:data:`COLUMNS`), by GPU time.
    ``kernels``: one row per GPU activity (``row`` = event row), with its work, ceilings,
    achieved ``tflops_per_s``/``tb_per_s``, ``bound``, ``pct_of_bound`` and ``saved_ns``.
    ``totals``: time_ns, modelled_ns, unmodelled_ns, flops, bytes, saved_ns,
    saved_measured_ns. ``unmodelled``: op, reason, kernels, time_us, pct (of all time).
    """

    table: pd.DataFrame
    kernels: pd.DataFrame
    by: str
    device: DevicePeaks | None
    measured: MeasuredPeaks | None
    target_pct: float
    totals: dict[str, float]
    unmodelled: pd.DataFrame
    notes: tuple[str, ...] = field(default=())


def with_ceilings(k: pd.DataFrame, device: DevicePeaks | None,
                  measured: MeasuredPeaks | None, target: float) -> pd.DataFrame:
    """:func:`activity_work`'s frame with ceilings, achieved rates, ideal and saved time
    (``target``: the share of the ceiling, 0-1, that saved time aims at)."""
    c = _ceilings(k, device, measured)
    f = np.nan_to_num(k["flops"].to_numpy(dtype=float))
    b = np.nan_to_num(k["bytes"].to_numpy(dtype=float))
    dur = k["dur"].to_numpy().astype(float)
    m = k["modelled"].to_numpy()
    comp, mem = _ideal(f, b, c["peak"].to_numpy(), c["bw"].to_numpy())
    mcomp, mmem = _ideal(f, b, c["mpeak"].to_numpy(), c["mbw"].to_numpy())
    ideal = np.where(m, np.fmax(comp, mem), np.nan)
    ideal = np.where(np.isnan(comp) | np.isnan(mem), np.nan, ideal)
    mideal = np.where(m & ~np.isnan(mcomp) & ~np.isnan(mmem), np.fmax(mcomp, mmem), np.nan)
    with np.errstate(divide="ignore", invalid="ignore"):
        out: pd.DataFrame = k.assign(
            ceiling=c["ceiling"], peak_tflops=c["peak"], hbm_tb_s=c["bw"],
            measured_tflops=c["mpeak"], measured_tb_s=c["mbw"],
            tflops_per_s=np.where(m & (dur > 0), f / dur / 1e3, np.nan),
            tb_per_s=np.where(m & (dur > 0), b / dur / 1e3, np.nan),
            intensity=np.where(m & (b > 0), f / b, np.nan),
            compute_ns=np.where(m, comp, np.nan), memory_ns=np.where(m, mem, np.nan),
            ideal_ns=ideal, ideal_measured_ns=mideal,
            bound=np.where(np.isnan(ideal), "", np.where(comp >= mem, "compute", "memory")),
            pct_of_bound=np.where(dur > 0, 100.0 * ideal / dur, np.nan),
            pct_of_measured=np.where(dur > 0, 100.0 * mideal / dur, np.nan),
            saved_ns=np.fmax(dur - ideal / target, 0.0),
            saved_measured_ns=np.fmax(dur - mideal / target, 0.0),
        )
    # fmax treats NaN as missing: keep NaN where the ideal is unknown.
    out.loc[np.isnan(ideal), "saved_ns"] = np.nan
    out.loc[np.isnan(mideal), "saved_measured_ns"] = np.nan
    return out


def _dominant(k: pd.DataFrame, key: str, col: str, weight: pd.Series) -> pd.Series:
    """Per group, the value of ``col`` carrying the most ``weight`` ("" when none)."""
    w = pd.DataFrame({key: k[key], col: k[col], "w": weight})
    w = w[(w[col] != "") & (w["w"] > 0)]
    if w.empty:
        return pd.Series(dtype=object)
    s = w.groupby([key, col], sort=False, observed=True)["w"].sum().reset_index()
    s = s.sort_values("w", ascending=False, kind="stable").drop_duplicates(key)
    res: pd.Series = s.set_index(key)[col]
    return res


def _group(k: pd.DataFrame, key: str, device: DevicePeaks | None) -> pd.DataFrame:
    """Aggregate activities by ``key`` into the roofline columns."""
    if k.empty:
        empty: pd.DataFrame = pd.DataFrame()
        return empty
    m = k["modelled"].to_numpy()
    dur = k["dur"].to_numpy().astype(float)
    z = pd.DataFrame({
        key: k[key].to_numpy(), "time": dur, "n": 1, "mod": np.where(m, dur, 0.0),
        "nmod": m.astype(np.int64),
        "fl": np.where(m, k["flops"].to_numpy(dtype=float), 0.0),
        "by": np.where(m, k["bytes"].to_numpy(dtype=float), 0.0),
        "comp": np.where(m, k["compute_ns"].to_numpy(dtype=float), 0.0),
        "mem": np.where(m, k["memory_ns"].to_numpy(dtype=float), 0.0),
        "ideal": np.where(m, k["ideal_ns"].to_numpy(dtype=float), 0.0),
        "noideal": (m & k["ideal_ns"].isna().to_numpy()).astype(np.int64),
        "mideal": np.where(m, k["ideal_measured_ns"].to_numpy(dtype=float), 0.0),
        "nomideal": (m & k["ideal_measured_ns"].isna().to_numpy()).astype(np.int64),
        "saved": np.where(m, k["saved_ns"].to_numpy(dtype=float), 0.0),
        "msaved": np.where(m, k["saved_measured_ns"].to_numpy(dtype=float), 0.0),
    })
    g = z.groupby(key, sort=False, observed=True).sum()
    calls = k[k["op_row"] >= 0].groupby(key, sort=False, observed=True)["op_row"].nunique()
    mod_w = pd.Series(np.where(m, dur, 0.0), index=k.index)
    dtype = _dominant(k, key, "dtype", mod_w)
    ceiling = _dominant(k, key, "ceiling", mod_w)
    has = (g["nmod"] > 0) & (g["noideal"] == 0)
    mhas = (g["nmod"] > 0) & (g["nomideal"] == 0)
    mod = g["mod"]
    ck = ceiling.reindex(g.index).fillna("")
    with np.errstate(divide="ignore", invalid="ignore"):
        out = pd.DataFrame({
            key: g.index.to_numpy(),
            "calls": calls.reindex(g.index).fillna(0).astype(np.int64).to_numpy(),
            "kernels": g["n"].to_numpy(),
            "time_us": g["time"].to_numpy() / 1e3,
            "modelled_pct": np.where(g["time"] > 0, 100.0 * mod / g["time"].where(
                g["time"] > 0, 1), np.where(g["nmod"] > 0, 100.0, 0.0)),
            "gflops": np.where(g["nmod"] > 0, g["fl"] / 1e9, np.nan),
            "gbytes": np.where(g["nmod"] > 0, g["by"] / 1e9, np.nan),
            "intensity": np.where(g["by"] > 0, g["fl"] / g["by"], np.nan),
            "tflops_per_s": np.where(mod > 0, g["fl"] / mod / 1e3, np.nan),
            "tb_per_s": np.where(mod > 0, g["by"] / mod / 1e3, np.nan),
            "dtype": dtype.reindex(g.index).fillna("").to_numpy(),
            "ridge": [(device.ridge(c) or math.nan) if device and c and f > 0 else math.nan
                      for c, f in zip(ck, g["fl"], strict=True)],
            "bound": np.where(has, np.where(g["comp"] >= g["mem"], "compute", "memory"), ""),
            "pct_of_bound": np.where(has & (mod > 0), 100.0 * g["ideal"] / mod, np.nan),
            "pct_of_measured": np.where(mhas & (mod > 0), 100.0 * g["mideal"] / mod, np.nan),
            "saved_us": np.where(has, g["saved"] / 1e3, np.nan),
            "saved_measured_us": np.where(mhas, g["msaved"] / 1e3, np.nan),
        })
    res: pd.DataFrame = out.sort_values(["time_us", key], ascending=[False, True],
                                        kind="stable").reset_index(drop=True)
    return res


def _table(k: pd.DataFrame, by: str, device: DevicePeaks | None) -> pd.DataFrame:
    if by == "op":
        t = _group(k.assign(op=k["op_name"].where(k["op_name"] != "", "(no op)")), "op", device)
    elif by == "class":
        t = _group(k.assign(**{"class": k["cls"]}), "class", device)
    else:
        t = _group(k.assign(kernel=k["name"]), "kernel", device)
        if not t.empty:
            top_op = (k.assign(op=k["op_name"].where(k["op_name"] != "", "(no op)"))
                      .groupby(["name", "op"])["dur"].sum().reset_index()
                      .sort_values("dur", ascending=False).drop_duplicates("name")
                      .set_index("name")["op"])
            share = k.groupby("name")["op_share"].mean()
            t["full_name"] = t["kernel"]
            t["op"] = t["kernel"].map(top_op)
            t["op_share_pct"] = 100.0 * t["kernel"].map(share)
            t["kernel"] = t["kernel"].map(short_name)
    if t.empty:
        t = pd.DataFrame({c: pd.Series([], dtype=object) for c in COLUMNS[by]})
    res: pd.DataFrame = t[list(COLUMNS[by])]
    return res


def _unmodelled(k: pd.DataFrame, total_ns: float) -> pd.DataFrame:
    u = k[~k["modelled"]]
    cols = ["op", "reason", "kernels", "time_us", "pct"]
    if u.empty:
        none: pd.DataFrame = pd.DataFrame({c: pd.Series([], dtype=object) for c in cols})
        return none
    u = u.assign(op=u["op_name"].where(u["op_name"] != "", "(no op)"))
    g = u.groupby(["op", "reason"])["dur"].agg(["count", "sum"]).reset_index()
    g = g.rename(columns={"count": "kernels", "sum": "time_ns"})
    g["time_us"] = g["time_ns"] / 1e3
    g["pct"] = 100.0 * g["time_ns"] / total_ns if total_ns else math.nan
    res: pd.DataFrame = g.sort_values("time_ns", ascending=False)[cols].reset_index(drop=True)
    return res


def measured_note(measured: MeasuredPeaks | None, device: DevicePeaks | None,
                  trace: Trace) -> list[str]:
    """Notes when a peaks file was measured on another GPU model than the trace's."""
    if measured is None or not measured.device:
        return []
    names = {d.name for d in trace.meta.devices}
    if names and measured.device not in names:
        return [f"Peaks file measured on {measured.device!r}; the trace ran on "
                f"{', '.join(sorted(names))}."]
    return []


def roofline(trace: Trace, *, by: str = "op", steps: Sequence[int] | None = None,
             device: str | DevicePeaks | None = None, peaks: MeasuredPeaks | None = None,
             target_pct: float = TARGET_PCT) -> RooflineReport:
    """Achieved TFLOP/s and TB/s per op (``by="op"``), kernel or kernel class against the
    device's ceilings (see the module docstring for every definition).

    ``device``: a device key or name overriding the trace's metadata (unknown: a note, and
    achieved rates only). ``peaks``: measured ceilings (:func:`~traceforge.analyzers.
    devices.load_peaks`). ``target_pct``: the share of the ceiling ``saved_us`` aims at.
    """
    if by not in BY:
        raise UsageError(f"--by {by!r}: choose from {', '.join(BY)}")
    if not 0 < target_pct <= 100:
        raise UsageError(f"--target-pct {target_pct}: must be in (0, 100]")
    acts, win = timeline(trace)
    acts, _ = select(acts, win, steps, trace.meta.path)
    dev, notes = resolve_device(trace, device, acts)
    notes += measured_note(peaks, dev, trace)
    if dev is not None:
        notes += list(dev.notes)
    k, wn = activity_work(trace, acts)
    notes += wn
    k = with_ceilings(k, dev, peaks, target_pct / 100.0)
    total = float(k["dur"].sum())
    mod = float(k.loc[k["modelled"], "dur"].sum())
    totals = {
        "time_ns": total, "modelled_ns": mod, "unmodelled_ns": total - mod,
        "flops": float(k.loc[k["modelled"], "flops"].sum()),
        "bytes": float(k.loc[k["modelled"], "bytes"].sum()),
        "saved_ns": float(k["saved_ns"].sum(min_count=1)),
        "saved_measured_ns": float(k["saved_measured_ns"].sum(min_count=1)),
    }
    un = _unmodelled(k, total)
    if total and total - mod > 0:
        top = "; ".join(f"{r.op} ({r.reason}): {r.time_us:,.0f} us"
                        for r in un.head(3).itertuples(index=False))
        notes.append(f"Unmodelled time: {(total - mod) / 1e3:,.0f} us "
                     f"({100 * (total - mod) / total:.1f}% of GPU time) — {top}.")
    if acts.empty:
        notes.append("No GPU activity in the selection: nothing to report.")
    return RooflineReport(_table(k, by, dev), k, by, dev, peaks, target_pct, totals, un,
                          tuple(notes))


# -- views for reports and annotations ---------------------------------------------------
def regroup(report: RooflineReport, by: str) -> pd.DataFrame:
    """The report's activities as the table :func:`roofline` gives for ``by`` (op, kernel
    or class), without measuring them again: a report shows several groupings of one run."""
    if by not in BY:
        raise UsageError(f"--by {by!r}: choose from {', '.join(BY)}")
    return _table(report.kernels, by, report.device)


def kernel_rates(report: RooflineReport) -> pd.DataFrame:
    """Per GPU activity, indexed by its event row: what ``annotate`` puts on each kernel.

    Columns: op, flops, bytes, intensity, tflops_per_s, tb_per_s, dtype, bound,
    pct_of_bound, pct_of_measured (NaN where unknown).
    """
    k = report.kernels
    cols = ["op_name", "flops", "bytes", "intensity", "tflops_per_s", "tb_per_s", "dtype",
            "bound", "pct_of_bound", "pct_of_measured"]
    out: pd.DataFrame = k.set_index("row")[cols].rename(columns={"op_name": "op"})
    out.index.name = "row"
    return out


def chart_data(report: RooflineReport) -> dict[str, Any]:
    """What a roofline chart plots: one point per op with known FLOPs, and the ceilings.

    ``points``: label, intensity (FLOP/byte), tflops_per_s, time_us, dtype, bound,
    pct_of_bound (ops that move data only have no intensity and are counted in
    ``bytes_only``). ``ceilings``: per dtype key used, peak_tflops, hbm_tb_s, ridge, and
    the measured ones when a peaks file was given.
    """
    k = report.kernels
    by_op = _table(k, "op", report.device)
    pts = by_op[(by_op["gflops"] > 0) & by_op["intensity"].notna()]
    points = [{"label": str(r.op), "intensity": float(r.intensity),
               "tflops_per_s": float(r.tflops_per_s), "time_us": float(r.time_us),
               "dtype": str(r.dtype), "bound": str(r.bound),
               "pct_of_bound": float(r.pct_of_bound)} for r in pts.itertuples(index=False)]
    keys = [c for c in pd.unique(k.loc[k["modelled"] & (k["flops"] > 0), "ceiling"]) if c]
    ceilings = []
    for c in keys:
        d = report.device
        m = report.measured
        ceilings.append({
            "dtype": str(c),
            "peak_tflops": d.peak(c) if d else None,
            "hbm_tb_s": d.hbm_tb_s if d else None,
            "ridge": d.ridge(c) if d else None,
            "measured_tflops": m.peak(measured_key(c)) if m else None,
            "measured_tb_s": m.memory_tb_s if m else None,
        })
    bytes_only = by_op[(by_op["gflops"] == 0) & (by_op["gbytes"] > 0)]
    return {
        "device": report.device.name if report.device else "",
        "points": points,
        "ceilings": ceilings,
        "bytes_only": {"ops": len(bytes_only), "time_us": float(bytes_only["time_us"].sum())},
        "unmodelled_us": report.totals["unmodelled_ns"] / 1e3,
    }


def below_bound(report: RooflineReport, n: int = 5) -> pd.DataFrame:
    """The ops with the most time at stake: furthest below their bound, weighted by time.

    Columns: op, time_us, pct_of_bound, bound, dtype, tflops_per_s, tb_per_s, saved_us
    (at the report's target_pct), sorted by saved_us. Input for the report's findings.
    """
    k = report.kernels
    t = _table(k, "op", report.device)
    t = t[t["saved_us"].notna() & (t["saved_us"] > 0)]
    cols = ["op", "time_us", "pct_of_bound", "bound", "dtype", "tflops_per_s", "tb_per_s",
            "saved_us"]
    res: pd.DataFrame = t.sort_values("saved_us", ascending=False)[cols].head(n)
    return res.reset_index(drop=True)  # type: ignore[no-any-return]
