"""FLOPs and bytes of contractions: matrix products, convolutions and attention.

These are the ops whose math runs on tensor / matrix cores (:data:`TENSOR_FAMILIES`, the
families the roofline gives a tensor-core ceiling) and the ones that carry nearly all of a
model's FLOPs: 2 x multiply-adds, as torch's flop counter counts them. :data:`CONTRACTIONS`
maps each operator name to its formula; where an op's stride, padding or causal flag sits
among its ``Concrete Inputs`` differs per op, so the table binds those positions.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any

from traceforge.analyzers.costs.operands import (
    Arg,
    Skip,
    Tensor,
    Work,
    dtype_arg,
    flag,
    integer,
    ints,
    optional,
    prod,
    tensor,
    work,
)

#: Families whose math runs on tensor / matrix cores.
TENSOR_FAMILIES = frozenset({"matmul", "conv", "attention"})


# -- matrix products ---------------------------------------------------------------------
def _mm_core(a: Tensor, b: Tensor, extra: Sequence[Tensor | None],
             out_size: int | None = None) -> Work:
    if len(a.shape) != 2 or len(b.shape) != 2:
        raise Skip("mm operands are not 2-d")
    m, k = a.shape
    n = b.shape[1]
    by = a.nbytes + b.nbytes + sum(x.nbytes for x in extra if x is not None)
    by += m * n * (out_size or a.size)
    return work(2 * m * k * n, by, a.dtype, "matmul")


def _mm(xs: list[Arg], c: list[Any]) -> Work:
    return _mm_core(tensor(xs, 0), tensor(xs, 1), ())


def _addmm(xs: list[Arg], c: list[Any]) -> Work:
    return _mm_core(tensor(xs, 1), tensor(xs, 2), (optional(xs, 0),))


def _bmm_core(a: Tensor, b: Tensor, extra: Sequence[Tensor | None]) -> Work:
    if len(a.shape) != 3 or len(b.shape) != 3:
        raise Skip("bmm operands are not 3-d")
    bt, m, k = a.shape
    n = b.shape[2]
    by = a.nbytes + b.nbytes + sum(x.nbytes for x in extra if x is not None) + bt * m * n * a.size
    return work(2 * bt * m * k * n, by, a.dtype, "matmul")


def _bmm(xs: list[Arg], c: list[Any]) -> Work:
    return _bmm_core(tensor(xs, 0), tensor(xs, 1), ())


def _baddbmm(xs: list[Arg], c: list[Any]) -> Work:
    return _bmm_core(tensor(xs, 1), tensor(xs, 2), (optional(xs, 0),))


def _matmul(xs: list[Arg], c: list[Any]) -> Work:
    a, b = tensor(xs, 0), tensor(xs, 1)
    x, w = list(a.shape), list(b.shape)
    if not x or not w:
        raise Skip("matmul of a 0-d tensor")
    if len(x) == 1:
        x = [1, *x]
    if len(w) == 1:
        w = [*w, 1]
    m, k, n = x[-2], x[-1], w[-1]
    batch = max(prod(x[:-2]), prod(w[:-2]))
    by = a.nbytes + b.nbytes + batch * m * n * a.size
    return work(2 * batch * m * k * n, by, a.dtype, "matmul")


def _linear(xs: list[Arg], c: list[Any]) -> Work:
    x, w, bias = tensor(xs, 0), tensor(xs, 1, 2), optional(xs, 2)
    if not x.shape:
        raise Skip("linear of a 0-d tensor")
    rows = prod(x.shape[:-1])
    by = x.nbytes + w.nbytes + (bias.nbytes if bias else 0) + rows * w.shape[0] * x.size
    return work(2 * rows * x.shape[-1] * w.shape[0], by, x.dtype, "matmul")


def _scaled_mm(xs: list[Arg], c: list[Any]) -> Work:
    """_scaled_mm(a, b, scale_a, scale_b, bias, scale_result, out_dtype, use_fast_accum)."""
    a, b = tensor(xs, 0, 2), tensor(xs, 1, 2)
    out = dtype_arg(c, 6)
    extra = [optional(xs, i) for i in (2, 3, 4, 5)]
    w = _mm_core(a, b, extra, out_size=out[1] if out else a.size)
    # FP4 x2 tensors hold two values per element of their dims: K is twice what dims say.
    f = 2.0 if a.dtype == "fp4" else 1.0
    approx = "" if out else "output dtype not recorded: assumed the input's"
    return work(w.flops * f, w.bytes, a.dtype, "matmul", approx)


def _int_mm(xs: list[Arg], c: list[Any]) -> Work:
    return _mm_core(tensor(xs, 0, 2), tensor(xs, 1, 2), (), out_size=4)


def _mv(xs: list[Arg], c: list[Any], a_i: int = 0) -> Work:
    a, v = tensor(xs, a_i, 2), tensor(xs, a_i + 1, 1)
    m, n = a.shape
    extra = optional(xs, 0) if a_i else None
    by = a.nbytes + v.nbytes + (extra.nbytes if extra else 0) + m * a.size
    return work(2 * m * n, by, a.dtype, "matmul")


# -- convolution -------------------------------------------------------------------------
def _pick(v: list[int], i: int, default: int) -> int:
    if not v:
        return default
    return v[i] if i < len(v) else v[-1]


def _conv_out(x: Tensor, w: Tensor, c: list[Any], stride_at: int, pad_at: int,
              dil_at: int) -> list[int]:
    nd = len(x.shape) - 2
    stride = ints(c[stride_at]) if len(c) > stride_at else []
    pad_raw = c[pad_at] if len(c) > pad_at else ""
    pad = ints(pad_raw)
    dil = ints(c[dil_at]) if len(c) > dil_at else []
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
        x, w = tensor(xs, 0), tensor(xs, 1)
        bias = optional(xs, bias_at) if bias_at is not None else None
        if len(x.shape) < 3 or len(w.shape) != len(x.shape):
            raise Skip("convolution input and weight ranks differ")
        if transposed_at is not None and flag(c, transposed_at):
            raise Skip("transposed convolution not modelled (output size needs "
                        "output_padding)")
        out = _conv_out(x, w, c, stride_at, pad_at, dil_at)
        n, cout = x.shape[0], w.shape[0]
        flops = 2 * n * cout * prod(out) * w.shape[1] * prod(w.shape[2:])
        by = x.nbytes + w.nbytes + (bias.nbytes if bias else 0) + n * cout * prod(out) * x.size
        return work(flops, by, x.dtype, "conv")
    return f


def _conv_backward(xs: list[Arg], c: list[Any]) -> Work:
    """convolution_backward(grad_output, input, weight, bias_sizes, stride, padding, dilation,
    transposed, output_padding, groups, output_mask): grad_input and grad_weight each cost
    one forward's FLOPs."""
    g, x, w = tensor(xs, 0), tensor(xs, 1), tensor(xs, 2)
    if len(x.shape) < 3 or len(w.shape) != len(x.shape) or len(g.shape) != len(x.shape):
        raise Skip("convolution_backward ranks differ")
    mask = [s.strip().lower() == "true" for s in re.findall(r"[A-Za-z]+", str(c[10]))] \
        if len(c) > 10 else []
    want_in, want_w, want_b = (mask + [True, True, False])[:3] if mask else (True, True, False)
    one = 2 * g.numel * w.shape[1] * prod(w.shape[2:])
    flops = one * (int(want_in) + int(want_w))
    by = g.nbytes + x.nbytes + w.nbytes
    by += (x.nbytes if want_in else 0) + (w.nbytes if want_w else 0)
    by += (w.shape[0] * w.size if want_b else 0)
    return work(flops, by, x.dtype, "conv")


