"""FLOPs and bytes of framework operators, from their input shapes and dtypes.

torch 2.11 traces carry ``Input Dims``, ``Input type`` and ``Concrete Inputs`` on cpu_op
events but no ``flops`` arg, even with ``with_flops=True`` (seen in our H100 fixtures), so
the work of the ops that matter is derived here. A trace's own ``flops`` arg wins where
present.

The model (documented in the README's roofline section, and what the roofline divides):

* FLOPs: multiply-adds x 2 for matrix products, convolutions and attention, as torch's
  flop counter counts them; elementwise epilogues (bias, activation) are not counted.
  Causal attention does half the work of full attention; an attention backward does 2.5x
  its forward (five matrix products instead of two, FlashAttention's convention).
  Norms and softmax count a fixed number of FLOPs per element (:data:`PER_ELEMENT`).
  Elementwise ops, reductions, copies and gathers move data only: 0 FLOPs.
* Bytes: every tensor input is read once and every output written once, at the dtype
  sizes of ``Input type``; output shapes and dtypes are derived from the inputs (and from
  ``Concrete Inputs`` where an op takes a dtype or dims). Caches, re-reads and strides are
  ignored, so bytes are the minimum traffic: a real kernel moves at least this much.
* ``dtype``: the dtype whose ceiling applies, that of the first operand.

:func:`op_work` returns a :class:`Work` (with ``reason`` set when the work is unknown);
:func:`op_flops` and :data:`FLOP_OPS` are the FLOP-only view the ``ops`` table uses.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

Dims = Sequence[Any]

#: Kineto ``Input type`` strings of tensors -> (dtype key, bytes per element).
#: ``Float4_e2m1fn_x2`` packs two FP4 values per byte: its dims count bytes.
DTYPES: dict[str, tuple[str, int]] = {
    "float": ("fp32", 4),
    "double": ("fp64", 8),
    "c10::Half": ("fp16", 2),
    "c10::BFloat16": ("bf16", 2),
    "c10::Float8_e4m3fn": ("fp8", 1),
    "c10::Float8_e5m2": ("fp8", 1),
    "c10::Float8_e4m3fnuz": ("fp8", 1),
    "c10::Float8_e5m2fnuz": ("fp8", 1),
    "c10::Float8_e8m0fnu": ("fp8", 1),
    "c10::Float4_e2m1fn_x2": ("fp4", 1),
    "long int": ("int64", 8),
    "long unsigned int": ("uint64", 8),
    "int": ("int32", 4),
    "unsigned int": ("uint32", 4),
    "short int": ("int16", 2),
    "short unsigned int": ("uint16", 2),
    "signed char": ("int8", 1),
    "unsigned char": ("uint8", 1),
    "bool": ("bool", 1),
    "c10::complex<c10::Half>": ("complex32", 4),
    "c10::complex<float>": ("complex64", 8),
    "c10::complex<double>": ("complex128", 16),
    "c10::qint8": ("int8", 1),
    "c10::quint8": ("uint8", 1),
    "c10::qint32": ("int32", 4),
}
_KEY_SIZE = dict(DTYPES.values())

#: c10::ScalarType codes (as ``Concrete Inputs`` print a dtype argument) -> Input type.
SCALAR_TYPES: dict[int, str] = {
    0: "unsigned char", 1: "signed char", 2: "short int", 3: "int", 4: "long int",
    5: "c10::Half", 6: "float", 7: "double", 8: "c10::complex<c10::Half>",
    9: "c10::complex<float>", 10: "c10::complex<double>", 11: "bool", 15: "c10::BFloat16",
    23: "c10::Float8_e5m2", 24: "c10::Float8_e4m3fn", 25: "c10::Float8_e5m2fnuz",
    26: "c10::Float8_e4m3fnuz", 27: "short unsigned int", 28: "unsigned int",
    29: "long unsigned int", 44: "c10::Float8_e8m0fnu", 45: "c10::Float4_e2m1fn_x2",
}

#: ``Input type`` values of arguments that are not tensors.
_NOT_TENSORS = frozenset({"", "Scalar", "ScalarList", "GenericList", "Device", "Layout",
                          "ScalarType", "MemoryFormat", "Generator", "None", "Stream",
                          "string", "str"})

#: FLOPs per element of the input, for ops that compute per element (documented constants:
#: layer norm = mean 1 + variance 3 + normalize 2 + affine 2 (without weight/bias 5), RMS
#: norm = square-sum 2 + scale 1 + weight 1, softmax = max 1 + subtract 1 + exp 1 + sum 1 +
#: divide 1; backward passes about twice the forward).
PER_ELEMENT: dict[str, float] = {
    "layer_norm": 8, "layer_norm_noaffine": 5, "layer_norm_backward": 16,
    "rms_norm": 4, "rms_norm_backward": 8, "group_norm": 8,
    "batch_norm_eval": 4, "batch_norm_train": 8,
    "softmax": 5, "softmax_backward": 3,
}

#: Families whose math runs on tensor / matrix cores.
TENSOR_FAMILIES = frozenset({"matmul", "conv", "attention"})


@dataclass(frozen=True)
class Work:
    """An op call's FLOPs and bytes moved, the dtype of its ceiling and its family.

    ``reason`` is empty when the work is known; otherwise flops and bytes are NaN and
    ``reason`` says why (op not modelled, shapes missing, unknown dtype, ...).
    ``approx`` names approximations the numbers rest on.
    """

    flops: float
    bytes: float
    dtype: str
    family: str
    reason: str = ""
    approx: str = ""

    @property
    def known(self) -> bool:
        return not self.reason


def unknown(reason: str) -> Work:
    """A :class:`Work` whose FLOPs and bytes are unknown, for ``reason``."""
    return Work(math.nan, math.nan, "", "", reason)


class _Skip(Exception):
    """The op's work cannot be derived from what the trace recorded."""


