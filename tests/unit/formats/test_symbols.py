"""Demangling in the readers: every mangled kernel symbol of the fixtures, checked against
the system's c++filt / llvm-cxxfilt where they can read it, and against the raw files."""

from __future__ import annotations

import gzip
import json
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from tests.conftest import SHARED, ev, make_trace, shared
from traceforge import load
from traceforge.formats import symbols
from traceforge.formats.symbols import demangle, demangle_names

# Kineto / TraceLens traces whose kernels are recorded by their mangled symbol.
MANGLED_TRACES = (
    "external/hta/nccl_parser_config/nccl_data.json.gz",  # cuDNN's CUTLASS (cutlass_cudnn_*)
    "external/tracelens/traces/inference/vllm_decode_full/graph_execution.json.gz",  # ck_tile
    "external/tracelens/traces/inference/sglang_decode/sglang_Qwen3-8B_decode.json.gz",  # aiter
    "external/tracelens/traces/mi300/resnet_act_checkpoint.json.gz",  # composable_kernel
)

# Written out from demanglers other than ours (the pure-Python ``demangle`` package and
# llvm-cxxfilt agree on them); the first uses C++20's ``Tn`` that no system tool here reads.
KNOWN = {
    "_ZN7sgl_hip10activation18act_and_mul_kernelI14__hip_bfloat16TnPFT_RKS3_EXadL_Z4siluIS2_ES3_"
    "S5_EEEEvPS3_PS4_i":
        "void sgl_hip::activation::act_and_mul_kernel<__hip_bfloat16, &__hip_bfloat16 "
        "silu<__hip_bfloat16>(__hip_bfloat16 const&)>(__hip_bfloat16*, __hip_bfloat16 const*, int)",
    "_ZN5aiter24add_rmsnorm_quant_kernelIDF16bDF16bLi64ELi8ELb0ELb0ELb1ELi1EEEvPT0_PT_PfS4_S4_S4_"
    "diiiiiiib":
        "void aiter::add_rmsnorm_quant_kernel<std::bfloat16_t, std::bfloat16_t, 64, 8, false, "
        "false, true, 1>(std::bfloat16_t*, std::bfloat16_t*, float*, std::bfloat16_t*, "
        "std::bfloat16_t*, std::bfloat16_t*, double, int, int, int, int, int, int, int, bool)",
    "_Z4axpyIdEvT_PS0_S1_i": "void axpy<double>(double, double*, double*, int)",
}


def _raw_kernel_names(path: Path) -> list[str]:
    """Kernel names straight from a Kineto JSON file (no traceforge code)."""
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt") as f:
        doc = json.load(f)
    return [e["name"] for e in doc["traceEvents"]
            if e.get("ph") == "X" and str(e.get("cat", "")).lower() == "kernel"]


def _mangled_fixture_names() -> list[str]:
    names: set[str] = set()
    for rel in MANGLED_TRACES:
        p = SHARED / rel
        if p.exists():
            names.update(n for n in _raw_kernel_names(p) if n.startswith("_Z"))
    return sorted(names)


def test_known_symbols() -> None:
    for sym, want in KNOWN.items():
        assert demangle(sym) == want


@pytest.mark.parametrize("tool", ["c++filt", "llvm-cxxfilt"])
def test_fixture_symbols_match_system_demanglers(tool: str) -> None:
    # GIVEN every distinct mangled kernel symbol of the shared traces
    names = _mangled_fixture_names()
    exe = shutil.which(tool)
    if not names or exe is None:
        pytest.skip(f"needs the shared traces and {tool}")
    # WHEN the system tool demangles them (it leaves alone what it cannot read)
    out = subprocess.run([exe], input="\n".join(names) + "\n", capture_output=True, text=True,
                         check=True).stdout.splitlines()
    compared = 0
    for sym, theirs in zip(names, out, strict=True):
        ours = demangle(sym)
        assert not ours.startswith("_Z"), sym  # ours reads every one of them
        if theirs != sym:
            # THEN ours agrees, up to the "> >" that older demanglers print for ">>"
            assert ours == theirs.replace("> >", ">>"), sym
            compared += 1
    assert compared > 0


def test_readers_demangle_and_keep_the_symbol_in_args() -> None:
    for rel in MANGLED_TRACES:
        path = shared(rel)
        raw = _raw_kernel_names(path)
        t = load(path)
        k = t.kernels()
        names = k["name"].astype(str).tolist()
        assert not any(n.startswith("_Z") for n in names), rel
        # Every kernel row maps back to the raw name it was read from: the symbol in args
        # where the name was demangled, the name itself otherwise.
        back = [a.get("mangled", n) for a, n in zip(t.args(k.index), names, strict=True)]
        assert Counter(back) == Counter(raw), rel
        assert sum(1 for n in raw if n.startswith("_Z")) == sum(
            1 for a in t.args(k.index) if "mangled" in a) > 0


def test_demangle_names_merges_and_leaves_others() -> None:
    sym = "_Z4axpyIdEvT_PS0_S1_i"
    plain = KNOWN[sym]
    t = make_trace([ev(sym, ts=0, dur=5), ev(plain, ts=10, dur=5), ev("aten::mm", "cpu_op"),
                    ev("_Zbroken", ts=20, dur=1)])
    out = demangle_names(t)
    assert out.events["name"].astype(str).tolist() == [plain, plain, "aten::mm", "_Zbroken"]
    assert list(out.events["name"].cat.categories).count(plain) == 1
    args = out.args([0, 1, 3])
    assert args[0]["mangled"] == sym and "mangled" not in args[1] and "mangled" not in args[2]
    # A trace without symbols is passed through untouched.
    plain_trace = make_trace([ev("gemm"), ev("aten::mm", "cpu_op")])
    assert demangle_names(plain_trace) is plain_trace


def test_openmp_target_regions() -> None:
    assert demangle("__omp_offloading_10302_b4fd1e__Z4axpyIdEvT_PS0_S1_i_l12") == (
        "__omp_offloading_10302_b4fd1e_void axpy<double>(double, double*, double*, int)_l12")
    assert demangle("__omp_offloading_fd00_4a3d1f_main_l52") == (
        "__omp_offloading_fd00_4a3d1f_main_l52")


def test_without_the_demangler_names_stay(monkeypatch: pytest.MonkeyPatch) -> None:
    # GIVEN a platform where pydemumble is not installed
    monkeypatch.setitem(sys.modules, "pydemumble", None)
    symbols.demangle.cache_clear()
    try:
        assert demangle("_Z4axpyIdEvT_PS0_S1_i") == "_Z4axpyIdEvT_PS0_S1_i"
    finally:
        symbols.demangle.cache_clear()
