"""Roofline: FLOPs and bytes per op, achieved rates, bound and time at stake.

Oracles: arithmetic from the raw Kineto JSON (``Input Dims`` / ``Input type`` read here,
not through traceforge), and synthetic traces whose shapes and durations make every
number exact by hand.
"""

from __future__ import annotations

import functools
import gzip
import json
import math
from typing import Any

import numpy as np
import pandas as pd
import pytest

from tests.conftest import FIXTURES, ev
from traceforge.analyzers.costs.devices import device_peaks, peaks_from_dict
from traceforge.analyzers.costs.flops import FLOP_OPS, op_flops, op_work
from traceforge.analyzers.costs.roofline import (
    WORK_COLUMNS,
    activity_work,
    below_bound,
    chart_data,
    kernel_rates,
    roofline,
    timeline,
)
from traceforge.errors import AnalysisError, UsageError
from traceforge.formats import load
from traceforge.model import Device, Trace, TraceMeta

EAGER = FIXTURES / "eager.pt.trace.json.gz"
SIZE = {"c10::BFloat16": 2, "c10::Half": 2, "float": 4}  # bytes per element, by Input type
H100 = Device(0, "NVIDIA H100 80GB HBM3", "nvidia", 132, 80 * 2**30, "9.0")


@functools.lru_cache(maxsize=1)
def _raw() -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(gzip.decompress(EAGER.read_bytes()))
    return doc


@functools.lru_cache(maxsize=1)
def _eager() -> Trace:
    return load(EAGER)


@functools.lru_cache(maxsize=1)
def _eager_ops() -> pd.DataFrame:
    return roofline(_eager()).table.set_index("op")


def _raw_ops(name: str) -> list[dict[str, Any]]:
    doc = _raw()
    launched = {e["args"].get("External id") for e in doc["traceEvents"]
                if e.get("cat") == "kernel"}
    return [e for e in doc["traceEvents"] if e.get("cat") == "cpu_op" and e["name"] == name
            and e["args"].get("External id") in launched]


def _numel(d: list[int]) -> int:
    return math.prod(d)


# -- hand-checked against the raw file ------------------------------------------------------
def test_addmm_flops_and_bytes_by_hand() -> None:
    calls = _raw_ops("aten::addmm")
    assert len(calls) == 810
    total_f = total_b = 0.0
    for e in calls:
        (bias, a, b, *_), types = e["args"]["Input Dims"], e["args"]["Input type"]
        m, k = a
        n = b[1]
        flops = 2 * m * k * n
        nbytes = (_numel(bias) * SIZE[types[0]] + m * k * SIZE[types[1]]
                  + k * n * SIZE[types[2]] + m * n * SIZE[types[1]])
        w = op_work("aten::addmm", e["args"])
        assert (w.flops, w.bytes, w.dtype, w.family) == (flops, nbytes, "bf16", "matmul")
        total_f += flops
        total_b += nbytes
    r = _eager_ops()
    assert r.loc["aten::addmm", "gflops"] == pytest.approx(total_f / 1e9, rel=1e-12)
    assert r.loc["aten::addmm", "gbytes"] == pytest.approx(total_b / 1e9, rel=1e-12)
    assert r.loc["aten::addmm", "calls"] == len(calls)


def test_bmm_flops_and_bytes_by_hand() -> None:
    calls = _raw_ops("aten::bmm")
    total_f = total_b = 0.0
    for e in calls[:50]:
        (a, b), types = e["args"]["Input Dims"][:2], e["args"]["Input type"]
        bt, m, k = a
        n = b[2]
        out = bt * m * n * SIZE[types[0]]
        w = op_work("aten::bmm", e["args"])
        assert w.flops == 2 * bt * m * k * n
        assert w.bytes == _numel(a) * SIZE[types[0]] + _numel(b) * SIZE[types[1]] + out
    for e in calls:
        (a, b), types = e["args"]["Input Dims"][:2], e["args"]["Input type"]
        total_f += 2 * a[0] * a[1] * a[2] * b[2]
        total_b += (_numel(a) + _numel(b) + a[0] * a[1] * b[2]) * SIZE[types[0]]
    r = _eager_ops()
    assert r.loc["aten::bmm", "gflops"] == pytest.approx(total_f / 1e9, rel=1e-12)
    assert r.loc["aten::bmm", "gbytes"] == pytest.approx(total_b / 1e9, rel=1e-12)


def test_every_eager_kernel_is_modelled_and_time_adds_up() -> None:
    t = _eager()
    r = roofline(t)
    assert r.totals["time_ns"] == t.gpu()["dur"].sum()
    assert r.totals["unmodelled_ns"] == 0 and r.unmodelled.empty
    assert r.table["time_us"].sum() == pytest.approx(t.gpu()["dur"].sum() / 1e3)
    assert r.device is not None and r.device.key == "h100-sxm"
    for by in ("kernel", "class"):
        assert roofline(t, by=by).table["time_us"].sum() == pytest.approx(
            r.table["time_us"].sum())


