"""Warm ``traceforge memory`` against warm ``top-kernels`` on the large trace with memory
events added (issue 27's target: within 1.5x).

The bench trace (``make_big_trace.py``: ``fixtures/eager.pt.trace.json.gz`` replicated to
~288 MB) records no memory; this adds Kineto ``[memory]`` events as ``profile_memory=True``
writes them: each ``aten::empty*``/``mm``/``addmm``/``cat``/... op call allocates its output
(an alloc event inside the op, with ``Total Allocated``/``Total Reserved`` running) that is
freed 50 us after the op ends. Each case runs in a fresh interpreter, round-robin, after a
first (cold) run of each verb has filled the cache and the memory table beside it, with the
same settle step as ``bench_load.py``:

    python benchmarks/bench_memory.py [--mb 288] [--repeat 3] [--settle 1]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from bench_load import run_case, settle, verb  # noqa: E402
from make_big_trace import build  # noqa: E402

ALLOCATING = ("aten::empty", "aten::empty_strided", "aten::mm", "aten::addmm", "aten::cat",
              "aten::add", "aten::mul", "aten::bmm", "aten::softmax", "aten::_to_copy")


def add_memory(src: Path, out: Path) -> int:
    """``src`` with [memory] events for every allocating op call; returns how many."""
    doc = json.loads(src.read_text())
    evs: list[dict[str, Any]] = doc["traceEvents"]
    mem: list[dict[str, Any]] = []
    for e in evs:
        if e.get("cat") == "cpu_op" and str(e.get("name", "")).startswith(ALLOCATING):
            size = 512 * (1 + (len(mem) % 4096))
            addr = 0x7F0000000000 + 4096 * len(mem)
            base = {"ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[memory]",
                    "pid": e["pid"], "tid": e["tid"]}
            mem.append({**base, "ts": round(e["ts"] + min(0.001, e.get("dur", 0)), 3),
                        "args": {"Addr": addr, "Bytes": size, "Device Id": 0,
                                 "Device Type": 1}})
            mem.append({**base, "ts": round(e["ts"] + e.get("dur", 0) + 50.0, 3),
                        "args": {"Addr": addr, "Bytes": -size, "Device Id": 0,
                                 "Device Type": 1}})
    mem.sort(key=lambda m: m["ts"])
    total, reserved = 0, 0
    for m in mem:
        total += m["args"]["Bytes"]
        reserved = max(reserved, (total + 2**21 - 1) // 2**21 * 2**21)
        m["args"]["Total Allocated"], m["args"]["Total Reserved"] = total, reserved
    doc["traceEvents"] = evs + mem
    with out.open("w") as f:
        json.dump(doc, f)
    return len(mem)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--mb", type=float, default=288.0)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--settle", type=float, default=1.0, metavar="GIB")
    a = ap.parse_args()
    outdir = HERE / "out"
    outdir.mkdir(exist_ok=True)
    big = outdir / f"big_memory_{a.mb:g}.json"
    if not big.exists():
        plain = outdir / f"big_{a.mb:g}.plain.json"
        build(HERE.parent / "fixtures" / "eager.pt.trace.json.gz", plain, a.mb)
        n = add_memory(plain, big)
        plain.unlink()
        print(f"{big}: {big.stat().st_size / 1e6:.1f} MB, {n} memory events", flush=True)
    cases = {"warm top-kernels": verb("top_kernels", "top-kernels", "@P"),
             "warm memory": verb("memory", "memory", "@P")}
    with tempfile.TemporaryDirectory() as cache:
        env = {**os.environ, "TRACEFORGE_CACHE": cache, "PYTHONPATH": str(HERE.parent)}
        for code in cases.values():  # cold: parse, cache, memory table
            run_case(code, big, env, outdir)
        got: dict[str, list[tuple[float, float]]] = {k: [] for k in cases}
        for _ in range(a.repeat):
            for name, code in cases.items():
                if a.settle:
                    settle(a.settle)
                wall, inproc, _ = run_case(code, big, env, outdir)
                got[name].append((wall, inproc))
    med = {k: (statistics.median(w for w, _ in v), statistics.median(i for _, i in v))
           for k, v in got.items()}
    print(f"{big.name}, median of {a.repeat}, {os.cpu_count()} CPUs")
    print("| case | wall s | in-proc s |\n|---|---:|---:|")
    for k, (w, i) in med.items():
        print(f"| {k} | {w:.2f} | {i:.3f} |")
    (tw, ti), (mw, mi) = med["warm top-kernels"], med["warm memory"]
    print(f"memory / top-kernels: {mw / tw:.2f}x wall, {mi / ti:.2f}x in-process "
          "(target: within 1.5x)")


if __name__ == "__main__":
    main()
