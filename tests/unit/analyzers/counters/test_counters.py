"""Hardware counters (issue 29): ncu/rocprofv3 readers, the join to a trace, measured
roofline, and op shapes from nsys's emit_nvtx ranges.

Fixtures (fixtures/counters, made on an H100 80GB HBM3 with Nsight Compute and Systems
2025.3.1, torch 2.11; scripts probe.py and model.py beside them): ``probe.ncu-raw.csv`` /
``probe.ncu-details.csv`` are ``ncu --set roofline --launch-count 10 python probe.py``
exported with ``--csv --page raw`` / ``--page details``; ``probe.pt.trace.json.gz`` and
``probe.nsys.sqlite.gz`` the same probe under torch.profiler and nsys; ``model.*`` a small
transformer's 4 training steps under nsys ``--pytorch=autograd-shapes-nvtx`` and Kineto.
"""

from __future__ import annotations

import contextlib
import csv
import math
from pathlib import Path

import pytest

import traceforge as tf
from tests.conftest import FIXTURES, cli_main
from traceforge.analyzers.costs.roofline import roofline
from traceforge.analyzers.counters.join import kernel_key
from traceforge.analyzers.counters.measured import measured_kernels
from traceforge.analyzers.critical_path import critical_path
from traceforge.analyzers.timing.ops import ops
from traceforge.errors import TraceFormatError
from traceforge.formats import ncu
from traceforge.formats.counter_files import read_counters
from traceforge.formats.nvtx_ops import mark_ops

F = FIXTURES / "counters"
RAW, DETAILS = F / "probe.ncu-raw.csv", F / "probe.ncu-details.csv"
N = 4096


