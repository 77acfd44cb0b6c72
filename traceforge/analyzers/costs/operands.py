"""Tensor arguments of an operator call, as Kineto records them, and the Work they imply.

Kineto writes an op call's arguments as three parallel lists: ``Input Dims`` (shapes),
``Input type`` (C++ dtype names) and ``Concrete Inputs`` (scalars, printed as strings).
:func:`read_operands` turns them into :class:`Tensor` arguments and the concrete values,
and the small accessors here (:func:`tensor`, :func:`optional`, :func:`flag`,
:func:`integer`, :func:`dtype_arg`) are what every FLOP/byte formula
(:mod:`~traceforge.analyzers.costs.contractions`, :mod:`~traceforge.analyzers.costs.normalizations`,
:mod:`~traceforge.analyzers.costs.data_movement`) reads them through: each raises :class:`Skip`
when the trace did not record what a formula needs, so a formula is a straight line of
arithmetic and :func:`traceforge.analyzers.costs.flops.op_work` turns the skip into a reason.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
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


class Skip(Exception):
    """The op's work cannot be derived from what the trace recorded."""


@dataclass(frozen=True)
class Tensor:
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


Arg = Tensor | list[Tensor] | None


def prod(xs: Sequence[int]) -> int:
    """The product of a shape's dims (1 for a 0-d shape), as a Python int."""
    return math.prod(int(x) for x in xs) if xs else 1


def _is_shape(d: Any) -> bool:
    return isinstance(d, list) and all(isinstance(x, int) and not isinstance(x, bool) for x in d)


def _parse_tensor(dims: Any, typ: str, list_dtype: str | None) -> Arg:
    if typ == "TensorList":
        if not isinstance(dims, list) or not all(_is_shape(d) for d in dims):
            return None
        if list_dtype is None or list_dtype not in DTYPES:
            raise Skip("TensorList element dtype not recorded")
        key, size = DTYPES[list_dtype]
        return [Tensor(tuple(d), key, size) for d in dims]
    if typ in _NOT_TENSORS:
        return None
    if typ not in DTYPES:
        if _is_shape(dims) and dims:
            raise Skip(f"unknown dtype {typ!r}")
        return None
    if not _is_shape(dims):
        return None
    key, size = DTYPES[typ]
    return Tensor(tuple(dims), key, size)


#: Why :func:`read_operands` stops on calls recorded with shapes but no dtypes.
NO_DTYPES = "no input dtypes recorded"


def read_operands(args: dict[str, Any], list_dtype: str | None, *, shapes_only: bool = False
                  ) -> tuple[list[Arg], list[Any]]:
    """An op call's arguments (a :class:`Tensor`, a list of them, or None for a non-tensor)
    and its ``Concrete Inputs``; raises :class:`Skip` when shapes or dtypes are missing
    (``shapes_only``: tensors of unknown dtype come back with dtype ``?`` and size 0, for
    FLOPs, which need no dtype)."""
    dims = args.get("Input Dims", args.get("Input dims"))
    if not isinstance(dims, list):
        raise Skip("no input shapes recorded (record_shapes off, or a compiled region)")
    types = args.get("Input type")
    if not isinstance(types, list) or len(types) != len(dims):
        types = ["?"] * len(dims)
    concrete = args.get("Concrete Inputs")
    if not isinstance(concrete, list):
        concrete = []
    out = [_parse_tensor(d, str(t) if t is not None else "", list_dtype) if t != "?"
           else (Tensor(tuple(d), "?", 0) if _is_shape(d) and d else None)
           for d, t in zip(dims, types, strict=True)]
    if not shapes_only and any(isinstance(x, Tensor) and x.dtype == "?" for x in out):
        raise Skip(NO_DTYPES)
    return out, list(concrete)


def tensor(xs: list[Arg], i: int, ndim: int | None = None) -> Tensor:
    """Argument ``i``, which the formula needs to be a tensor (of ``ndim`` dims)."""
    x = xs[i] if i < len(xs) else None
    if not isinstance(x, Tensor) or (ndim is not None and len(x.shape) != ndim):
        want = f"a {ndim}-d tensor" if ndim else "a tensor"
        raise Skip(f"argument {i} is not {want}")
    return x


def optional(xs: list[Arg], i: int) -> Tensor | None:
    """Argument ``i`` if it is a tensor (an optional bias or weight), else None."""
    x = xs[i] if i < len(xs) else None
    return x if isinstance(x, Tensor) else None


def tensors(xs: list[Arg]) -> list[Tensor]:
    """Every tensor argument, tensor lists flattened."""
    out: list[Tensor] = []
    for x in xs:
        if isinstance(x, Tensor):
            out.append(x)
        elif isinstance(x, list):
            out.extend(x)
    return out


def flag(c: list[Any], i: int, default: bool = False) -> bool:
    """Concrete input ``i`` as a bool (``default`` when not recorded)."""
    v = str(c[i]).strip().lower() if i < len(c) else ""
    if v in ("true", "1"):
        return True
    if v in ("false", "0"):
        return False
    return default


_INTS = re.compile(r"-?\d+")


def ints(v: Any) -> list[int]:
    """The integers of a concrete input (a list, or a string such as ``'[1, 1]'``)."""
    if isinstance(v, list):
        return [int(x) for x in v if isinstance(x, int)]
    if isinstance(v, str):
        return [int(x) for x in _INTS.findall(v)]
    return []


def integer(c: list[Any], i: int) -> int | None:
    """Concrete input ``i`` when it is exactly one integer, else None."""
    xs = ints(c[i]) if i < len(c) else []
    return xs[0] if len(xs) == 1 else None


def dtype_arg(c: list[Any], i: int) -> tuple[str, int] | None:
    """Concrete input ``i`` read as a ScalarType code: (dtype key, bytes per element)."""
    code = integer(c, i)
    typ = SCALAR_TYPES.get(code) if code is not None else None
    return DTYPES[typ] if typ else None


def work(flops: float, nbytes: float, dtype: str, family: str, approx: str = "") -> Work:
    """A known :class:`Work` (what every formula returns)."""
    return Work(float(flops), float(nbytes), dtype, family, "", approx)


def element_size(dtype: str) -> int | None:
    """Bytes per element of a dtype key (``"bf16"`` -> 2), or None when unknown."""
    return _KEY_SIZE.get(dtype)
