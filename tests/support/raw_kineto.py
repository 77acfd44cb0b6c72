"""Raw-file oracle for Kineto JSON: events read with ``json`` and exact decimals, interval
arithmetic in plain Python -- nothing from traceforge -- for tests that check analyses
against the file itself."""

from __future__ import annotations

import gzip
import json
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

GPU_CATS = ("kernel", "gpu_memcpy", "gpu_memset")


def ns(us: Any) -> int:
    """Kineto microseconds (parsed as Decimal, so no float rounding) -> integer ns."""
    return int(Decimal(us) * 1000)


def read(path: Path) -> dict[str, Any]:
    raw = path.read_bytes()
    if raw[:2] == b"\x1f\x8b":
        raw = gzip.decompress(raw)
    doc: dict[str, Any] = json.loads(raw, parse_float=Decimal)
    return doc


@dataclass
class Gpu:
    name: str
    cat: str
    ts: int
    end: int
    launch: int  # launch call start (ns), or -1


@dataclass
class Raw:
    steps: list[tuple[int, int]]  # host ProfilerStep ranges, by start
    gpu: list[Gpu]
    base_ns: int

    def in_steps(self) -> list[Gpu]:
        """GPU events whose launch call (else own start) lies inside a step range."""
        return [g for g in self.gpu
                if any(lo <= (g.launch if g.launch >= 0 else g.ts) < hi for lo, hi in self.steps)]

    def step_of(self, g: Gpu) -> int:
        t = g.launch if g.launch >= 0 else g.ts
        return next(i for i, (lo, hi) in enumerate(self.steps) if lo <= t < hi)

    @property
    def step_ns(self) -> float:
        return sum(hi - lo for lo, hi in self.steps) / len(self.steps)

    def span(self) -> tuple[int, int]:
        """The steps' GPU windows as one span: the first activity whose launch call lies in
        the first step (else the step's start) to the last end of an activity launched in
        the last step (else its end). Activities with no launch call in the trace do not
        move the span."""
        inside = {id(g) for g in self.in_steps()}
        launched = [g for g in self.gpu if g.launch >= 0 and id(g) in inside]
        first = [g.ts for g in launched if self.step_of(g) == 0]
        last = [g.end for g in launched if self.step_of(g) == len(self.steps) - 1]
        return (min(first) if first else self.steps[0][0],
                max(last) if last else self.steps[-1][1])


def load(path: Path) -> Raw:
    doc = read(path)
    evs = [e for e in doc["traceEvents"] if e.get("ph") == "X"]
    launch = {e["args"]["correlation"]: ns(e["ts"]) for e in evs
              if e.get("cat") in ("cuda_runtime", "cuda_driver") and "correlation" in
              e.get("args", {})}
    steps = sorted({(ns(e["ts"]), ns(e["ts"]) + ns(e["dur"])) for e in evs
                    if str(e.get("name", "")).startswith("ProfilerStep#")
                    and e.get("cat") in ("user_annotation", "cpu_op")})
    gpu = [Gpu(e["name"], e["cat"], ns(e["ts"]), ns(e["ts"]) + ns(e["dur"]),
               launch.get(e.get("args", {}).get("correlation"), -1))
           for e in evs if e.get("cat") in GPU_CATS]
    return Raw(steps, gpu, int(doc.get("baseTimeNanoseconds", 0)))


# -- intervals as sorted lists of disjoint [lo, hi) pairs ---------------------------------

def union(pairs: list[tuple[int, int]]) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for lo, hi in sorted(p for p in pairs if p[1] > p[0]):
        if out and lo <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], hi))
        else:
            out.append((lo, hi))
    return out


def intersect(a: list[tuple[int, int]], b: list[tuple[int, int]]) -> list[tuple[int, int]]:
    out = []
    for lo, hi in a:
        for c, d in b:
            x, y = max(lo, c), min(hi, d)
            if y > x:
                out.append((x, y))
    return union(out)


def minus(a: list[tuple[int, int]], b: list[tuple[int, int]]) -> list[tuple[int, int]]:
    out = []
    for lo, hi in a:
        cur = lo
        for c, d in b:
            if d <= cur or c >= hi:
                continue
            if c > cur:
                out.append((cur, c))
            cur = max(cur, d)
        if cur < hi:
            out.append((cur, hi))
    return union(out)


def total(a: list[tuple[int, int]]) -> int:
    return sum(hi - lo for lo, hi in a)
