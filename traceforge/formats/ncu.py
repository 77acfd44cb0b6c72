"""Nsight Compute reader: ``--csv --page raw`` and ``--page details`` exports, ``.ncu-rep``.

The raw page (``ncu --import X.ncu-rep --csv --page raw``) has one row per profiled kernel
launch after a header row of metric names and a row of units (``us``, ``Kbyte``,
``Tbyte/s``, ``%``, ``inst/cycle``...); numbers may carry thousands separators. The
details page has one row per (launch, section, metric) with ``Metric Name``, ``Metric
Unit`` and ``Metric Value`` columns (and rule rows, which are skipped). A ``.ncu-rep`` is
read by running ``ncu --import X --csv --page raw`` when ``ncu`` is on PATH (or
``$TRACEFORGE_NCU``, or Nsight Compute's install folders), else NVIDIA's ``ncu_report``
module when importable.

Every value is converted to a base unit (:data:`UNIT_SCALE`): times to ns, sizes to
bytes, rates to per second, frequencies to Hz; ``%`` and plain counts stay as they are.
The result is a :class:`~traceforge.formats.counter_table.CounterTable`: a long
``metrics`` table (launch, metric, unit as written, cell as written, value in base unit)
and one row per launch of the named counters traceforge uses (see
:data:`~traceforge.formats.counter_table.LAUNCH_COLUMNS`); names it does not know are
kept in ``metrics`` and never fail the read.
"""

from __future__ import annotations

import csv
import io
import math
import subprocess
from pathlib import Path

import pandas as pd

from traceforge.errors import TraceFormatError
from traceforge.executables import NCU, find
from traceforge.formats.counter_table import CounterTable, from_long

NAME = "ncu"
SUFFIXES = (".csv", ".ncu-rep")

#: Units ncu prints and the factor to traceforge's base unit of their dimension.
UNIT_SCALE: dict[str, tuple[float, str]] = {
    "ns": (1.0, "ns"), "nsecond": (1.0, "ns"), "us": (1e3, "ns"), "usecond": (1e3, "ns"),
    "ms": (1e6, "ns"), "msecond": (1e6, "ns"), "s": (1e9, "ns"), "second": (1e9, "ns"),
    "byte": (1.0, "byte"), "Kbyte": (1e3, "byte"), "Mbyte": (1e6, "byte"),
    "Gbyte": (1e9, "byte"), "Tbyte": (1e12, "byte"), "Kibyte": (1024.0, "byte"),
    "Mibyte": (1024.0**2, "byte"), "Gibyte": (1024.0**3, "byte"),
    "hz": (1.0, "hz"), "Khz": (1e3, "hz"), "Mhz": (1e6, "hz"), "Ghz": (1e9, "hz"),
    "cycle/nsecond": (1e9, "hz"), "cycle/usecond": (1e6, "hz"),
}
#: Identity columns of both pages (everything else on the raw page is a metric).
ID_COLUMNS = ("ID", "Process ID", "Process Name", "Host Name", "Kernel Name", "Context",
              "Stream", "Block Size", "Grid Size", "Device", "CC")
_DETAIL_COLUMNS = ("Section Name", "Metric Name", "Metric Unit", "Metric Value")


def convert(cell: str, unit: str) -> tuple[float, str]:
    """``(value, base unit)`` of one ncu cell; rates (``X/s``) and ratios per unit too.

    Unknown units keep their value and name; cells that are no number give NaN."""
    text = cell.strip().replace(",", "")
    try:
        v = float(text)
    except ValueError:
        return math.nan, unit
    if unit in UNIT_SCALE:
        f, base = UNIT_SCALE[unit]
        return v * f, base
    num, sep, den = unit.partition("/")
    if sep and num in UNIT_SCALE and den in ("s", "second"):
        f, base = UNIT_SCALE[num]
        return v * f, f"{base}/s"
    if sep and num in UNIT_SCALE:
        f, base = UNIT_SCALE[num]
        return v * f, f"{base}/{den}"
    return v, unit


def sniff(head: bytes) -> bool:
    """True when ``head`` (a file's first bytes) is an ncu CSV export."""
    first = head.split(b"\n", 1)[0]
    return first.startswith(b'"ID","Process ID"') or (
        b'"Kernel Name"' in first and (b'"Metric Name"' in first or b"gpu__time" in head))


def read(path: str | Path) -> CounterTable:
    """Counters of an ncu CSV export (raw or details page) or ``.ncu-rep`` at ``path``."""
    p = Path(path)
    if not p.exists():
        raise TraceFormatError(p, "no such file")
    if p.suffix == ".ncu-rep":
        text, how = _from_report(p)
        return parse(text, str(p), how)
    try:
        text = p.read_text(encoding="utf-8", errors="replace")
    except OSError as e:
        raise TraceFormatError(p, f"cannot read ({e.strerror or e})") from None
    return parse(text, str(p), "csv")


def _from_report(p: Path) -> tuple[str, str]:
    try:
        ncu: str | None = find(NCU)
    except LookupError:
        ncu = None
    if ncu:
        try:
            out = subprocess.run([ncu, "--import", str(p), "--csv", "--page", "raw"],
                                 capture_output=True, text=True, timeout=600, check=False)
        except (OSError, subprocess.TimeoutExpired) as e:
            raise TraceFormatError(p, f"ncu --import failed ({e})") from None
        if out.returncode != 0:
            msg = (out.stderr or out.stdout).strip().splitlines()[-1:] or ["no output"]
            raise TraceFormatError(p, f"ncu --import failed: {msg[0]}")
        return out.stdout, "ncu --import --page raw"
    try:
        import ncu_report  # type: ignore[import-not-found]  # noqa: F401
    except ImportError:
        raise TraceFormatError(
            p, "reading .ncu-rep needs Nsight Compute (ncu on PATH or $TRACEFORGE_NCU, "
            "or its ncu_report Python module); neither is installed here: export it with "
            "`ncu --import X.ncu-rep --csv --page raw > X.csv` and read the CSV") from None
    return _via_module(p), "ncu_report"


