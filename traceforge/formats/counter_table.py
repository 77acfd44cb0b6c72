"""The table every hardware-counter reader returns (Nsight Compute, rocprofv3 ``--pmc``).

:class:`CounterTable`: ``metrics``, one row per (launch, metric) as the source wrote it and
converted to a base unit, and ``launches``, one row per profiled kernel launch with the
named counters of :data:`LAUNCH_COLUMNS` (NaN where the export lacks them). Units in
column names: ``*_ns``, ``*_bytes``, ``*_flop``, ``*_pct``, ``*_hz``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

#: Per-launch columns (besides launch, pid, kernel, device, stream, grid, block).
LAUNCH_COLUMNS = (
    "duration_ns", "dram_bytes", "fp64_flop", "fp32_flop", "fp16_flop", "tensor_flop",
    "flop", "tensor_dtype", "sm_pct", "dram_pct", "memory_pct", "tensor_pct", "occupancy_pct",
    "occupancy_kind", "sm_clock_hz")
#: Columns of ``CounterTable.metrics``.
METRIC_COLUMNS = ("launch", "metric", "unit", "cell", "value", "base_unit")


@dataclass(frozen=True)
class CounterTable:
    """Counters of profiled kernel launches (see the module docstring)."""

    launches: pd.DataFrame
    metrics: pd.DataFrame
    source: str
    page: str
    notes: tuple[str, ...] = field(default=())


def _get(m: dict[str, float], *names: str) -> float:
    for n in names:
        v = m.get(n)
        if v is not None and not math.isnan(v):
            return v
    return math.nan


def _sum(m: dict[str, float], names: Sequence[str]) -> float:
    vals = [m[n] for n in names if n in m and not math.isnan(m[n])]
    return float(sum(vals)) if vals else math.nan


_TENSOR = ("sm__ops_path_tensor_src_bf16_dst_fp32.sum", "sm__ops_path_tensor_src_fp16.sum",
           "sm__ops_path_tensor_src_fp64.sum", "sm__ops_path_tensor_src_tf32_dst_fp32.sum")
_FP8 = ("sm__ops_path_tensor_src_fp8_sparsity_off.sum",
        "sm__ops_path_tensor_src_fp8_sparsity_on.sum")
_DERIVED = "derived__smsp__sass_thread_inst_executed_op_"
_PIPE = "smsp__sass_thread_inst_executed_op_{}_pred_on.sum.per_cycle_elapsed"


def _simt(m: dict[str, float], p: str, fma: str, cycles: float) -> float:
    """FLOPs of one precision from per-cycle thread instruction counts (ncu's roofline:
    2 per FMA, 4 per packed half FMA, 1 per add and mul), times the elapsed cycles."""
    fma_x = _get(m, f"{_DERIVED}{p}fma_pred_on_{fma}")
    if math.isnan(fma_x):
        base = _get(m, _PIPE.format(f"{p}fma"))
        fma_x = base * (4 if p == "h" else 2)
    add = _get(m, _PIPE.format(f"{p}add"), f"{_DERIVED}{p}add_pred_on_x2")
    mul = _get(m, _PIPE.format(f"{p}mul"), f"{_DERIVED}{p}mul_pred_on_x2")
    per_cycle = _sum({"a": fma_x, "b": add, "c": mul}, ("a", "b", "c"))
    return per_cycle * cycles


def launch_row(m: dict[str, float]) -> dict[str, object]:
    """The named counters of one launch from its metrics (base units)."""
    dur = _get(m, "gpu__time_duration.sum", "gpu__time_duration.avg")
    dram = _get(m, "dram__bytes.sum")
    if math.isnan(dram):
        rw = _sum(m, ("dram__bytes_read.sum", "dram__bytes_write.sum"))
        rate = _get(m, "dram__bytes.sum.per_second")
        dram = rw if not math.isnan(rw) else rate * dur * 1e-9
    dram = _get({"x": dram, "y": m.get("rocprof:dram_bytes", math.nan)}, "x", "y")
    cycles = _get(m, "smsp__cycles_elapsed.avg")
    fp64 = _simt(m, "d", "x2", cycles)
    fp32 = _simt(m, "f", "x2", cycles)
    fp16 = _simt(m, "h", "x4", cycles)
    fp8 = _sum(m, _FP8) if "sm__ops_path_tensor_src_fp8.sum" not in m else m[
        "sm__ops_path_tensor_src_fp8.sum"]
    tensor = _sum({**m, "fp8": fp8}, (*_TENSOR, "fp8"))
    for k, var in (("rocprof:fp64_flop", "fp64"), ("rocprof:fp32_flop", "fp32"),
                   ("rocprof:fp16_flop", "fp16"), ("rocprof:tensor_flop", "tensor")):
        if k in m:
            if var == "fp64":
                fp64 = m[k]
            elif var == "fp32":
                fp32 = m[k]
            elif var == "fp16":
                fp16 = m[k]
            else:
                tensor = m[k]
    by_dtype = {"bf16": _get(m, _TENSOR[0]), "fp16": _get(m, _TENSOR[1]),
                 "fp64_tensor": _get(m, _TENSOR[2]), "tf32": _get(m, _TENSOR[3]), "fp8": fp8}
    best = max(by_dtype, key=lambda d: 0.0 if math.isnan(by_dtype[d]) else by_dtype[d])
    tensor_dtype = best if by_dtype[best] > 0 else ""
    flop = _sum({"a": fp64, "b": fp32, "c": fp16, "d": tensor}, ("a", "b", "c", "d"))
    occ = _get(m, "sm__warps_active.avg.pct_of_peak_sustained_active")
    occ_kind = "achieved" if not math.isnan(occ) else ""
    if math.isnan(occ):
        occ = _get(m, "sm__maximum_warps_per_active_cycle_pct")
        occ_kind = "theoretical" if not math.isnan(occ) else ""
    return {
        "duration_ns": dur, "dram_bytes": dram, "fp64_flop": fp64, "fp32_flop": fp32,
        "fp16_flop": fp16, "tensor_flop": tensor, "flop": flop, "tensor_dtype": tensor_dtype,
        "sm_pct": _get(m, "sm__throughput.avg.pct_of_peak_sustained_elapsed"),
        "dram_pct": _get(m, "gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed",
                         "dram__throughput.avg.pct_of_peak_sustained_elapsed"),
        "memory_pct": _get(m, "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed"),
        "tensor_pct": _get(m, "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_elapsed"),
        "occupancy_pct": occ, "occupancy_kind": occ_kind,
        "sm_clock_hz": _get(m, "sm__cycles_elapsed.avg.per_second"),
    }


def _int(text: str | None) -> int:
    try:
        return int(str(text).replace(",", ""))
    except (TypeError, ValueError):
        return -1


def from_long(ident: list[dict[str, str]], long: list[tuple[int, str, str, str, float, str]],
              *, source: str, page: str, notes: Sequence[str] = ()) -> CounterTable:
    """Build a :class:`CounterTable` from per-launch identity fields (ncu's column names:
    ``ID``, ``Process ID``, ``Kernel Name``, ``Device``, ``Stream``, ``Grid Size``,
    ``Block Size``) and ``(launch, metric, unit, cell, value, base unit)`` tuples."""
    metrics = pd.DataFrame(long, columns=list(METRIC_COLUMNS)) if long else pd.DataFrame(
        {c: pd.Series([], dtype=object) for c in METRIC_COLUMNS})
    per: list[dict[str, float]] = [{} for _ in ident]
    for i, name, _u, _c, v, _b in long:
        per[i][name] = v
    rows = []
    for i, (idf, m) in enumerate(zip(ident, per, strict=True)):
        row: dict[str, object] = {
            "launch": _int(idf.get("ID")) if idf.get("ID") not in (None, "") else i,
            "pid": _int(idf.get("Process ID")), "kernel": idf.get("Kernel Name", ""),
            "device": _int(idf.get("Device")), "stream": _int(idf.get("Stream")),
            "grid": idf.get("Grid Size", ""), "block": idf.get("Block Size", "")}
        row.update(launch_row(m))
        rows.append(row)
    cols = ["launch", "pid", "kernel", "device", "stream", "grid", "block", *LAUNCH_COLUMNS]
    launches = pd.DataFrame(rows, columns=cols) if rows else pd.DataFrame(
        {c: pd.Series([], dtype=object) for c in cols})
    all_notes = list(notes)
    known = [c for c in ("duration_ns", "dram_bytes", "flop", "sm_pct") if c in launches]
    if rows:
        missing = [c for c in known if launches[c].isna().all()]
        if missing:
            all_notes.append(f"{source}: not in this export: {', '.join(missing)} "
                             "(profile with `--set roofline` or `--set full`)")
    for c in LAUNCH_COLUMNS:
        if c not in ("occupancy_kind", "tensor_dtype") and c in launches:
            launches[c] = launches[c].astype(float)
    launches["launch"] = np.asarray(launches["launch"], dtype=np.int64)
    return CounterTable(launches, metrics, source, page, tuple(all_notes))
