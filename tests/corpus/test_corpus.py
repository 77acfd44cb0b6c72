"""Every real trace we have loads, and basic invariants hold (skipped without shared/)."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import SHARED
from traceforge import load, top_kernels
from traceforge.errors import TraceFormatError

# Files that are not traces (sidecar metadata), or formats other readers own.
NOT_KINETO = ("execution_details.json", "latency", "908_results.json.gz", "kokkos_rocprof")


def _kineto_files() -> list[Path]:
    if not SHARED.exists():
        return []
    files = sorted(SHARED.rglob("*.json")) + sorted(SHARED.rglob("*.json.gz"))
    return [p for p in files if not any(s in str(p) for s in NOT_KINETO)]


def _raw_events(p: Path) -> list[dict[str, Any]]:
    data = p.read_bytes()
    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    doc = json.loads(data)
    return doc if isinstance(doc, list) else doc["traceEvents"]


@pytest.mark.parametrize("path", _kineto_files(), ids=lambda p: str(p.relative_to(SHARED)))
def test_every_kineto_fixture_loads_with_invariants(path: Path) -> None:
    t = load(path)
    ev = t.events
    assert (ev["dur"] >= 0).all()
    assert ev["ts"].min() >= 0
    # Independent count from the raw file: kernel events by category (either schema).
    raw = _raw_events(path)
    raw_kernels = [e for e in raw if isinstance(e, dict) and e.get("ph") == "X"
                   and str(e.get("cat", "")).lower() == "kernel"]
    assert len(t.kernels()) == len(raw_kernels)
    raw_total_ns = sum(round(float(e["dur"]) * 1000) for e in raw_kernels)
    assert int(t.kernels()["dur"].sum()) == raw_total_ns
    tk = top_kernels(t)
    if raw_kernels:
        assert tk["calls"].sum() == len(raw_kernels)
        assert abs(tk["pct"].sum() - 100.0) < 1e-6
    else:
        assert tk.empty
    # GPU rows always know their device and stream; host rows never claim one.
    gpu = t.gpu()
    assert (gpu["device"] >= 0).all() and (gpu["stream"] >= 0).all()
    host = ev[ev["kind"].isin(("cpu_op", "runtime", "driver"))]
    assert (host["device"] == -1).all()


def test_sidecar_json_is_rejected_in_one_line() -> None:
    p = (SHARED / "external/tracelens/traces/inference/sglang_decode/capture_traces"
         / "execution_details.json")
    if not p.exists():
        pytest.skip("shared fixtures absent")
    with pytest.raises(TraceFormatError, match="not a trace"):
        load(p)