def test_op_flops_keeps_its_contract() -> None:
    args = {"Input Dims": [[64], [32, 128], [128, 64], [], []],
            "Input type": ["float", "float", "float", "Scalar", "Scalar"]}
    assert op_flops("aten::addmm", args) == 2 * 32 * 128 * 64
    assert op_flops("aten::addmm", {**args, "flops": 7}) == 7
    assert op_flops("aten::add", {"Input Dims": [[4], [4]],
                                  "Input type": ["float", "float"]}) is None
    assert op_flops("aten::mm", {}) is None
    assert {"aten::mm", "aten::addmm", "aten::_flash_attention_forward",
            "aten::native_layer_norm", "aten::_softmax"} <= FLOP_OPS
    assert "aten::add" not in FLOP_OPS


# -- the work model on single calls ------------------------------------------------------
def _args(dims: list[Any], types: list[str], concrete: list[str] | None = None) -> dict[str, Any]:
    return {"Input Dims": dims, "Input type": types,
            "Concrete Inputs": concrete or [""] * len(dims)}


def test_attention_causal_halves_and_backward_is_2_5x() -> None:
    q = [2, 8, 512, 64]  # [B, H, L, E]
    bf = "c10::BFloat16"
    full = 4.0 * 2 * 8 * 512 * 512 * 64
    fwd = op_work("aten::_scaled_dot_product_flash_attention",
                  _args([q, q, q, [], [], [], []], [bf, bf, bf, "Scalar", "Scalar", "Scalar", ""],
                        ["", "", "", "0.", "False", "False", ""]))
    causal = op_work("aten::_scaled_dot_product_flash_attention",
                     _args([q, q, q, [], [], [], []],
                           [bf, bf, bf, "Scalar", "Scalar", "Scalar", ""],
                           ["", "", "", "0.", "True", "False", ""]))
    assert fwd.flops == full and causal.flops == full / 2
    assert fwd.bytes == 4 * _numel(q) * 2  # q, k, v read; out written
    blhd = [2, 512, 8, 64]
    fa = op_work("aten::_flash_attention_forward",
                 _args([blhd, blhd, blhd, [], [], [], [], [], []], [bf] * 3 + ["Scalar"] * 6,
                       ["", "", "", "", "", "512", "512", "0.", "True"]))
    assert fa.flops == full / 2 and fa.family == "attention"
    bwd_dims = [q, q, q, q, q, [2, 8, 512], [], [], [], [], [], [], [], [], []]
    bwd_types = [bf] * 5 + ["float"] + ["Scalar"] * 9
    conc = [""] * 11 + ["True"] + [""] * 3
    bwd = op_work("aten::_scaled_dot_product_flash_attention_backward",
                  _args(bwd_dims, bwd_types, conc))
    assert bwd.flops == 2.5 * full / 2
    # reads grad_out, q, k, v, out, logsumexp (fp32); writes dq, dk, dv
    assert bwd.bytes == 5 * _numel(q) * 2 + 2 * 8 * 512 * 4 + 3 * _numel(q) * 2


def test_norm_softmax_embedding_elementwise_reduction() -> None:
    bf = "c10::BFloat16"
    ln = op_work("aten::native_layer_norm",
                 _args([[4, 256, 1024], [], [1024], [1024], []],
                       [bf, "ScalarList", bf, bf, "Scalar"], ["", "[1024]", "", "", "1e-05"]))
    n = 4 * 256 * 1024
    assert ln.flops == 8 * n
    assert ln.bytes == 2 * n * 2 + 2 * 1024 * 2 + 2 * (4 * 256) * 4  # x, y, w, b, mean, rstd
    sm = op_work("aten::_softmax", _args([[8, 128], [], []], [bf, "Scalar", "Scalar"],
                                         ["", "-1", "True"]))
    assert sm.flops == 5 * 1024 and sm.bytes == 1024 * 2 + 1024 * 4  # half_to_float
    emb = op_work("aten::embedding", _args([[32000, 1024], [1, 48], [], [], []],
                                           [bf, "long int", "Scalar", "Scalar", "Scalar"]))
    assert emb.flops == 0 and emb.bytes == 48 * 8 + 2 * 48 * 1024 * 2
    add = op_work("aten::add", _args([[4, 1024], [1024], []], [bf, bf, "Scalar"]))
    assert add.flops == 0 and add.bytes == (4 * 1024 + 1024 + 4 * 1024) * 2
    # A wrapped Python scalar (0-d double) does not widen the output.
    mul = op_work("aten::mul", _args([[4, 1024], []], [bf, "double"]))
    assert mul.bytes == 4 * 1024 * 2 * 2 + 8
    inplace = op_work("aten::add_", _args([[1024], [1024], []], [bf, bf, "Scalar"]))
    assert inplace.bytes == 3 * 1024 * 2
    copy = op_work("aten::copy_", _args([[1024], [1024], []], ["float", bf, "Scalar"]))
    assert copy.bytes == 1024 * 2 + 1024 * 4
    to = op_work("aten::_to_copy", _args([[1024], [], [], [], [], [], []],
                                         [bf] + ["Scalar"] * 6, ["", "6", "", "", "", "", ""]))
    assert to.bytes == 1024 * 2 + 1024 * 4  # ScalarType 6 = float
    red = op_work("aten::sum", _args([[64, 1024], [], [], []], ["float", "ScalarList", "Scalar",
                                                                  ""], ["", "[-1]", "False", ""]))
    assert red.flops == 0 and red.bytes == 64 * 1024 * 4 + 64 * 4
    mx = op_work("aten::max", _args([[64], [64]], ["float", "float"]))
    assert mx.bytes == 3 * 64 * 4  # max(a, b) is elementwise
    cat = op_work("aten::cat", _args([[[2, 3], [2, 5]], []], ["TensorList", "Scalar"]),
                  list_dtype="float")
    assert cat.bytes == 2 * (6 + 10) * 4
    mm8 = op_work("aten::_scaled_mm", _args([[64, 128], [128, 32], [], [], [], [], [], []],
                                            ["c10::Float8_e4m3fn"] * 2 + ["float"] * 2
                                            + ["", "", "Scalar", "Scalar"],
                                            ["", "", "", "", "", "", "15", "False"]))
    assert mm8.dtype == "fp8" and mm8.flops == 2 * 64 * 128 * 32
    # fp8 operands, two fp32 0-d scales, bf16 output (ScalarType 15)
    assert mm8.bytes == 64 * 128 + 128 * 32 + 2 * 4 + 64 * 32 * 2