@dataclass(frozen=True)
class _T:
    """One tensor argument: shape, dtype key and element size."""

    shape: tuple[int, ...]
    dtype: str
    size: int

    @property
    def numel(self) -> int:
        return math.prod(self.shape)

    @property
    def nbytes(self) -> int:
        return self.numel * self.size


Arg = _T | list[_T] | None


def _prod(xs: Sequence[int]) -> int:
    return math.prod(int(x) for x in xs) if xs else 1


def _is_shape(d: Any) -> bool:
    return isinstance(d, list) and all(isinstance(x, int) and not isinstance(x, bool) for x in d)


def _tensor(dims: Any, typ: str, list_dtype: str | None) -> Arg:
    if typ == "TensorList":
        if not isinstance(dims, list) or not all(_is_shape(d) for d in dims):
            return None
        if list_dtype is None or list_dtype not in DTYPES:
            raise _Skip("TensorList element dtype not recorded")
        key, size = DTYPES[list_dtype]
        return [_T(tuple(d), key, size) for d in dims]
    if typ in _NOT_TENSORS:
        return None
    if typ not in DTYPES:
        if _is_shape(dims) and dims:
            raise _Skip(f"unknown dtype {typ!r}")
        return None
    if not _is_shape(dims):
        return None
    key, size = DTYPES[typ]
    return _T(tuple(dims), key, size)


def _args(args: dict[str, Any], list_dtype: str | None) -> tuple[list[Arg], list[Any]]:
    dims = args.get("Input Dims", args.get("Input dims"))
    if not isinstance(dims, list):
        raise _Skip("no input shapes recorded (record_shapes off, or a compiled region)")
    types = args.get("Input type")
    if not isinstance(types, list) or len(types) != len(dims):
        types = ["?"] * len(dims)
    concrete = args.get("Concrete Inputs")
    if not isinstance(concrete, list):
        concrete = []
    out = [_tensor(d, str(t) if t is not None else "", list_dtype) if t != "?"
           else (_T(tuple(d), "?", 0) if _is_shape(d) and d else None)
           for d, t in zip(dims, types, strict=True)]
    if any(isinstance(x, _T) and x.dtype == "?" for x in out):
        raise _Skip("no input dtypes recorded")
    return out, list(concrete)


def _t(xs: list[Arg], i: int, ndim: int | None = None) -> _T:
    x = xs[i] if i < len(xs) else None
    if not isinstance(x, _T) or (ndim is not None and len(x.shape) != ndim):
        want = f"a {ndim}-d tensor" if ndim else "a tensor"
        raise _Skip(f"argument {i} is not {want}")
    return x


def _opt(xs: list[Arg], i: int) -> _T | None:
    x = xs[i] if i < len(xs) else None
    return x if isinstance(x, _T) else None


def _tensors(xs: list[Arg]) -> list[_T]:
    out: list[_T] = []
    for x in xs:
        if isinstance(x, _T):
            out.append(x)
        elif isinstance(x, list):
            out.extend(x)
    return out


def _bool(c: list[Any], i: int, default: bool = False) -> bool:
    v = str(c[i]).strip().lower() if i < len(c) else ""
    if v in ("true", "1"):
        return True
    if v in ("false", "0"):
        return False
    return default


_INTS = re.compile(r"-?\d+")


def _ints(v: Any) -> list[int]:
    if isinstance(v, list):
        return [int(x) for x in v if isinstance(x, int)]
    if isinstance(v, str):
        return [int(x) for x in _INTS.findall(v)]
    return []


