"""Device ceilings: the shipped datasheet table, name matching, peaks files."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.conftest import EXTERNAL, FIXTURES
from traceforge import load
from traceforge.analyzers.costs.devices import (
    DTYPE_KEYS,
    _table,
    device_peaks,
    known_devices,
    load_peaks,
    match_device,
    match_name,
    peaks_from_dict,
)
from traceforge.errors import TraceFormatError, UsageError
from traceforge.model import Device


@pytest.mark.parametrize(("name", "key"), [
    ("NVIDIA H100 80GB HBM3", "h100-sxm"),
    ("NVIDIA H100 PCIe", "h100-pcie"),
    ("NVIDIA H100 NVL", "h100-nvl"),
    ("NVIDIA H200", "h200"),
    ("NVIDIA H200 NVL", "h200-nvl"),
    ("NVIDIA B200", "b200"),
    ("NVIDIA GB200", "gb200"),
    ("NVIDIA B300 SXM6 AC", "b300"),
    ("NVIDIA A100-SXM4-80GB", "a100-sxm4-80gb"),
    ("NVIDIA A100-SXM4-40GB", "a100-sxm4-40gb"),
    ("NVIDIA A100-PCIE-40GB", "a100-pcie-40gb"),
    ("NVIDIA A100 80GB PCIe", "a100-pcie-80gb"),
    ("AMD Instinct MI250X", "mi250x"),
    ("AMD Instinct MI300X", "mi300x"),
    ("AMD Instinct MI300X VF", "mi300x"),
    ("AMD Instinct MI325X", "mi325x"),
    ("AMD Instinct MI350X", "mi350x"),
    ("AMD Instinct MI355X", "mi355x"),
    ("h100-sxm", "h100-sxm"),
])
def test_names_match_their_device(name: str, key: str) -> None:
    assert device_peaks(name).key == key


@pytest.mark.parametrize("name", ["NVIDIA GH200 480GB", "Tesla V100-SXM2-32GB",
                                  "NVIDIA GeForce RTX 2080 Ti", "AMD Instinct MI300A", "foo"])
def test_unknown_names_raise_a_one_line_usage_error(name: str) -> None:
    with pytest.raises(UsageError, match="unknown device .*known: a100"):
        device_peaks(name)
    assert match_name(name) is None


def test_figures_gathered_for_the_issue() -> None:
    # BF16 / FP8 dense TFLOP/s and HBM TB/s as listed in the issue (from the datasheets).
    expect = {"h100-sxm": (989, 1979, 3.35), "h200": (989, 1979, 4.8),
              "b200": (2250, 4500, 8.0), "mi300x": (1307, 2615, 5.3),
              "mi325x": (1307, 2615, 6.0), "mi355x": (2500, 5000, 8.0)}
    for key, (bf16, fp8, hbm) in expect.items():
        p = device_peaks(key)
        assert p.peak("bf16") == pytest.approx(bf16, rel=0.01), key
        assert p.peak("fp8") == pytest.approx(fp8, rel=0.01), key
        assert p.hbm_tb_s == hbm, key


def test_sparse_datasheet_figures_are_halved() -> None:
    # NVIDIA's H100 datasheet: BF16 1,979 and FP8 3,958 TFLOPS "with sparsity".
    h = device_peaks("h100-sxm")
    assert h.peak("bf16") == 1979 / 2 and h.peak("fp8") == 3958 / 2
    assert "halved" in h.sources["bf16"] and "halved" not in h.sources["fp32"]
    # A100's datasheet prints the dense figure itself (312, and 624* sparse).
    a = device_peaks("a100-sxm4-80gb")
    assert a.peak("bf16") == 312 and "halved" not in a.sources["bf16"]
    # MI250X: the module's 383 TFLOPS are two GCDs; a trace's device is one.
    assert device_peaks("mi250x").peak("bf16") == pytest.approx(383 / 2)
    assert device_peaks("mi250x").hbm_tb_s == pytest.approx(3.2768 / 2)


def test_every_entry_is_complete_and_sourced() -> None:
    data = _table()
    keys = [e["key"] for e in data["devices"]]
    assert len(keys) == len(set(keys))
    for e in data["devices"]:
        assert e["source"] in data["sources"], e["key"]
        assert set(e["tflops"]) <= set(DTYPE_KEYS), e["key"]
        assert set(e.get("halved") or []) <= set(e["tflops"]), e["key"]
        for r in e["match"]:
            re.compile(r["name"])
        p = device_peaks(e["key"])
        assert set(p.sources) == {*p.tflops, "hbm_tb_s"}
        assert all("<https://" in s for s in p.sources.values())
        assert p.hbm_tb_s > 0 and p.peak("bf16") and p.peak("fp32"), e["key"]
        # Dense tensor-core rates never fall below the vector rate of the same width.
        assert p.peak("bf16") >= p.peak("fp32")  # type: ignore[operator]
    for src in data["sources"].values():
        assert src["url"].startswith("https://") and src["sparsity"] and src["checked"]
    table = known_devices()
    assert list(table["key"]) == keys and table["hbm_tb_s"].gt(0).all()


def test_memory_and_sm_count_pick_the_variant() -> None:
    gib = 2**30
    a40 = Device(0, "NVIDIA A100-PG509-200", "nvidia", 108, 40 * gib, "8.0")
    a80 = Device(0, "NVIDIA A100-SXM4", "nvidia", 108, 80 * gib, "8.0")
    assert match_device(a40).key == "a100-sxm4-40gb"  # type: ignore[union-attr]
    assert match_device(a80).key == "a100-sxm4-80gb"  # type: ignore[union-attr]
    # ROCm 6 Kineto traces may call an MI250 GCD "AMD Radeon Graphics": 104 CUs tell.
    gcd = Device(0, "AMD Radeon Graphics", "amd", 104, 64 * gib, None)
    assert match_device(gcd).key == "mi250"  # type: ignore[union-attr]
    assert match_device(Device(0, "AMD Radeon Graphics", "amd", 60)) is None


def test_a_partition_scales_compute_but_not_memory() -> None:
    cpx = match_device(Device(0, "AMD Instinct MI300X", "amd", 38))
    assert cpx is not None and cpx.sms == 38
    assert cpx.peak("bf16") == pytest.approx(1307.4 / 8)
    assert cpx.hbm_tb_s == 5.3 and "partition of 38 of 304" in cpx.notes[-1]


def test_devices_of_real_traces_match() -> None:
    want = {"eager.pt.trace.json.gz": "h100-sxm",
            "capture_h200x2.ddp_train.sdpa.rank0.pt.trace.json.gz": "h200"}
    for f, key in want.items():
        devs = load(FIXTURES / f).meta.devices
        assert {match_device(d).key for d in devs} == {key}  # type: ignore[union-attr]
    ext = {"tracelens/traces/b200/eager_trace.json.gz": "b200",
           "tracelens/traces/mi300/gaunernst_bert-small-uncased__1016001.json.gz": "mi300x",
           "hta/amd_trace/mi250_minitoy_train_ROCm6_2_kineto.json.gz": "mi250",
           "hta/trace_diff/control/control.json.gz": "a100-sxm4-40gb",
           "tracelens/rocprof/908_results.json.gz": "mi350x"}
    for rel, key in ext.items():
        p = EXTERNAL / rel
        if not p.exists():
            pytest.skip(f"shared fixture {rel} not present")
        devs = load(p).meta.devices
        assert {getattr(match_device(d), "key", None) for d in devs} == {key}, rel


def _doc(**kw: object) -> dict[str, object]:
    doc: dict[str, object] = {"schema": "traceforge-peaks/1", "device": "NVIDIA H100 80GB HBM3",
                              "matmul_tflops": {"bf16": 790.0, "fp8": 1300.0},
                              "read_write_tb_s": 3.0}
    doc.update(kw)
    return doc


def test_peaks_file_reads_back(tmp_path: Path) -> None:
    p = tmp_path / "peaks.json"
    p.write_text(json.dumps(_doc()))
    m = load_peaks(p)
    assert m.peak("bf16") == 790.0 and m.peak("fp16") is None and m.memory_tb_s == 3.0
    assert m.device == "NVIDIA H100 80GB HBM3" and m.path == str(p)


@pytest.mark.parametrize(("content", "problem"), [
    (None, "no such peaks file"),
    ("{not json", "not a peaks file"),
    (json.dumps({"matmul_tflops": {}}), "not a peaks file"),
    (json.dumps(_doc(schema="traceforge-peaks/9")), "is not 'traceforge-peaks/1'"),
    (json.dumps(_doc(matmul_tflops={"bf16": -1})), "not a positive rate"),
    (json.dumps(_doc(matmul_tflops={"bf17": 5})), "not a positive rate"),
    (json.dumps(_doc(matmul_tflops=[1])), "no matmul_tflops object"),
    (json.dumps(_doc(read_write_tb_s="fast")), "read_write_tb_s"),
])
def test_bad_peaks_files_give_one_line(tmp_path: Path, content: str | None,
                                       problem: str) -> None:
    p = tmp_path / "peaks.json"
    if content is not None:
        p.write_text(content)
    with pytest.raises(TraceFormatError, match=re.escape(problem)) as e:
        load_peaks(p)
    assert str(p) in str(e.value) and "\n" not in str(e.value)


def test_peaks_from_dict_without_memory() -> None:
    m = peaks_from_dict(_doc(read_write_tb_s=None))
    assert m.memory_tb_s is None