def test_convolution_work() -> None:
    bf = "c10::BFloat16"
    w = op_work("aten::convolution",
                _args([[1, 3, 224, 224], [1024, 3, 14, 14], [1024], [], [], [], [], [], []],
                      [bf, bf, bf] + ["ScalarList"] * 3 + ["Scalar", "ScalarList", "Scalar"],
                      ["", "", "", "[14, 14]", "[0, 0]", "[1, 1]", "False", "[0, 0]", "1"]))
    out = 1 * 1024 * 16 * 16
    assert w.flops == 2 * out * 3 * 14 * 14
    assert w.bytes == (3 * 224 * 224 + 1024 * 3 * 14 * 14 + 1024 + out) * 2


def test_convolution_argument_layouts_differ_per_op() -> None:
    # Argument lists as torch 2.x records them (H100 and MI300X traces of TraceLens).
    bf = "c10::BFloat16"
    cudnn = op_work("aten::cudnn_convolution", _args(
        [[4, 3, 224, 224], [768, 3, 16, 16], [], [], [], [], [], [], []],
        [bf, bf, "ScalarList", "ScalarList", "ScalarList"] + ["Scalar"] * 4,
        ["", "", "[0, 0]", "[16, 16]", "[1, 1]", "1", "False", "False", "True"]))
    assert cudnn.flops == 2 * 4 * 768 * 14 * 14 * 3 * 16 * 16
    miopen = op_work("aten::miopen_convolution", _args(
        [[2, 16, 128, 128], [2432, 16, 2, 2], [], [], [], [], [], [], []],
        [bf, bf, "", "ScalarList", "ScalarList", "ScalarList", "Scalar", "Scalar", "Scalar"],
        ["", "", "", "[0, 0]", "[2, 2]", "[1, 1]", "1", "False", "False"]))
    assert miopen.known and miopen.flops == 2 * 2 * 2432 * 64 * 64 * 16 * 2 * 2
    same = op_work("aten::conv2d", _args(
        [[1, 8, 32, 32], [16, 8, 3, 3], [], [], [], [], []],
        [bf, bf, "", "ScalarList", "str", "ScalarList", "Scalar"],
        ["", "", "", "[1, 1]", "'same'", "[1, 1]", "1"]))
    assert same.flops == 2 * 16 * 32 * 32 * 8 * 3 * 3


def test_cudnn_attention_ops() -> None:
    q = [8, 16, 512, 64]
    bf = "c10::BFloat16"
    fwd = op_work("aten::_cudnn_attention_forward", _args(
        [q, q, q] + [[]] * 10, [bf] * 3 + ["", "", ""] + ["Scalar"] * 6 + [""],
        ["", "", "", "", "", "", "512", "512", "True", "0.", "True", "False", ""]))
    full = 4.0 * 8 * 16 * 512 * 512 * 64
    assert fwd.flops == full / 2
    bwd = op_work("aten::_cudnn_attention_backward", _args(
        [q] * 5 + [[8, 16, 512, 1]] + [[]] * 10,
        [bf] * 5 + ["float", "long int", "long int", "", "", ""] + ["Scalar"] * 4 + [""],
        [""] * 11 + ["512", "512", "0.", "True", ""]))
    assert bwd.flops == 2.5 * full / 2


