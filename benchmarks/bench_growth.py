"""Growth: time and peak memory of cold verbs as the trace grows (70 MB to 1 GB).

Builds replicas of a fixture (:mod:`make_big_trace`, ``--mb``) of each size under
``--dir`` (default /tmp/tf-bench; a file already there is reused), then runs each verb on
each in a fresh process with an empty cache (what a user's first command costs: parse,
cache write, analysis, output): ``top-kernels``, ``report`` (Markdown), ``critical-path``
(all steps) and ``annotate -o x.pftrace``. Prints per case the wall time, the CPU time of
the command and every process it started, and the peak memory (the command's cgroup peak,
every page counted once, where this user can make memory cgroups; else the largest peak
RSS of one of its processes; the trace's pages are dropped from the page cache before
each run, so that the pages a run reads are counted whatever ran before: a file still
cached by an earlier run was not charged to the run's cgroup, which made a 565 MB row
1.00 GiB beside 0.28 GiB at 288 MB in one run), then a least-squares line
``a + b * MB`` through each verb's wall times, CPU times and peaks and every row's
distance from it: growth is linear when every row is within 10% (on a shared machine,
CPU time is the steadier of the two).

    python benchmarks/bench_growth.py [--sizes 70,140,280,560,1000] [--verbs top-kernels,...]
                                      [--repeat N]

``--repeat N`` runs every (size, verb) N times, a round over all of them at a time, and
fits the medians (single runs on a shared machine move by 10-15%).

Files over 300 MB are deleted at the end unless ``--keep``. Run it alone
(``flock /tmp/tf-heavy.lock``) with ``TRACEFORGE_MAX_MEMORY`` set to what the machine
can spare: each case's environment passes it on.
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
sys.path.insert(0, str(HERE))

from bench_load import _cgroup_root  # noqa: E402  (a sibling script)

VERBS = {
    "top-kernels": ["top-kernels", "@P", "--format", "json"],
    "report": ["report", "@P", "-o", "@OUT/report.md"],
    "critical-path": ["critical-path", "@P", "--format", "json"],
    "annotate": ["annotate", "@P", "-o", "@OUT/annotated.pftrace"],
}


def replica(src: Path, d: Path, mb: int) -> Path:
    """``d/growth-MBmb.json``, built once (``big.json`` stands for 280 MB when present)."""
    if mb == 280 and (d / "big.json").exists():
        return d / "big.json"
    out = d / f"growth-{mb}mb.json"
    if not out.exists():
        tmp = out.with_suffix(".part")
        subprocess.run([sys.executable, str(HERE / "make_big_trace.py"), str(src), str(tmp),
                        "--mb", str(mb)], check=True, stdout=subprocess.DEVNULL)
        tmp.replace(out)
    return out


def uncached(path: Path) -> None:
    """Drop ``path``'s pages from the page cache (the next reader charges them anew)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def measure(argv: list[str], env: dict[str, str], cgroup: tuple[Path, str] | None
            ) -> tuple[int, float, float, float, float | None, str]:
    """(exit code, wall s, CPU s, max RSS GiB, cgroup peak GiB or None, last stderr line)
    of ``traceforge ARGV`` in a fresh process (in a fresh memory cgroup where ``cgroup``
    says where to make one), its output discarded."""
    cmd = [sys.executable, "-m", "traceforge", *argv]
    group = None
    if cgroup is not None:
        group = cgroup[0] / f"tf-bench-run-{os.getpid()}-{time.monotonic_ns()}"
        group.mkdir()
        cmd = ["sh", "-c", 'echo $$ > "$0/cgroup.procs" && exec "$@"', str(group), *cmd]
    try:
        t0 = time.perf_counter()
        proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE)
        assert proc.stderr is not None
        err = proc.stderr.read().decode(errors="replace").strip().splitlines()
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - t0
        peak = None
        if group is not None and cgroup is not None:
            peak = int((group / cgroup[1]).read_text()) / 2**30
        return (os.waitstatus_to_exitcode(status), wall, usage.ru_utime + usage.ru_stime,
                usage.ru_maxrss / 2**20, peak, err[-1] if err else "")
    finally:
        if group is not None:
            group.rmdir()


def run(argv: list[str], env: dict[str, str], cgroup: tuple[Path, str] | None,
        trace: Path | None = None) -> tuple[float, float, float, str]:
    """(wall s, CPU s, peak GiB, how the peak was taken) of ``traceforge ARGV``
    (``trace``: its pages dropped from the page cache first); RuntimeError if it fails."""
    if trace is not None:
        uncached(trace)
    code, wall, cpu, rss, peak, err = measure(argv, env, cgroup)
    if code != 0:
        raise RuntimeError(err or "failed")
    if peak is not None:
        return wall, cpu, peak, "cgroup"
    return wall, cpu, rss, "max RSS"


