"""Vendor-neutral names: what a kernel class and family *are*, on NVIDIA and on AMD.

:func:`traceforge.analyzers.names.kernel_names.classify` names families after the library or
generator that made a kernel (``sm90_xmma``, ``nvjet_sm90``, ``cutlass``, ``Cijk``,
``flash_attn``, ``attention``, ``nccl``), so an H100 run and an MI300 run of the same model
have different family rows for the same work. This module maps each (class, family) to a
*neutral family* -- the role the kernel plays -- and names the library that plays it on
the run's vendor:

=====================  ==========================================  ==============================
neutral family         NVIDIA                                      AMD
=====================  ==========================================  ==============================
``library_gemm``       cuBLAS/cuBLASLt (``nvjet_*``, ``sm90_xmma``,  hipBLASLt/rocBLAS (Tensile
                       CUTLASS kernels cuBLAS picks, gemv)          ``Cijk_*``), CK GEMMs
``compiled_gemm``      Triton templates (``triton_tem_fused``)     the same
``dnn_conv``           cuDNN (xmma/CUTLASS fprop, dgrad, wgrad)    MIOpen (``igemm_*``, Im2Col)
``fused_attention``    FlashAttention, cuDNN SDPA, CUTLASS fmha    AOTriton ``attn_fwd``, CK /
                                                                   aiter fmha, Triton attention
``collectives``        NCCL                                        RCCL (keeps NCCL's kernel names)
``compiled_pointwise`` Triton ``triton_poi_fused``                 the same
``compiled_reduction`` Triton ``triton_red/per_fused``             the same
=====================  ==========================================  ==============================

and ``elementwise``, ``reduction``, ``softmax``, ``norm``, ``memcpy``, ``memset``,
``other`` map to themselves (PyTorch's own kernels, the same code on both vendors).

The neutral class is the classifier's class, with one correction: cuDNN's convolutions
built from CUTLASS or xmma templates (``..._s16816fprop_...``, ``sm90_xmma_fprop_...``) are
classified ``gemm`` by their template family; here they are ``conv`` like MIOpen's, so a
convolution does not show up as GEMM time on one vendor and conv time on the other.
A family the table does not know keeps its class as neutral family and its own name as
library.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from typing import cast

import numpy as np
import pandas as pd

from traceforge.analyzers.timeline.core import timeline
from traceforge.frames import object_series
from traceforge.model import Trace, pair_codes, str_codes

#: Neutral classes in the order comparison tables list them.
NEUTRAL_CLASSES: tuple[str, ...] = (
    "gemm", "conv", "attention", "communication", "triton", "elementwise", "reduction",
    "norm", "memcpy", "memset", "other",
)
#: Classes a cross-vendor comparison always shows, even where both runs have none.
HEADLINE_CLASSES: tuple[str, ...] = ("gemm", "attention", "communication", "elementwise",
                                     "reduction")

# kernel_names family -> (neutral family, NVIDIA library, AMD library).
_FAMILIES: dict[str, tuple[str, str, str]] = {
    "nvjet_sm90": ("library_gemm", "cuBLASLt (nvjet)", "cuBLASLt (nvjet)"),
    "nvjet_tst": ("library_gemm", "cuBLASLt (nvjet)", "cuBLASLt (nvjet)"),
    "nvjet": ("library_gemm", "cuBLASLt (nvjet)", "cuBLASLt (nvjet)"),
    "sm90_xmma": ("library_gemm", "cuBLAS (xmma)", "cuBLAS (xmma)"),
    "sm80_xmma": ("library_gemm", "cuBLAS (xmma)", "cuBLAS (xmma)"),
    "cublas": ("library_gemm", "cuBLAS", "cuBLAS"),
    "cutlass": ("library_gemm", "CUTLASS (via cuBLAS)", "CUTLASS"),
    "Cijk": ("library_gemm", "Tensile", "hipBLASLt/rocBLAS (Tensile)"),
    "gemmSN": ("library_gemm", "cuBLAS", "rocBLAS"),
    "gemm": ("library_gemm", "cuBLAS", "rocBLAS"),
    "triton_tem_fused": ("compiled_gemm", "Triton template", "Triton template"),
    "conv": ("dnn_conv", "cuDNN", "MIOpen"),
    "flash_attn": ("fused_attention", "FlashAttention", "FlashAttention (CK)"),
    "cudnn_sdpa": ("fused_attention", "cuDNN SDPA", "cuDNN SDPA"),
    "fmha": ("fused_attention", "fmha (CUTLASS)", "fmha (CK/aiter)"),
    "attention": ("fused_attention", "attention", "attention"),
    "nccl": ("collectives", "NCCL", "RCCL"),
    "rccl": ("collectives", "RCCL", "RCCL"),
    "custom_allreduce": ("custom_allreduce", "custom all-reduce", "custom all-reduce"),
    "triton_poi_fused": ("compiled_pointwise", "Triton (torch.compile)",
                         "Triton (torch.compile)"),
    "triton_red_fused": ("compiled_reduction", "Triton (torch.compile)",
                         "Triton (torch.compile)"),
    "triton_per_fused": ("compiled_reduction", "Triton (torch.compile)",
                         "Triton (torch.compile)"),
    "elementwise": ("elementwise", "PyTorch", "PyTorch"),
    "reduction": ("reduction", "PyTorch/CUB", "PyTorch/rocPRIM"),
    "softmax": ("softmax", "PyTorch", "PyTorch"),
    "norm": ("norm", "PyTorch", "PyTorch"),
    "memcpy": ("memcpy", "copy", "copy"),
    "memset": ("memset", "memset", "memset"),
    "other": ("other", "", ""),
}

# cuDNN convolutions that the classifier files under a GEMM template family.
_CONV_IN_GEMM = re.compile(r"fprop|dgrad|wgrad|implicit_gemm|implicit_convolve")
# Finer library names where the family is generic.
_LIBRARY_BY_NAME: tuple[tuple[re.Pattern[str], str], ...] = tuple(
    (re.compile(p), lib) for p, lib in (
        (r"^(void )?ck(_tile)?::|composable_kernel", "Composable Kernel"),
        (r"aiter|asm_fmha|fmha_fwd_hd", "aiter"),
        (r"cublasLt", "cuBLASLt"),
        (r"rocblas|hipblaslt", "rocBLAS/hipBLASLt"),
        (r"^attn_fwd|^_attn_fwd|^attn_bwd|^_attn_bwd|aotriton", "AOTriton (Triton)"),
        (r"^triton_|^_?triton", "Triton"),
        (r"paged_attention|unified_attention", "paged attention (vLLM)"),
        (r"flashinfer", "FlashInfer"),
        (r"efficient_attention|mem_efficient", "memory-efficient SDPA"),
    )
)


@dataclass(frozen=True)
class Neutral:
    """A kernel's vendor-neutral class and family, and its library on the run's vendor."""

    cls: str
    family: str
    library: str


@lru_cache(maxsize=65536)
def neutral(cls: str, family: str, name: str = "", vendor: str = "") -> Neutral:
    """The neutral class/family of a kernel the classifier put in (``cls``, ``family``),
    with the library that ran it on ``vendor`` ("nvidia", "amd" or "" for unknown)."""
    if cls == "gemm" and family != "triton_tem_fused" and _CONV_IN_GEMM.search(name):
        return Neutral("conv", "dnn_conv", "cuDNN" if vendor != "amd" else "MIOpen")
    known = _FAMILIES.get(family)
    if known is None:
        return Neutral(cls, cls, family)
    fam, nv, amd = known
    lib = amd if vendor == "amd" else nv
    if family in ("gemm", "attention", "fmha", "gemmSN") and name:
        for pat, named in _LIBRARY_BY_NAME:
            if pat.search(name):
                lib = named
                break
    return Neutral(cls, fam, lib)


def vendor_of(trace: Trace) -> str:
    """The trace's GPU vendor, "nvidia" or "amd": from the device description, else the
    runtime versions the trace names (HIP/ROCm vs CUDA), else its GEMM kernels' families;
    "" when nothing tells."""
    vendors = {d.vendor for d in trace.meta.devices if d.vendor}
    if len(vendors) == 1:
        return vendors.pop()
    keys = " ".join(trace.meta.versions).lower()
    if "hip" in keys or "roc" in keys:
        return "amd"
    if "cuda" in keys or "cupti" in keys:
        return "nvidia"
    fams = set(timeline(trace).activity["family"].astype(str).unique().tolist())
    if fams & {"Cijk", "rccl"}:
        return "amd"
    if fams & {"nvjet_sm90", "nvjet_tst", "nvjet", "sm90_xmma", "sm80_xmma", "cutlass"}:
        return "nvidia"
    return ""


def neutral_codes(acts: pd.DataFrame, vendor: str) -> tuple[np.ndarray, list[Neutral]]:
    """Each row's code into the list of answers of :func:`neutral` for the distinct
    (class, family, name) of a timeline activity table: group on the codes, not on
    string columns of every row."""
    # Each distinct (class, family, name) is mapped once and its rows take the answer
    # through its code (a merge on three string columns cost ~0.1 s per 80k rows).
    (c0, l0), (c1, l1), (c2, l2) = (str_codes(acts[c]) for c in ("cls", "family", "name"))
    triple = pair_codes(pair_codes(c0, c1)[0], c2)[0]
    first = np.full(int(triple.max()) + 1, len(triple), dtype=np.int64)
    np.minimum.at(first, triple, np.arange(len(triple)))
    return triple, [neutral(l0[c0[i]], l1[c1[i]], l2[c2[i]], vendor) for i in first.tolist()]


def neutral_columns(acts: pd.DataFrame, vendor: str) -> pd.DataFrame:
    """``ncls``, ``nfamily`` and ``library`` for each row of a timeline activity table."""
    if acts.empty:
        return cast("pd.DataFrame", pd.DataFrame({"ncls": pd.Series([], dtype=object),
                                                   "nfamily": pd.Series([], dtype=object),
                                                   "library": pd.Series([], dtype=object)}))
    triple, mapped = neutral_codes(acts, vendor)
    # Object columns (object_series): Arrow strings of 10M rows cost seconds each way.
    out: pd.DataFrame = pd.DataFrame(
        {col: object_series(np.array([getattr(m, attr) for m in mapped], dtype=object)[triple],
                            acts.index)
         for col, attr in (("ncls", "cls"), ("nfamily", "family"), ("library", "library"))})
    return out