@pytest.mark.parametrize(("name", "args", "reason"), [
    ("aten::mm", _args([[4, 4], [4, 4]], ["c10::Float9", "c10::Float9"]), "unknown dtype"),
    ("aten::mm", {"Input type": ["float", "float"]}, "no input shapes"),
    ("aten::mm", _args([[4, 4], []], ["float", ""]), "argument 1 is not a tensor"),
    ("aten::nonzero", _args([[4]], ["float"]), "op not modelled"),
    ("aten::cat", _args([[[2], [3]], []], ["TensorList", "Scalar"]), "TensorList"),
    ("aten::_flash_attention_forward", _args([[10, 8, 64]] * 3, ["float"] * 3),
     "variable-length"),
])
def test_bad_input_gives_a_reason_not_an_error(name: str, args: dict[str, Any],
                                               reason: str) -> None:
    w = op_work(name, args)
    assert not w.known and reason in w.reason and math.isnan(w.flops)


def test_a_trace_s_own_flops_arg_wins() -> None:
    w = op_work("aten::mm", {**_args([[4, 4], [4, 4]], ["float", "float"]), "flops": 1000})
    assert w.flops == 1000 and w.bytes == 3 * 16 * 4
    own = op_work("my::op", {"flops": 5})
    assert not own.known and own.flops == 5


# -- exact rates on a synthetic trace -----------------------------------------------------
BF = "c10::BFloat16"


def _op(name: str, ext: int, ts: int, dims: list[Any], types: list[str],
        dur: int = 50) -> tuple[dict[str, Any], dict[str, Any]]:
    return (ev(name, "cpu_op", ts, dur, pid=1, tid=1, ext=ext),
            {"Input Dims": dims, "Input type": types, "Concrete Inputs": [""] * len(dims)})


def _kernel(name: str, ext: int, ts: int, dur: int) -> tuple[dict[str, Any], dict[str, Any]]:
    return ev(name, "kernel", ts, dur, corr=ext, ext=ext), {}


def synthetic(device: Device | None = H100, steps: bool = False) -> Trace:
    """Step 1: a 4096^3 bf16 mm (1 ms) and an add of 2^20 bf16 (10 us).
    Step 2: an addmm split over two kernels (300 + 100 us), an op of unknown dtype, an op
    without shapes, and a kernel no op launched."""
    n = 4096
    pairs = [
        _op("aten::mm", 1, 0, [[n, n], [n, n]], [BF, BF]),
        _kernel("gemm_kernel", 1, 100, 1_000_000),
        _op("aten::add", 2, 60, [[1 << 20], [1 << 20], []], [BF, BF, "Scalar"]),
        _kernel("add_kernel", 2, 1_000_100, 10_000),
        _op("aten::addmm", 3, 2_000_000, [[1024], [2048, 1024], [1024, 1024], [], []],
            [BF, BF, BF, "Scalar", "Scalar"]),
        _kernel("splitk_main", 3, 2_000_100, 300_000),
        _kernel("splitk_reduce", 3, 2_300_100, 100_000),
        _op("aten::mm", 4, 2_000_060, [[8, 8], [8, 8]], ["c10::Float9", "c10::Float9"]),
        _kernel("odd_kernel", 4, 2_400_100, 5_000),
        (ev("aten::mm", "cpu_op", 2_000_070, 10, pid=1, tid=1, ext=5), {}),
        _kernel("noshape_kernel", 5, 2_405_100, 6_000),
        _kernel("orphan_kernel", -1, 2_411_100, 7_000),
        _kernel("ncclDevKernel_AllReduce_Sum_bf16_RING_LL", -1, 2_418_100, 9_000),
    ]
    rows = [r for r, _ in pairs]
    args = [a for _, a in pairs]
    # The launch calls, inside their ops' host ranges (op attribution may go through them,
    # and steps map GPU work to the host step that launched it).
    for ext, ts in ((1, 10), (2, 70), (3, 2_000_010), (4, 2_000_065), (5, 2_000_075)):
        rows.append(ev("cudaLaunchKernel", "runtime", ts, 2, pid=1, tid=1, corr=ext, ext=ext))
        args.append({})
    if steps:
        rows += [ev("ProfilerStep#1", "user_annotation", 0, 1_000_000, pid=1, tid=1),
                 ev("ProfilerStep#2", "user_annotation", 1_999_990, 500_000, pid=1, tid=1)]
        args += [{}, {}]
    meta = TraceMeta(format="synthetic", devices=(device,) if device else ())
    return Trace.from_events(rows, meta, args=args)


