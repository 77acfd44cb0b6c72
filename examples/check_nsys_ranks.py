"""Check an nsys report of a torchrun launch as traceforge reads it: one trace per rank, and
per kernel name the totals over the ranks equal ``nsys stats --report cuda_gpu_kern_sum``.

    nsys stats --report cuda_gpu_kern_sum --format csv run.sqlite > kern_sum.csv
    python examples/check_nsys_ranks.py run.sqlite kern_sum.csv [--ranks 2]

Prints one line per rank and a verdict; exits 1 when a total, a count or the number of
ranks differs.
"""

from __future__ import annotations

import argparse
import csv
import io
import sys
from collections import defaultdict
from pathlib import Path

import traceforge as tf


def read_kern_sum(path: Path) -> list[dict[str, str]]:
    """The CSV rows, after whatever nsys printed before the header."""
    text = path.read_text()
    start = text.find("Time (%)")
    if start < 0:
        raise SystemExit(f"{path}: no cuda_gpu_kern_sum header")
    return list(csv.DictReader(io.StringIO(text[start:])))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("sqlite", type=Path)
    ap.add_argument("kern_sum", type=Path)
    ap.add_argument("--ranks", type=int, default=None, help="ranks expected")
    args = ap.parse_args()
    ranks = tf.load_run([args.sqlite])
    total: dict[str, int] = defaultdict(int)
    count: dict[str, int] = defaultdict(int)
    for t in ranks:
        k = t.kernels()
        nccl = int(k["name"].astype(str).str.startswith("nccl").sum())
        print(f"rank {t.meta.rank} of {t.meta.world_size}: process {t.meta.extra.get('pid')}, "
              f"{len(k)} kernels ({nccl} NCCL), {k['dur'].sum() / 1e6:,.3f} ms")
        for name, g in k.groupby("name", observed=True):
            total[str(name)] += int(g["dur"].sum())
            count[str(name)] += len(g)
    rows = read_kern_sum(args.kern_sum)
    bad = [r["Name"] for r in rows if total.get(r["Name"]) != int(r["Total Time (ns)"])
           or count.get(r["Name"]) != int(r["Instances"])]
    extra = set(total) - {r["Name"] for r in rows}
    ok = not bad and not extra and (args.ranks is None or len(ranks) == args.ranks)
    print(f"{len(rows)} kernel names in cuda_gpu_kern_sum, {len(total)} in traceforge's "
          f"{len(ranks)} rank traces; totals and counts differ for {len(bad)}, "
          f"{len(extra)} only in traceforge: {'OK' if ok else 'MISMATCH'}")
    for name in (bad + sorted(extra))[:10]:
        print(f"  differs: {name[:120]}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
