"""Golden facts about our own H100 captures (fixtures/, copied from shared/fixtures/h100).

The expectations come from how the runs were made (fixtures README): eager GEMMs run as
cuBLAS nvjet_sm90 kernels, fa2 restricts SDPA to FlashAttention-2, compiled is
torch.compile max-autotune (Triton template GEMMs, CUDA-graph replay).
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from tests.conftest import FIXTURES
from traceforge import load, top_kernels
from traceforge.analyzers.timing.ops import ops


def fixture(name: str) -> Path:
    return FIXTURES / f"{name}.pt.trace.json.gz"


def test_compiled_top_family_is_triton_template_gemm() -> None:
    fam = top_kernels(load(fixture("compiled")), by="family")
    assert fam.iloc[0]["family"] == "triton_tem_fused"
    assert {"triton_poi_fused", "triton_per_fused"} <= set(fam["family"])


def test_eager_gemms_are_nvjet_and_attention_is_unfused() -> None:
    t = load(fixture("eager"))
    by_class = top_kernels(t, by="class").set_index("class")
    assert by_class.loc["gemm", "family"].split(", ")[0] == "nvjet_sm90"
    assert "attention" not in by_class.index  # matmul + softmax, no SDPA kernel


def test_fa2_runs_flash_attention_and_sdpa_runs_cudnn() -> None:
    fa2 = set(top_kernels(load(fixture("fa2")), by="family")["family"])
    sdpa = set(top_kernels(load(fixture("sdpa")), by="family")["family"])
    assert "flash_attn" in fa2 and "cudnn_sdpa" not in fa2
    assert "cudnn_sdpa" in sdpa


@pytest.mark.parametrize("mode", ["eager", "sdpa", "fa2", "compiled"])
def test_kernel_totals_match_raw_durations(mode: str) -> None:
    # Oracle: the raw file's kernel durations, summed in integer ns from the decimal text.
    doc = json.loads(gzip.decompress(fixture(mode).read_bytes()))
    raw = [e for e in doc["traceEvents"] if e.get("cat") == "kernel"]
    tk = top_kernels(load(fixture(mode)))
    assert tk["calls"].sum() == len(raw)
    assert round(tk["total_us"].sum() * 1000) == sum(round(e["dur"] * 1000) for e in raw)


def test_attention_flops_agree_between_math_and_flash_paths() -> None:
    # Same model, two independent formulas: eager computes attention with two bmm per
    # layer (QK^T and PV), fa2 with _flash_attention_forward in [B, L, H, E] layout. The
    # math path computes every score and masks the causal ones afterwards; the flash kernel
    # skips them, so a causal call does half the work (is_causal: Concrete Inputs[8]).
    doc = json.loads(gzip.decompress(fixture("fa2").read_bytes()))
    full = causal = 0.0
    for e in doc["traceEvents"]:
        if e.get("cat") == "cpu_op" and e["name"] == "aten::_flash_attention_forward":
            (b, lq, h, d), k = e["args"]["Input Dims"][:2]
            work = 4.0 * b * h * lq * k[1] * d
            full += work
            causal += work / 2 if e["args"]["Concrete Inputs"][8] == "True" else work
    assert 0 < causal < full
    eager = ops(load(fixture("eager"))).set_index("op")
    fa2 = ops(load(fixture("fa2"))).set_index("op")
    assert eager.loc["aten::bmm", "gflops"] == pytest.approx(full / 1e9)
    assert fa2.loc["aten::_flash_attention_forward", "gflops"] == pytest.approx(causal / 1e9)
    # The dense layers are the same in both runs.
    assert eager.loc["aten::addmm", "gflops"] == pytest.approx(fa2.loc["aten::addmm", "gflops"])
    assert eager.loc["aten::addmm", "gflops"] > 0


def test_ops_self_time_covers_every_attributed_gpu_ns() -> None:
    t = load(fixture("eager"))
    table = ops(t)
    gpu_total_us = t.gpu()["dur"].sum() / 1e3
    # Every eager kernel is launched inside some aten op.
    assert table["self_gpu_us"].sum() == pytest.approx(gpu_total_us)
    assert table["pct"].sum() == pytest.approx(100.0)


def test_graph_replayed_kernels_are_attributed_to_the_compiled_region() -> None:
    table = ops(load(fixture("compiled"))).set_index("op")
    top = table.index[0]
    assert top.startswith("Torch-Compiled Region")
    assert table.loc[top, "kernels"] > 2000


def test_launch_config_matches_raw_kernel_args() -> None:
    from traceforge.analyzers.timing.kernels import launch_config

    path = fixture("fa2")
    doc = json.loads(gzip.decompress(path.read_bytes()))
    raw = [e["args"] for e in doc["traceEvents"] if e.get("cat") == "kernel"]
    lc = launch_config(load(path))
    assert len(lc) == len(raw)
    assert lc[["grid_x", "grid_y", "grid_z"]].to_numpy().tolist() == [a["grid"] for a in raw]
    assert lc["registers"].tolist() == [a["registers per thread"] for a in raw]
    assert lc["shared_mem_bytes"].tolist() == [a["shared memory"] for a in raw]
    assert (lc["threads"] == [a["block"][0] * a["block"][1] * a["block"][2] for a in raw]).all()