def test_exact_rates_intensity_and_bound() -> None:
    r = roofline(synthetic(), by="kernel")
    k = r.kernels.set_index("name")
    n = 4096
    flops, nbytes = 2.0 * n**3, 3.0 * n * n * 2
    g = k.loc["gemm_kernel"]
    assert g["flops"] == flops and g["bytes"] == nbytes
    assert g["tflops_per_s"] == pytest.approx(flops / 1e-3 / 1e12, rel=1e-12)
    assert g["intensity"] == pytest.approx(flops / nbytes, rel=1e-12)
    assert g["bound"] == "compute"  # 1365 FLOP/byte > ridge 989.5 / 3.35 = 295
    ideal_ns = flops / 989.5e12 * 1e9
    assert g["pct_of_bound"] == pytest.approx(100 * ideal_ns / 1e6, rel=1e-12)
    assert g["saved_ns"] == pytest.approx(1e6 - ideal_ns / 0.8, rel=1e-12)
    a = k.loc["add_kernel"]
    assert a["bytes"] == 3 * (1 << 20) * 2 and a["flops"] == 0
    assert a["bound"] == "memory"
    assert a["tb_per_s"] == pytest.approx(3 * (1 << 20) * 2 / 10e-6 / 1e12, rel=1e-12)
    assert a["pct_of_bound"] == pytest.approx(100 * a["tb_per_s"] / 3.35, rel=1e-12)


def test_an_op_s_work_is_shared_by_its_kernels_in_proportion_to_time() -> None:
    k = roofline(synthetic()).kernels.set_index("name")
    total = 2.0 * 2048 * 1024 * 1024
    assert k.loc["splitk_main", "flops"] == pytest.approx(0.75 * total)
    assert k.loc["splitk_reduce", "flops"] == pytest.approx(0.25 * total)
    assert k.loc["splitk_main", "op_share"] == 0.75 and k.loc["splitk_main", "op_kernels"] == 2
    t = roofline(synthetic(), by="kernel").table.set_index("full_name")
    assert t.loc["splitk_reduce", "op_share_pct"] == pytest.approx(25.0)
    op = roofline(synthetic()).table.set_index("op").loc["aten::addmm"]
    assert op["calls"] == 1 and op["kernels"] == 2 and op["gflops"] == pytest.approx(total / 1e9)


def test_unmodelled_time_is_shown_never_dropped() -> None:
    r = roofline(synthetic())
    un = r.unmodelled.set_index("reason")["time_us"]
    assert un[[x for x in un.index if "unknown dtype" in x][0]] == 5.0
    assert un[[x for x in un.index if "no input shapes" in x][0]] == 6.0
    assert un["no launching op in the trace"] == 7.0
    assert un[[x for x in un.index if x.startswith("communication")][0]] == 9.0
    assert r.totals["unmodelled_ns"] == 27_000
    assert r.totals["time_ns"] == 1_000_000 + 10_000 + 400_000 + 27_000
    table = r.table.set_index("op")
    assert table.loc["(no op)", "time_us"] == 16.0 and table.loc["(no op)", "modelled_pct"] == 0
    assert table["time_us"].sum() == pytest.approx(r.totals["time_ns"] / 1e3)
    assert any(n.startswith("Unmodelled time: 27 us") for n in r.notes)


def test_unknown_device_gives_a_note_and_achieved_rates() -> None:
    for r in (roofline(synthetic(Device(0, "Mystery GPU 9000"))),
              roofline(synthetic(None)),
              roofline(synthetic(), device="no-such-gpu")):
        assert r.device is None and any("achieved rates only" in n for n in r.notes)
        g = r.kernels.set_index("name").loc["gemm_kernel"]
        assert g["tflops_per_s"] == pytest.approx(2.0 * 4096**3 / 1e-3 / 1e12)
        assert math.isnan(g["pct_of_bound"]) and g["bound"] == ""
        assert math.isnan(r.totals["saved_ns"])


def test_device_override_and_measured_peaks() -> None:
    r = roofline(synthetic(), device="mi300x")
    g = r.kernels.set_index("name").loc["gemm_kernel"]
    assert g["peak_tflops"] == 1307.4 and g["hbm_tb_s"] == 5.3
    m = peaks_from_dict({"schema": "traceforge-peaks/1", "device": "NVIDIA H100 80GB HBM3",
                         "matmul_tflops": {"bf16": 500.0}, "read_write_tb_s": 2.0})
    r = roofline(synthetic(), peaks=m)
    k = r.kernels.set_index("name")
    flops = 2.0 * 4096**3
    assert k.loc["gemm_kernel", "pct_of_measured"] == pytest.approx(
        100 * flops / 500e12 / 1e-3, rel=1e-12)
    assert k.loc["add_kernel", "pct_of_measured"] == pytest.approx(
        100 * k.loc["add_kernel", "tb_per_s"] / 2.0, rel=1e-12)
    t = r.table.set_index("op")
    assert t.loc["aten::mm", "pct_of_measured"] > t.loc["aten::mm", "pct_of_bound"]
    assert not math.isnan(r.totals["saved_measured_ns"])