@pytest.fixture(autouse=True)
def _no_cache(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("TRACEFORGE_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("TRACEFORGE_NO_CACHE", "1")


def _cells() -> tuple[list[str], list[str], list[list[str]]]:
    rows = list(csv.reader(RAW.open()))
    return rows[0], rows[1], rows[2:]


def _num(cell: str) -> float:
    return float(cell.replace(",", ""))


# -- reading: values equal the raw CSV cells, units converted ----------------------------
SCALE = {"us": 1e3, "Kbyte": 1e3, "Mbyte": 1e6, "Gbyte": 1e9, "Tbyte": 1e12, "Ghz": 1e9,
         "Tbyte/s": 1e12, "Gbyte/s": 1e9, "Mbyte/s": 1e6, "Kbyte/s": 1e3, "byte": 1.0,
         "Kbyte/cycle": 1e3, "Kbyte/block": 1e3, "Mhz": 1e6, "%": 1.0, "": 1.0}


def test_every_metric_equals_its_raw_cell_in_base_units() -> None:
    head, units, body = _cells()
    t = ncu.read(RAW)
    assert len(t.launches) == len(body) == 9
    m = t.metrics
    checked = 0
    for r in m.itertuples(index=False):
        j = head.index(r.metric)
        cell = body[r.launch][j]
        assert r.cell == cell and r.unit == units[j]
        try:
            raw = _num(cell)
        except ValueError:
            assert math.isnan(r.value)
            continue
        if units[j] in SCALE:
            assert r.value == pytest.approx(raw * SCALE[units[j]], rel=1e-12)
            checked += 1
    assert checked > 5000


def test_launch_columns_equal_their_cells() -> None:
    head, _units, body = _cells()
    t = ncu.read(RAW)
    col = {n: i for i, n in enumerate(head)}
    for i, row in enumerate(body):
        L = t.launches.iloc[i]
        dur_ns = _num(row[col["gpu__time_duration.sum"]]) * 1e3
        assert L["duration_ns"] == pytest.approx(dur_ns)
        assert L["sm_pct"] == _num(row[col["sm__throughput.avg.pct_of_peak_sustained_elapsed"]])
        assert L["dram_pct"] == _num(
            row[col["gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed"]])
        assert L["tensor_pct"] == _num(
            row[col["sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_elapsed"]])
        assert L["occupancy_pct"] == _num(row[col["sm__maximum_warps_per_active_cycle_pct"]])
        rate = _num(row[col["dram__bytes.sum.per_second"]]) * 1e12
        assert L["dram_bytes"] == pytest.approx(rate * dur_ns * 1e-9)
        tensor = sum(_num(row[col[c]]) for c in col if c.startswith("sm__ops_path_tensor_src_")
                     and c.endswith(".sum") and "int" not in c)
        assert L["tensor_flop"] == pytest.approx(tensor)
        assert L["kernel"] == row[col["Kernel Name"]]


def test_probe_measured_flops_and_bytes_match_the_model() -> None:
    """bf16 4096^3 GEMM: tensor-path ops = 2MNK; x * 2.0 over 64 Mi fp32: 64 Mi FLOPs and
    DRAM bytes within 10% of read + write (2 x 256 MiB)."""
    L = ncu.read(RAW).launches
    gemm = L[L["kernel"].str.startswith("nvjet")]
    mul = L[L["kernel"].str.contains("MulFunctor")]
    assert len(gemm) == 3 and len(mul) == 3
    for v in gemm["flop"]:
        assert abs(v / (2 * N**3) - 1) < 0.02
    for v in mul["fp32_flop"]:
        assert abs(v / 2**26 - 1) < 0.02
    for v in mul["dram_bytes"]:
        assert abs(v / (2 * 4 * 2**26) - 1) < 0.10
    assert set(gemm["tensor_dtype"]) == {"bf16"}


def test_details_page_gives_the_summary_metrics() -> None:
    d = ncu.read(DETAILS).launches
    r = ncu.read(RAW).launches
    assert len(d) == len(r)
    assert (abs(d["duration_ns"] - r["duration_ns"]) <= 10).all()  # details round to 0.01 us
    assert (abs(d["sm_pct"] - r["sm_pct"]) <= 0.006).all()
    assert d["flop"].isna().all()
    assert any("details page" in n for n in ncu.read(DETAILS).notes)


# -- bad input ---------------------------------------------------------------------------
def ncu_installed() -> bool:
    from traceforge.executables import NCU, find

    try:
        find(NCU)
    except LookupError:
        return False
    return True


def _write(tmp: Path, text: str, name: str = "x.csv") -> Path:
    p = tmp / name
    p.write_text(text)
    return p


def test_unknown_metrics_and_missing_units_row(tmp_path: Path) -> None:
    p = _write(tmp_path, '"ID","Process ID","Kernel Name","foo__bar.sum","gpu__time_duration.sum"\n'
               '"0","5","k1","12","3,000"\n')
    t = read_counters(p)
    assert t.launches["duration_ns"].iloc[0] == 3000.0  # no units row: base units (ns)
    assert any("no units row" in n for n in t.notes)
    assert any("not in this export" in n for n in t.notes)
    assert set(t.metrics["metric"]) == {"foo__bar.sum", "gpu__time_duration.sum"}


def test_other_layouts_and_non_counter_files(tmp_path: Path) -> None:
    # An older ncu's raw page: other columns, other order, units row, "n/a" cells.
    p = _write(tmp_path, '"ID","Kernel Name","Process ID","dram__bytes_read.sum",'
               '"dram__bytes_write.sum","gpu__time_duration.sum"\n'
               '"","","","Mbyte","Kbyte","msecond"\n"0","k","7","1.5","500","n/a"\n')
    L = read_counters(p).launches
    assert L["dram_bytes"].iloc[0] == pytest.approx(1.5e6 + 5e5)
    assert math.isnan(L["duration_ns"].iloc[0])
    for text in ('"ID","Process ID","Kernel Name"\n"0","1","k\x00"\n"1"\n',
                 "Dispatch_Id,Counter_Name,Counter_Value\n1,\x00,2\n,,\n"):
        # Hostile bytes: a table of what is known, or one line; never a traceback.
        with contextlib.suppress(TraceFormatError):
            read_counters(_write(tmp_path, text, "odd.csv"))
    for text in ("", "a,b\n1,2\n", "\x00\x01garbage"):
        with pytest.raises(TraceFormatError):
            read_counters(_write(tmp_path, text, "bad.csv"))
    if not ncu_installed():
        with pytest.raises(TraceFormatError, match="needs Nsight Compute"):
            read_counters(_write(tmp_path, "x", "r.ncu-rep"))
    code, out, err = cli_main("top-kernels", str(F / "probe.pt.trace.json.gz"),
                              "--counters", str(tmp_path / "bad.csv"))
    assert code == 2 and "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_rocprofv3_counter_collection() -> None:
    t = read_counters(F / "rocprofv3.counter_collection.csv")
    L = t.launches.iloc[0]
    assert L["duration_ns"] == 5000 and L["dram_bytes"] == 8 * 2**20
    assert L["fp32_flop"] == 64 * 16384 and L["kernel"] == "void mul_kernel(float*)"


# -- the join ------------------------------------------------------------------------------
def test_kernel_keys_agree_across_profilers() -> None:
    ncu_name = ("void at::vectorized_elementwise_kernel<4, at::AUnaryFunctor<float, float, "
                "float, binary_internal::MulFunctor<float>>, std::array<char *, 2>>(int, T2, T3)")
    kineto = ("void at::native::vectorized_elementwise_kernel<4, at::native::AUnaryFunctor<float,"
              " float, float, at::native::binary_internal::MulFunctor<float> >, std::array<char*,"
              " 2ul> >(int, at::native::AUnaryFunctor<float, float, float, at::native::"
              "binary_internal::MulFunctor<float> >, std::array<char*, 2ul>)")
    nsys = ("void at::native::vectorized_elementwise_kernel<(int)4, at::native::AUnaryFunctor"
            "<float, float, float, at::native::binary_internal::MulFunctor<float>>, std::array"
            "<char *, (unsigned long)2>>(int, T2, T3)")
    assert kernel_key(ncu_name) == kernel_key(kineto) == kernel_key(nsys)


def test_join_to_kineto_and_nsys_traces() -> None:
    c = ncu.read(RAW)
    k = tf.load(F / "probe.pt.trace.json.gz")
    r = roofline(k, by="kernel")
    m = measured_kernels(k, c.launches, device=r.device, modelled=r.kernels)
    # The Kineto trace holds the 3 GEMMs and 3 multiplies only: randn and fill unmatched.
    assert int(m.join.by_key["matched"].sum()) == 6
    assert any("not in the trace" in n for n in m.notes)
    g = m.table[m.table["kernel"].str.startswith("nvjet")].iloc[0]
    assert g["measured_gflop"] == pytest.approx(g["modelled_gflop"], rel=0.02)
    assert g["limiter"] == "compute"
    e = m.table[m.table["kernel"].str.startswith("vectorized")].iloc[0]
    assert e["measured_gbytes"] == pytest.approx(e["modelled_gbytes"], rel=0.10)
    assert e["limiter"] == "memory"
    s = measured_kernels(tf.load(F / "probe.nsys.sqlite.gz"), c.launches)
    assert int(s.join.by_key["matched"].sum()) == 9


def test_join_gaps_and_nothing_matching() -> None:
    c = ncu.read(RAW)
    k = tf.load(F / "probe.pt.trace.json.gz")
    skipped = measured_kernels(k, c.launches, skip=1)  # as after ncu --launch-skip 1
    assert int(skipped.join.by_key["matched"].sum()) == 4
    none = measured_kernels(k, read_counters(F / "rocprofv3.counter_collection.csv").launches)
    assert none.table.empty and any("nothing measured" in n for n in none.notes)


def test_cli_roofline_measured_and_top_kernels_counters() -> None:
    code, out, err = cli_main("roofline", str(F / "probe.pt.trace.json.gz"), "--by", "kernel",
                              "--measured", str(RAW))
    assert code == 0, err
    assert "Measured roofline by kernel" in out and "Limiter" in out
    code, out, err = cli_main("top-kernels", str(F / "probe.nsys.sqlite.gz"), "--counters",
                              str(RAW), "--format", "csv")
    assert code == 0, err
    assert "sm_pct" in out.splitlines()[0]


# -- shapes under nsys -----------------------------------------------------------------------
def test_emit_nvtx_ranges_become_ops() -> None:
    import pandas as pd

    df = pd.DataFrame({"name": [
        "aten::softmax, seq = 3, op_id = 64, sizes = [[8192, 4096], [], []], "
        "input_op_ids = [(1,0), (0,-1)]", "step 0", "aten::mm, seq = 2, op_id = 5",
        "NllLossBackward0, seq = 116, op_id = 1141, sizes = [[]], input_op_ids = [(1136,0)]"],
        "kind": "user_annotation", "cat": "nvtx"})
    assert mark_ops(df) == 3
    assert df["name"].tolist() == ["aten::softmax", "step 0", "aten::mm", "NllLossBackward0"]
    assert df["kind"].tolist() == ["cpu_op", "user_annotation", "cpu_op", "cpu_op"]
    assert df["Input Dims"].iloc[0] == "[[8192, 4096], [], []]"


def test_nsys_shapes_give_the_kineto_ops_flops_and_idle_share() -> None:
    """The same 4 training steps under nsys --pytorch=autograd-shapes-nvtx and Kineto."""
    ns = tf.load(F / "model.nsys.sqlite.gz")
    kn = tf.load(F / "model.pt.trace.json.gz")
    per_step_n = ops(ns, steps=[0, 1, 2, 3])["gflops"].sum() / 4
    per_step_k = ops(kn)["gflops"].sum() / 4  # the Kineto trace is the 4 steps alone
    assert per_step_n > 1000
    assert per_step_n == pytest.approx(per_step_k, rel=0.01)

    def idle(t: tf.Trace) -> float:
        c = critical_path(t).by_category
        tot = c["ns"].sum()
        return 100 * float(c.loc[c["category"] == "idle", "ns"].sum()) / tot

    assert abs(idle(ns) - idle(kn)) < 5


def test_nsys_capture_records_shapes_by_default() -> None:
    from traceforge.capture.nsys import SHAPES_FLAG, profile_command
    from traceforge.capture.options import CaptureOptions

    on = profile_command("nsys", "r.nsys-rep", CaptureOptions(backend="nsys"), ["python", "t.py"])
    off = profile_command("nsys", "r.nsys-rep", CaptureOptions(backend="nsys",
                                                               record_shapes=False), ["x"])
    assert SHAPES_FLAG in on and on[-2:] == ["python", "t.py"] and SHAPES_FLAG not in off


FAKE_NCU = """#!/bin/sh
# Stands in for ncu: logs its arguments; a profile writes an empty report, --import prints
# the H100 probe's raw page.
echo "$@" >> "$(dirname "$0")/calls.log"
case "$1" in
  --version) echo "fake ncu 0.0"; exit 0 ;;
  --import) cat "%s"; exit 0 ;;
esac
out=""
while [ $# -gt 0 ]; do case "$1" in -o) [ -z "$out" ] && out="$2"; shift 2 ;; *) shift ;; esac
done
: > "$out.ncu-rep"
"""


def test_capture_backend_ncu_profiles_the_top_kernels(tmp_path: Path) -> None:
    import json

    fake = tmp_path / "bin" / "ncu"
    fake.parent.mkdir()
    fake.write_text(FAKE_NCU % RAW)
    fake.chmod(0o755)
    (tmp_path / "train.py").write_text("print('hi')\n")
    out = tmp_path / "out"
    code, _o, err = cli_main("capture", "--backend", "ncu", "--ncu", str(fake), "--top", "2",
                             "--from", str(F / "probe.pt.trace.json.gz"), "-o", str(out), "--",
                             "python", str(tmp_path / "train.py"))
    assert code == 0, err
    calls = (fake.parent / "calls.log").read_text()
    assert "--set roofline -k regex:vectorized_elementwise_kernel|" \
           "nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_NNT --launch-count 6" in calls
    assert "clocks locked to base" in err
    summary = json.loads((out / "train.sdpa.summary.json").read_text())
    assert summary["backend"] == "ncu" and summary["ncu"]["csv"] == "train.sdpa.ncu-raw.csv"
    assert (out / "train.sdpa.ncu-raw.csv").read_text() == RAW.read_text()
    code, text, err = cli_main("roofline", str(F / "probe.pt.trace.json.gz"), "--measured",
                               str(out / "train.sdpa.ncu-raw.csv"), "--format", "json")
    assert code == 0, err
    assert len(json.loads(text)["measured"]) == 2


def test_report_chart_and_annotate_counters(tmp_path: Path) -> None:
    import json

    html = tmp_path / "r.html"
    code, _o, err = cli_main("report", str(F / "probe.pt.trace.json.gz"), "--counters", str(RAW),
                             "-o", str(html))
    assert code == 0, err
    text = html.read_text()
    assert "Roofline: measured" in text and text.count("<svg") >= 2
    out = tmp_path / "a.json"
    code, _o, err = cli_main("annotate", str(F / "probe.pt.trace.json.gz"), "--counters",
                             str(RAW), "-o", str(out))
    assert code == 0, err
    ev = [e for e in json.loads(out.read_text())["traceEvents"]
          if "ncu_sm_pct" in e.get("args", {})]
    assert len(ev) == 6
    gemm = next(e for e in ev if e["name"].startswith("nvjet"))
    assert gemm["args"]["ncu_flop"] == 2 * N**3


def test_join_with_ncu_name_filter_and_launch_count() -> None:
    """ncu -k regex:'vectorized_elementwise_kernel|nvjet...' --launch-count 6 (the command
    capture --backend ncu builds, run on the H100): the fill kernel shares the multiply's
    function name, so the 6 launches are fill, then GEMM and multiply alternately."""
    c = read_counters(F / "probe.ncu-filtered-raw.csv")
    assert len(c.launches) == 6
    m = measured_kernels(tf.load(F / "probe.pt.trace.json.gz"), c.launches)
    by = m.join.by_key.set_index("key")
    assert int(by["matched"].sum()) == 5
    assert any("5 of 6 profiled launches" in n for n in m.notes)
    assert any("1 trace launches of 1 kernel name(s) have no profiled launch" in n
               for n in m.notes)


def test_mfu_on_nsys_shapes_needs_a_dtype() -> None:
    from traceforge.analyzers.costs.mfu import mfu

    ns = tf.load(F / "model.nsys.sqlite.gz")
    plain = mfu(ns)
    assert plain.steps["gflops"].iloc[0] > 1000 and plain.steps["hfu_pct"].isna().all()
    assert any("--dtype" in n for n in plain.notes)
    assert (mfu(ns, dtype="bf16").steps["hfu_pct"] > 0).all()


def test_ncu_rep_through_ncu_import(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake = tmp_path / "ncu"
    fake.write_text(f'#!/bin/sh\n[ "$1" = --import ] && [ -s "$2" ] && cat "{RAW}" && exit 0\n'
                    'echo "==ERROR== cannot open report" >&2; exit 1\n')
    fake.chmod(0o755)
    monkeypatch.setenv("TRACEFORGE_NCU", str(fake))
    rep = tmp_path / "probe.ncu-rep"
    rep.write_bytes(b"x")
    t = read_counters(rep)
    assert len(t.launches) == 9 and "ncu --import" in t.page
    rep.write_bytes(b"")
    with pytest.raises(TraceFormatError, match="cannot open report"):
        read_counters(rep)
