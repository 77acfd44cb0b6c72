"""FLOPs of framework operators from their input shapes.

torch 2.11 traces carry ``Input Dims`` on cpu_op events but no ``flops`` arg, even with
``with_flops=True`` (seen in our H100 fixtures), so the count is derived from shapes for the
ops that dominate GPU time: matrix products, convolutions and scaled-dot-product attention.
A trace's own ``flops`` arg wins where present. Counts are multiply-adds x 2, as torch's
own flop counter does; elementwise epilogues (bias, activation) are not counted.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from typing import Any

Dims = Sequence[Any]


def _prod(xs: Sequence[int]) -> int:
    return math.prod(int(x) for x in xs) if xs else 1


def _is_shape(d: Any) -> bool:
    return isinstance(d, list) and all(isinstance(x, int) for x in d)


def _mm(dims: Dims, a: int = 0) -> int | None:
    if len(dims) < a + 2:
        return None
    x, w = dims[a], dims[a + 1]
    if not (_is_shape(x) and _is_shape(w)) or len(x) != 2 or len(w) != 2:
        return None
    m, k = x
    n = w[1]
    result: int = 2 * m * k * n
    return result


def _bmm(dims: Dims, a: int = 0) -> int | None:
    if len(dims) < a + 2:
        return None
    x, w = dims[a], dims[a + 1]
    if not (_is_shape(x) and _is_shape(w)) or len(x) != 3 or len(w) != 3:
        return None
    b, m, k = x
    result2: int = 2 * b * m * k * w[2]
    return result2


def _matmul(dims: Dims) -> int | None:
    if len(dims) < 2 or not (_is_shape(dims[0]) and _is_shape(dims[1])):
        return None
    x, w = list(dims[0]), list(dims[1])
    if not x or not w:
        return None
    if len(x) == 1:
        x = [1, *x]
    if len(w) == 1:
        w = [*w, 1]
    m, k = x[-2], x[-1]
    n = w[-1]
    batch = max(_prod(x[:-2]), _prod(w[:-2]))
    result3: int = 2 * batch * m * k * n
    return result3


def _linear(dims: Dims) -> int | None:
    if len(dims) < 2 or not (_is_shape(dims[0]) and _is_shape(dims[1])):
        return None
    x, w = dims[0], dims[1]
    if not x or len(w) != 2:
        return None
    result4: int = 2 * _prod(x[:-1]) * x[-1] * w[0]
    return result4


_INTS = re.compile(r"-?\d+")


def _ints(v: Any) -> list[int]:
    if isinstance(v, list):
        return [int(x) for x in v if isinstance(x, int)]
    if isinstance(v, str):
        return [int(x) for x in _INTS.findall(v)]
    return []


def _conv(dims: Dims, concrete: Sequence[Any] | None) -> int | None:
    """aten::convolution(input, weight, bias, stride, padding, dilation, transposed, ...)."""
    if len(dims) < 2 or not (_is_shape(dims[0]) and _is_shape(dims[1])):
        return None
    x, w = dims[0], dims[1]
    nd = len(x) - 2
    if nd < 1 or len(w) != len(x):
        return None
    c = list(concrete or [])
    stride = _ints(c[3]) if len(c) > 3 else []
    pad = _ints(c[4]) if len(c) > 4 else []
    dil = _ints(c[5]) if len(c) > 5 else []
    transposed = len(c) > 6 and str(c[6]).strip().lower() in ("true", "1")
    if transposed:
        return None  # output size needs output_padding; rare in inference, left uncounted

    def pick(v: list[int], i: int, default: int) -> int:
        if not v:
            return default
        return v[i] if i < len(v) else v[-1]

    out_spatial = []
    for i in range(nd):
        size, k = x[2 + i], w[2 + i]
        s, p, d = pick(stride, i, 1), pick(pad, i, 0), pick(dil, i, 1)
        out_spatial.append((size + 2 * p - d * (k - 1) - 1) // s + 1)
    n, cout = x[0], w[0]
    cin_per_group = w[1]
    result5: int = 2 * n * cout * _prod(out_spatial) * cin_per_group * _prod(w[2:])
    return result5


def _sdpa_bhle(dims: Dims) -> int | None:
    """q [B, H, L, E], k [B, H, S, E], v [B, H, S, Ev]: QK^T and PV."""
    if len(dims) < 3 or not all(_is_shape(d) and len(d) == 4 for d in dims[:3]):
        return None
    b, h, lq, e = dims[0]
    s = dims[1][2]
    ev = dims[2][3]
    result6: int = 2 * b * h * lq * s * e + 2 * b * h * lq * s * ev
    return result6


def _sdpa_blhe(dims: Dims) -> int | None:
    """flash/efficient kernels' layout: q [B, L, H, E], k [B, S, H, E], v [B, S, H, Ev]."""
    if len(dims) < 3 or not all(_is_shape(d) and len(d) == 4 for d in dims[:3]):
        return None
    b, lq, h, e = dims[0]
    s = dims[1][1]
    ev = dims[2][3]
    result7: int = 2 * b * h * lq * s * e + 2 * b * h * lq * s * ev
    return result7


_FORMULAS: dict[str, Callable[[Dims, Sequence[Any] | None], int | None]] = {
    "aten::mm": lambda d, c: _mm(d),
    "aten::addmm": lambda d, c: _mm(d, 1),
    "aten::bmm": lambda d, c: _bmm(d),
    "aten::baddbmm": lambda d, c: _bmm(d, 1),
    "aten::matmul": lambda d, c: _matmul(d),
    "aten::linear": lambda d, c: _linear(d),
    "aten::convolution": _conv,
    "aten::_convolution": _conv,
    "aten::conv1d": _conv,
    "aten::conv2d": _conv,
    "aten::conv3d": _conv,
    "aten::cudnn_convolution": _conv,
    "aten::scaled_dot_product_attention": lambda d, c: _sdpa_bhle(d),
    "aten::_scaled_dot_product_flash_attention": lambda d, c: _sdpa_bhle(d),
    "aten::_scaled_dot_product_efficient_attention": lambda d, c: _sdpa_bhle(d),
    "aten::_scaled_dot_product_cudnn_attention": lambda d, c: _sdpa_bhle(d),
    "aten::_flash_attention_forward": lambda d, c: _sdpa_blhe(d),
    "aten::_efficient_attention_forward": lambda d, c: _sdpa_blhe(d),
}

#: Operator names whose FLOPs traceforge derives from shapes.
FLOP_OPS: frozenset[str] = frozenset(_FORMULAS)


def op_flops(name: str, args: dict[str, Any]) -> int | None:
    """FLOPs of one operator call, from its ``flops`` arg or its input shapes; None if unknown."""
    own = args.get("flops")
    if isinstance(own, (int, float)) and own > 0:
        return int(own)
    f = _FORMULAS.get(name)
    if f is None:
        return None
    dims = args.get("Input Dims", args.get("Input dims"))
    if not isinstance(dims, list):
        return None
    concrete = args.get("Concrete Inputs")
    try:
        return f(dims, concrete if isinstance(concrete, list) else None)
    except (TypeError, ValueError, IndexError):
        return None
