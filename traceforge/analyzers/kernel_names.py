"""Kernel names: the one place that turns a raw kernel name into class, family and a short name.

Classes: gemm, conv, attention, communication, memcpy, memset, elementwise, reduction, norm,
triton (fused pointwise/reduction kernels from torch.compile), other.
Families are the library or generator that produced the kernel (``nvjet_sm90``, ``Cijk``,
``triton_tem_fused``, ``flash_fwd``, ``nccl``, ...), so that tables can be grouped by them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

CLASSES: tuple[str, ...] = (
    "gemm",
    "conv",
    "attention",
    "communication",
    "memcpy",
    "memset",
    "elementwise",
    "reduction",
    "norm",
    "triton",
    "other",
)


@dataclass(frozen=True)
class KernelName:
    """What a kernel name tells: class, family, short name and decoded details."""

    cls: str
    family: str
    short: str
    detail: str = ""  # e.g. "tile 128x256, k64 x4 stages, cluster 2x1" or "ops: addmm+gelu"


# (regex on the full name, class, family). First match wins; order encodes priority:
# communication first (an NCCL kernel's template args can mention "reduce"), then
# attention (flash kernels contain "gemm"-like words), then GEMM libraries.
_RULES: tuple[tuple[re.Pattern[str], str, str], ...] = tuple(
    (re.compile(p), c, f)
    for p, c, f in (
        (r"ncclDevKernel_|ncclKernel_|^nccl", "communication", "nccl"),
        (r"rccl|RCCL", "communication", "rccl"),
        (r"multimem_all_reduce|cross_device_reduce|one_shot_all_reduce|two_shot_all_reduce",
         "communication", "custom_allreduce"),
        (r"^Memcpy|^\[CUDA memcpy|^memcpy|CopyBuffer|copyBuffer", "memcpy", "memcpy"),
        (r"^Memset|^\[CUDA memset|fillBuffer", "memset", "memset"),
        (r"pytorch_flash::|^(void )?flash_(fwd|bwd)|flash_attn|flashattn",
         "attention", "flash_attn"),
        (r"sdpa.*flash|flash.*sdpa|cudnn_generated_fort_native_sdpa", "attention", "cudnn_sdpa"),
        (r"fmha", "attention", "fmha"),
        (r"^triton_.*attn|^attn_fwd|^_attn_fwd|unified_attention|paged_attention|"
         r"flashinfer|mem_efficient_attention|fmha_cutlass|efficient_attention",
         "attention", "attention"),
        (r"^triton_tem_fused", "gemm", "triton_tem_fused"),
        (r"^triton_poi_fused", "triton", "triton_poi_fused"),
        (r"^triton_red_fused", "triton", "triton_red_fused"),
        (r"^triton_per_fused", "triton", "triton_per_fused"),
        (r"^nvjet_sm90", "gemm", "nvjet_sm90"),
        (r"^nvjet_tst", "gemm", "nvjet_tst"),
        (r"^nvjet_(\w+?)_", "gemm", "nvjet"),
        (r"sm90_xmma_gemm|sm90_xmma", "gemm", "sm90_xmma"),
        (r"sm80_xmma_gemm|sm80_xmma", "gemm", "sm80_xmma"),
        (r"xmma_fprop|xmma_dgrad|xmma_wgrad|implicit_convolve|explicit_convolve|"
         r"scudnn|_conv_|conv2d|convolution|igemm_(fwd|bwd|wrw)|Convolution|wgrad_alg|"
         r"dgrad|fft2d|winograd|Im2d2Col|grouped_conv",
         "conv", "conv"),
        (r"^Cijk_", "gemm", "Cijk"),
        (r"gemmSN", "gemm", "gemmSN"),
        (r"cutlass", "gemm", "cutlass"),
        (r"^(ampere|volta|turing|sm\d+|hopper)_\w*gemm", "gemm", "cublas"),
        (r"gemv|gemm|GEMM|Gemm|matmul|_mm_|bmm_|^bmm|splitKreduce", "gemm", "gemm"),
        (r"layer_norm|rms_?norm|RMSNorm|LayerNorm|batch_norm|BatchNorm|group_norm|GroupNorm|"
         r"bn_fw|bn_bw|instance_norm|Rmsnorm|Layernorm",
         "norm", "norm"),
        (r"softmax|SoftMax|Softmax", "reduction", "softmax"),
        (r"reduce_kernel|reduce_1Block|Reduce|reduction|DeviceScan|RadixSort|cub::|rocprim|"
         r"_sum_|topk|argmax|max_pool|avg_pool",
         "reduction", "reduction"),
        (r"elementwise|vectorized_|unrolled_|CatArrayBatchedCopy|multi_tensor_apply|"
         r"index_elementwise|fill_kernel|copy_kernel|_scatter_gather|distribution_|"
         r"act_and_mul|activation|transpose|Tensor1d|Tensor2d|permute",
         "elementwise", "elementwise"),
    )
)

_GENERIC_WRAPPERS = {"Kernel", "Kernel2", "kernel", "device_kernel", "kentry", "trampoline_kernel"}
_NCCL_COLL = re.compile(r"nccl(?:Dev)?Kernel_([A-Za-z]+)")
_NVJET = re.compile(r"nvjet_\w+?_(\d+)x(\d+)_(\d+)x(\d+)_(\d+)x(\d+)_")
_CIJK_TILE = re.compile(r"_MT(\d+)x(\d+)x(\d+)_")
_TRITON_OPS = re.compile(r"^triton_(?:tem|poi|red|per)_fused_(.*?)(?:_\d+)?$")


def _strip_balanced(s: str, open_: str, close: str) -> str:
    """Remove every top-level ``open_ ... close`` group (template args, parameter lists)."""
    out = []
    depth = 0
    for ch in s:
        if ch == open_:
            depth += 1
        elif ch == close and depth:
            depth -= 1
        elif depth == 0:
            out.append(ch)
    return "".join(out)


def _first_template_arg(s: str) -> str:
    start = s.find("<")
    if start < 0:
        return ""
    depth = 0
    for i in range(start, len(s)):
        if s[i] == "<":
            depth += 1
        elif s[i] == ">":
            depth -= 1
            if depth == 0:
                return s[start + 1 : i].split(",")[0].strip()
    return s[start + 1 :].split(",")[0].strip()


def short_name(name: str) -> str:
    """A readable name for C++ template kernels; other names are returned unchanged.

    ``void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<float>(int, ...)``
    becomes ``vectorized_layer_norm_kernel``; a generic wrapper such as
    ``cutlass::Kernel2<cutlass_80_wmma_..._align2>(...)`` becomes its first template argument.
    """
    s = name.strip()
    if s.startswith("_Z"):
        return s  # mangled (rocprof, old nsys): keep; demangling needs a C++ toolchain
    if not any(c in s for c in "<(:") or s.startswith("["):
        return s
    s = s.replace("(anonymous namespace)", "anon")
    if s.startswith("void "):
        s = s[5:]
    base = _strip_balanced(_strip_balanced(s, "<", ">"), "(", ")").strip()
    last = base.split("::")[-1].strip() or base
    if last in _GENERIC_WRAPPERS:
        arg = _first_template_arg(s)
        if arg:
            inner = _strip_balanced(arg, "<", ">").split("::")[-1].strip()
            if inner:
                return inner
    return last.split(" ")[-1] or name


def _detail(name: str, family: str) -> str:
    if family.startswith("nvjet"):
        m = _NVJET.search(name)
        if m:
            tm, tn, tk, st, cm, cn = m.groups()
            return f"tile {tm}x{tn}, k{tk} x{st} stages, cluster {cm}x{cn}"
    if family == "Cijk":
        m = _CIJK_TILE.search(name)
        if m:
            return f"macro tile {m.group(1)}x{m.group(2)}x{m.group(3)}"
    if family.startswith("triton_"):
        m = _TRITON_OPS.match(name)
        if m:
            return "ops: " + "+".join(op for op in fused_ops(name))
    if family in ("nccl", "rccl"):
        m = _NCCL_COLL.search(name)
        if m:
            return m.group(1)
    return ""


def fused_ops(name: str) -> list[str]:
    """The aten ops a torch.compile Triton kernel fused, from its name.

    ``triton_tem_fused_addmm_gelu_t_view_3`` -> ``["addmm", "gelu", "t", "view"]``. Op names
    with underscores (``native_layer_norm``) are kept whole where known.
    """
    m = _TRITON_OPS.match(name)
    if not m:
        return []
    body = m.group(1)
    ops: list[str] = []
    for known in sorted(_MULTI_WORD_OPS, key=len, reverse=True):
        body = body.replace(known, known.replace("_", "\0"))
    for part in body.split("_"):
        if part:
            ops.append(part.replace("\0", "_"))
    return ops


_MULTI_WORD_OPS = (
    "_scaled_dot_product_cudnn_attention",
    "_scaled_dot_product_flash_attention",
    "_scaled_dot_product_efficient_attention",
    "native_layer_norm",
    "native_group_norm",
    "native_batch_norm",
    "_native_batch_norm_legit",
    "_unsafe_view",
    "_to_copy",
    "full_like",
    "zeros_like",
    "ones_like",
    "index_put",
    "index_select",
    "constant_pad_nd",
    "scaled_dot_product",
    "_log_softmax",
    "_softmax",
    "embedding_dense_backward",
    "select_backward",
    "slice_backward",
    "threshold_backward",
    "gelu_backward",
    "silu_backward",
    "native_layer_norm_backward",
    "rsqrt",
)


@lru_cache(maxsize=65536)
def classify(name: str) -> KernelName:
    """Class, family, short name and decoded detail of one kernel name (cached)."""
    for pat, cls, fam in _RULES:
        if pat.search(name):
            family = fam
            if fam == "nccl":
                m = _NCCL_COLL.search(name)
                family = "nccl"
                return KernelName(cls, family, short_name(name), m.group(1) if m else "")
            return KernelName(cls, family, short_name(name), _detail(name, family))
    return KernelName("other", "other", short_name(name))
