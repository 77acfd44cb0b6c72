"""``critical-path`` at trace size: this checkout vs a baseline checkout, side by side.

Each case runs ``python -m traceforge critical-path ...`` in a fresh process, once per
side per repeat, old and new alternating (so load on a shared machine hits both alike),
and is measured from outside: wall time, and peak RSS from ``os.wait4``'s rusage (the
largest single process of the run: the process or a worker it forked and reaped; forked
workers share the parent's pages, so their peaks do not add up). Each side has its own
parse cache (a temporary folder): a first ``cold`` run parses the trace and stores its
tables and critical-path graph, the other cases read them back (``warm``). Every case's
stdout is compared between the sides: the output must be byte-identical.

Cases: the text tables of every step, the same with what-ifs, ``--format json`` (every
segment of every step), the text tables on one core (``taskset -c 0``: the steps without
the forked workers, new side only), and ``--tiny N``: a trace of N tiny kernels (no host
side; issue 31's memory case), cold and warm.

    python benchmarks/bench_critical_path_cli.py --trace /tmp/tf-bench/big.json \\
        --baseline-tree /work/main [--repeat 3] [--tiny 1000000]

``--baseline-tree``: a checkout whose ``traceforge`` package is the baseline (put on
PYTHONPATH), e.g. a ``git worktree add --detach`` of main. Run heavy cases under
``flock /tmp/tf-heavy.lock`` on a shared machine.
"""

from __future__ import annotations

import argparse
import hashlib
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


def tiny_trace(path: Path, n: int) -> Path:
    """``n`` kernels of 1 us, 1 us apart, on one stream (~127 bytes an event)."""
    if path.exists():
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".part")
    with tmp.open("w") as f:
        f.write('{"schemaVersion": 1, "traceEvents": [\n')
        for i in range(n):
            sep = ",\n" if i else ""
            f.write(f'{sep}{{"ph": "X", "cat": "kernel", "name": "k{i % 97}", "pid": 0, '
                    f'"tid": 7, "ts": {2 * i + 1000}.0, "dur": 1.0, "args": {{"device": 0, '
                    f'"stream": 7, "correlation": {i + 1}}}}}')
        f.write("\n]}\n")
    tmp.rename(path)
    return path


def run(tree: Path, argv: list[str], cache: Path, one_core: bool = False
        ) -> tuple[float, float, str]:
    """(wall s, peak RSS MiB, stdout digest) of one ``python -m traceforge`` process."""
    env = {**os.environ, "PYTHONPATH": str(tree), "TRACEFORGE_CACHE": str(cache)}
    cmd = [sys.executable, "-m", "traceforge", *argv]
    if one_core:
        cmd = ["taskset", "-c", "0", *cmd]
    t0 = time.perf_counter()
    p = subprocess.Popen(cmd, cwd=tree, env=env, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE)
    digest = hashlib.sha256()
    assert p.stdout is not None
    for chunk in iter(lambda: p.stdout.read(1 << 20), b""):  # type: ignore[union-attr]
        digest.update(chunk)
    _, status, usage = os.wait4(p.pid, 0)
    wall = time.perf_counter() - t0
    code = os.waitstatus_to_exitcode(status)
    if code:
        err = p.stderr.read().decode() if p.stderr else ""
        raise SystemExit(f"{tree}: {' '.join(argv)} exited {code}: {err[-2000:]}")
    return wall, usage.ru_maxrss / 1024, digest.hexdigest()[:16]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--trace", type=Path, default=Path("/tmp/tf-bench/big.json"))
    ap.add_argument("--baseline-tree", type=Path, required=True)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--tiny", type=int, default=0, help="also a trace of N tiny kernels")
    ap.add_argument("--no-json", action="store_true", help="leave out the --format json case")
    args = ap.parse_args()
    trace = str(args.trace.resolve())
    trees = {"old": args.baseline_tree.resolve(), "new": REPO}
    work = Path(tempfile.mkdtemp(prefix="tf-bench-cp-"))
    cases: list[tuple[str, list[str], bool, bool]] = [  # name, argv, cold, one core (new only)
        ("cold, text", ["critical-path", trace], True, False),
        ("warm, text", ["critical-path", trace], False, False),
        ("warm, --what-if gemm=2 nccl=1.5", ["critical-path", trace, "--what-if", "gemm=2",
                                             "nccl=1.5"], False, False),
    ]
    if not args.no_json:
        cases.append(("warm, --format json", ["critical-path", trace, "--format", "json"],
                      False, False))
    cases.append(("warm, text, one core", ["critical-path", trace], False, True))
    if args.tiny:
        tiny = str(tiny_trace(Path(tempfile.gettempdir()) / "tf-bench" /
                              f"tiny-{args.tiny}.json", args.tiny))
        cases += [(f"{args.tiny:,} tiny kernels, cold", ["critical-path", tiny], True, False),
                  (f"{args.tiny:,} tiny kernels, warm", ["critical-path", tiny], False, False)]
    rows = []
    try:
        for name, argv, cold, one_core in cases:
            got: dict[str, list[tuple[float, float, str]]] = {"old": [], "new": []}
            for _ in range(1 if cold else args.repeat):
                for side, tree in trees.items():
                    if one_core and side == "old":
                        continue
                    cache = work / side
                    if cold:
                        shutil.rmtree(cache, ignore_errors=True)
                    got[side].append(run(tree, argv, cache, one_core))
            med = {s: (statistics.median(w for w, _, _ in v), max(m for _, m, _ in v),
                       {d for _, _, d in v}) for s, v in got.items() if v}
            rows.append((name, med))
            o, n = med.get("old"), med["new"]
            same = "" if o is None else ("identical" if o[2] == n[2] else "OUTPUT DIFFERS")
            line = (f"{name}: new {n[0]:.2f} s, {n[1]:.0f} MiB" if o is None else
                    f"{name}: old {o[0]:.2f} s, {o[1]:.0f} MiB | new {n[0]:.2f} s, "
                    f"{n[1]:.0f} MiB | time x{n[0] / o[0]:.2f}, memory x{n[1] / o[1]:.2f} "
                    f"| {same}")
            print(line, flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"\n{os.cpu_count()} cores; medians of {args.repeat} (cold: 1); peak = largest "
          "process of the run")
    print("| case | old s | new s | ratio | old MiB | new MiB | ratio |")
    print("|---|---|---|---|---|---|---|")
    for name, med in rows:
        o, n = med.get("old"), med["new"]
        if o is None:
            print(f"| {name} | | {n[0]:.2f} | | | {n[1]:.0f} | |")
        else:
            print(f"| {name} | {o[0]:.2f} | {n[0]:.2f} | {n[0] / o[0]:.2f} | {o[1]:.0f} | "
                  f"{n[1]:.0f} | {n[1] / o[1]:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
