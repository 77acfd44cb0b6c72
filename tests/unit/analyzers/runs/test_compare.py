"""Cross-vendor comparison: the H100 and MI300X TraceLens traces of the same four models line
up row by row, and every per-class total equals the sum computed from the raw file."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

import traceforge as tf
from tests.conftest import EXTERNAL, ev, make_trace
from tests.support import raw_kineto as rk
from traceforge.analyzers.runs.compare import compare
from traceforge.analyzers.runs.inputs import TraceRun
from traceforge.analyzers.runs.vendor import HEADLINE_CLASSES, neutral, vendor_of
from traceforge.errors import UsageError
from traceforge.model import Device, TraceMeta

MODELS = ("Qwen_Qwen1.5-0.5B-Chat__1016005", "google_owlv2-large-patch14-ensemble__1016001",
          "gaunernst_bert-small-uncased__1016001", "Falconsai_nsfw_image_detection__1016002")
TRACES = EXTERNAL / "tracelens" / "traces"

#: The oracle's classes for the kernel names of these eight files, by regex on the raw name
#: (first match wins), written from the names themselves; copies and memsets by category.
ORACLE = (
    ("communication", r"^nccl|rccl"),
    ("attention", r"flash_fwd|^attn_fwd"),
    ("conv", r"fprop|^igemm_fwd|^Im2d2Col"),
    ("gemm", r"^Cijk_|xmma_gemm|cutlass.*gemm|gemv|splitKreduce"),
    ("norm", r"layer_norm"),
    ("reduction", r"reduce_kernel|reduce_1Block|[Ss]oft[Mm]ax"),
    ("elementwise", r"elementwise_kernel|CatArrayBatchedCopy|batched_transpose"),
)


def oracle_class(g: rk.Gpu) -> str:
    if g.cat == "gpu_memcpy":
        return "memcpy"
    if g.cat == "gpu_memset":
        return "memset"
    return next((c for c, pat in ORACLE if re.search(pat, g.name)), "other")


def pair(model: str) -> tuple[Path, Path]:
    paths = (TRACES / "h100" / f"{model}.json.gz", TRACES / "mi300" / f"{model}.json.gz")
    for p in paths:
        if not p.exists():
            pytest.skip(f"shared fixture {p} not present")
    return paths


@pytest.mark.parametrize("model", MODELS)
def test_h100_and_mi300_line_up_and_totals_match_the_raw_files(model: str) -> None:
    paths = pair(model)
    c = compare([TraceRun(v, (tf.load(p),)) for v, p in zip(("h100", "mi300"), paths,
                                                              strict=True)])
    assert c.runs["vendor"].tolist() == ["nvidia", "amd"]
    by = c.by_class.set_index(["class", "run"])
    for side, p in zip(("h100", "mi300"), paths, strict=True):
        raw = rk.load(p)
        assert len(raw.steps) == 1
        sums: dict[str, float] = {}
        for g in raw.in_steps():
            cls = oracle_class(g)
            sums[cls] = sums.get(cls, 0.0) + (g.end - g.ts) / 1e6
        for cls in set(sums) | set(c.by_class["class"]):
            assert by.loc[(cls, side), "ms"] == pytest.approx(sums.get(cls, 0.0), abs=1e-9), (
                cls, side)
    # Rows line up: the headline classes are rows of both runs, and no class or neutral
    # family has time on one side only -- except memset: cuBLAS zeroes workspaces with
    # cudaMemsetAsync on the H100; the MI300X file makes no memset call at all.
    assert set(HEADLINE_CLASSES) <= set(c.by_class["class"])
    mi300 = rk.read(paths[1])
    assert not any("Memset" in str(e.get("name", "")) for e in mi300["traceEvents"])
    for table, keys in ((c.by_class, ["class"]), (c.by_family, ["class", "family"])):
        have = table[table["ms"] > 0].groupby(keys)["run"].nunique()
        one_sided = {k for k, n in have.items() if n == 1 and "memset" not in str(k)}
        assert not one_sided, (model, one_sided)
    fam = c.by_family.set_index(["family", "run"])
    assert fam.loc[("library_gemm", "h100"), "ms"] > 0
    assert "Tensile" in fam.loc[("library_gemm", "mi300"), "library"]


def test_neutral_names_across_vendors() -> None:
    assert neutral("gemm", "sm90_xmma", "sm90_xmma_gemm_bf16", "nvidia").family == "library_gemm"
    assert neutral("gemm", "Cijk", "Cijk_Alik_Bljk", "amd") == neutral(
        "gemm", "Cijk", "Cijk_Alik_Bljk", "amd")
    assert neutral("gemm", "Cijk", "Cijk_A", "amd").library == "hipBLASLt/rocBLAS (Tensile)"
    # cuDNN's CUTLASS convolution is a conv, like MIOpen's igemm_fwd.
    conv = neutral("gemm", "cutlass", "cutlass_tensorop_bf16_s16816fprop_optimized", "nvidia")
    assert (conv.cls, conv.family, conv.library) == ("conv", "dnn_conv", "cuDNN")
    assert neutral("conv", "conv", "igemm_fwd_gtcx3", "amd").library == "MIOpen"
    # RCCL keeps NCCL's kernel names: the family is nccl, the library on AMD is RCCL.
    assert neutral("communication", "nccl", "ncclDevKernel_Generic", "amd").library == "RCCL"
    assert neutral("communication", "nccl", "ncclDevKernel_AllReduce", "nvidia").library == "NCCL"
    assert neutral("attention", "attention", "attn_fwd", "amd").library == "AOTriton (Triton)"
    assert neutral("attention", "flash_attn", "flash_fwd_kernel", "nvidia").family == (
        "fused_attention")
    assert neutral("triton", "triton_poi_fused", "triton_poi_fused_add_0", "amd").family == (
        "compiled_pointwise")
    assert neutral("other", "brand_new_family", "x", "").family == "other"


def test_collectives_line_up_between_nccl_and_rccl() -> None:
    def run(label: str, kernel: str, vendor: str) -> TraceRun:
        t = make_trace([ev(kernel, "kernel", 0, 400), ev("Cijk_Alik_Bljk_HHS" if vendor == "amd"
                                                         else "nvjet_sm90_tst_128x256", "kernel",
                                                         0, 300)])
        dev = Device(0, "GPU", vendor=vendor)
        return TraceRun(label, (tf.Trace(t.events, TraceMeta(devices=(dev,))),))

    c = compare([run("h200", "ncclDevKernel_AllReduce_Sum_bf16_RING_LL", "nvidia"),
                 run("mi350", "ncclDevKernel_Generic_1", "amd")], baseline="h200")
    fam = c.by_family.set_index(["family", "run"])
    assert fam.loc[("collectives", "h200"), "library"] == "NCCL"
    assert fam.loc[("collectives", "mi350"), "library"] == "RCCL"
    assert fam.loc[("collectives", "mi350"), "ms"] == pytest.approx(400e-6)
    wide = c.wide("by_class").set_index("class")
    assert wide.loc["communication", "mi350 vs h200"] == pytest.approx(1.0)
    # Without a device description the vendor comes from the GEMM library's kernels.
    assert vendor_of(make_trace([ev("Cijk_Alik_Bljk_HHS", "kernel", 0, 1)])) == "amd"
    assert vendor_of(make_trace([ev("nvjet_sm90_tst_64x8", "kernel", 0, 1)])) == "nvidia"
    assert vendor_of(make_trace([ev("my_kernel", "kernel", 0, 1)])) == ""
    with pytest.raises(UsageError, match="no such run"):
        compare([run("a", "nccl", "nvidia"), run("b", "nccl", "amd")], baseline="c")


def test_capture_facts_give_latency_speedup() -> None:
    t = make_trace([ev("gemm", "kernel", 0, 100)])
    a = TraceRun("h200", (t,), {"latency_ms": 10.0, "peak_gib": 20.0})
    b = TraceRun("mi350", (t,), {"latency_ms": 8.0, "peak_gib": 30.0})
    runs = compare([a, b]).runs.set_index("run")
    assert runs.loc["mi350", "latency_speedup"] == pytest.approx(1.25)
    assert runs.loc["mi350", "hz"] != runs.loc["mi350", "hz"]  # NaN: no hz fact given
    # no memory events in the traces: the capture summary's peak, labelled so
    assert runs.loc["h200", "peak_memory_bytes"] == 20.0 * 2**30
    assert runs.loc["h200", "peak_memory_from"] == "capture summary"


def test_cli_compare_writes_table_chart_and_reports(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    paths = pair(MODELS[2])
    report = tmp_path / "cmp.html"
    r = subprocess.run([sys.executable, "-m", "traceforge", "compare", *map(str, paths),
                        "--report", str(report), "--chart", str(tmp_path / "chart"),
                        "--format", "md"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    # Labels default to the parent folders, since the file names are the same.
    assert "| class | h100 ms | mi300 ms | mi300 vs h100 |" in r.stdout
    for name in ("chart.png", "chart.svg", "cmp.html", "cmp.compare.png", "cmp.compare.svg"):
        assert (tmp_path / name).stat().st_size > 0
    page = report.read_text()
    assert page.count("<svg") == 1 and "fused_attention" in page and "<script" not in page
    md = tmp_path / "cmp.md"
    r = subprocess.run([sys.executable, "-m", "traceforge", "compare", *map(str, paths),
                        "--labels", "H100,MI300X", "--baseline", "MI300X", "--report", str(md),
                        "--format", "csv", "--table", "classes"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[0] == "class,run,ms,calls,share_pct,speedup"
    assert "H100 vs MI300X" in md.read_text()
    bad = subprocess.run([sys.executable, "-m", "traceforge", "compare", str(paths[0])],
                         capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1
