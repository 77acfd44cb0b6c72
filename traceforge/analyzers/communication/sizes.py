"""Collective kinds, element sizes and nccl-tests' bandwidth conventions.

nccl-tests (``doc/PERFORMANCE.md``) reports ``algbw = S / t`` and ``busbw = algbw x F``,
where ``S`` and ``F`` depend on the collective (n = ranks of the group):

===============  ===================================  ==============
kind             S (bytes)                            F
===============  ===================================  ==============
all_reduce       the buffer (count x element size)    2(n-1)/n
all_gather       the total, gathered output           (n-1)/n
reduce_scatter   the total, unscattered input         (n-1)/n
all_to_all       the whole send buffer of a rank      (n-1)/n
broadcast        the buffer                           1
reduce           the buffer                           1
send_recv        the message                          1
===============  ===================================  ==============

Kineto writes ``In msg nelems``/``Out msg nelems`` per rank: the all-gather's total is
its output, the reduce-scatter's its input, so ``S`` is the larger of the two for both.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable

#: Bytes per element of the dtype names Kineto writes (c10 ScalarType names), NCCL's and
#: RCCL's own type names (kernel names, NVTX payloads) and numpy-style names.
DTYPE_BYTES: dict[str, int] = {
    "float": 4, "float32": 4, "f32": 4, "double": 8, "float64": 8, "f64": 8,
    "half": 2, "float16": 2, "f16": 2, "bfloat16": 2, "bf16": 2,
    "int": 4, "int32": 4, "i32": 4, "u32": 4, "uint32": 4, "long": 8, "int64": 8,
    "i64": 8, "u64": 8, "uint64": 8, "short": 2, "int16": 2, "uint16": 2,
    "char": 1, "int8": 1, "i8": 1, "byte": 1, "uint8": 1, "u8": 1, "bool": 1,
    "float8_e4m3fn": 1, "float8_e5m2": 1, "float8_e4m3fnuz": 1, "float8_e5m2fnuz": 1,
    "f8e4m3": 1, "f8e5m2": 1, "fp8": 1, "fp8e4m3": 1, "fp8e5m2": 1,
    "complexfloat": 8, "complexdouble": 16, "complexhalf": 4,
}

#: Every kind a collective is filed under, in display order.
KINDS: tuple[str, ...] = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all",
                          "broadcast", "reduce", "send_recv", "barrier", "unknown")

# ``Collective name`` values (torch.distributed's c10d op names) and NCCL/RCCL kernel
# name parts, to a kind. Order matters: the first pattern that matches wins.
_KIND_PATTERNS: tuple[tuple[str, str], ...] = (
    ("barrier", r"barrier"),
    ("reduce_scatter", r"reduce_?scatter"),
    ("all_gather", r"all_?gather"),
    ("all_to_all", r"all_?to_?all"),
    ("all_reduce", r"all_?reduce"),
    ("broadcast", r"broadcast|bcast"),
    ("reduce", r"(^|_)reduce($|_)"),
    ("send_recv", r"send|recv|gather|scatter"),
)

#: nccl-tests' bus-bandwidth factor of each kind as a function of the group size.
_FACTORS: dict[str, Callable[[int], float]] = {
    "all_reduce": lambda n: 2 * (n - 1) / n,
    "all_gather": lambda n: (n - 1) / n,
    "reduce_scatter": lambda n: (n - 1) / n,
    "all_to_all": lambda n: (n - 1) / n,
    "broadcast": lambda n: 1.0,
    "reduce": lambda n: 1.0,
    "send_recv": lambda n: 1.0,
}


def kind_of(collective: str, kernel: str = "") -> str:
    """The kind of a collective from its ``Collective name`` arg, else its kernel name
    (``ncclDevKernel_AllGather_RING_LL``, ``ncclKernel_SendRecv``); ``unknown`` when
    neither says (RCCL's ``ncclDevKernel_Generic``)."""
    for text in (collective, _kernel_part(kernel)):
        t = text.strip().lower().lstrip("_")
        if not t:
            continue
        t = re.sub(r"_(base|coalesced|tensor|into_tensor|tensor_coalesced)\b", "", t)
        for kind, pat in _KIND_PATTERNS:
            if re.search(pat, t):
                return kind
    return "unknown"


def _kernel_part(kernel: str) -> str:
    m = re.match(r"\s*(?:void\s+)?(?:\w+::)*nccl(?:Dev)?Kernel_([A-Za-z]+)", kernel)
    if not m:
        # Symmetric-memory and custom collectives name theirs in snake case
        # (``multimem_all_reduce_kernel``, ``one_shot_all_reduce``).
        s = re.search(r"(all_reduce|all_gather|reduce_scatter|all_to_all)", kernel.lower())
        return s.group(1) if s else ""
    return re.sub(r"(?<=[a-z])(?=[A-Z])", "_", m.group(1))


def dtype_bytes(dtype: str) -> int | None:
    """Bytes per element of a dtype name, or None when it is not one traceforge knows."""
    d = dtype.strip().lower().replace("torch.", "").replace(" ", "")
    return DTYPE_BYTES.get(d.removeprefix("nccl").removeprefix("rccl"))


def message_bytes(kind: str, in_nelems: float, out_nelems: float, elem: int) -> float:
    """nccl-tests' size ``S`` in bytes (see the module docstring); NaN when unknown."""
    ins = in_nelems if in_nelems >= 0 else math.nan
    outs = out_nelems if out_nelems >= 0 else math.nan
    if kind in ("all_gather", "reduce_scatter"):
        n = max(x for x in (ins, outs) if not math.isnan(x)) if not (
            math.isnan(ins) and math.isnan(outs)) else math.nan
    elif kind == "send_recv":
        n = ins if not math.isnan(ins) and ins > 0 else outs
    else:
        n = ins if not math.isnan(ins) else outs
    return n * elem


def bus_factor(kind: str, n: int) -> float:
    """nccl-tests' busbw/algbw factor of a kind in a group of ``n`` ranks (NaN when the
    kind has none: barrier, unknown; or ``n`` < 1)."""
    f = _FACTORS.get(kind)
    if f is None or n < 1:
        return math.nan
    return float(f(n))
