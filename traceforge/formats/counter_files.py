"""Hardware-counter files of any vendor: picks the reader (Nsight Compute CSV or
``.ncu-rep``, rocprofv3 ``--pmc`` ``counter_collection.csv``) and reads rocprofv3's.

rocprofv3's counter collection CSV has one row per (dispatch, counter): ``Dispatch_Id``,
``Process_Id``, ``Kernel_Name``, ``Grid_Size``, ``Workgroup_Size``, ``Counter_Name``,
``Counter_Value``, ``Start_Timestamp``, ``End_Timestamp`` (ns). Named counters map to the
table's columns: ``FETCH_SIZE`` + ``WRITE_SIZE`` (KiB) -> ``dram_bytes``; per-wave VALU
instruction counts ``SQ_INSTS_VALU_{ADD,MUL,FMA,TRANS}_F{16,32,64}`` x 64 lanes (x 2 for
FMA) -> SIMT FLOPs; ``SQ_INSTS_VALU_MFMA_MOPS_*`` x 512 -> tensor (matrix-core) FLOPs;
``GRBM_GUI_ACTIVE``, ``SQ_WAVES`` and the rest stay in ``metrics``.
"""

from __future__ import annotations

import csv
import math
from pathlib import Path

from traceforge.errors import TraceFormatError
from traceforge.formats import ncu
from traceforge.formats.counter_table import CounterTable, from_long

_LANES = 64
_MFMA_OPS = 512


def read_counters(path: str | Path) -> CounterTable:
    """The counters in ``path``, whichever profiler wrote it; one-line errors otherwise."""
    p = Path(path)
    if not p.is_file():
        raise TraceFormatError(p, "no such file")
    if p.suffix == ".ncu-rep":
        return ncu.read(p)
    try:
        with p.open("rb") as fh:
            head = fh.read(4096)
    except OSError as e:
        raise TraceFormatError(p, f"cannot read ({e.strerror or e})") from None
    if b"Counter_Name" in head.split(b"\n", 1)[0]:
        return read_rocprof(p)
    if ncu.sniff(head):
        return ncu.read(p)
    raise TraceFormatError(p, "not a counter file (an ncu --csv export, an .ncu-rep or a "
                           "rocprofv3 counter_collection.csv)")


def _flops(c: dict[str, float]) -> dict[str, float]:
    out: dict[str, float] = {}
    for prec, key in (("F64", "fp64"), ("F32", "fp32"), ("F16", "fp16")):
        parts = [c.get(f"SQ_INSTS_VALU_{op}_{prec}") for op in ("ADD", "MUL", "TRANS")]
        fma = c.get(f"SQ_INSTS_VALU_FMA_{prec}")
        if fma is None and all(x is None for x in parts):
            continue
        out[f"rocprof:{key}_flop"] = _LANES * (sum(x for x in parts if x is not None)
                                               + 2 * (fma or 0.0))
    mfma = [v for k, v in c.items() if k.startswith("SQ_INSTS_VALU_MFMA_MOPS_")]
    if mfma:
        out["rocprof:tensor_flop"] = _MFMA_OPS * sum(mfma)
    if "FETCH_SIZE" in c or "WRITE_SIZE" in c:
        out["rocprof:dram_bytes"] = 1024 * (c.get("FETCH_SIZE", 0.0) + c.get("WRITE_SIZE", 0.0))
    return out


def read_rocprof(p: Path) -> CounterTable:
    """A rocprofv3 ``counter_collection.csv`` (see the module docstring)."""
    try:
        with p.open(encoding="utf-8", errors="replace", newline="") as fh:
            rows = list(csv.DictReader(fh))
    except OSError as e:
        raise TraceFormatError(p, f"cannot read ({e.strerror or e})") from None
    except csv.Error as e:
        raise TraceFormatError(p, f"malformed rocprofv3 CSV ({e})") from None
    order: dict[str, int] = {}
    ident: list[dict[str, str]] = []
    vals: list[dict[str, float]] = []
    long: list[tuple[int, str, str, str, float, str]] = []
    for r in rows:
        key = r.get("Dispatch_Id") or r.get("Correlation_Id") or ""
        if key == "":
            continue
        if key not in order:
            order[key] = len(order)
            ident.append({"ID": key, "Process ID": r.get("Process_Id", ""),
                          "Kernel Name": r.get("Kernel_Name", ""),
                          "Device": r.get("Agent_Id", ""), "Stream": r.get("Queue_Id", ""),
                          "Grid Size": r.get("Grid_Size", ""),
                          "Block Size": r.get("Workgroup_Size", "")})
            vals.append({})
            try:
                dur = float(r.get("End_Timestamp") or "nan") - float(
                    r.get("Start_Timestamp") or "nan")
            except ValueError:
                dur = math.nan
            if not math.isnan(dur):
                vals[-1]["gpu__time_duration.sum"] = dur
                long.append((order[key], "gpu__time_duration.sum", "ns",
                             str(int(dur)), dur, "ns"))
        i = order[key]
        name, cell = r.get("Counter_Name", ""), r.get("Counter_Value", "")
        try:
            v = float(cell)
        except (TypeError, ValueError):
            continue
        vals[i][name] = vals[i].get(name, 0.0) + v
        long.append((i, name, "", cell, v, ""))
    for i, c in enumerate(vals):
        for k, v in _flops(c).items():
            long.append((i, k, "", "", v, "flop" if "flop" in k else "byte"))
    notes = [] if rows else [f"{p}: no counter rows"]
    return from_long(ident, long, source=str(p), page="rocprofv3 counter_collection",
                     notes=notes)
