"""Reports: findings on hand-built traces, Markdown/HTML output, and the HTML in Chromium."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from dataclasses import replace
from pathlib import Path

import pytest
from click.testing import CliRunner

from tests.conftest import REPO, ev, make_trace, shared
from traceforge.analyzers.costs.devices import device_peaks
from traceforge.cli import cli
from traceforge.model import Device, Trace, TraceMeta
from traceforge.report.analysis import analyze
from traceforge.report.comparison import compare_runs, group_runs
from traceforge.report.findings import GEMM_BOUND_PCT_MIN, findings


def _launch_bound() -> Trace:
    # One 100 us step: ten 9 us launch calls, each kernel (0.5 us) starts 0.5 us after its
    # call returns. Busy = 10 * 0.5 = 5 us of the GPU window: far below 40%.
    rows = [ev("ProfilerStep#1", "user_annotation", ts=0, dur=100_000)]
    for i in range(10):
        t = i * 10_000
        rows.append(ev("cudaLaunchKernel", "runtime", ts=t, dur=9_000, corr=i + 1))
        rows.append(ev("vectorized_elementwise_kernel", ts=t + 9_500, dur=500, corr=i + 1))
    return make_trace(rows)


def _gpu_bound() -> Trace:
    # All launches up front; kernels back to back for 95 us of a 100 us step.
    rows = [ev("ProfilerStep#1", "user_annotation", ts=0, dur=100_000)]
    for i in range(10):
        rows.append(ev("cudaLaunchKernel", "runtime", ts=i * 100, dur=50, corr=i + 1))
        rows.append(ev("nvjet_sm90_tst_gemm", ts=5_000 + i * 9_500, dur=9_500, corr=i + 1))
    return make_trace(rows)


def _rules(t: Trace | list[Trace]) -> set[str]:
    return {f.rule for f in findings(analyze(t))}


def test_launch_bound_and_low_busy_fire() -> None:
    r = analyze(_launch_bound())
    assert r.facts["busy_pct"] < 40
    got = {f.rule: f for f in findings(r)}
    assert {"gpu_busy_low", "launch_bound"} <= set(got)
    assert "1 of 1 steps" in got["launch_bound"].evidence


def test_gpu_bound_run_has_no_busy_or_launch_finding() -> None:
    assert not {"gpu_busy_low", "launch_bound"} & _rules(_gpu_bound())


def test_exposed_communication() -> None:
    # NCCL runs [0, 600) and a GEMM [0, 200) in a 1000 ns step: 400 ns exposed = 40% > 30%.
    t = make_trace([
        ev("ProfilerStep#1", "user_annotation", ts=0, dur=1000),
        ev("ncclDevKernel_AllReduce_Sum_bf16_RING_LL", ts=0, dur=600, stream=20),
        ev("nvjet_sm90_tst_gemm", ts=0, dur=200, stream=7),
        ev("nvjet_sm90_tst_gemm", ts=999, dur=1, stream=7),
    ])
    f = {x.rule: x for x in findings(analyze(t))}
    assert "exposed_comm" in f
    assert "rank 0: 40% exposed" in f["exposed_comm"].evidence


def test_copies_and_syncs_inside_steps() -> None:
    rows = [ev("ProfilerStep#1", "user_annotation", ts=0, dur=10_000)]
    rows += [ev("cudaMemcpyAsync", "runtime", ts=100, dur=50, corr=1),
             ev("Memcpy HtoD (Pageable -> Device)", "memcpy", ts=200, dur=300, corr=1),
             ev("cudaDeviceSynchronize", "runtime", ts=600, dur=4_000, corr=2),
             ev("cudaLaunchKernel", "runtime", ts=4_700, dur=50, corr=3),
             ev("nvjet_sm90_tst_gemm", ts=4_800, dur=5_000, corr=3),
             # after the step: neither rule may count these
             ev("cudaDeviceSynchronize", "runtime", ts=20_000, dur=9_000, corr=4),
             ev("Memcpy DtoH (Device -> Pageable)", "memcpy", ts=30_000, dur=300, corr=-1)]
    r = analyze(make_trace(rows))
    assert int(r.copies["count"].sum()) == 1
    assert r.syncs["calls"].tolist() == [1]
    assert r.syncs["total_us"].tolist() == [4.0]
    got = {f.rule: f for f in findings(r)}
    assert "1 copies" in got["host_device_copies"].evidence
    assert "host_device_copies" in got and "sync_stalls" in got
    assert "40.0%" in got["sync_stalls"].evidence  # 4 us of a 10 us step blocked in sync


def _one_gemm(dur_ns: int, device: str) -> Trace:
    """One step: a 4096^3 bf16 aten::mm whose cuBLAS kernel runs ``dur_ns``, on ``device``."""
    n = 4096
    rows = [ev("ProfilerStep#1", "user_annotation", ts=0, dur=dur_ns + 10_000, pid=1, tid=1),
            ev("aten::mm", "cpu_op", ts=10, dur=50, pid=1, tid=1, ext=1),
            ev("cudaLaunchKernel", "runtime", ts=20, dur=5, pid=1, tid=1, corr=1, ext=1),
            ev("nvjet_sm90_tst_128x256_64x4_2x1_v_bz_TNN", ts=100, dur=dur_ns, corr=1, ext=1)]
    args: list[dict[str, object]] = [{} for _ in rows]
    args[1] = {"Input Dims": [[n, n], [n, n]], "Input type": ["c10::BFloat16"] * 2,
               "Concrete Inputs": ["", ""]}
    meta = TraceMeta(format="synthetic", devices=(Device(0, device, "nvidia"),))
    return Trace.from_events(rows, meta, args=args)


@pytest.mark.parametrize(("device", "key"), [("NVIDIA H100 80GB HBM3", "h100-sxm"),
                                             ("NVIDIA H200", "h200"),
                                             ("AMD Instinct MI300X", "mi300x")])
def test_gemm_rule_uses_the_shipped_device_ceilings(device: str, key: str) -> None:
    # One source of device ceilings: the rule reads the datasheet table through the
    # roofline. 2 x 4096^3 FLOPs at the bf16 peak take `ideal` ns; the kernel takes 10x.
    peak = device_peaks(key).peak("bf16")
    assert peak is not None
    ideal = 2 * 4096**3 / (peak * 1e12) * 1e9
    got = {f.rule: f for f in findings(analyze(_one_gemm(round(10 * ideal), device)))}
    ev_ = got["gemm_below_peak"].evidence
    assert device_peaks(key).name in ev_ and "10.0% of their roofline bound" in ev_
    assert f"{2 * 4096**3 / (round(10 * ideal) * 1e3):,.1f} TFLOP/s" in ev_
    fast = round(ideal / ((GEMM_BOUND_PCT_MIN + 1) / 100))
    assert "gemm_below_peak" not in _rules(_one_gemm(fast, device))
    # No ceilings for an unknown device: achieved rates only, so no finding.
    assert "gemm_below_peak" not in _rules(_one_gemm(round(10 * ideal), "Mystery GPU 9000"))


def test_ddp_ranks_form_one_run() -> None:
    from traceforge import load

    ts = [load(shared(f"h200-ddp/ddp_rank{i}.pt.trace.json.gz")) for i in (0, 1)]
    runs = group_runs(ts)
    assert len(runs) == 1 and [t.meta.rank for t in runs[0]] == [0, 1]
    r = analyze(runs[0])
    assert sorted(r.overlap["rank"].tolist()) == [0, 1]


def test_markdown_report_and_latency_comparison(tmp_path: Path) -> None:
    a, b = shared("h100/eager.pt.trace.json.gz"), shared("h100/compiled.pt.trace.json.gz")
    lat = shared("h100/latency.json")
    out = tmp_path / "r.md"
    res = CliRunner().invoke(cli, ["report", str(a), str(b), "-o", str(out), "--latency",
                                   str(lat)])
    assert res.exit_code == 0, res.output
    text = out.read_text()
    for title in ("## Findings", "### Comparison", "### Top kernels", "### Idle time by cause",
                  "### Launch overhead per step", "launch-bound", "## Diff: compiled vs eager",
                  "### Fused kernels in B and the A kernels their ops launched"):
        assert title in text
    rows = {r[0]: r[1] for r in json.loads(lat.read_text())["rows"]}
    line = next(x for x in text.splitlines() if x.startswith("| compiled |"))
    assert f"{rows['eager'] / rows['compiled']:,.2f}" in line  # speedup from latency.json


def test_report_refuses_bad_output(tmp_path: Path) -> None:
    a = shared("h100/compiled.pt.trace.json.gz")
    r = CliRunner().invoke(cli, ["report", str(a), "-o", str(tmp_path / "r.pdf")])
    assert r.exit_code != 0 and not (tmp_path / "r.pdf").exists()
    copy = tmp_path / "t.html"
    shutil.copy(a, copy)
    before = copy.read_bytes()
    r = CliRunner().invoke(cli, ["report", str(copy), "-o", str(copy)])
    assert r.exit_code != 0 and copy.read_bytes() == before  # the input is never overwritten


def test_comparison_speedup_is_latency_ratio() -> None:
    fast, slow = analyze(_gpu_bound()), analyze(_launch_bound())
    fast = replace(fast, label="fast", run_info={"latency_ms": 2.0})
    slow = replace(slow, label="slow", run_info={"latency_ms": 5.0})
    c = compare_runs([slow, fast]).set_index("run")
    assert c.loc["fast", "speedup"] == pytest.approx(2.5)
    assert c.loc["fast", "throughput_per_s"] == pytest.approx(500.0)


_PROBE = """<script>
window.__errors = [];
window.addEventListener('error', function (ev) { window.__errors.push(String(ev.message)); });
var _ce = console.error;
console.error = function () { window.__errors.push(Array.prototype.join.call(arguments, ' '));
  _ce.apply(console, arguments); };