def _int(c: list[Any], i: int) -> int | None:
    xs = _ints(c[i]) if i < len(c) else []
    return xs[0] if len(xs) == 1 else None


def _dtype_arg(c: list[Any], i: int) -> tuple[str, int] | None:
    code = _int(c, i)
    typ = SCALAR_TYPES.get(code) if code is not None else None
    return DTYPES[typ] if typ else None


def _work(flops: float, nbytes: float, dtype: str, family: str, approx: str = "") -> Work:
    return Work(float(flops), float(nbytes), dtype, family, "", approx)


# -- matrix products ---------------------------------------------------------------------
def _mm_core(a: _T, b: _T, extra: Sequence[_T | None], out_size: int | None = None) -> Work:
    if len(a.shape) != 2 or len(b.shape) != 2:
        raise _Skip("mm operands are not 2-d")
    m, k = a.shape
    n = b.shape[1]
    by = a.nbytes + b.nbytes + sum(x.nbytes for x in extra if x is not None)
    by += m * n * (out_size or a.size)
    return _work(2 * m * k * n, by, a.dtype, "matmul")


def _mm(xs: list[Arg], c: list[Any]) -> Work:
    return _mm_core(_t(xs, 0), _t(xs, 1), ())


def _addmm(xs: list[Arg], c: list[Any]) -> Work:
    return _mm_core(_t(xs, 1), _t(xs, 2), (_opt(xs, 0),))


def _bmm_core(a: _T, b: _T, extra: Sequence[_T | None]) -> Work:
    if len(a.shape) != 3 or len(b.shape) != 3:
        raise _Skip("bmm operands are not 3-d")
    bt, m, k = a.shape
    n = b.shape[2]
    by = a.nbytes + b.nbytes + sum(x.nbytes for x in extra if x is not None) + bt * m * n * a.size
    return _work(2 * bt * m * k * n, by, a.dtype, "matmul")


def _bmm(xs: list[Arg], c: list[Any]) -> Work:
    return _bmm_core(_t(xs, 0), _t(xs, 1), ())


def _baddbmm(xs: list[Arg], c: list[Any]) -> Work:
    return _bmm_core(_t(xs, 1), _t(xs, 2), (_opt(xs, 0),))


def _matmul(xs: list[Arg], c: list[Any]) -> Work:
    a, b = _t(xs, 0), _t(xs, 1)
    x, w = list(a.shape), list(b.shape)
    if not x or not w:
        raise _Skip("matmul of a 0-d tensor")
    if len(x) == 1:
        x = [1, *x]
    if len(w) == 1:
        w = [*w, 1]
    m, k, n = x[-2], x[-1], w[-1]
    batch = max(_prod(x[:-2]), _prod(w[:-2]))
    by = a.nbytes + b.nbytes + batch * m * n * a.size
    return _work(2 * batch * m * k * n, by, a.dtype, "matmul")


def _linear(xs: list[Arg], c: list[Any]) -> Work:
    x, w, bias = _t(xs, 0), _t(xs, 1, 2), _opt(xs, 2)
    if not x.shape:
        raise _Skip("linear of a 0-d tensor")
    rows = _prod(x.shape[:-1])
    by = x.nbytes + w.nbytes + (bias.nbytes if bias else 0) + rows * w.shape[0] * x.size
    return _work(2 * rows * x.shape[-1] * w.shape[0], by, x.dtype, "matmul")


def _scaled_mm(xs: list[Arg], c: list[Any]) -> Work:
    """_scaled_mm(a, b, scale_a, scale_b, bias, scale_result, out_dtype, use_fast_accum)."""
    a, b = _t(xs, 0, 2), _t(xs, 1, 2)
    out = _dtype_arg(c, 6)
    extra = [_opt(xs, i) for i in (2, 3, 4, 5)]
    w = _mm_core(a, b, extra, out_size=out[1] if out else a.size)
    # FP4 x2 tensors hold two values per element of their dims: K is twice what dims say.
    f = 2.0 if a.dtype == "fp4" else 1.0
    approx = "" if out else "output dtype not recorded: assumed the input's"
    return _work(w.flops * f, w.bytes, a.dtype, "matmul", approx)


def _int_mm(xs: list[Arg], c: list[Any]) -> Work:
    return _mm_core(_t(xs, 0, 2), _t(xs, 1, 2), (), out_size=4)


def _mv(xs: list[Arg], c: list[Any], a_i: int = 0) -> Work:
    a, v = _t(xs, a_i, 2), _t(xs, a_i + 1, 1)
    m, n = a.shape
    extra = _opt(xs, 0) if a_i else None
    by = a.nbytes + v.nbytes + (extra.nbytes if extra else 0) + m * a.size
    return _work(2 * m * n, by, a.dtype, "matmul")


