"""Wall time of ``traceforge --help`` and of a warm verb (the trace already in the cache),
for this checkout against ``--baseline DIR`` (another checkout, e.g. main), alternating
runs so both see the same machine load; prints medians and ratios.

    python benchmarks/cli_startup.py --baseline /path/to/main -n 5
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CASES = {"--help": ["--help"], "top-kernels (warm)": ["top-kernels", "sample:h100-eager"]}


def once(root: Path, args: list[str], env: dict[str, str]) -> float:
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-m", "traceforge", *args], cwd=root, check=True,
                   env={**env, "PYTHONPATH": str(root)}, stdout=subprocess.DEVNULL)
    return time.perf_counter() - t0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--baseline", type=Path, required=True)
    ap.add_argument("-n", type=int, default=5)
    args = ap.parse_args()
    roots = {"baseline": args.baseline.resolve(), "this": REPO}
    with tempfile.TemporaryDirectory() as cache:
        env = {**os.environ, "TRACEFORGE_CACHE": cache, "COLUMNS": "120"}
        for case, argv in CASES.items():
            for root in roots.values():
                once(root, argv, env)  # warm: the cache entry and the OS file cache
            times: dict[str, list[float]] = {k: [] for k in roots}
            for _ in range(args.n):
                for name, root in roots.items():
                    times[name].append(once(root, argv, env))
            b, t = (statistics.median(times[k]) for k in ("baseline", "this"))
            print(f"{case:20} baseline {b * 1e3:6.0f} ms  this {t * 1e3:6.0f} ms  "
                  f"ratio {t / b:.2f}x  (median of {args.n})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
