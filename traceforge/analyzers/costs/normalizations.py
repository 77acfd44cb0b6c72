"""FLOPs and bytes of norms and softmax: ops that compute a fixed amount per element.

Layer, RMS, group and batch norm and (log-)softmax do a few FLOPs per input element
(:data:`PER_ELEMENT`, documented constants) and read and write each element about once,
plus the small per-row statistics (mean, rstd) they save for the backward pass.
:data:`NORMALIZATIONS` maps each operator name to its formula.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from traceforge.analyzers.costs.operands import (
    Arg,
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


# -- norms, softmax ----------------------------------------------------------------------
def _rows(x: Tensor, c: list[Any], shape_at: int, w: Tensor | None) -> int:
    norm = ints(c[shape_at]) if len(c) > shape_at else []
    inner = prod(norm) if norm else (w.numel if w is not None else (x.shape[-1] if x.shape
                                                                      else 1))
    return max(x.numel // max(inner, 1), 1)


def _layer_norm(xs: list[Arg], c: list[Any]) -> Work:
    """native_layer_norm(input, normalized_shape, weight, bias, eps): y, mean, rstd."""
    x, w, b = tensor(xs, 0), optional(xs, 2), optional(xs, 3)
    per = PER_ELEMENT["layer_norm" if w is not None else "layer_norm_noaffine"]
    rows = _rows(x, c, 1, w)
    by = 2 * x.nbytes + (w.nbytes if w else 0) + (b.nbytes if b else 0) + 2 * rows * 4
    return work(per * x.numel, by, x.dtype, "norm")


def _layer_norm_bwd(xs: list[Arg], c: list[Any]) -> Work:
    """native_layer_norm_backward(grad_out, input, normalized_shape, mean, rstd, weight, bias,
    output_mask)."""
    g, x, w = tensor(xs, 0), tensor(xs, 1), optional(xs, 5)
    reads = g.nbytes + x.nbytes + sum(t.nbytes for t in (optional(xs, 3), optional(xs, 4), w) if t)
    writes = x.nbytes + (2 * w.nbytes if w else 0)
    return work(PER_ELEMENT["layer_norm_backward"] * x.numel, reads + writes, x.dtype, "norm")


def _rms_norm(xs: list[Arg], c: list[Any]) -> Work:
    """_fused_rms_norm / rms_norm(input, normalized_shape, weight, eps): y (and rstd)."""
    x, w = tensor(xs, 0), optional(xs, 2)
    rows = _rows(x, c, 1, w)
    by = 2 * x.nbytes + (w.nbytes if w else 0) + rows * 4
    return work(PER_ELEMENT["rms_norm"] * x.numel, by, x.dtype, "norm")


def _rms_norm_bwd(xs: list[Arg], c: list[Any]) -> Work:
    """_fused_rms_norm_backward(grad_out, input, normalized_shape, rstd, weight, mask)."""
    g, x, w = tensor(xs, 0), tensor(xs, 1), optional(xs, 4)
    r = optional(xs, 3)
    by = g.nbytes + x.nbytes + (r.nbytes if r else 0) + (w.nbytes if w else 0)
    by += x.nbytes + (w.nbytes if w else 0)
    return work(PER_ELEMENT["rms_norm_backward"] * x.numel, by, x.dtype, "norm")


def _group_norm(xs: list[Arg], c: list[Any]) -> Work:
    """native_group_norm(input, weight, bias, N, C, HxW, group, eps): y, mean, rstd."""
    x, w, b = tensor(xs, 0), optional(xs, 1), optional(xs, 2)
    groups = integer(c, 6) or 1
    by = 2 * x.nbytes + sum(t.nbytes for t in (w, b) if t) + 2 * x.shape[0] * groups * 4
    return work(PER_ELEMENT["group_norm"] * x.numel, by, x.dtype, "norm")


def _batch_norm(training_at: int | None) -> Callable[[list[Arg], list[Any]], Work]:
    """native_batch_norm(input, weight, bias, running_mean, running_var, training, ...)."""
    def f(xs: list[Arg], c: list[Any]) -> Work:
        x = tensor(xs, 0)
        vecs = sum(t.nbytes for t in (optional(xs, i) for i in (1, 2, 3, 4)) if t)
        train = flag(c, training_at) if training_at is not None else False
        per = PER_ELEMENT["batch_norm_train" if train else "batch_norm_eval"]
        return work(per * x.numel, 2 * x.nbytes + vecs, x.dtype, "norm")
    return f


def _softmax(dtype_at: int, half_to_float: bool) -> Callable[[list[Arg], list[Any]], Work]:
    """_softmax(self, dim, half_to_float) / softmax(self, dim, dtype)."""
    def f(xs: list[Arg], c: list[Any]) -> Work:
        x = tensor(xs, 0)
        if half_to_float:
            out = 4 if flag(c, dtype_at) else x.size
        else:
            d = dtype_arg(c, dtype_at)
            out = d[1] if d else x.size
        return work(PER_ELEMENT["softmax"] * x.numel, x.nbytes + x.numel * out, x.dtype,
                     "softmax")
    return f


def _softmax_bwd(xs: list[Arg], c: list[Any]) -> Work:
    """_softmax_backward_data(grad_output, output, dim, input_dtype)."""
    g, y = tensor(xs, 0), tensor(xs, 1)
    d = dtype_arg(c, 3)
    by = g.nbytes + y.nbytes + g.numel * (d[1] if d else g.size)
    return work(PER_ELEMENT["softmax_backward"] * g.numel, by, g.dtype, "softmax")


#: Operator name -> formula, for the ops above.
NORMALIZATIONS: dict[str, Callable[[list[Arg], list[Any]], Work]] = {
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
}
