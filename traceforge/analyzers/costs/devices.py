"""Device ceilings: datasheet peaks shipped with traceforge, and measured peaks files.

``traceforge/data/devices.json`` holds, per device, the dense (no sparsity) peak TFLOP/s of
each dtype and the HBM bandwidth, each with its source. :func:`match_device` finds the
entry for a device named in a trace (Kineto ``deviceProperties``, nsys ``TARGET_INFO_GPU``,
rocprof agents); :func:`device_peaks` looks one up by name or key. A peaks file written by
``traceforge calibrate`` (schema in :data:`PEAKS_SCHEMA`) holds what a machine really
reached; :func:`load_peaks` reads it.
"""

from __future__ import annotations

import functools
import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from importlib import resources
from pathlib import Path
from typing import Any

import pandas as pd

from traceforge.errors import TraceFormatError, UsageError
from traceforge.model import Device

#: The ``schema`` value of peaks files this version reads (``traceforge calibrate`` writes it).
PEAKS_SCHEMA = "traceforge-peaks/1"

#: Every key a device's ``tflops`` may hold, in display order.
DTYPE_KEYS: tuple[str, ...] = (
    "fp64", "fp64_tensor", "fp32", "fp32_tensor", "tf32", "fp16", "bf16", "fp8", "fp4", "int8",
)


@dataclass(frozen=True)
class DevicePeaks:
    """One device's ceilings: dense peak TFLOP/s per dtype key and HBM TB/s.

    ``tflops`` keys are :data:`DTYPE_KEYS`; ``fp64``/``fp32`` are non-tensor (vector)
    rates, the others tensor/matrix-core rates. ``sources`` maps each figure (a dtype key
    or ``"hbm_tb_s"``) to where it comes from, with ``(halved: ...)`` when the source gave
    it with sparsity only.
    """

    key: str
    name: str
    vendor: str
    tflops: Mapping[str, float]
    hbm_tb_s: float
    memory_gb: float | None = None
    sms: int | None = None
    sources: Mapping[str, str] = field(default_factory=dict)
    notes: tuple[str, ...] = ()

    def peak(self, dtype: str) -> float | None:
        """Peak TFLOP/s of a dtype key, or None when the device has no such figure."""
        v = self.tflops.get(dtype)
        return float(v) if v else None

    def ridge(self, dtype: str) -> float | None:
        """Ridge point (FLOP/byte) of a dtype: its peak over the HBM bandwidth."""
        p = self.peak(dtype)
        return p / self.hbm_tb_s if p and self.hbm_tb_s else None

    def scaled(self, sms: int) -> DevicePeaks:
        """This device cut to ``sms`` of its SMs/CUs (a MIG slice, an MI300X CPX partition).

        Compute scales with the units; memory bandwidth is left whole because partitions
        may share it (NPS1), so memory-bound rates are upper bounds.
        """
        if not self.sms or sms >= self.sms:
            return self
        f = sms / self.sms
        return replace(
            self, tflops={k: v * f for k, v in self.tflops.items()}, sms=sms,
            notes=(*self.notes, f"partition of {sms} of {self.sms} SMs/CUs: compute peaks "
                   f"scaled by {f:.3f}; HBM bandwidth is the whole device's"))


@dataclass(frozen=True)
class MeasuredPeaks:
    """What ``traceforge calibrate`` measured: matmul TFLOP/s per dtype key, memory TB/s.

    ``memory_tb_s`` counts bytes read plus bytes written per second (a device-to-device
    copy of N bytes moves 2N), the same accounting as the roofline's bytes and as HBM
    datasheet figures.
    """

    device: str
    tflops: Mapping[str, float]
    memory_tb_s: float | None
    path: str = ""

    def peak(self, dtype: str) -> float | None:
        v = self.tflops.get(dtype)
        return float(v) if v else None


@functools.lru_cache(maxsize=1)
def _table() -> dict[str, Any]:
    text = resources.files("traceforge").joinpath("data/devices.json").read_text("utf-8")
    data: dict[str, Any] = json.loads(text)
    return data


def _peaks_of(entry: Mapping[str, Any]) -> DevicePeaks:
    srcs = _table()["sources"]
    src = srcs[entry["source"]]
    base = f"{src['title']} <{src['url']}>"
    div = entry.get("divided_by")
    halved = set(entry.get("halved") or [])
    figure_sources: dict[str, str] = dict(entry.get("figure_sources") or {})
    sources: dict[str, str] = {}
    for k in (*entry["tflops"], "hbm_tb_s"):
        s = figure_sources.get(k, base)
        extra = [x for x in ("halved: datasheet figure is with sparsity" if k in halved else "",
                             f"divided by {div}" if div else "") if x]
        sources[k] = s + (f" ({'; '.join(extra)})" if extra else "")
    notes = tuple(x for x in [entry.get("notes", "")] if x)
    return DevicePeaks(
        key=str(entry["key"]), name=str(entry["name"]), vendor=str(entry["vendor"]),
        tflops={k: float(v) for k, v in entry["tflops"].items()},
        hbm_tb_s=float(entry["hbm_tb_s"]),
        memory_gb=float(entry["memory_gb"]) if entry.get("memory_gb") else None,
        sms=int(entry["sms"]) if entry.get("sms") else None,
        sources=sources, notes=notes,
    )


