"""Kernel names: the one place that turns a raw kernel name into class, family and a short name.

Classes: gemm, conv, attention, communication, memcpy, memset, elementwise, reduction, norm,
triton (fused pointwise/reduction kernels from torch.compile), other.
Families are the library or generator that produced the kernel (``nvjet_sm90``, ``Cijk``,
``triton_tem_fused``, ``flash_fwd``, ``nccl``, ...), so that tables can be grouped by them.

Short names (:func:`short_name`) are what tables show: the kernel's own name without
namespaces, template arguments, parameters or code-object suffixes. Where several kernels
shown together share a short name, :func:`display_names` adds what tells them apart.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from itertools import combinations

from traceforge.analyzers.names import cxx_names

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

#: Every family the rules above name (a what-if may name one a trace happens not to hold).
FAMILIES: frozenset[str] = frozenset(f for _, _, f in _RULES)

# Wrappers whose first type argument is the real kernel (CUTLASS, cuDNN's CUTLASS, ck_tile).
_GENERIC_WRAPPERS = frozenset({"Kernel", "Kernel2", "device_kernel", "kentry"})
# rocPRIM's trampoline_kernel<config..., scan_impl<...>(...)::{lambda}, ...>: the argument
# named *_impl is the algorithm; its position changes between rocPRIM versions.
_IMPL_ARG_WRAPPERS = frozenset({"trampoline_kernel"})
# Names too generic alone: ``internal::gemvx::kernel`` is shown with its namespace.
_GENERIC_NAMES = frozenset({"kernel", "Kernel"})
_NCCL_COLL = re.compile(r"nccl(?:Dev)?Kernel_([A-Za-z]+)")
_NVJET = re.compile(r"nvjet_\w+?_(\d+)x(\d+)_(\d+)x(\d+)_(\d+)x(\d+)_")
_CIJK_TILE = re.compile(r"_MT(\d+)x(\d+)x(\d+)_")
_TRITON_OPS = re.compile(r"^triton_(?:tem|poi|red|per)_fused_(.*?)(?:_\d+)?$")
# Code-object and compiler suffixes: GCC's " [clone .kd]", LLVM's " (.kd)", the ".kd" of an
# AMD kernel descriptor symbol (rocprof writes "attn_fwd.kd", "Cijk_..._WG32_8_1.kd").
_SUFFIX = re.compile(r"(?:\s*\[clone [^\]]*\]|\s+\(\.[\w.$]+\)|\.kd)+$")
# OpenMP target regions: __omp_offloading_<device id>_<file id>_<function>_l<line>.
_OMP = re.compile(r"^__omp_offloading_[0-9a-f]+_[0-9a-f]+_(.+)_l(\d+)(?:_\d+)?$")
# Tensile (rocBLAS, hipBLASLt) solution names: Cijk_<A layout>_<B layout>_<types>_..._MT<tile>.
_TENSILE_TYPE = re.compile(r"[A-Z0-9]{1,4}")
_TENSILE_FLAGS = frozenset({"HA", "HAS", "SAV", "UA", "GB"})
_TENSILE_MT = re.compile(r"MT\d+x\d+x\d+")


def core_name(name: str) -> str:
    """``name`` without code-object suffixes: what short names are made from.

    Names come demangled from the readers (traceforge.formats.symbols); a mangled name that
    reaches this point (a hand-built trace) is kept as it is.
    """
    s = name.strip()
    return _SUFFIX.sub("", s).strip() or s


def _tensile(s: str) -> str:
    """``Cijk_Alik_Bljk_SB_Bias_AS_SAV_UserArgs_MT64x16x32_MI16x16x1_...`` ->
    ``Cijk_Alik_Bljk_SB MT64x16x32``: the layouts of C, A and B, the data types and the
    macro tile (M x N x depth U) of the solution; "" for a name that does not parse."""
    tokens = s.split("_")
    if len(tokens) < 4 or not (tokens[1].startswith("A") and tokens[2].startswith("B")):
        return ""
    head = tokens[:3]
    for t in tokens[3:]:
        if not _TENSILE_TYPE.fullmatch(t) or t in _TENSILE_FLAGS or _TENSILE_MT.fullmatch(t):
            break
        head.append(t)
    tile = next((t for t in tokens if _TENSILE_MT.fullmatch(t)), "")
    return "_".join(head) + (f" {tile}" if tile else "")


def _declared(s: str) -> tuple[str, tuple[str, ...]] | None:
    """(short name, the template arguments that belong to it) of a C++ declaration, or None
    for a name that is not one (``Memcpy DtoD (Device -> Device)``, ``triton_poi_...``)."""
    if not any(c in s for c in "<(:") or s.startswith("["):
        return None
    parts = cxx_names.parse(s)
    if not parts or not re.fullmatch(r"~?[A-Za-z_$][\w$]*", parts[-1].name):
        return None
    last = parts[-1]
    types = [a for a in last.targs if not cxx_names.is_literal(a)]
    if last.name in _GENERIC_WRAPPERS and types:
        return cxx_names.label(types[0]), cxx_names.children(types[0])
    impl = [a for a in types if cxx_names.label(a).endswith("_impl")]
    if last.name in _IMPL_ARG_WRAPPERS and impl:
        return cxx_names.label(impl[0]), cxx_names.children(impl[0])
    scoped = [p.name for p in parts if p.meaningful]
    if last.name in _GENERIC_NAMES and len(scoped) > 1:
        return "::".join(scoped[-2:]), last.targs
    return last.name, last.targs


@lru_cache(maxsize=65536)
def short_name(name: str) -> str:
    """A readable name: the kernel's own name; other names are returned unchanged.

    ``void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<float>(int, ...)``
    becomes ``vectorized_layer_norm_kernel``; a generic wrapper such as
    ``cutlass::Kernel2<cutlass_80_wmma_..._align2>(...)`` becomes its first template argument;
    ``void laplacian_kernel<double>(...) [clone .kd]`` becomes ``laplacian_kernel``; Tensile
    GEMMs keep layout, types and macro tile (``Cijk_Alik_Bljk_SB MT64x16x32``); OpenMP target
    regions become ``function_l<line> (omp)``.
    """
    s = core_name(name)
    omp = _OMP.match(s)
    if omp:
        return f"{short_name(omp.group(1))}_l{omp.group(2)} (omp)"
    if s.startswith("Cijk_"):
        return _tensile(s) or s
    d = _declared(s)
    return d[0] if d else s


def display_names(names: Iterable[str]) -> dict[str, str]:
    """A distinct, readable display name for each full kernel name shown together.

    Each is the :func:`short_name`; full names that share one get what tells them apart,
    shortest first: the template argument (functor, lambda's function, type) that differs,
    ``vectorized_elementwise_kernel<CUDAFunctor_add>`` next to
    ``vectorized_elementwise_kernel<FillFunctor>``; for names without template arguments
    (Tensile) the first ``_`` fields that differ; ``#2``, ``#3`` only where nothing in the
    name differs but its parameter list.
    """
    by_short: dict[str, list[str]] = defaultdict(list)
    for n in sorted(set(names)):
        by_short[short_name(n)].append(n)
    out: dict[str, str] = {}
    for short, group in by_short.items():
        labels = [short] if len(group) == 1 else _tell_apart(short, group)
        out.update(zip(group, labels, strict=True))
    # A decorated name can still meet another (or a short name): number what remains.
    seen: dict[str, list[str]] = defaultdict(list)
    for n, d in out.items():
        seen[d].append(n)
    for d, same in seen.items():
        for k, n in enumerate(same[1:], start=2):
            out[n] = f"{d} #{k}"
    return out


def _tell_apart(short: str, group: list[str]) -> list[str]:
    decls = [_declared(core_name(n)) for n in group]
    if all(d is not None and d[1] for d in decls):
        labels = _distinguish([d[1] if d else () for d in decls])
        return [f"{short}<{lab}>" if lab else short for lab in labels]
    fields = [core_name(n).split("_") for n in group]
    labels = _distinguish([tuple(f) for f in fields], aligned=False)
    return [f"{short} {lab.replace(', ', '_')}" if lab else short for lab in labels]


def _distinguish(arglists: list[tuple[str, ...]], *, aligned: bool = True) -> list[str]:
    """Per member, the fewest arguments (joined by ", ") that tell it from the others.

    ``aligned`` compares arguments by position (template arguments); otherwise by presence
    (the ``_`` fields of a Tensile name, whose optional fields shift positions).
    """
    if not aligned:
        return [_own_fields(a, arglists) for a in arglists]
    n = len(arglists)
    width = max(len(a) for a in arglists)
    cols = [[a[p] if p < len(a) else "" for a in arglists] for p in range(width)]
    per = [_refine(c) for c in cols]
    diff = [p for p in range(width) if len(set(cols[p])) > 1]
    # Type-like arguments (functors, the functions lambdas live in) first, values after.
    order = [p for p in diff if not all(cxx_names.is_literal(v) for v in cols[p])]
    order += [p for p in diff if p not in order]
    out = []
    for i in range(n):
        # Arguments are added in that order while they separate a rival still sharing
        # every argument shown so far; members told apart early stay short.
        rivals = [j for j in range(n) if arglists[j] != arglists[i]]
        shown: list[int] = []
        for p in order:
            if not rivals:
                break
            if any(per[p][j] != per[p][i] for j in rivals):
                shown.append(p)
                rivals = [j for j in rivals if per[p][j] == per[p][i]]
        shown.sort()
        out.append(", ".join(per[p][i] for p in shown if per[p][i]))
    return out


def _own_fields(fields: tuple[str, ...], group: list[tuple[str, ...]]) -> str:
    """The fewest of this name's ``_`` fields (first in name order among equals) that no
    other name has all of."""
    common = set.intersection(*(set(g) for g in group))
    own = [f for f in fields if f not in common]
    others = [set(g) for g in group if g != fields]
    for size in range(1, min(len(own), 3) + 1):
        for pick in combinations(own, size):
            if not any(set(pick) <= o for o in others):
                return "_".join(pick)
    return "_".join(own)


def _refine(texts: list[str]) -> list[str]:
    """Labels for one template argument across members: its name, and where members share
    a name but differ inside, what differs inside (``BinaryFunctor<MulFunctor>``)."""
    labels = [cxx_names.label(t) if t else "" for t in texts]
    out = list(labels)
    groups: dict[str, list[int]] = defaultdict(list)
    for i, lab in enumerate(labels):
        groups[lab].append(i)
    for lab, idx in groups.items():
        distinct = len({texts[i] for i in idx})
        if distinct < 2:
            continue
        sub = _distinguish([cxx_names.children(texts[i]) for i in idx])
        if len(set(sub)) < distinct:
            # Lambdas of one function differ by the types they take, else by their number.
            keys = [cxx_names.lambda_key(texts[i]) for i in idx]
            if len(set(keys)) > len(set(sub)):
                params = [k[0] for k in keys]
                sub = [f"({k[0]})" + (f"#{k[1]}" if params.count(k[0]) > 1 else "")
                       for k in keys]
            if sub[0].startswith("("):
                for i, s in zip(idx, sub, strict=True):
                    out[i] = lab + s
                continue
        # A wrapper all members share (gpu_kernel_impl<...>) is left out when what it wraps
        # has a name of its own.
        drop = len(groups) == 1 and all(s and not cxx_names.is_literal(s) for s in sub)
        for i, s in zip(idx, sub, strict=True):
            out[i] = s if drop else (f"{lab}<{s}>" if s else lab)
    return out


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
    core = core_name(name)
    for pat, cls, fam in _RULES:
        if pat.search(core):
            family = fam
            if fam == "nccl":
                m = _NCCL_COLL.search(core)
                family = "nccl"
                return KernelName(cls, family, short_name(name), m.group(1) if m else "")
            return KernelName(cls, family, short_name(name), _detail(core, family))
    return KernelName("other", "other", short_name(name))


#: SDPA's backends as kernel names show them: the fused kernels of cuDNN, memory-efficient
#: (xFormers' CUTLASS kernels) and FlashAttention (PyTorch's, flash_attn's, AOTriton's and
#: CK's on AMD), and the math backend, unfused: a softmax kernel between two GEMMs.
ATTENTION_BACKENDS: tuple[str, ...] = ("flash", "memory-efficient", "cudnn", "math")
_ATTENTION_RULES: tuple[tuple[re.Pattern[str], str], ...] = tuple(
    (re.compile(p), b) for p, b in (
        (r"cudnn_generated_fort_native_sdpa|sdpa.*cudnn|cudnn.*sdpa", "cudnn"),
        (r"fmha_cutlass|efficient_attention|mem_efficient|AttentionKernel|fmha_cutlass[FB]",
         "memory-efficient"),
        (r"flash|^(_)?attn_(fwd|bwd)|fmha|unified_attention", "flash"),
        (r"softmax|SoftMax|Softmax", "math"),
    ))


def attention_backend(name: str) -> str | None:
    """The SDPA backend a kernel name belongs to (:data:`ATTENTION_BACKENDS`), or None.
    ``math`` is a softmax kernel: the unfused path's sign (its GEMMs look like any other)."""
    for pat, backend in _ATTENTION_RULES:
        if pat.search(name):
            return backend
    return None


def attention_counts(names: Mapping[str, int]) -> dict[str, int]:
    """Kernel launches per attention backend, from kernel names and their counts; only the
    backends that ran, in :data:`ATTENTION_BACKENDS` order."""
    out = dict.fromkeys(ATTENTION_BACKENDS, 0)
    for name, n in names.items():
        b = attention_backend(str(name))
        if b is not None:
            out[b] += int(n)
    return {b: n for b, n in out.items() if n}


def attention_text(names: Mapping[str, int]) -> str:
    """``"flash 96, math 24"`` (kernels per backend), or ``"none"``."""
    counts = attention_counts(names)
    return ", ".join(f"{'math (softmax)' if b == 'math' else b} {n:,}"
                     for b, n in counts.items()) or "none"
