"""Bytes of ops that only move data: gathers, elementwise ops, copies and reductions.

These ops do no arithmetic worth counting (0 FLOPs in the model): their cost is the bytes
they read and write, which follow from the input shapes plus the output's shape and dtype
(broadcasting, type promotion, ``_to_copy``'s dtype, a reduction's dims).
:data:`GATHERS` maps the gather ops to their formulas; :func:`elementwise` and
:func:`reduction` build the formula of each name in :data:`ELEMENTWISE` and
:data:`REDUCTIONS` (and of the in-place variants), which
:mod:`~traceforge.analyzers.costs.flops` registers.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from traceforge.analyzers.costs.operands import (
    Arg,
    Skip,
    Tensor,
    Work,
    dtype_arg,
    integer,
    ints,
    prod,
    tensor,
    tensors,
    work,
)


# -- gathers -----------------------------------------------------------------------------
def _embedding(xs: list[Arg], c: list[Any]) -> Work:
    """embedding(weight [V, D], indices): reads the indices and one row per index."""
    w, idx = tensor(xs, 0, 2), tensor(xs, 1)
    out = idx.numel * w.shape[1] * w.size
    return work(0, idx.nbytes + 2 * out, w.dtype, "embedding")


def _index_select(xs: list[Arg], c: list[Any]) -> Work:
    """index_select(self, dim, index)."""
    x, idx = tensor(xs, 0), tensor(xs, 2, 1)
    dim = integer(c, 1) or 0
    if not x.shape:
        raise Skip("index_select of a 0-d tensor")
    dim %= len(x.shape)
    out = x.numel // max(x.shape[dim], 1) * idx.numel * x.size
    return work(0, idx.nbytes + 2 * out, x.dtype, "embedding")


def _gather(xs: list[Arg], c: list[Any]) -> Work:
    """gather(self, dim, index, sparse_grad[, out]): one element read per index."""
    x, idx = tensor(xs, 0), tensor(xs, 2)
    return work(0, idx.nbytes + 2 * idx.numel * x.size, x.dtype, "embedding")


def _embedding_bwd(xs: list[Arg], c: list[Any]) -> Work:
    """embedding_dense_backward(grad_output, indices, num_weights, padding_idx, scale)."""
    g, idx = tensor(xs, 0), tensor(xs, 1)
    rows = integer(c, 2)
    if rows is None or not g.shape:
        raise Skip("num_weights not recorded")
    return work(0, g.nbytes + idx.nbytes + rows * g.shape[-1] * g.size, g.dtype, "embedding")


# -- data movement: elementwise, copies, reductions ---------------------------------------
_COMPARE = frozenset({"eq", "ne", "lt", "le", "gt", "ge", "isnan", "isinf", "isfinite",
                      "isneginf", "isposinf",
                      "logical_not", "logical_and", "logical_or", "logical_xor"})
_FLOATS = ("fp64", "fp32", "fp16", "bf16", "fp8", "fp4")


def _broadcast(shapes: list[tuple[int, ...]]) -> int:
    nd = max((len(s) for s in shapes), default=0)
    out = [1] * nd
    for s in shapes:
        for i, d in enumerate(s):
            j = nd - len(s) + i
            if d != 1:
                out[j] = d
    return prod(out)


def elementwise(base: str, inplace: bool) -> Callable[[list[Arg], list[Any]], Work]:
    def f(xs: list[Arg], c: list[Any]) -> Work:
        ts = tensors(xs)
        if not ts:
            raise Skip("no tensor inputs")
        first = ts[0]
        if base in ("fill", "zero"):  # writes self only
            return work(0, first.nbytes, first.dtype, "elementwise")
        if base == "copy":  # copy_(self, src): reads src, writes self
            src = ts[1] if len(ts) > 1 else first
            return work(0, src.nbytes + first.nbytes, first.dtype, "copy")
        if inplace:
            return work(0, sum(t.nbytes for t in ts) + first.nbytes, first.dtype,
                         "elementwise")
        if base == "_to_copy":
            d = dtype_arg(c, 1)
            return work(0, first.nbytes + first.numel * (d[1] if d else first.size),
                         first.dtype, "copy")
        if base in ("clone", "contiguous"):
            return work(0, 2 * first.nbytes, first.dtype, "copy")
        if base in ("cat", "stack"):
            return work(0, 2 * sum(t.nbytes for t in ts), first.dtype, "copy")
        if base in ("masked_fill", "tril", "triu"):
            return work(0, sum(t.nbytes for t in ts) + first.nbytes, first.dtype,
                         "elementwise")
        n = _broadcast([t.shape for t in ts])
        # Type promotion: 0-d tensors (wrapped Python scalars) do not widen the result.
        dims = [t for t in ts if t.shape] or ts
        fl = [t for t in dims if t.dtype in _FLOATS]
        out_size = 1 if base in _COMPARE else max((t.size for t in fl), default=first.size)
        dt = fl[0].dtype if fl else first.dtype
        return work(0, sum(t.nbytes for t in ts) + n * out_size, dt, "elementwise")
    return f


def _reduced_numel(x: Tensor, dims: list[int] | None) -> int:
    if not x.shape:
        return 1
    if not dims:
        return 1
    nd = len(x.shape)
    keep = [d for i, d in enumerate(x.shape) if i not in {k % nd for k in dims}]
    return prod(keep)


def reduction(base: str) -> Callable[[list[Arg], list[Any]], Work]:
    pointwise = elementwise(base, False)

    def f(xs: list[Arg], c: list[Any]) -> Work:
        x = tensor(xs, 0)
        if len(tensors(xs)) > 1 and base in ("max", "min"):
            return pointwise(xs, c)  # max(a, b) / min(a, b): the elementwise overloads
        if base in ("cumsum", "cumprod"):
            return work(0, 2 * x.nbytes, x.dtype, "reduction")
        raw = c[1] if len(c) > 1 else ""
        dims = ints(raw) if raw not in ("", None) else None
        out = _reduced_numel(x, dims)
        size = 8 if base in ("argmax", "argmin") else x.size
        if base in ("max", "min") and dims:
            size += 8  # values and int64 indices
        approx = "" if len(c) > 1 else "reduction dims not recorded: assumed all"
        return work(0, x.nbytes + out * size, x.dtype, "reduction", approx)
    return f


#: Elementwise ops and copies (``aten::NAME``, and ``aten::NAME_`` in place unless NAME
#: starts with ``_``): :func:`elementwise` builds their formulas.
ELEMENTWISE = (
    "add", "sub", "rsub", "mul", "div", "neg", "abs", "exp", "exp2", "expm1", "log", "log2",
    "log1p", "sqrt", "rsqrt", "pow", "reciprocal", "sin", "cos", "tanh", "sigmoid", "relu",
    "gelu", "silu", "mish", "hardswish", "hardsigmoid", "leaky_relu", "elu", "softplus",
    "clamp", "clamp_min", "clamp_max", "minimum", "maximum", "where", "masked_fill", "fill",
    "zero", "copy", "_to_copy", "clone", "contiguous", "bitwise_not", "bitwise_and",
    "bitwise_or", "bitwise_xor", "logical_not", "logical_and", "logical_or", "logical_xor",
    "eq", "ne", "lt", "le", "gt", "ge", "isnan", "isinf", "isfinite", "isneginf", "isposinf",
    "tril", "triu", "cat",
    "stack", "gelu_backward", "silu_backward", "threshold_backward", "tanh_backward",
    "sigmoid_backward", "native_dropout", "native_dropout_backward", "addcmul", "addcdiv",
    "lerp", "sign", "floor", "ceil", "round", "trunc", "fmod", "remainder", "erf",
)
#: Reductions and scans (``aten::NAME``): :func:`reduction` builds their formulas.
REDUCTIONS = (
    "sum", "mean", "amax", "amin", "max", "min", "argmax", "argmin", "norm",
    "linalg_vector_norm", "var", "std", "var_mean", "std_mean", "prod", "any", "all",
    "logsumexp", "cumsum", "cumprod",
)

#: Operator name -> formula, for the gathers above.
GATHERS: dict[str, Callable[[list[Arg], list[Any]], Work]] = {
    "aten::embedding": _embedding,
    "aten::index_select": _index_select,
    "aten::gather": _gather,
    "aten::embedding_dense_backward": _embedding_bwd,
}
