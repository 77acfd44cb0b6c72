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
The formulas live by kind of op (:mod:`~traceforge.analyzers.costs.contractions`,
:mod:`~traceforge.analyzers.costs.normalizations`,
:mod:`~traceforge.analyzers.costs.data_movement`),
reading the recorded arguments through :mod:`~traceforge.analyzers.costs.operands`; this module
holds the table of which op uses which formula, and the entry points.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from traceforge.analyzers.costs.contractions import CONTRACTIONS, TENSOR_FAMILIES
from traceforge.analyzers.costs.data_movement import (
    ELEMENTWISE,
    GATHERS,
    REDUCTIONS,
    elementwise,
    reduction,
)
from traceforge.analyzers.costs.normalizations import NORMALIZATIONS, PER_ELEMENT
from traceforge.analyzers.costs.operands import (
    DTYPES,
    NO_DTYPES,
    SCALAR_TYPES,
    Arg,
    Skip,
    Work,
    element_size,
    read_operands,
    unknown,
)

_FORMULAS: dict[str, Callable[[list[Arg], list[Any]], Work]] = {
    **CONTRACTIONS, **NORMALIZATIONS, **GATHERS}
# setdefault: an op the tables above already model keeps that formula.
for _b in ELEMENTWISE:
    _FORMULAS.setdefault(f"aten::{_b}", elementwise(_b, False))
    if not _b.startswith("_"):
        _FORMULAS.setdefault(f"aten::{_b}_", elementwise(_b, True))
for _b in REDUCTIONS:
    _FORMULAS.setdefault(f"aten::{_b}", reduction(_b))

#: Every operator name :func:`op_work` models.
WORK_OPS: frozenset[str] = frozenset(_FORMULAS)

#: Operator names whose FLOPs traceforge derives from shapes (ops that do arithmetic:
#: matrix products, convolutions, attention, norms, softmax).
FLOP_OPS: frozenset[str] = frozenset(
    n for n, f in _FORMULAS.items()
    if not any(n == f"aten::{b}" or n == f"aten::{b}_" for b in (*ELEMENTWISE, *REDUCTIONS))
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
            raise Skip("op not modelled")
        xs, c = read_operands(args, list_dtype)
        w = f(xs, c)
    except Skip as e:
        if str(e) == NO_DTYPES and own is None and f is not None:
            return _shapes_only(f, args, list_dtype)
        if own is not None:  # the FLOPs are known even when the bytes are not
            return Work(own, math.nan, "", "", f"bytes unknown: {e}")
        return unknown(str(e))
    except (TypeError, ValueError, IndexError, ZeroDivisionError, OverflowError) as e:
        return unknown(f"malformed arguments ({type(e).__name__})")
    if own is not None:
        w = Work(own, w.bytes, w.dtype, w.family, w.reason, w.approx)
    return w


def _shapes_only(f: Callable[[list[Arg], list[Any]], Work], args: dict[str, Any],
                 list_dtype: str | None) -> Work:
    """FLOPs of a call recorded with shapes but no dtypes (PyTorch's emit_nvtx ranges under
    nsys): the shapes give the FLOPs; bytes, which need element sizes, stay unknown."""
    try:
        xs, c = read_operands(args, list_dtype, shapes_only=True)
        w = f(xs, c)
    except Skip as e:
        return unknown(str(e))
    except (TypeError, ValueError, IndexError, ZeroDivisionError, OverflowError) as e:
        return unknown(f"malformed arguments ({type(e).__name__})")
    if not w.known:
        return w
    return Work(w.flops, math.nan, "", w.family, "", f"{NO_DTYPES}: bytes unknown")


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


__all__ = ["ARG_KEYS", "DTYPES", "FLOP_OPS", "PER_ELEMENT", "SCALAR_TYPES", "TENSOR_FAMILIES",
           "WORK_OPS", "Work", "element_size", "op_flops", "op_work", "unknown"]