def fit(xs: list[float], ys: list[float]) -> tuple[float, float]:
    """Least-squares ``a + b * x``."""
    n = len(xs)
    mx, my = sum(xs) / n, sum(ys) / n
    var = sum((x - mx) ** 2 for x in xs)
    b = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / var if var else 0.0
    return my - b * mx, b


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--src", type=Path, default=REPO / "fixtures" / "eager.pt.trace.json.gz")
    ap.add_argument("--dir", type=Path, default=Path("/tmp/tf-bench"))
    ap.add_argument("--sizes", default="70,140,280,560,1000")
    ap.add_argument("--verbs", default=",".join(VERBS))
    ap.add_argument("--keep", action="store_true", help="keep files over 300 MB")
    ap.add_argument("--repeat", type=int, default=1, help="runs of each case (median shown)")
    a = ap.parse_args()
    sizes = [int(s) for s in a.sizes.split(",")]
    verbs = a.verbs.split(",")
    a.dir.mkdir(parents=True, exist_ok=True)
    where = _cgroup_root()
    # Bytecode is written, as for an installed package (see bench_load).
    base = {k: v for k, v in os.environ.items()
            if k not in ("TRACEFORGE_CACHE", "PYTHONDONTWRITEBYTECODE")}
    rows: dict[str, list[tuple[float, float, float, float]]] = {v: [] for v in verbs}
    print(f"{os.cpu_count()} CPUs; python {sys.version.split()[0]}; "
          f"TRACEFORGE_MAX_MEMORY={os.environ.get('TRACEFORGE_MAX_MEMORY', '(default)')}")
    print(f"{'verb':14} {'MB':>6} {'wall s':>7} {'CPU s':>7} {'peak GiB':>8}")
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(REPO / "traceforge")],
                   env=base, check=False)
    built = [replica(a.src, a.dir, mb) for mb in sizes]
    runs: dict[tuple[str, float], list[tuple[float, float, float]]] = {}
    for _ in range(max(1, a.repeat)):
        for trace in built:
            size = trace.stat().st_size / 1e6
            for v in verbs:
                work = Path(tempfile.mkdtemp(prefix="tf-growth-", dir=a.dir))
                env = {**base, "TRACEFORGE_CACHE": str(work / "cache")}
                argv = [x.replace("@P", str(trace)).replace("@OUT", str(work))
                        for x in VERBS[v]]
                try:
                    wall, cpu, peak, how = run(argv, env, where, trace)
                except RuntimeError as e:
                    print(f"{v:14} {size:6.0f}  failed: {e}")
                    continue
                finally:
                    shutil.rmtree(work, ignore_errors=True)
                runs.setdefault((v, size), []).append((wall, cpu, peak))
                print(f"{v:14} {size:6.0f} {wall:7.2f} {cpu:7.2f} {peak:8.2f}  ({how})",
                      flush=True)
    for (v, size), got in runs.items():
        rows[v].append((size, *(statistics.median(g[i] for g in got) for i in range(3))))
    if a.repeat > 1:
        print(f"\nmedians of {a.repeat} runs:")
        for v, got in rows.items():
            for size, wall, cpu, peak in got:
                print(f"{v:14} {size:6.0f} {wall:7.2f} {cpu:7.2f} {peak:8.2f}")
    print("\nlinear fit per verb (a + b * MB) and each row's distance from it:")
    for v, got in rows.items():
        if len(got) < 2:
            continue
        xs = [r[0] for r in got]
        for col, what in ((1, "wall"), (2, "CPU"), (3, "peak")):
            ys = [r[col] for r in got]
            c, b = fit(xs, ys)
            off = [(y - (c + b * x)) / (c + b * x) * 100 for x, y in zip(xs, ys, strict=True)]
            unit = "GiB" if what == "peak" else "s"
            print(f"  {v:14} {what}: {c:.2f} {unit} + {b * 1000:.2f} {unit}/GB; "
                  f"rows {', '.join(f'{o:+.0f}%' for o in off)}; "
                  f"{'linear' if max(map(abs, off)) <= 10 else 'NOT within 10%'}")
    if not a.keep:
        for p in built:
            if p.name != "big.json" and p.stat().st_size > 300e6:
                p.unlink()


if __name__ == "__main__":
    main()