window.addEventListener('load', function () {
  var th = document.querySelector('table.sortable th');
  if (th) { th.click(); }
  document.documentElement.setAttribute('data-errors', String(window.__errors.length));
  document.documentElement.setAttribute('data-error-text', window.__errors.join(' | '));
  var n = document.querySelectorAll('svg').length;
  document.documentElement.setAttribute('data-svgs', String(n));
});
</script>"""

_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
          "--disable-background-networking", "--disable-component-update", "--disable-sync"]


@pytest.mark.slow
def test_html_report_renders_in_chromium(tmp_path: Path) -> None:
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        pytest.skip("chromium not installed (apt-get install -y chromium)")
    ranks = [str(shared(f"h200-ddp/ddp_rank{i}.pt.trace.json.gz")) for i in (0, 1)]
    a, b = shared("h100/eager.pt.trace.json.gz"), shared("h100/compiled.pt.trace.json.gz")
    report = tmp_path / "report.html"
    res = CliRunner().invoke(cli, ["report", str(a), str(b), "-o", str(report)])
    assert res.exit_code == 0, res.output
    ddp = tmp_path / "ddp.html"
    assert CliRunner().invoke(cli, ["report", *ranks, "-o", str(ddp)]).exit_code == 0
    for page in (report, ddp):
        text = page.read_text()
        # Self-contained: nothing is fetched from anywhere.
        assert not re.search(r"""(src|href)\s*=\s*["'](https?:|//)""", text)
        assert "<svg" in text and "<script>" in text
        probed = tmp_path / f"probe-{page.name}"
        probed.write_text(text.replace("<head>", "<head>" + _PROBE, 1))
        dom = subprocess.run(
            [chromium, *_FLAGS, f"--user-data-dir={tmp_path / 'profile'}",
             "--virtual-time-budget=5000", "--dump-dom", probed.as_uri()],
            capture_output=True, text=True, timeout=120, check=False,
        ).stdout
        m = re.search(r'data-errors="(\d+)"', dom)
        assert m is not None, "the page did not finish loading"
        err = re.search(r'data-error-text="([^"]*)"', dom)
        assert m.group(1) == "0", err.group(1) if err else ""
        svgs = re.search(r'data-svgs="(\d+)"', dom)
        assert svgs is not None and int(svgs.group(1)) >= 5
    art = REPO / "test-artifacts"
    art.mkdir(exist_ok=True)
    shot = art / "report.png"
    shot.unlink(missing_ok=True)
    subprocess.run(
        [chromium, *_FLAGS, f"--user-data-dir={tmp_path / 'profile2'}", "--hide-scrollbars",
         "--window-size=1200,4000", f"--screenshot={shot}", report.as_uri()],
        capture_output=True, timeout=120, check=False,
    )
    assert shot.exists() and shot.stat().st_size > 10_000


def test_cpu_only_trace_reports_without_gpu_sections(tmp_path: Path) -> None:
    t = make_trace([ev("ProfilerStep#1", "user_annotation", ts=0, dur=1000),
                    ev("aten::add", "cpu_op", ts=10, dur=100)])
    r = analyze(t)
    assert r.launch.empty and r.top_kernels.empty
    assert findings(r) == []
    from traceforge.render.html import render_html
    from traceforge.render.markdown import render_markdown

    assert "(none)" in render_html([r], [])
    assert "No rule fired" in render_markdown([r], [])
