"""What the capture wrapper loads inside the profiled process, against a baseline checkout.

``traceforge capture -- python train.py`` runs train.py in its own process (the torch
backend), so whatever the wrapper imports before the target starts (the CLI, the capture
verb, the capture session) sits in the user's process: its import time and memory are the
user's. This script imports exactly that, in a fresh interpreter per repetition, for this
checkout and for ``--baseline DIR`` (another checkout, e.g. main), and prints the median
import wall time, the peak RSS, the heavy modules loaded, and the ratios.

    python benchmarks/capture_imports.py --baseline /path/to/main -n 5
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

CHILD = """
import json, resource, sys, time
t0 = time.perf_counter()
import click
from traceforge.cli import cli
cli.get_command(click.Context(cli), "capture")
import traceforge.capture.runner, traceforge.capture.session
wall = time.perf_counter() - t0
heavy = [m for m in ("numpy", "pandas", "pyarrow", "orjson", "duckdb", "torch")
         if m in sys.modules]
print(json.dumps({"wall_ms": wall * 1e3,
                  "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                  "heavy": heavy,
                  "modules": sum(m.startswith("traceforge") for m in sys.modules)}))
"""


def measure(root: Path, n: int) -> dict[str, object]:
    env = {**os.environ, "PYTHONPATH": str(root)}
    runs = [json.loads(subprocess.run([sys.executable, "-c", CHILD], env=env, check=True, cwd=root,
                                      capture_output=True, text=True).stdout)
            for _ in range(n)]
    return {"wall_ms": statistics.median(r["wall_ms"] for r in runs),
            "rss_mb": statistics.median(r["rss_mb"] for r in runs),
            "heavy": runs[0]["heavy"], "modules": runs[0]["modules"]}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--baseline", type=Path, help="another checkout to compare with")
    ap.add_argument("-n", type=int, default=5, help="fresh interpreters per checkout")
    args = ap.parse_args()
    rows = [("this", measure(REPO, args.n))]
    if args.baseline:
        rows.insert(0, ("baseline", measure(args.baseline.resolve(), args.n)))
    for name, r in rows:
        print(f"{name:9} import {r['wall_ms']:7.0f} ms  peak RSS {r['rss_mb']:6.1f} MB  "
              f"traceforge modules {r['modules']:3}  heavy: {', '.join(r['heavy']) or '-'}")
    if args.baseline:
        (_, b), (_, t) = rows
        print(f"ratio     import {t['wall_ms'] / b['wall_ms']:.2f}x  "
              f"peak RSS {t['rss_mb'] / b['rss_mb']:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