def test_fp32_matmul_faster_than_fp32_peak_is_tf32() -> None:
    n = 4096
    pairs = [_op("aten::mm", 1, 0, [[n, n], [n, n]], ["float", "float"]),
             _kernel("fast", 1, 100, 1_000_000),  # 137 TFLOP/s > 67 (FP32 non-tensor)
             _op("aten::mm", 2, 60, [[n, n], [n, n]], ["float", "float"]),
             _kernel("slow", 2, 2_000_000, 5_000_000),  # 27 TFLOP/s
             (ev("cudaLaunchKernel", "runtime", 10, 2, pid=1, tid=1, corr=1, ext=1), {}),
             (ev("cudaLaunchKernel", "runtime", 70, 2, pid=1, tid=1, corr=2, ext=2), {})]
    t = Trace.from_events([p for p, _ in pairs], TraceMeta(devices=(H100,)),
                          args=[a for _, a in pairs])
    k = roofline(t).kernels.set_index("name")
    assert k.loc["fast", "ceiling"] == "tf32" and k.loc["slow", "ceiling"] == "fp32"


def test_steps_select_and_unknown_steps_raise() -> None:
    t = synthetic(steps=True)
    one = roofline(t, steps=[1])
    assert set(one.kernels["name"]) == {"gemm_kernel", "add_kernel"}
    with pytest.raises(AnalysisError, match="no step 7"):
        roofline(t, steps=[7])
    with pytest.raises(UsageError):
        roofline(t, by="nothing")
    with pytest.raises(UsageError):
        roofline(t, target_pct=0)


def test_views_for_report_and_annotate() -> None:
    t = synthetic()
    r = roofline(t)
    rates = kernel_rates(r)
    gemm_row = int(t.events.index[t.events["name"] == "gemm_kernel"][0])
    assert rates.loc[gemm_row, "bound"] == "compute" and rates.loc[gemm_row, "op"] == "aten::mm"
    assert set(rates.index) == set(t.gpu().index)
    worst = below_bound(r, n=2)
    assert list(worst["op"]) == ["aten::mm", "aten::addmm"]
    assert worst["saved_us"].is_monotonic_decreasing
    data = chart_data(r)
    assert {p["label"] for p in data["points"]} == {"aten::mm", "aten::addmm"}
    assert data["ceilings"][0]["dtype"] == "bf16" and data["ceilings"][0]["ridge"] > 0
    assert data["bytes_only"]["ops"] == 1 and data["unmodelled_us"] == 27.0


def test_memcpy_and_memset_carry_their_own_bytes() -> None:
    rows = [ev("Memcpy DtoD (Device -> Device)", "memcpy", 0, 1000, corr=1),
            ev("Memset (Device)", "memset", 2000, 1000, corr=2),
            ev("Memcpy HtoD (Pinned -> Device)", "memcpy", 4000, 1000, corr=3)]
    t = Trace.from_events(rows, TraceMeta(devices=(H100,)),
                          args=[{"bytes": 1000}, {"bytes": 1000}, {"bytes": 1000}])
    k = roofline(t).kernels.set_index("name")
    assert k.loc["Memcpy DtoD (Device -> Device)", "bytes"] == 2000
    assert k.loc["Memset (Device)", "bytes"] == 1000
    assert "host-device" in k.loc["Memcpy HtoD (Pinned -> Device)", "reason"]


def test_compiled_trace_counts_its_regions_as_unmodelled() -> None:
    r = roofline(load(FIXTURES / "compiled.pt.trace.json.gz"))
    assert r.totals["unmodelled_ns"] / r.totals["time_ns"] > 0.9
    # Its region's kernels are CUDA-graph replays: the row says why their work is unknown.
    assert any("graph replay" in x for x in r.unmodelled["reason"])
    region = r.table.set_index("op").loc["Torch-Compiled Region: 0/0"]
    assert region["work"] == "work unknown: graph replay, no shapes recorded"
    assert pd.isna(region["gflops"])  # unknown, not 0
    assert isinstance(r.table, pd.DataFrame) and len(r.table) >= 2


def test_device_peaks_of_a_key_is_what_the_report_uses() -> None:
    assert roofline(synthetic()).device == device_peaks("NVIDIA H100 80GB HBM3")


def test_cudnn_and_flash_attention_of_one_model_do_the_same_work() -> None:
    # Two formulas, two layouts ([B, H, L, E] cuDNN op vs [B, L, H, E] flash op), one model.
    sdpa = roofline(load(FIXTURES / "sdpa.pt.trace.json.gz")).table.set_index("op")
    fa2 = roofline(load(FIXTURES / "fa2.pt.trace.json.gz")).table.set_index("op")
    assert sdpa.loc["aten::_cudnn_attention_forward", "gflops"] == pytest.approx(
        fa2.loc["aten::_flash_attention_forward", "gflops"], rel=1e-12)