def known_devices() -> pd.DataFrame:
    """Every shipped device: key, name, HBM TB/s, each dtype's dense TFLOP/s, source."""
    rows = []
    for e in _table()["devices"]:
        p = _peaks_of(e)
        rows.append({"key": p.key, "name": p.name, "hbm_tb_s": p.hbm_tb_s,
                     **{k: p.tflops.get(k, math.nan) for k in DTYPE_KEYS},
                     "source": _table()["sources"][e["source"]]["title"]})
    out: pd.DataFrame = pd.DataFrame(rows)
    return out


def _rule_holds(rule: Mapping[str, Any], name: str, memory_gib: float | None,
                sms: int | None) -> bool:
    if not re.search(str(rule["name"]), name, re.IGNORECASE):
        return False
    need_mem = rule.get("min_memory_gib")
    if need_mem is not None and (memory_gib is None or memory_gib < float(need_mem)):
        return False
    need_sms = rule.get("sms")
    return need_sms is None or sms == int(need_sms)


def match_name(name: str, *, memory_gib: float | None = None,
               sms: int | None = None) -> DevicePeaks | None:
    """The shipped entry whose rules match a device name (and memory, SM count), or None."""
    for e in _table()["devices"]:
        if any(_rule_holds(r, name, memory_gib, sms) for r in e["match"]):
            return _peaks_of(e)
    return None


def match_device(dev: Device) -> DevicePeaks | None:
    """The entry for a device of a trace; partitions (fewer SMs/CUs) get scaled compute."""
    mem = dev.memory_bytes / 2**30 if dev.memory_bytes else None
    # gfx arch stands in for the name when a ROCm trace calls the GPU "AMD Radeon Graphics".
    for name in (dev.name, dev.compute_capability or ""):
        p = match_name(name, memory_gib=mem, sms=dev.sms) if name else None
        if p is not None:
            return p.scaled(dev.sms) if dev.sms else p
    return None


def device_peaks(name: str) -> DevicePeaks:
    """Datasheet peaks by key (``"h100-sxm"``) or device name (``"NVIDIA H100 80GB HBM3"``).

    Raises :class:`~traceforge.errors.UsageError` naming the known keys when nothing matches.
    """
    for e in _table()["devices"]:
        if e["key"] == name.strip().lower():
            return _peaks_of(e)
    p = match_name(name)
    if p is None:
        keys = ", ".join(e["key"] for e in _table()["devices"])
        raise UsageError(f"unknown device {name!r}; known: {keys}")
    return p


def load_peaks(path: str | Path) -> MeasuredPeaks:
    """Read a peaks file written by ``traceforge calibrate`` (one-line errors, exit 2)."""
    p = Path(path)
    try:
        doc = json.loads(p.read_text("utf-8"))
    except FileNotFoundError:
        raise TraceFormatError(p, "no such peaks file") from None
    except (OSError, UnicodeDecodeError, ValueError) as e:
        raise TraceFormatError(p, f"not a peaks file ({type(e).__name__})") from None
    return peaks_from_dict(doc, str(p))


def peaks_from_dict(doc: Any, path: str = "") -> MeasuredPeaks:
    """Validate a peaks document (see :data:`PEAKS_SCHEMA`)."""
    where = path or "peaks"
    if not isinstance(doc, dict) or not str(doc.get("schema", "")).startswith("traceforge-peaks/"):
        raise TraceFormatError(where, f"not a peaks file (no schema {PEAKS_SCHEMA!r})")
    if doc["schema"] != PEAKS_SCHEMA:
        raise TraceFormatError(where, f"peaks schema {doc['schema']!r} is not {PEAKS_SCHEMA!r}")
    raw = doc.get("matmul_tflops")
    if not isinstance(raw, dict):
        raise TraceFormatError(where, "peaks file has no matmul_tflops object")
    tflops: dict[str, float] = {}
    for k, v in raw.items():
        if k not in DTYPE_KEYS or not isinstance(v, (int, float)) or not v > 0:
            raise TraceFormatError(where, f"matmul_tflops[{k!r}] = {v!r} is not a positive "
                                          f"rate of a known dtype ({', '.join(DTYPE_KEYS)})")
        tflops[k] = float(v)
    mem = doc.get("read_write_tb_s")
    if mem is not None and (not isinstance(mem, (int, float)) or not mem > 0):
        raise TraceFormatError(where, f"read_write_tb_s = {mem!r} is not a positive number")
    return MeasuredPeaks(device=str(doc.get("device", "")), tflops=tflops,
                         memory_tb_s=float(mem) if mem is not None else None, path=path)