# -- attention ---------------------------------------------------------------------------
def _attention(q: Tensor, k: Tensor, v: Tensor, layout: str, causal: bool,
               extra: Sequence[Tensor | None], backward: bool = False,
               bwd_reads: Sequence[Tensor | None] = ()) -> Work:
    if not (len(q.shape) == len(k.shape) == len(v.shape) == 4):
        raise Skip("variable-length attention: per-sequence lengths are not recorded")
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
        return work(2.5 * flops, by, q.dtype, "attention")
    return work(flops, ins + out, q.dtype, "attention")


def _sdpa(q_at: int, causal_at: int, layout: str, extra: Sequence[int] = (),
          mask_type: bool = False) -> Callable[[list[Arg], list[Any]], Work]:
    def f(xs: list[Arg], c: list[Any]) -> Work:
        q, k, v = tensor(xs, q_at), tensor(xs, q_at + 1), tensor(xs, q_at + 2)
        causal = (integer(c, causal_at) or 0) in (1, 2) if mask_type else flag(c, causal_at)
        return _attention(q, k, v, layout, causal, [optional(xs, i) for i in extra])
    return f


def _sdpa_bwd(causal_at: int, layout: str, reads: Sequence[int],
              mask_type: bool = False) -> Callable[[list[Arg], list[Any]], Work]:
    """Backward ops take (grad_out, q, k, v, ...): q at 1."""
    def f(xs: list[Arg], c: list[Any]) -> Work:
        q, k, v = tensor(xs, 1), tensor(xs, 2), tensor(xs, 3)
        causal = (integer(c, causal_at) or 0) in (1, 2) if mask_type else flag(c, causal_at)
        return _attention(q, k, v, layout, causal, (), backward=True,
                          bwd_reads=[optional(xs, i) for i in (0, *reads)])
    return f


#: Operator name -> formula, for the ops above.
CONTRACTIONS: dict[str, Callable[[list[Arg], list[Any]], Work]] = {
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
}