def test_activity_work_of_the_whole_timeline_shares_the_memo_s_columns() -> None:
    """All of the timeline's activities (roofline, MFU) take the memoized work columns as
    they are (no copy through an identity index); any other selection takes the same
    values row by row."""
    t = load(EAGER)
    acts = timeline(t)[0]
    whole, _ = activity_work(t, acts)
    full, _ = t.memo["roofline.activity_work"]
    if int(pd.__version__.split(".")[0]) >= 3:  # copy-on-write: assign keeps the arrays
        for c in ("flops", "bytes", "op_share", "op_kernels"):
            assert np.shares_memory(whole[c].to_numpy(), full[c].to_numpy()), c
    picked = acts.iloc[::-3]  # reversed and thinned: taken through the row index
    some, _ = activity_work(t, picked)
    assert not np.shares_memory(some["flops"].to_numpy(), full["flops"].to_numpy())
    want = whole.iloc[::-3]
    for c in WORK_COLUMNS:
        assert some[c].dtype == whole[c].dtype, c
        pd.testing.assert_series_equal(some[c].reset_index(drop=True),
                                       want[c].reset_index(drop=True), check_exact=True)


def test_kernels_without_ops_read_no_args_and_share_their_reasons(
        tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """Kernels no op launched (1M tiny kernels of a bench trace): their work is unknown
    without reading a single arg, so the source file is not scanned for args (at 10M
    events a 1.5 GB re-read and 10M raw slices kept), and every row's reason is one
    string object (np.full of a str made a new object per row: 73 MB at 1M)."""
    from traceforge.analyzers.costs import activity_work as aw
    from traceforge.formats import kineto_args

    p = tmp_path / "tiny.json"
    events = [{"ph": "X", "cat": "kernel", "name": f"k{i % 3}", "pid": 0, "tid": 7,
               "ts": 1000.0 + 2 * i, "dur": 1.0,
               "args": {"device": 0, "stream": 7, "correlation": i + 1}} for i in range(50)]
    p.write_text(json.dumps({"traceEvents": events}))
    t = load(p, cache=False)

    def scan(*a: Any) -> Any:
        raise AssertionError("the source file was scanned for args")
    monkeypatch.setattr(kineto_args, "_scan_in_chunks", scan)
    monkeypatch.setattr(kineto_args, "view", scan)
    codes, uniq = t.distinct_args(np.empty(0, dtype=np.int64), ("bytes",))
    assert len(codes) == 0 and uniq == []
    assert t.args(np.empty(0, dtype=np.int64)) == []
    k, _ = aw.activity_work(t, aw.timeline(t)[0])
    assert len(k) == 50 and not k["modelled"].any()
    reasons = k["reason"].to_numpy()
    assert set(reasons) == {"no launching op in the trace"}
    assert len({id(r) for r in reasons}) == 1
    assert k["reason"].dtype == object and k["dtype"].dtype == object


def _activities(n: int = 3000, seed: int = 7) -> pd.DataFrame:
    """A per-activity table as the roofline groups it: ops with blank and missing names,
    repeated reasons and dtypes (ties by weight on purpose), NaN ideals, unmodelled rows."""
    rng = np.random.default_rng(seed)
    ops = np.array(["aten::mm", "", "aten::add", None, "(no op)", "aten::bmm"], dtype=object)
    reasons = np.array(["", "no shapes", "graph replay", "no shapes", None], dtype=object)
    dtypes = np.array(["bf16", "fp32", "", "bf16"], dtype=object)
    m = rng.random(n) < 0.6
    dur = rng.integers(1, 4, n) * 1000  # few distinct times: ties between groups' values
    flops = np.where(m, rng.random(n) * 1e9, np.nan)
    ideal = np.where(m & (rng.random(n) < 0.9), rng.random(n) * 900, np.nan)
    return pd.DataFrame({
        "op_name": pd.Series(ops[rng.integers(0, len(ops), n)], dtype=object),
        "cls": pd.Series(np.array(["gemm", "elementwise", None], dtype=object)[
            rng.integers(0, 3, n)], dtype=object),
        "name": pd.Series(np.array([f"k{i}" for i in range(9)], dtype=object)[
            rng.integers(0, 9, n)], dtype=object),
        "op_row": np.where(rng.random(n) < 0.8, rng.integers(0, 400, n), -1),
        "dur": dur, "modelled": m, "flops": flops,
        "bytes": np.where(m, rng.random(n) * 1e8, np.nan),
        "dtype": pd.Series(np.where(m, dtypes[rng.integers(0, len(dtypes), n)], ""),
                           dtype=object),
        "ceiling": pd.Series(np.where(m, "bf16", ""), dtype=object),
        "reason": pd.Series(np.where(m, "", reasons[rng.integers(0, len(reasons), n)]),
                            dtype=object),
        "compute_ns": np.where(m, rng.random(n) * 500, np.nan),
        "memory_ns": np.where(m, rng.random(n) * 500, np.nan),
        "ideal_ns": ideal, "ideal_measured_ns": ideal,
        "saved_ns": np.where(np.isnan(ideal), np.nan, rng.random(n) * 100),
        "saved_measured_ns": np.where(np.isnan(ideal), np.nan, rng.random(n) * 100),
    })


def _dominant_by_hand(keys: list[Any], values: list[Any], weight: list[float]
                      ) -> dict[Any, Any]:
    """Per key, the value of the most weight; a tie goes to the (key, value) pair met
    first (what the pandas groupby the roofline used gave)."""
    tot: dict[tuple[Any, Any], float] = {}
    for key, v, w in zip(keys, values, weight, strict=True):
        if w > 0 and isinstance(key, str) and isinstance(v, str) and v:
            tot[(key, v)] = tot.get((key, v), 0.0) + w
    best: dict[Any, tuple[Any, float]] = {}
    for (key, v), w in tot.items():
        if key not in best or w > best[key][1]:
            best[key] = (v, w)
    return {key: v for key, (v, _) in best.items()}


def test_groups_add_up_as_a_groupby_of_their_keys() -> None:
    """The op and class tables (sums as bincounts of the keys' codes, the dominant dtype
    and reason from arrays) against pandas groupbys and a hand count: blank ops are
    "(no op)" (one group with an op of that name), missing keys in no group, ties in
    dominance to the pair met first, calls the distinct op rows."""
    from traceforge.analyzers.costs import roofline_groups as rg

    k = _activities()
    op = k["op_name"].where(k["op_name"] != "", "(no op)")
    for by, keys in (("op", op), ("class", k["cls"])):
        t = rg.table(k, by, None).set_index(by)
        ref = pd.DataFrame({"key": keys, "dur": k["dur"], "m": k["modelled"],
                            "by": np.where(k["modelled"], k["bytes"], 0.0),
                            "op_row": k["op_row"]})
        g = ref.groupby("key")
        assert sorted(t.index) == sorted(g.groups), by
        assert (t["kernels"] == g.size().reindex(t.index)).all()
        assert np.allclose(t["time_us"], g["dur"].sum().reindex(t.index) / 1e3, rtol=1e-12)
        assert np.allclose(t["gbytes"], g["by"].sum().reindex(t.index) / 1e9, rtol=1e-12)
        calls = ref[ref["op_row"] >= 0].groupby("key")["op_row"].nunique()
        assert (t["calls" if by == "op" else "kernels"] >= 0).all()
        if by == "op":
            assert (t["calls"] == calls.reindex(t.index).fillna(0)).all()
        w = np.where(k["modelled"], k["dur"], 0).tolist()
        dt = _dominant_by_hand(keys.tolist(), k["dtype"].tolist(), w)
        assert t["dtype"].to_dict() == {key: dt.get(key, "") for key in t.index}
        unm = np.where(~k["modelled"], k["dur"], 0).tolist()
        why = _dominant_by_hand(keys.tolist(), k["reason"].tolist(), unm)
        assert t["work"].to_dict() == {key: rg._work(why.get(key, "")) for key in t.index}
    u = rg.unmodelled(k, float(k["dur"].sum()))
    um = k[~k["modelled"]].assign(op=op[~k["modelled"]])
    want = um.groupby(["op", "reason"])["dur"].agg(["count", "sum"]).reset_index()
    got = u.assign(time_ns=(u["time_us"] * 1e3).round().astype(np.int64))
    pd.testing.assert_frame_equal(
        got[["op", "reason", "kernels", "time_ns"]].sort_values(["op", "reason"])
        .reset_index(drop=True),
        want.rename(columns={"count": "kernels", "sum": "time_ns"}).astype(
            {"kernels": np.int64, "op": object, "reason": object}), check_dtype=False)
    assert list(u["time_us"]) == sorted(u["time_us"], reverse=True)


def test_with_columns_is_assign_without_copies() -> None:
    """``frames.with_columns`` gives what ``assign`` gives (values, dtypes, column order,
    a column replaced in its place, Series aligned, scalars broadcast) and keeps the
    arrays handed to it under pandas 3 (whose ``assign`` copied each: 4 s and 1.2 GB at
    10M rows for the roofline's 16 columns); object arrays of str stay object."""
    from traceforge.frames import with_columns

    df = pd.DataFrame({"a": np.arange(5), "s": pd.Series(list("abcab"), dtype=object)},
                      index=np.arange(10, 15))
    f, o = np.linspace(0, 1, 5), np.array(list("vwxyz"), dtype=object)
    s = pd.Series(np.arange(5)[::-1], index=df.index[::-1])  # aligned on the index
    got = with_columns(df, {"f": f, "a": np.arange(5) * 3, "o": o, "b": False, "s2": s})
    want = df.assign(f=f, a=np.arange(5) * 3, o=pd.Series(o, index=df.index, dtype=object),
                     b=False, s2=s)
    pd.testing.assert_frame_equal(got, want)
    assert list(got.columns) == ["a", "s", "f", "o", "b", "s2"]
    assert got["o"].dtype == object
    if int(pd.__version__.split(".")[0]) >= 3:  # pandas 2 copies into its blocks anyway
        assert np.shares_memory(got["f"].to_numpy(), f)
        assert np.shares_memory(got["o"].to_numpy(), o)
