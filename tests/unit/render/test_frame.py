"""Terminal and Markdown tables format by column-name convention; JSON and CSV stay exact."""

from __future__ import annotations

import io
import json

import numpy as np
import pandas as pd
from click.testing import CliRunner

from tests.conftest import FIXTURES
from traceforge.cli import cli
from traceforge.render.frame import render_frame

EAGER = str(FIXTURES / "eager.pt.trace.json.gz")

# Shaped like the verbs' frames (column names and dtypes as the analyzers return them).
LAUNCH_STEPS = pd.DataFrame({
    "step": [2, 3], "kernels": [1799, 1799], "launches": [1799, 1799], "graph_replays": [0, 0],
    "window_ns": np.array([78_898_276, 81_363_562], dtype=np.int64),
    "busy_ns": np.array([6_372_629, 6_374_866], dtype=np.int64),
    "host_wait_ns": np.array([72_525_647, 74_988_696], dtype=np.int64),
    "host_wait_pct": [91.92, 92.16], "short_kernels": [1697, 1713], "short_pct": [94.33, 95.22],
    "median_launch_delay_us": [8.29, 8.31], "verdict": ["launch-bound", "launch-bound"],
})
LAUNCH_DELAYS = pd.DataFrame({
    "name": ["Memcpy DtoD (Device -> Device)", "gemm"], "kind": ["memcpy", "kernel"],
    "stream": [7, 7], "ts": np.array([86_054_052, 7_642_343], dtype=np.int64),
    "dur": np.array([2_049, 2_240], dtype=np.int64),
    "launch_delay_ns": np.array([35_909, -1], dtype=np.int64),
})
IDLE_HISTOGRAM = pd.DataFrame({
    "bin": ["<1us", "1-10us", "10-100us"], "gaps": [0, 1, 3507],
    "idle_ns": np.array([0, 9_633, 136_001_367], dtype=np.int64),
})
DIFF_SUMMARY = pd.DataFrame({
    "metric": ["span", "steps", "kernels"], "unit": ["ms", "", "per step"],
    "a": [222.576, 2.0, 1791.0], "b": [372.62, 2.0, 1183.0], "delta": [150.043, 0.0, -608.0],
    "ratio": [1.674, 1.0, 0.661],
})
TOP_KERNELS = pd.DataFrame({
    "name": ["nvjet_sm90_tst_24x64_64x16_4x1_v_bz_bias_TNN"], "class": ["gemm"],
    "family": ["nvjet_sm90"], "calls": [320.0], "total_us": [1789.504], "pct": [14.07],
})


def _table(df: pd.DataFrame) -> str:
    return render_frame(df, "table", width=160)


def test_ns_columns_in_ms_with_the_unit_in_the_header() -> None:
    out = _table(LAUNCH_STEPS)
    # 78,898,276 ns = 78.898276 ms: five significant digits of the largest value
    assert "window (ms)" in out and "78.898" in out and "81.364" in out
    assert "busy (ms)" in out and "6.373" in out and "host wait (ms)" in out
    assert "78,898,276" not in out
    # 160 columns hold the launch table with no cell or unit header split across lines
    lines = out.splitlines()
    assert all(len(ln) <= 160 for ln in lines)
    assert "window (ms)" in next(ln for ln in lines if "step" in ln)


def test_us_for_short_columns_and_minus_one_left_blank() -> None:
    out = _table(LAUNCH_DELAYS)
    assert "ts (ms)" in out and "86.05" in out and "7.64" in out
    assert "dur (us)" in out and "2.049" in out and "2.240" in out
    assert "launch delay (us)" in out and "35.909" in out
    row = next(ln for ln in out.splitlines() if "gemm" in ln)
    assert "-0.001" not in row and "-1" not in row.replace("kernel", "")


def test_small_values_keep_a_significant_digit() -> None:
    out = _table(IDLE_HISTOGRAM)
    # 9,633 ns next to 136 ms: the column is in ms, with enough decimals to show it
    assert "idle (ms)" in out and "0.010" in out and "136.001" in out


def test_whole_number_floats_are_counts() -> None:
    out = render_frame(DIFF_SUMMARY, "table", digits=3, width=160)
    assert "1,791" in out and "1,791.000" not in out and "2.000" not in out
    assert "222.576" in out and "0.661" in out and "-608" in out
    md = render_frame(TOP_KERNELS, "md")
    assert "| 320 |" in md and "| 1,789.50 |" in md


def test_spelled_headers_in_terminal_tables_and_markdown() -> None:
    out = _table(TOP_KERNELS)
    assert "total (us)" in out and "calls" in out
    md = render_frame(LAUNCH_STEPS, "md")
    assert "| window (ms) |" in md and "| median launch delay (us) |" in md  # as in HTML


def test_json_and_csv_keep_exact_integer_ns() -> None:
    rows = json.loads(render_frame(LAUNCH_STEPS, "json"))
    assert rows[0]["window_ns"] == 78_898_276 and rows[1]["busy_ns"] == 6_374_866
    csv = pd.read_csv(io.StringIO(render_frame(LAUNCH_DELAYS, "csv")))
    assert csv["launch_delay_ns"].tolist() == [35_909, -1] and csv["ts"].tolist()[0] == 86_054_052
    floats = json.loads(render_frame(DIFF_SUMMARY, "json"))
    assert floats[0]["a"] == 222.576


def test_the_verbs_on_a_real_trace() -> None:
    r = CliRunner().invoke(cli, ["launch", EAGER, "--width", "160"])
    assert r.exit_code == 0, r.output
    assert "window (ms)" in r.output and "78.898" in r.output
    assert all(len(ln) <= 160 for ln in r.output.splitlines())
    r = CliRunner().invoke(cli, ["diff", EAGER, str(FIXTURES / "sdpa.pt.trace.json.gz")])
    assert r.exit_code == 0, r.output
    assert "1,791" in r.output and "1,791.000" not in r.output
    r = CliRunner().invoke(cli, ["breakdown", EAGER, "--format", "json"])
    assert r.exit_code == 0, r.output
    assert all(isinstance(row["window_ns"], int) for row in json.loads(r.output)["breakdown"])


def test_bytes_and_seconds_in_humane_units_json_exact() -> None:
    df = pd.DataFrame({"peak_bytes": np.array([3 * 2**30, 2**20], dtype=np.int64),
                       "span_ns": np.array([12_345_678_901, 2_000_000_000], dtype=np.int64),
                       "calls": [3.0, 4.0], "total_us": [1.5, 2.25]})
    out = render_frame(df, "table", width=160)
    assert "peak (GiB)" in out and "3.000" in out and "span (s)" in out and "12.346" in out
    assert "3.0" not in out.replace("3.000", "")  # calls is a count
    rows = json.loads(render_frame(df, "json"))
    assert rows[0] == {"peak_bytes": 3 * 2**30, "span_ns": 12_345_678_901, "calls": 3,
                       "total_ns": 1500}
    csv = render_frame(df, "csv").splitlines()
    assert csv[0] == "peak_bytes,span_ns,calls,total_ns" and csv[2].endswith(",4,2250")
