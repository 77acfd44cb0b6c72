"""roofline, mfu and calibrate on the command line; the peaks file round trip; the chart."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from tests.conftest import FIXTURES
from tests.unit.analyzers.costs.test_roofline import synthetic
from traceforge.analyzers.costs.devices import load_peaks
from traceforge.analyzers.costs.roofline import chart_data, roofline
from traceforge.capture import calibrate as cal
from traceforge.cli import cli, main
from traceforge.errors import UsageError
from traceforge.render.roofline_chart import roofline_svg

EAGER = str(FIXTURES / "eager.pt.trace.json.gz")
COMPILED = str(FIXTURES / "compiled.pt.trace.json.gz")


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    """The CLI in process, exit code and all (main() maps errors to exit codes)."""
    capsys.readouterr()
    try:
        main(list(args))
        code = 0
    except SystemExit as e:
        code = int(e.code or 0)
    out = capsys.readouterr()
    return code, out.out, out.err


def fake_measure(index: int = 0, **kw: Any) -> dict[str, Any]:
    """What measure() returns on an H100, without a GPU (figures as measured there)."""
    rows = [{"dtype": d, "m": 8192, "n": 8192, "k": 8192, "ms": 2 * 8192**3 / (t * 1e9),
             "tflops": t} for d, t in (("bf16", 790.0), ("fp16", 780.0), ("tf32", 390.0),
                                       ("fp32", 51.0))]
    return {"schema": cal.SCHEMA, "device": "NVIDIA H100 80GB HBM3", "sms": 132,
            "created": "2026-11-23T00:00:00+00:00", "torch": "2.11.0+cu130", "cuda": "13.0",
            "hip": None, "method": {"timer": "cuda events", "warmup": 5, "iters": 20,
                                    "copy_bytes": 1 << 30},
            "matmul_tflops": {r["dtype"]: r["tflops"] for r in rows}, "matmul": rows,
            "copy_tb_s": 1.5, "read_write_tb_s": 3.0,
            "skipped": {"fp8": "RuntimeError: not on this build"}}


def test_calibrate_writes_a_peaks_file_roofline_reads(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cal, "measure", fake_measure)
    out = tmp_path / "peaks.json"
    r = CliRunner().invoke(cli, ["calibrate", "-o", str(out)])
    assert r.exit_code == 0, r.output
    assert "bf16 790.0" in r.output and "Skipped fp8" in r.output and "3.000 TB/s" in r.output
    m = load_peaks(out)
    assert m.peak("bf16") == 790.0 and m.memory_tb_s == 3.0
    assert json.loads(out.read_text())["matmul"][0]["m"] == 8192
    r = CliRunner().invoke(cli, ["roofline", EAGER, "--peaks", str(out), "--format", "json"])
    assert r.exit_code == 0, r.output
    rows = json.loads(r.output)["rows"]
    addmm = next(x for x in rows if x["op"] == "aten::addmm")
    # Memory-bound at batch 1: % of the measured 3.0 TB/s exceeds % of the datasheet's 3.35.
    assert addmm["pct_of_measured"] == pytest.approx(addmm["pct_of_bound"] * 3.35 / 3.0)


def test_calibrate_on_a_machine_without_gpu_is_one_line_exit_2(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("torch")
    import torch

    if torch.cuda.is_available():
        pytest.skip("a GPU is present")
    code, out, err = run(capsys, "calibrate", "-o", str(tmp_path / "p.json"))
    assert code == 2 and out == ""
    assert err.strip() == ("traceforge: error: calibrate needs a CUDA or ROCm GPU, and torch "
                           "sees none")
    assert not (tmp_path / "p.json").exists()


def test_write_peaks_to_an_unwritable_place(tmp_path: Path) -> None:
    with pytest.raises(Exception, match="cannot write the peaks file"):
        cal.write_peaks(fake_measure(), tmp_path / "no" / "such" / "dir" / "p.json")


def test_roofline_verbs_and_views() -> None:
    runner = CliRunner()
    r = runner.invoke(cli, ["roofline", EAGER, "-n", "5"])
    assert r.exit_code == 0, r.output
    assert "aten::addmm" in r.output and "h100-sxm" in r.output and "ridge" in r.output
    for by, first in (("kernel", "Kernel"), ("class", "Class")):
        r = runner.invoke(cli, ["roofline", EAGER, "--by", by, "--format", "md"])
        assert r.exit_code == 0 and f"| {first} |" in r.output
    r = runner.invoke(cli, ["roofline", EAGER, "--format", "csv", "--step", "2"])
    assert r.exit_code == 0 and r.output.startswith("op,calls,kernels,time_ns")
    r = runner.invoke(cli, ["roofline", COMPILED])
    assert r.exit_code == 0 and "Unmodelled GPU time" in r.output


def test_roofline_unknown_device_is_a_note_not_an_error() -> None:
    r = CliRunner().invoke(cli, ["roofline", EAGER, "--device", "tpu-v9", "--format", "json"])
    assert r.exit_code == 0, r.output
    doc = json.loads(r.output)
    assert doc["device"] is None and any("unknown device 'tpu-v9'" in n for n in doc["notes"])
    assert doc["rows"][0]["tflops_per_s"] > 0 and doc["rows"][0]["pct_of_bound"] is None


@pytest.mark.parametrize(("args", "needle"), [
    (["roofline", EAGER, "--step", "9"], "no step 9 (steps: 2, 3"),
    (["roofline", EAGER, "--peaks", "/no/such/peaks.json"], "no such peaks file"),
    (["roofline", EAGER, "--target-pct", "0"], "--target-pct 0"),
    (["mfu", EAGER, "--params", "1e9"], "--params and --tokens go together"),
    (["mfu", EAGER, "--flops-from", COMPILED], "no modelled FLOPs"),
])
def test_bad_options_are_one_line_exit_2(args: list[str], needle: str,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, *args)
    assert code == 2 and needle in err and len(err.strip().splitlines()) == 1, err


def test_mfu_verb_compares_eager_and_compiled() -> None:
    runner = CliRunner()
    e = json.loads(runner.invoke(cli, ["mfu", EAGER, "--format", "json"]).output)
    c = json.loads(runner.invoke(cli, ["mfu", COMPILED, "--flops-from", EAGER,
                                       "--format", "json"]).output)
    assert [s["gflops"] for s in c["steps"]] == [s["gflops"] for s in e["steps"]]
    assert min(s["hfu_pct"] for s in c["steps"]) > max(s["hfu_pct"] for s in e["steps"])
    r = runner.invoke(cli, ["mfu", EAGER, "--params", "3e8", "--tokens", "600", "--inference"])
    assert r.exit_code == 0 and "MFU %" in r.output and "HFU %" in r.output


def test_chart_is_a_deterministic_svg() -> None:
    pytest.importorskip("matplotlib")
    data = chart_data(roofline(synthetic()))
    svg = roofline_svg(data)
    assert svg.startswith("<svg") and svg.rstrip().endswith("</svg>")
    assert "NVIDIA H100 SXM5 80GB" in svg and "bf16 datasheet" in svg and "mm" in svg
    assert roofline_svg(data) == svg
    # No device: points only, no roofs.
    bare = roofline_svg(chart_data(roofline(synthetic(None))))
    assert "unknown device" in bare and "datasheet" not in bare


def test_chart_without_matplotlib_says_how_to_get_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib.figure", None)
    with pytest.raises(UsageError, match=r"traceforge\[charts\]"):
        roofline_svg({"points": [], "ceilings": []})