def _via_module(p: Path) -> str:  # pragma: no cover - needs Nsight Compute installed
    import ncu_report

    ctx = ncu_report.load_report(str(p))
    rows: list[dict[str, str]] = []
    units: dict[str, str] = {}
    for r in range(ctx.num_ranges()):
        rng = ctx.range_by_idx(r)
        for a in range(rng.num_actions()):
            act = rng.action_by_idx(a)
            row = {"ID": str(len(rows)),
                   "Kernel Name": act.name(ncu_report.IAction.NameBase_DEMANGLED)}
            for m in act.metric_names():
                met = act.metric_by_name(m)
                v = met.as_double() if met.metric_type() != met.MetricType_STRING \
                    else met.as_string()
                row[m], units[m] = str(v), met.unit()
            rows.append(row)
    names = ["ID", "Kernel Name", *sorted({k for r in rows for k in r} - {"ID", "Kernel Name"})]
    buf = io.StringIO()
    w = csv.writer(buf, quoting=csv.QUOTE_ALL)
    w.writerow(names)
    w.writerow([units.get(n, "") for n in names])
    for row_ in rows:
        w.writerow([row_.get(n, "") for n in names])
    return buf.getvalue()


def parse(text: str, source: str, how: str = "csv") -> CounterTable:
    """Parse the CSV text of a raw or details page export (``source`` names it in notes)."""
    lines = [ln for ln in text.splitlines() if not ln.startswith("==")]  # ==PROF== lines
    try:
        rows = list(csv.reader(lines))
    except csv.Error as e:
        raise TraceFormatError(source, f"malformed ncu CSV ({e})") from None
    rows = [r for r in rows if r]
    if not rows:
        raise TraceFormatError(source, "empty ncu export")
    head = rows[0]
    if "Kernel Name" not in head:
        raise TraceFormatError(source, "not an ncu CSV export (no 'Kernel Name' column)")
    if all(c in head for c in _DETAIL_COLUMNS):
        return _details(head, rows[1:], source, how)
    return _raw(head, rows[1:], source, how)


def _ident(head: list[str], row: list[str]) -> dict[str, str]:
    return {c: row[head.index(c)] for c in ID_COLUMNS if c in head and head.index(c) < len(row)}


def _raw(head: list[str], body: list[list[str]], source: str, how: str) -> CounterTable:
    notes: list[str] = []
    units: list[str] = [""] * len(head)
    if body and (not body[0] or body[0][0] == "" or not body[0][0].strip().isdigit()):
        units = body[0] + [""] * (len(head) - len(body[0]))
        body = body[1:]
    else:
        notes.append(f"{source}: no units row; values taken as ncu's base units "
                     "(as `--print-units base` writes them)")
    ids = set(ID_COLUMNS)
    long: list[tuple[int, str, str, str, float, str]] = []
    ident: list[dict[str, str]] = []
    for i, row in enumerate(body):
        ident.append(_ident(head, row))
        for j, name in enumerate(head):
            if name in ids or j >= len(row):
                continue
            v, base = convert(row[j], units[j])
            long.append((i, name, units[j], row[j], v, base))
    return from_long(ident, long, source=source, page=f"raw ({how})", notes=notes)


# Details-page metric names -> the raw metric they show (so both pages fill one table).
_DETAIL_METRICS = {
    "Duration": "gpu__time_duration.sum",
    "Compute (SM) Throughput": "sm__throughput.avg.pct_of_peak_sustained_elapsed",
    "DRAM Throughput": "gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed",
    "Memory Throughput": "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed",
    "Achieved Occupancy": "sm__warps_active.avg.pct_of_peak_sustained_active",
    "Theoretical Occupancy": "sm__maximum_warps_per_active_cycle_pct",
    "SM Frequency": "sm__cycles_elapsed.avg.per_second",
    "DRAM Frequency": "dram__cycles_elapsed.avg.per_second",
    "Elapsed Cycles": "gpc__cycles_elapsed.max",
    "Registers Per Thread": "launch__registers_per_thread",
}


def _details(head: list[str], body: list[list[str]], source: str, how: str
             ) -> CounterTable:
    col = {c: head.index(c) for c in _DETAIL_COLUMNS}
    idc = head.index("ID")
    order: dict[str, int] = {}
    ident: list[dict[str, str]] = []
    long: list[tuple[int, str, str, str, float, str]] = []
    for row in body:
        if len(row) <= max(col.values()) or row[idc] == "":
            continue
        key = row[idc]
        if key not in order:
            order[key] = len(order)
            ident.append(_ident(head, row))
        name, unit, cell = (row[col["Metric Name"]], row[col["Metric Unit"]],
                            row[col["Metric Value"]])
        if not name or cell == "":  # rule rows carry text, no value
            continue
        v, base = convert(cell, unit)
        if math.isnan(v):
            continue
        metric = _DETAIL_METRICS.get(name, f"{row[col['Section Name']]}: {name}")
        long.append((order[key], metric, unit, cell, v, base))
    notes = [f"{source}: details page: only the sections' summary metrics (no DRAM bytes "
             "or instruction counts; export `--page raw` for measured FLOPs and bytes)"]
    return from_long(ident, long, source=source, page=f"details ({how})", notes=notes)


def frame(table: CounterTable) -> pd.DataFrame:
    """The per-launch table (a convenience for notebooks)."""
    return table.launches
