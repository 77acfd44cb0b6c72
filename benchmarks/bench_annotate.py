"""``annotate`` and ``convert`` on a large Kineto trace, next to a cold ``report`` and a cold
``top-kernels`` on the same trace, in one run (issue 30's targets are ratios to those).

Each case runs in a fresh process with an empty cache of its own (``TRACEFORGE_CACHE`` a
new folder: a user's first command on the trace, parse and cache write included) and is
measured from outside: wall time, and the peak RSS of that one process from ``os.wait4``'s
rusage. Cases: ``annotate -o x.pftrace``, ``annotate -o x.json``, ``convert x.pftrace``,
and the references ``report -o x.html`` and ``top-kernels``; within each repeat they run one
after another, so load on a shared machine hits all alike. Prints per case the median wall
and peak, the ratio to its reference (annotate: the report; convert: top-kernels) and the
target (issue 30: annotate <= 2x the report and <= 1.5 GiB; convert <= 3x top-kernels and
<= 1 GiB), plus output sizes.

With ``--baseline REF`` the annotate/convert cases also run on a detached ``git worktree``
of REF (in a temporary folder, removed afterwards), alternating with this checkout, and
new/old ratios are printed too.

    flock /tmp/tf-heavy.lock python benchmarks/bench_annotate.py --trace /tmp/tf-bench/big.json
    python benchmarks/bench_annotate.py [--mb 70] [--repeat 1] [--baseline main]
    python benchmarks/bench_annotate.py --tiny 1000000 --cases "annotate -o .pftrace"

Without ``--trace``, builds benchmarks/out/big-<MB>mb.json from
fixtures/eager.pt.trace.json.gz once.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent

#: case -> (argv, reference case or None, target ratio to it, target peak MiB)
CASES: dict[str, tuple[list[str], str | None, float, float]] = {
    "report -o .html (cold)": (["report", "{trace}", "-o", "{out}/r.html"], None, 0, 0),
    "top-kernels (cold)": (["top-kernels", "{trace}"], None, 0, 0),
    "annotate -o .pftrace": (["annotate", "{trace}", "-o", "{out}/a.pftrace"],
                             "report -o .html (cold)", 2.0, 1536),
    "annotate -o .json": (["annotate", "{trace}", "-o", "{out}/a.json"],
                          "report -o .html (cold)", 2.0, 1536),
    "convert .pftrace": (["convert", "{trace}", "{out}/c.pftrace"],
                         "top-kernels (cold)", 3.0, 1024),
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
    """(wall s, peak RSS MiB, output bytes) of one ``python -m traceforge`` process, with
    an empty cache of its own."""
    cache = out.parent / "cache"
    shutil.rmtree(cache, ignore_errors=True)
    cache.mkdir()
    # (TRACEFORGE_DEBUG: an internal error leaves its traceback, printed below)
    env = {**os.environ, "PYTHONPATH": str(tree), "TRACEFORGE_CACHE": str(cache),
           "TRACEFORGE_DEBUG": "1"}
    for f in out.iterdir():
        f.unlink()
    t0 = time.perf_counter()
    p = subprocess.Popen([sys.executable, "-m", "traceforge", *argv], cwd=tree,
                         env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(p.pid, 0)
    wall = time.perf_counter() - t0
    p.returncode = os.waitstatus_to_exitcode(status)
    if p.returncode:
        err = p.stderr.read().decode() if p.stderr else ""
        raise SystemExit(f"{tree}: {' '.join(argv)} failed: {err.strip()[-500:]}")
    size = sum(f.stat().st_size for f in out.iterdir())
    shutil.rmtree(cache, ignore_errors=True)
    return wall, usage.ru_maxrss / 1024, size


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--mb", type=float, default=70.0)
    ap.add_argument("--trace", type=Path)
    ap.add_argument("--tiny", type=int, default=0,
                    help="a trace of N tiny kernels on one stream instead (N idle gaps, a "
                         "critical path of 2N pieces: what annotate draws grows with N)")
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--baseline", help="also run annotate/convert on this git ref")
    ap.add_argument("--cases", nargs="*", default=list(CASES))
    a = ap.parse_args()
    if a.tiny:
        from bench_critical_path_cli import tiny_trace  # (this script's folder is on the path)

        trace = tiny_trace(Path(tempfile.gettempdir()) / "tf-bench" / f"tiny-{a.tiny}.json",
                           a.tiny)
    else:
        trace = (a.trace or trace_of(a.mb)).resolve()
    cases = [c for c in CASES if c in a.cases]
    for c in list(cases):  # a case's reference always runs beside it
        ref = CASES[c][1]
        if ref is not None and ref not in cases:
            cases.insert(0, ref)
    print(f"trace: {trace} ({trace.stat().st_size / 1e6:.0f} MB); "
          f"baseline: {a.baseline or 'none'}")
    with tempfile.TemporaryDirectory() as tmp:
        trees = {"new": REPO}
        if a.baseline:
            trees["old"] = Path(tmp) / "baseline"
            subprocess.run(["git", "-C", str(REPO), "worktree", "add", "-q", "--detach",
                            str(trees["old"]), a.baseline], check=True)
        out = Path(tmp) / "out"
        out.mkdir()
        res: dict[tuple[str, str], list[tuple[float, float, int]]] = {}
        try:
            for _ in range(a.repeat):
                for case in cases:
                    sides = ["new"] if CASES[case][1] is None else list(trees)
                    for side in sides:
                        argv = [x.format(trace=trace, out=out) for x in CASES[case][0]]
                        got = run(trees[side], argv, out)
                        res.setdefault((case, side), []).append(got)
                        print(f"  {case} [{side}]: {got[0]:.1f} s {got[1]:.0f} MiB",
                              flush=True)
        finally:
            if a.baseline:
                subprocess.run(["git", "-C", str(REPO), "worktree", "remove", "--force",
                                str(trees["old"])], check=False)
    med = {k: [statistics.median(v[i] for v in r) for i in range(3)] for k, r in res.items()}
    print(f"\n{'case':<24}{'s':>7}{'MiB':>7}{'x ref':>7}{'target':>8}{'MiB tgt':>9}"
          f"{'ok':>5}{'MB out':>8}" + ("   old s  old MiB  new/old s  new/old MiB"
                                       if a.baseline else ""))
    for case in cases:
        s, mib, size = med[(case, "new")]
        ref, target, mib_target = CASES[case][1:]
        line = f"{case:<24}{s:>7.1f}{mib:>7.0f}"
        if ref is None:
            line += f"{'':>7}{'':>8}{'':>9}{'':>5}{size / 1e6:>8.1f}"
        else:
            ratio = s / med[(ref, "new")][0]
            ok = "yes" if ratio <= target and mib <= mib_target else "no"
            line += (f"{ratio:>7.2f}{f'<={target:g}x':>8}{f'<={mib_target:g}':>9}{ok:>5}"
                     f"{size / 1e6:>8.1f}")
            if (case, "old") in med:
                o = med[(case, "old")]
                line += f"{o[0]:>8.1f}{o[1]:>9.0f}{s / o[0]:>11.2f}{mib / o[1]:>13.2f}"
        print(line)


if __name__ == "__main__":
    main()
