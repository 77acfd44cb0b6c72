"""``annotate`` and ``convert`` on a large Kineto trace: this checkout vs a baseline ref,
side by side.

Each case runs in a fresh process (``python -m traceforge --no-cache ...``, so both sides
parse the trace) and is measured from outside: wall time, and the peak RSS of that one
process from ``os.wait4``'s rusage. Cases: ``annotate -o x.pftrace``, ``annotate -o
x.json``, ``convert x.pftrace``; old and new alternate within each repeat, so load on a
shared machine hits both alike. The baseline is a detached ``git worktree`` of ``--baseline``
(default ``main``) in a temporary folder, removed afterwards. Prints per case the median
wall and peak of each side and new/old ratios, plus output sizes.

    python benchmarks/bench_annotate.py [--mb 70] [--repeat 1] [--baseline main]

Builds benchmarks/out/big-<MB>mb.json from fixtures/eager.pt.trace.json.gz once.
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

HERE = Path(__file__).resolve().parent
REPO = HERE.parent

CASES = {
    "annotate -o .pftrace": ["annotate", "{trace}", "-o", "{out}/a.pftrace"],
    "annotate -o .json": ["annotate", "{trace}", "-o", "{out}/a.json"],
    "convert .pftrace": ["convert", "{trace}", "{out}/c.pftrace"],
}


def trace_of(mb: float) -> Path:
    trace = HERE / "out" / f"big-{mb:g}mb.json"
    if not trace.exists():
        trace.parent.mkdir(exist_ok=True)
        subprocess.run([sys.executable, str(HERE / "make_big_trace.py"),
                        str(REPO / "fixtures" / "eager.pt.trace.json.gz"), str(trace),
                        "--mb", str(mb)], check=True)
    return trace


def run(tree: Path, argv: list[str], out: Path) -> tuple[float, float, int]:
    """(wall s, peak RSS MiB, output bytes) of one ``python -m traceforge`` process."""
    env = {**os.environ, "PYTHONPATH": str(tree)}
    for f in out.iterdir():
        f.unlink()
    t0 = time.perf_counter()
    p = subprocess.Popen([sys.executable, "-m", "traceforge", "--no-cache", *argv], cwd=tree,
                         env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(p.pid, 0)
    wall = time.perf_counter() - t0
    p.returncode = os.waitstatus_to_exitcode(status)
    if p.returncode:
        err = p.stderr.read().decode() if p.stderr else ""
        raise SystemExit(f"{tree}: {' '.join(argv)} failed: {err.strip()[-500:]}")
    size = sum(f.stat().st_size for f in out.iterdir())
    return wall, usage.ru_maxrss / 1024, size


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--mb", type=float, default=70.0)
    ap.add_argument("--trace", type=Path)
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--baseline", default="main")
    ap.add_argument("--cases", nargs="*", default=list(CASES))
    a = ap.parse_args()
    trace = (a.trace or trace_of(a.mb)).resolve()
    print(f"trace: {trace} ({trace.stat().st_size / 1e6:.0f} MB); baseline {a.baseline}")
    with tempfile.TemporaryDirectory() as tmp:
        old = Path(tmp) / "baseline"
        subprocess.run(["git", "-C", str(REPO), "worktree", "add", "-q", "--detach", str(old),
                        a.baseline], check=True)
        out = Path(tmp) / "out"
        out.mkdir()
        try:
            rows = []
            for case in a.cases:
                res: dict[str, list[tuple[float, float, int]]] = {"old": [], "new": []}
                for _ in range(a.repeat):
                    for side, tree in (("old", old), ("new", REPO)):
                        argv = [x.format(trace=trace, out=out) for x in CASES[case]]
                        res[side].append(run(tree, argv, out))
                med = {s: [statistics.median(v[i] for v in r) for i in range(3)]
                       for s, r in res.items()}
                rows.append((case, med["old"], med["new"]))
                print(f"  {case}: old {med['old'][0]:.1f} s {med['old'][1]:.0f} MiB, "
                      f"new {med['new'][0]:.1f} s {med['new'][1]:.0f} MiB", flush=True)
        finally:
            subprocess.run(["git", "-C", str(REPO), "worktree", "remove", "--force", str(old)],
                           check=False)
    print(f"\n{'case':<22}{'old s':>8}{'new s':>8}{'ratio':>7}{'old MiB':>9}{'new MiB':>9}"
          f"{'ratio':>7}{'old MB out':>12}{'new MB out':>12}")
    for case, o, n in rows:
        print(f"{case:<22}{o[0]:>8.1f}{n[0]:>8.1f}{n[0] / o[0]:>7.2f}{o[1]:>9.0f}{n[1]:>9.0f}"
              f"{n[1] / o[1]:>7.2f}{o[2] / 1e6:>12.1f}{n[2] / 1e6:>12.1f}")


if __name__ == "__main__":
    main()
