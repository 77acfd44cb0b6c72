"""Sample traces shipped with the package, for the quick start and for trying commands.

Any command that takes a trace accepts ``sample:NAME`` (for example ``sample:h100-eager``).
Both come from one H100 80GB HBM3 run of a small pi0-like policy (vision encoder, text
prefill, 10 denoising steps; bf16, batch 1; torch 2.11, CUDA 13): ``h100-eager`` without
compilation (cuBLAS nvjet GEMMs), ``h100-compiled`` with torch.compile max-autotune.
"""

from __future__ import annotations

from pathlib import Path

HERE = Path(__file__).resolve().parent
PREFIX = "sample:"


def names() -> list[str]:
    """Names of the bundled samples."""
    return sorted(p.name.removesuffix(".pt.trace.json.gz") for p in HERE.glob("*.pt.trace.json.gz"))


def path(name: str) -> Path:
    """The file of sample ``name`` (with or without the ``sample:`` prefix)."""
    name = name.removeprefix(PREFIX)
    return HERE / f"{name}.pt.trace.json.gz"