# -- convolution -------------------------------------------------------------------------
def _pick(v: list[int], i: int, default: int) -> int:
    if not v:
        return default
    return v[i] if i < len(v) else v[-1]


def _conv_out(x: _T, w: _T, c: list[Any], stride_at: int, pad_at: int,
              dil_at: int) -> list[int]:
    nd = len(x.shape) - 2
    stride = _ints(c[stride_at]) if len(c) > stride_at else []
    pad_raw = c[pad_at] if len(c) > pad_at else ""
    pad = _ints(pad_raw)
    dil = _ints(c[dil_at]) if len(c) > dil_at else []
    out = []
    for i in range(nd):
        size, k = x.shape[2 + i], w.shape[2 + i]
        s, p, d = _pick(stride, i, 1), _pick(pad, i, 0), _pick(dil, i, 1)
        if str(pad_raw).strip("'\" ") == "same":  # conv2d(padding="same"): stride 1
            out.append(size)
            continue
        out.append((size + 2 * p - d * (k - 1) - 1) // s + 1)
    return out


def _conv(bias_at: int | None, stride_at: int, pad_at: int, dil_at: int,
          transposed_at: int | None) -> Callable[[list[Arg], list[Any]], Work]:
    """Convolutions; where stride, padding and dilation sit differs per op:
    convolution / _convolution / conv{1,2,3}d (input, weight, bias, stride, padding,
    dilation, [transposed, ...]), cudnn_convolution (input, weight, padding, stride,
    dilation, ...), miopen_convolution (input, weight, bias, padding, stride, dilation, ...)."""
    def f(xs: list[Arg], c: list[Any]) -> Work:
        x, w = _t(xs, 0), _t(xs, 1)
        bias = _opt(xs, bias_at) if bias_at is not None else None
        if len(x.shape) < 3 or len(w.shape) != len(x.shape):
            raise _Skip("convolution input and weight ranks differ")
        if transposed_at is not None and _bool(c, transposed_at):
            raise _Skip("transposed convolution not modelled (output size needs "
                        "output_padding)")
        out = _conv_out(x, w, c, stride_at, pad_at, dil_at)
        n, cout = x.shape[0], w.shape[0]
        flops = 2 * n * cout * _prod(out) * w.shape[1] * _prod(w.shape[2:])
        by = x.nbytes + w.nbytes + (bias.nbytes if bias else 0) + n * cout * _prod(out) * x.size
        return _work(flops, by, x.dtype, "conv")
    return f


def _conv_backward(xs: list[Arg], c: list[Any]) -> Work:
    """convolution_backward(grad_output, input, weight, bias_sizes, stride, padding, dilation,
    transposed, output_padding, groups, output_mask): grad_input and grad_weight each cost
    one forward's FLOPs."""
    g, x, w = _t(xs, 0), _t(xs, 1), _t(xs, 2)
    if len(x.shape) < 3 or len(w.shape) != len(x.shape) or len(g.shape) != len(x.shape):
        raise _Skip("convolution_backward ranks differ")
    mask = [s.strip().lower() == "true" for s in re.findall(r"[A-Za-z]+", str(c[10]))] \
        if len(c) > 10 else []
    want_in, want_w, want_b = (mask + [True, True, False])[:3] if mask else (True, True, False)
    one = 2 * g.numel * w.shape[1] * _prod(w.shape[2:])
    flops = one * (int(want_in) + int(want_w))
    by = g.nbytes + x.nbytes + w.nbytes
    by += (x.nbytes if want_in else 0) + (w.nbytes if want_w else 0)
    by += (w.shape[0] * w.size if want_b else 0)
    return _work(flops, by, x.dtype, "conv")


# -- attention ---------------------------------------------------------------------------
def _attention(q: _T, k: _T, v: _T, layout: str, causal: bool, extra: Sequence[_T | None],
               backward: bool = False, bwd_reads: Sequence[_T | None] = ()) -> Work:
    if not (len(q.shape) == len(k.shape) == len(v.shape) == 4):
        raise _Skip("variable-length attention: per-sequence lengths are not recorded")
    if layout == "bhld":
        b, h, lq, e = q.shape
        s, ev = k.shape[2], v.shape[3]
    else:  # blhd: flash / efficient kernels' own layout
        b, lq, h, e = q.shape
        s, ev = k.shape[1], v.shape[3]
    flops = 2.0 * b * h * lq * s * (e + ev)
    if causal:
        flops /= 2
    ins = q.nbytes + k.nbytes + v.nbytes + sum(x.nbytes for x in extra if x is not None)
    out = b * h * lq * ev * q.size
    if backward:
        # reads grad_out, q, k, v, out, logsumexp; writes dq, dk, dv
        by = ins + sum(x.nbytes for x in bwd_reads if x is not None) + q.nbytes + k.nbytes \
            + v.nbytes
        return _work(2.5 * flops, by, q.dtype, "attention")
    return _work(flops, ins + out, q.dtype, "attention")


def _sdpa(q_at: int, causal_at: int, layout: str, extra: Sequence[int] = (),
          mask_type: bool = False) -> Callable[[list[Arg], list[Any]], Work]:
    def f(xs: list[Arg], c: list[Any]) -> Work:
        q, k, v = _t(xs, q_at), _t(xs, q_at + 1), _t(xs, q_at + 2)
        causal = (_int(c, causal_at) or 0) in (1, 2) if mask_type else _bool(c, causal_at)
        return _attention(q, k, v, layout, causal, [_opt(xs, i) for i in extra])
    return f


def _sdpa_bwd(causal_at: int, layout: str, reads: Sequence[int],
              mask_type: bool = False) -> Callable[[list[Arg], list[Any]], Work]:
    """Backward ops take (grad_out, q, k, v, ...): q at 1."""
    def f(xs: list[Arg], c: list[Any]) -> Work:
        q, k, v = _t(xs, 1), _t(xs, 2), _t(xs, 3)
        causal = (_int(c, causal_at) or 0) in (1, 2) if mask_type else _bool(c, causal_at)
        return _attention(q, k, v, layout, causal, (), backward=True,
                          bwd_reads=[_opt(xs, i) for i in (0, *reads)])
    return f


# -- norms, softmax ----------------------------------------------------------------------
def _rows(x: _T, c: list[Any], shape_at: int, w: _T | None) -> int:
    norm = _ints(c[shape_at]) if len(c) > shape_at else []
    inner = _prod(norm) if norm else (w.numel if w is not None else (x.shape[-1] if x.shape
                                                                      else 1))
    return max(x.numel // max(inner, 1), 1)


def _layer_norm(xs: list[Arg], c: list[Any]) -> Work:
    """native_layer_norm(input, normalized_shape, weight, bias, eps): y, mean, rstd."""
    x, w, b = _t(xs, 0), _opt(xs, 2), _opt(xs, 3)
    per = PER_ELEMENT["layer_norm" if w is not None else "layer_norm_noaffine"]
    rows = _rows(x, c, 1, w)
    by = 2 * x.nbytes + (w.nbytes if w else 0) + (b.nbytes if b else 0) + 2 * rows * 4
    return _work(per * x.numel, by, x.dtype, "norm")


def _layer_norm_bwd(xs: list[Arg], c: list[Any]) -> Work:
    """native_layer_norm_backward(grad_out, input, normalized_shape, mean, rstd, weight, bias,
    output_mask)."""
    g, x, w = _t(xs, 0), _t(xs, 1), _opt(xs, 5)
    reads = g.nbytes + x.nbytes + sum(t.nbytes for t in (_opt(xs, 3), _opt(xs, 4), w) if t)
    writes = x.nbytes + (2 * w.nbytes if w else 0)
    return _work(PER_ELEMENT["layer_norm_backward"] * x.numel, reads + writes, x.dtype, "norm")


def _rms_norm(xs: list[Arg], c: list[Any]) -> Work:
    """_fused_rms_norm / rms_norm(input, normalized_shape, weight, eps): y (and rstd)."""
    x, w = _t(xs, 0), _opt(xs, 2)
    rows = _rows(x, c, 1, w)
    by = 2 * x.nbytes + (w.nbytes if w else 0) + rows * 4
    return _work(PER_ELEMENT["rms_norm"] * x.numel, by, x.dtype, "norm")


def _rms_norm_bwd(xs: list[Arg], c: list[Any]) -> Work:
    """_fused_rms_norm_backward(grad_out, input, normalized_shape, rstd, weight, mask)."""
    g, x, w = _t(xs, 0), _t(xs, 1), _opt(xs, 4)
    r = _opt(xs, 3)
    by = g.nbytes + x.nbytes + (r.nbytes if r else 0) + (w.nbytes if w else 0)
    by += x.nbytes + (w.nbytes if w else 0)
    return _work(PER_ELEMENT["rms_norm_backward"] * x.numel, by, x.dtype, "norm")


def _group_norm(xs: list[Arg], c: list[Any]) -> Work:
    """native_group_norm(input, weight, bias, N, C, HxW, group, eps): y, mean, rstd."""
    x, w, b = _t(xs, 0), _opt(xs, 1), _opt(xs, 2)
    groups = _int(c, 6) or 1
    by = 2 * x.nbytes + sum(t.nbytes for t in (w, b) if t) + 2 * x.shape[0] * groups * 4
    return _work(PER_ELEMENT["group_norm"] * x.numel, by, x.dtype, "norm")


def _batch_norm(training_at: int | None) -> Callable[[list[Arg], list[Any]], Work]:
    """native_batch_norm(input, weight, bias, running_mean, running_var, training, ...)."""
    def f(xs: list[Arg], c: list[Any]) -> Work:
        x = _t(xs, 0)
        vecs = sum(t.nbytes for t in (_opt(xs, i) for i in (1, 2, 3, 4)) if t)
        train = _bool(c, training_at) if training_at is not None else False
        per = PER_ELEMENT["batch_norm_train" if train else "batch_norm_eval"]
        return _work(per * x.numel, 2 * x.nbytes + vecs, x.dtype, "norm")
    return f


def _softmax(dtype_at: int, half_to_float: bool) -> Callable[[list[Arg], list[Any]], Work]:
    """_softmax(self, dim, half_to_float) / softmax(self, dim, dtype)."""
    def f(xs: list[Arg], c: list[Any]) -> Work:
        x = _t(xs, 0)
        if half_to_float:
            out = 4 if _bool(c, dtype_at) else x.size
        else:
            d = _dtype_arg(c, dtype_at)
            out = d[1] if d else x.size
        return _work(PER_ELEMENT["softmax"] * x.numel, x.nbytes + x.numel * out, x.dtype,
                     "softmax")
    return f


def _softmax_bwd(xs: list[Arg], c: list[Any]) -> Work:
    """_softmax_backward_data(grad_output, output, dim, input_dtype)."""
    g, y = _t(xs, 0), _t(xs, 1)
    d = _dtype_arg(c, 3)
    by = g.nbytes + y.nbytes + g.numel * (d[1] if d else g.size)
    return _work(PER_ELEMENT["softmax_backward"] * g.numel, by, g.dtype, "softmax")


# -- gathers -----------------------------------------------------------------------------
def _embedding(xs: list[Arg], c: list[Any]) -> Work:
    """embedding(weight [V, D], indices): reads the indices and one row per index."""
    w, idx = _t(xs, 0, 2), _t(xs, 1)
    out = idx.numel * w.shape[1] * w.size
    return _work(0, idx.nbytes + 2 * out, w.dtype, "embedding")


def _index_select(xs: list[Arg], c: list[Any]) -> Work:
    """index_select(self, dim, index)."""
    x, idx = _t(xs, 0), _t(xs, 2, 1)
    dim = _int(c, 1) or 0
    if not x.shape:
        raise _Skip("index_select of a 0-d tensor")
    dim %= len(x.shape)
    out = x.numel // max(x.shape[dim], 1) * idx.numel * x.size
    return _work(0, idx.nbytes + 2 * out, x.dtype, "embedding")


def _gather(xs: list[Arg], c: list[Any]) -> Work:
    """gather(self, dim, index, sparse_grad[, out]): one element read per index."""
    x, idx = _t(xs, 0), _t(xs, 2)
    return _work(0, idx.nbytes + 2 * idx.numel * x.size, x.dtype, "embedding")


def _embedding_bwd(xs: list[Arg], c: list[Any]) -> Work:
    """embedding_dense_backward(grad_output, indices, num_weights, padding_idx, scale)."""
    g, idx = _t(xs, 0), _t(xs, 1)
    rows = _int(c, 2)
    if rows is None or not g.shape:
        raise _Skip("num_weights not recorded")
    return _work(0, g.nbytes + idx.nbytes + rows * g.shape[-1] * g.size, g.dtype, "embedding")


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
    return _prod(out)


def _elementwise(base: str, inplace: bool) -> Callable[[list[Arg], list[Any]], Work]:
    def f(xs: list[Arg], c: list[Any]) -> Work:
        ts = _tensors(xs)
        if not ts:
            raise _Skip("no tensor inputs")
        first = ts[0]
        if base in ("fill", "zero"):  # writes self only
            return _work(0, first.nbytes, first.dtype, "elementwise")
        if base == "copy":  # copy_(self, src): reads src, writes self
            src = ts[1] if len(ts) > 1 else first
            return _work(0, src.nbytes + first.nbytes, first.dtype, "copy")
        if inplace:
            return _work(0, sum(t.nbytes for t in ts) + first.nbytes, first.dtype,
                         "elementwise")
        if base == "_to_copy":
            d = _dtype_arg(c, 1)
            return _work(0, first.nbytes + first.numel * (d[1] if d else first.size),
                         first.dtype, "copy")
        if base in ("clone", "contiguous"):
            return _work(0, 2 * first.nbytes, first.dtype, "copy")
        if base in ("cat", "stack"):
            return _work(0, 2 * sum(t.nbytes for t in ts), first.dtype, "copy")
        if base in ("masked_fill", "tril", "triu"):
            return _work(0, sum(t.nbytes for t in ts) + first.nbytes, first.dtype,
                         "elementwise")
        n = _broadcast([t.shape for t in ts])
        # Type promotion: 0-d tensors (wrapped Python scalars) do not widen the result.
        dims = [t for t in ts if t.shape] or ts
        fl = [t for t in dims if t.dtype in _FLOATS]
        out_size = 1 if base in _COMPARE else max((t.size for t in fl), default=first.size)
        dt = fl[0].dtype if fl else first.dtype
        return _work(0, sum(t.nbytes for t in ts) + n * out_size, dt, "elementwise")
    return f


def _reduced_numel(x: _T, dims: list[int] | None) -> int:
    if not x.shape:
        return 1
    if not dims:
        return 1
    nd = len(x.shape)
    keep = [d for i, d in enumerate(x.shape) if i not in {k % nd for k in dims}]
    return _prod(keep)


def _reduction(base: str) -> Callable[[list[Arg], list[Any]], Work]:
    pointwise = _elementwise(base, False)

    def f(xs: list[Arg], c: list[Any]) -> Work:
        x = _t(xs, 0)
        if len(_tensors(xs)) > 1 and base in ("max", "min"):
            return pointwise(xs, c)  # max(a, b) / min(a, b): the elementwise overloads
        if base in ("cumsum", "cumprod"):
            return _work(0, 2 * x.nbytes, x.dtype, "reduction")
        raw = c[1] if len(c) > 1 else ""
        dims = _ints(raw) if raw not in ("", None) else None
        out = _reduced_numel(x, dims)
        size = 8 if base in ("argmax", "argmin") else x.size
        if base in ("max", "min") and dims:
            size += 8  # values and int64 indices
        approx = "" if len(c) > 1 else "reduction dims not recorded: assumed all"
        return _work(0, x.nbytes + out * size, x.dtype, "reduction", approx)
    return f


_ELEMENTWISE = (
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
_REDUCTIONS = (
    "sum", "mean", "amax", "amin", "max", "min", "argmax", "argmin", "norm",
    "linalg_vector_norm", "var", "std", "var_mean", "std_mean", "prod", "any", "all",
    "logsumexp", "cumsum", "cumprod",
)

_FORMULAS: dict[str, Callable[[list[Arg], list[Any]], Work]] = {
    "aten::mm": _mm,
    "aten::addmm": _addmm,
    "aten::bmm": _bmm,
    "aten::baddbmm": _baddbmm,
    "aten::matmul": _matmul,
    "aten::linear": _linear,
    "aten::_scaled_mm": _scaled_mm,
    "aten::_int_mm": _int_mm,
    "aten::mv": _mv,
    "aten::addmv": lambda xs, c: _mv(xs, c, 1),
    "aten::convolution": _conv(2, 3, 4, 5, 6),
    "aten::_convolution": _conv(2, 3, 4, 5, 6),
    "aten::conv1d": _conv(2, 3, 4, 5, None),
    "aten::conv2d": _conv(2, 3, 4, 5, None),
    "aten::conv3d": _conv(2, 3, 4, 5, None),
    "aten::cudnn_convolution": _conv(None, 3, 2, 4, None),
    "aten::miopen_convolution": _conv(2, 4, 3, 5, None),
    "aten::convolution_backward": _conv_backward,
    # SDPA entry points: [B, H, L, E]; is_causal is the Concrete Input at the given index.
    "aten::scaled_dot_product_attention": _sdpa(0, 5, "bhld", (3,)),
    "aten::_scaled_dot_product_flash_attention": _sdpa(0, 4, "bhld"),
    "aten::_scaled_dot_product_efficient_attention": _sdpa(0, 6, "bhld", (3,)),
    "aten::_scaled_dot_product_cudnn_attention": _sdpa(0, 6, "bhld", (3,)),
    "aten::_cudnn_attention_forward": _sdpa(0, 10, "bhld", (3,)),
    # The kernels' own ops: [B, L, H, E].
    "aten::_flash_attention_forward": _sdpa(0, 8, "blhd"),
    "aten::_efficient_attention_forward": _sdpa(0, 9, "blhd", (3,), mask_type=True),
    "flash_attn::_flash_attn_forward": _sdpa(0, 5, "blhd"),
    "aten::_scaled_dot_product_flash_attention_backward": _sdpa_bwd(11, "bhld", (4, 5)),
    "aten::_scaled_dot_product_efficient_attention_backward": _sdpa_bwd(11, "bhld", (4, 5, 6)),
    "aten::_scaled_dot_product_cudnn_attention_backward": _sdpa_bwd(14, "bhld", (4, 5, 8)),
    "aten::_cudnn_attention_backward": _sdpa_bwd(14, "bhld", (4, 5, 8)),
    "aten::_flash_attention_backward": _sdpa_bwd(11, "blhd", (4, 5)),
    "aten::_efficient_attention_backward": _sdpa_bwd(14, "blhd", (4, 5, 10), mask_type=True),
    "flash_attn::_flash_attn_backward": _sdpa_bwd(11, "blhd", (4, 5)),
    "aten::native_layer_norm": _layer_norm,
    "aten::layer_norm": _layer_norm,
    "aten::native_layer_norm_backward": _layer_norm_bwd,
    "aten::_fused_rms_norm": _rms_norm,
    "aten::rms_norm": _rms_norm,
    "aten::_fused_rms_norm_backward": _rms_norm_bwd,
    "aten::native_group_norm": _group_norm,
    "aten::native_batch_norm": _batch_norm(5),
    "aten::_native_batch_norm_legit": _batch_norm(5),
    "aten::_native_batch_norm_legit_no_training": _batch_norm(None),
    "aten::cudnn_batch_norm": _batch_norm(5),
    "aten::_softmax": _softmax(2, True),
    "aten::_log_softmax": _softmax(2, True),
    "aten::softmax": _softmax(2, False),
    "aten::log_softmax": _softmax(2, False),
    "aten::_safe_softmax": _softmax(2, False),
    "aten::_softmax_backward_data": _softmax_bwd,
    "aten::_log_softmax_backward_data": _softmax_bwd,
    "aten::embedding": _embedding,
    "aten::index_select": _index_select,
    "aten::gather": _gather,
    "aten::embedding_dense_backward": _embedding_bwd,
}
for _b in _ELEMENTWISE:
    _FORMULAS.setdefault(f"aten::{_b}", _elementwise(_b, False))
    if not _b.startswith("_"):
        _FORMULAS.setdefault(f"aten::{_b}_", _elementwise(_b, True))
for _b in _REDUCTIONS:
    _FORMULAS.setdefault(f"aten::{_b}", _reduction(_b))

#: Every operator name :func:`op_work` models.
WORK_OPS: frozenset[str] = frozenset(_FORMULAS)

#: Operator names whose FLOPs traceforge derives from shapes (ops that do arithmetic:
#: matrix products, convolutions, attention, norms, softmax).
FLOP_OPS: frozenset[str] = frozenset(
    n for n, f in _FORMULAS.items()
    if not any(n == f"aten::{b}" or n == f"aten::{b}_" for b in (*_ELEMENTWISE, *_REDUCTIONS))
    and n not in ("aten::embedding", "aten::index_select", "aten::gather",
                  "aten::embedding_dense_backward")
)


#: The args :func:`op_work` and :func:`op_flops` read (for ``Trace.distinct_args``).
ARG_KEYS = ("flops", "Input Dims", "Input dims", "Input type", "Concrete Inputs")


def op_work(name: str, args: dict[str, Any], *, list_dtype: str | None = None) -> Work:
    """FLOPs and bytes of one operator call (see the module docstring for the model).

    ``list_dtype`` is the ``Input type`` assumed for TensorList elements (``aten::cat``),
    whose dtype Kineto does not record. Never raises: unknown work comes back with a reason.
    """
    f = _FORMULAS.get(name)
    raw = args.get("flops")
    own = float(raw) if isinstance(raw, (int, float)) and not isinstance(raw, bool) \
        and raw > 0 else None
    if f is None and own is None:
        return unknown(f"op not modelled: {name}")
    try:
        if f is None:
            raise _Skip("op not modelled")
        xs, c = _args(args, list_dtype)
        w = f(xs, c)
    except _Skip as e:
        if own is not None:  # the FLOPs are known even when the bytes are not
            return Work(own, math.nan, "", "", f"bytes unknown: {e}")
        return unknown(str(e))
    except (TypeError, ValueError, IndexError, ZeroDivisionError, OverflowError) as e:
        return unknown(f"malformed arguments ({type(e).__name__})")
    if own is not None:
        w = Work(own, w.bytes, w.dtype, w.family, w.reason, w.approx)
    return w


def op_flops(name: str, args: dict[str, Any]) -> int | None:
    """FLOPs of one operator call, from its ``flops`` arg or its input shapes; None if unknown.

    Only ops in :data:`FLOP_OPS` (and ops with a ``flops`` arg) have FLOPs; ops that only
    move data give None here.
    """
    own = args.get("flops")
    if isinstance(own, (int, float)) and not isinstance(own, bool) and own > 0:
        return int(own)
    if name not in FLOP_OPS:
        return None
    w = op_work(name, args)
    return int(w.flops) if w.known else None


def element_size(dtype: str) -> int | None:
    """Bytes per element of a dtype key (``"bf16"`` -> 2), or None when unknown."""
    return _KEY_SIZE.get(dtype)
