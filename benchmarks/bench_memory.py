"""Warm ``memory`` and the other new verbs (``comm``, the counter paths) against warm
``top-kernels`` and the import floor, side by side on large traces (issue 27's target:
warm ``memory`` within 1.5x of warm ``top-kernels``; issue 30's: warm single-table verbs
within 0.2 s of ``python -c "import pandas, pyarrow"``).

The memory trace: ``--source`` (default the H100 capture
``fixtures/capture_h100.memory_train.both.pt.trace.json.gz``, whose Kineto ``[memory]``
events are real) replicated to ``--mb`` by ``make_big_trace.py``. A source without memory
events (``--source fixtures/eager.pt.trace.json.gz``) gets synthetic ones first
(:func:`add_memory`: each allocating op allocates its output, freed 50 us after the op).
``--comm DIR``: a folder of rank traces for ``comm`` (e.g. the H200 DDP pair replicated
with ``make_big_trace.py``); left out, ``comm`` runs on the memory trace (no collectives:
its fixed cost only). ``--counters FILE`` (default ``fixtures/counters/probe.ncu-raw.csv``,
3 kernel names of another program, so the join is mostly misses: the path's cost, not a
match rate) for ``top-kernels --counters`` and ``roofline --measured``.

Each case runs in a fresh interpreter (``bench_load.run_case``: wall and in-process time),
round-robin, after a first (cold) run of each has filled the cache and what verbs keep
beside it. ``PYTHONDONTWRITEBYTECODE`` is dropped from the children's environment:
otherwise traceforge's modules are compiled in every run while pandas' come from
``__pycache__``, which is not how an installed package runs.

    python benchmarks/bench_memory.py [--trace T | --source SRC --mb 288] [--out DIR]
        [--comm DIR] [--counters FILE] [--repeat 3] [--settle 1] [--cache DIR]
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(HERE))

from bench_load import run_case, settle, verb  # noqa: E402
from make_big_trace import build  # noqa: E402

ALLOCATING = ("aten::empty", "aten::empty_strided", "aten::mm", "aten::addmm", "aten::cat",
              "aten::add", "aten::mul", "aten::bmm", "aten::softmax", "aten::_to_copy")
SOURCE = REPO / "fixtures" / "capture_h100.memory_train.both.pt.trace.json.gz"
COUNTERS = REPO / "fixtures" / "counters" / "probe.ncu-raw.csv"
FLOOR = "import pandas, pyarrow\nINPROC = 0.0\n"


def _read(src: Path) -> dict[str, Any]:
    raw = src.read_bytes()
    doc: dict[str, Any] = json.loads(gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw)
    return doc


def add_memory(src: Path, out: Path) -> int:
    """``src`` with [memory] events for every allocating op call; returns how many."""
    doc = _read(src)
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


def memory_trace(src: Path, mb: float, outdir: Path) -> Path:
    """``src`` (with memory events, added when it has none) replicated to ``mb`` MB."""
    stem = src.name.split(".pt.trace")[0].split(".json")[0]
    big = outdir / f"memory-{stem}-{mb:g}mb.json"
    if big.exists():
        return big
    seed = src
    if not any(e.get("name") == "[memory]" for e in _read(src)["traceEvents"]):
        seed = outdir / f"{stem}.with-memory.json"
        add_memory(src, seed)
    n = build(seed, big, mb)
    if seed != src:
        seed.unlink()
    print(f"{big}: {big.stat().st_size / 1e6:.1f} MB, {n} events", flush=True)
    return big


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--trace", type=Path, help="a trace with memory events (else built)")
    ap.add_argument("--source", type=Path, default=SOURCE)
    ap.add_argument("--mb", type=float, default=288.0)
    ap.add_argument("--out", type=Path, default=HERE / "out")
    ap.add_argument("--comm", type=Path, help="folder of rank traces for `comm`")
    ap.add_argument("--counters", type=Path, default=COUNTERS)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--settle", type=float, default=1.0, metavar="GIB")
    ap.add_argument("--cases", help="comma-separated words: only the cases whose names "
                    "contain one (the floor, top-kernels and memory always run)")
    ap.add_argument("--cache", type=Path, help="cache directory to use (and keep) instead "
                    "of a fresh temporary one: a warm one skips the cold parses")
    a = ap.parse_args()
    a.out.mkdir(parents=True, exist_ok=True)
    big = a.trace or memory_trace(a.source, a.mb, a.out)
    comm = a.comm or big
    c = str(a.counters)
    cases = {
        "import pandas, pyarrow": FLOOR,
        "warm top-kernels": verb("top_kernels", "top-kernels", "@P"),
        "warm memory": verb("memory", "memory", "@P"),
        f"warm comm ({comm.name})": verb("comm", "comm", str(comm)),
        "warm top-kernels --counters": verb("top_kernels", "top-kernels", "@P", "--counters", c),
        "warm roofline": verb("roofline", "roofline", "@P"),
        "warm roofline --measured": verb("roofline", "roofline", "@P", "--measured", c),
    }
    if a.cases:
        words = a.cases.split(",")
        cases = {k: v for i, (k, v) in enumerate(cases.items())
                 if i < 3 or any(w in k for w in words)}
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    with tempfile.TemporaryDirectory() as tmp:
        env.update(TRACEFORGE_CACHE=str(a.cache or tmp), PYTHONPATH=str(REPO))
        for code in cases.values():  # cold: parse, cache, memory table, derived tables
            run_case(code, big, env, a.out)
        got: dict[str, list[tuple[float, float]]] = {k: [] for k in cases}
        for _ in range(a.repeat):
            for name, code in cases.items():
                if a.settle:
                    settle(a.settle)
                res = run_case(code, big, env, a.out)  # (wall, in-process, ...)
                got[name].append((res[0], res[1]))
    med = {k: (statistics.median(w for w, _ in v), statistics.median(i for _, i in v))
           for k, v in got.items()}
    floor = med["import pandas, pyarrow"][0]
    tw, ti = med["warm top-kernels"]
    print(f"{big.name} ({big.stat().st_size / 1e6:.0f} MB), median of {a.repeat}, "
          f"{os.cpu_count()} CPUs")
    print("| case | wall s | above floor s | in-proc s | wall / top-kernels | "
          "in-proc / top-kernels |\n|---|---:|---:|---:|---:|---:|")
    for k, (w, i) in med.items():
        print(f"| {k} | {w:.2f} | {w - floor:+.2f} | {i:.3f} | {w / tw:.2f}x | "
              f"{i / ti if ti else 0:.2f}x |")
    mw, mi = med["warm memory"]
    print(f"memory / top-kernels: {mw / tw:.2f}x wall, {mi / ti:.2f}x in-process "
          "(target: within 1.5x); floor: `import pandas, pyarrow` "
          f"{floor:.2f} s (target: warm single-table verbs within +0.2 s)")


if __name__ == "__main__":
    main()
