"""Kernel symbols: Itanium-mangled names (``_ZN2ck...``) demangled once, for every reader.

rocprof, rocprofv3 and some Kineto traces (cuDNN's CUTLASS kernels, AMD's composable_kernel,
aiter) record a kernel by its mangled symbol. Every reader that produces kernel names passes
its trace through :func:`demangle_names`, so ``Trace.events["name"]`` holds the demangled
name the model promises; the source's symbol stays in the row's args as ``mangled``.

The demangler is pydemumble, a binding of demumble over LLVM's ItaniumDemangle (the one in
clang, which compiles every HIP kernel, and in llvm-cxxfilt), kept by the angr project.
Chosen on the 16 distinct mangled kernel names of our fixtures, which it demangles all,
byte for byte as the independent pure-Python ``demangle`` package does:

- cxxfilt calls the C++ runtime's ``__cxa_demangle`` (ctypes): 0 of 16 with libstdc++ of
  GCC 12 (no ``DF16b``, std::bfloat16_t, and it gave up on every long CUTLASS/ck name);
  results would also change with each machine's libstdc++;
- itanium_demangler (pure Python, last release 2022): 10 of 16 (no ``DF16b``, no ``Tn``);
- cpp-demangle and multi-demangle (Rust cpp_demangle crate): no Linux wheel for 3.13 /
  5 of 16; symbolic: a 75 MB install;
- demangle (pure Python): 16 of 16 but needs Python 3.11 and takes 40x longer.

pydemumble ships wheels for CPython 3.10-3.13 on Linux (x86_64, aarch64) and macOS arm64;
where it is not installed (Intel macOS has no wheel) names stay as the source wrote them.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import replace
from functools import lru_cache
from typing import Any

import numpy as np
import pandas as pd

from traceforge.args_provider import distinct_args, factorize_args
from traceforge.model import Trace

#: Itanium symbols start with ``_Z``; Mach-O adds one more underscore.
_PREFIXES = ("_Z", "__Z")
# OpenMP target regions of C++ functions embed the function's symbol:
# __omp_offloading_<device id>_<file id>_<symbol>_l<line>.
_OMP = re.compile(r"^(__omp_offloading_[0-9a-f]+_[0-9a-f]+_)(_Z.+?)(_l\d+(?:_\d+)?)$")


@lru_cache(maxsize=65536)
def demangle(name: str) -> str:
    """The demangled form of an Itanium symbol; any other name (or one that does not
    demangle) comes back unchanged.

    LLVM renders a symbol suffix such as ``.kd`` (an AMD kernel descriptor) as
    ``foo(int) (.kd)``; :func:`traceforge.analyzers.names.kernel_names.short_name` drops it.
    """
    omp = _OMP.match(name)
    if omp:
        inner = demangle(omp.group(2))
        return name if inner == omp.group(2) else omp.group(1) + inner + omp.group(3)
    if not name.startswith(_PREFIXES):
        return name
    try:
        from pydemumble import demangle as _llvm_demangle
    except ImportError:  # a platform without a wheel: keep the symbol as written
        return name
    out = str(_llvm_demangle(name))
    # demumble answers "" for what it cannot parse (a truncated or invalid symbol).
    return out if out and out != name else name


def demangle_names(trace: Trace) -> Trace:
    """``trace`` with every mangled event name demangled (once per distinct name).

    Works on the categories of the ``name`` column, so the cost is per distinct name, not
    per event. Rows whose name changed get ``mangled`` (the source's symbol) in their args.
    A trace without mangled names is returned as it is.
    """
    names = trace.events["name"]
    cats = [str(c) for c in names.cat.categories]
    new = [demangle(c) for c in cats]
    if new == cats:
        return trace
    codes = names.cat.codes.to_numpy()
    # Two symbols may demangle to one string (or to a name already present): factorize
    # merges them into one category.
    new_codes, uniques = pd.factorize(np.array(new, dtype=object))
    mapped = np.where(codes >= 0, new_codes[np.maximum(codes, 0)], -1)
    cat = pd.Categorical.from_codes(mapped, categories=pd.Index(uniques))
    events = trace.events.assign(name=pd.Series(cat, index=trace.events.index))
    mangled = {i: c for i, (c, n) in enumerate(zip(cats, new, strict=True)) if c != n}
    return replace(trace, events=events,
                   args_provider=_MangledArgs(trace.args_provider, codes, mangled))


class _MangledArgs:
    """Args of the wrapped provider plus ``mangled`` for rows whose name was demangled.

    Keeps the original category code per row (one small int each), nothing per name beyond
    the demangled ones.
    """

    def __init__(self, parent: Any, codes: np.ndarray, mangled: dict[int, str]) -> None:
        self.parent = parent
        self.codes = codes
        self.mangled = mangled

    def __call__(self, rows: np.ndarray) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        for r, a in zip(rows, self.parent(rows), strict=True):
            sym = self.mangled.get(int(self.codes[int(r)]))
            # A new dict: a provider may hand out the dicts it stores.
            out.append(a if sym is None else {**a, "mangled": sym})
        return out

    def distinct(self, rows: np.ndarray, keys: Sequence[str]
                 ) -> tuple[np.ndarray, list[dict[str, Any]]]:
        """The parent's answer where ``mangled`` is not asked for."""
        if "mangled" in keys:
            return factorize_args(self, rows, keys)
        return distinct_args(self.parent, rows, keys)
