"""Build a large Kineto trace by replicating a real fixture with shifted timestamps and ids.

A public H200 eager trace of a 3.5B policy was 280.6 MB; replicating ``h100/eager`` to that
size gives ~777k events. Usage: ``python benchmarks/make_big_trace.py SRC OUT [--mb 280]``.
"""

from __future__ import annotations

import argparse
import gzip
import json
from pathlib import Path
from typing import Any

import orjson

ID_ARGS = ("External id", "correlation", "Record function id", "Ev Idx")


def _shift(ev: dict[str, Any], dt: float, did: int) -> dict[str, Any]:
    ev = dict(ev)
    if isinstance(ev.get("ts"), (int, float)):
        # Keep three decimals: Kineto writes ns-exact microseconds.
        ev["ts"] = round(ev["ts"] + dt, 3)
    if "id" in ev and isinstance(ev["id"], int):
        ev["id"] = ev["id"] + did
    args = ev.get("args")
    if isinstance(args, dict):
        args = dict(args)
        for key in ID_ARGS:
            if isinstance(args.get(key), int) and args[key] > 0:
                args[key] = args[key] + did
        ev["args"] = args
    return ev


def build(src: Path, out: Path, target_mb: float) -> int:
    raw = src.read_bytes()
    doc = orjson.loads(gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw)
    events = doc["traceEvents"]
    timed = [e for e in events if e.get("ph") != "M" and isinstance(e.get("ts"), (int, float))]
    t0 = min(e["ts"] for e in timed)
    t1 = max(e["ts"] + e.get("dur", 0) for e in timed)
    period = (t1 - t0) + 100.0
    max_id = 1 + max(
        max((e.get("id", 0) for e in events if isinstance(e.get("id"), int)), default=0),
        max(
            (
                v
                for e in events
                for k, v in (e.get("args") or {}).items()
                if k in ID_ARGS and isinstance(v, int)
            ),
            default=0,
        ),
    )
    one = len(json.dumps(events))
    copies = max(1, round(target_mb * 1e6 / one))
    meta = [e for e in events if e.get("ph") == "M"]
    body = [e for e in events if e.get("ph") != "M"]
    # Written one copy at a time (a 1 GB trace would not fit in memory as dicts); the bytes
    # are those of json.dump of the whole document (json, not orjson: Kineto writes
    # `"ph": "X", ` with spaces, and the size target, events per MB, should match real
    # files).
    mark = "\x00EVENTS\x00"
    head, tail = json.dumps({**doc, "traceEvents": mark}).split(json.dumps(mark))
    n = 0
    with out.open("w") as f:
        f.write(head + "[")
        sep = ""
        if meta:
            f.write(", ".join(json.dumps(e) for e in meta))
            sep, n = ", ", len(meta)
        for i in range(copies):
            part = ", ".join(json.dumps(_shift(e, i * period, i * max_id)) for e in body)
            if part:
                f.write(sep + part)
                sep = ", "
            n += len(body)
        f.write("]" + tail)
    return n


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("src", type=Path)
    ap.add_argument("out", type=Path)
    ap.add_argument("--mb", type=float, default=280.0)
    a = ap.parse_args()
    n = build(a.src, a.out, a.mb)
    print(f"{a.out}: {a.out.stat().st_size / 1e6:.1f} MB, {n} events")


if __name__ == "__main__":
    main()
