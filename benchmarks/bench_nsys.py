"""A cold ``top-kernels`` of a large Nsight Systems export, next to the SQL ``nsys stats``
runs for the same table (its kernel summary over the database: the floor), in one run.

The export is the H200 capture in ``../shared/fixtures/h200-nsys/policy_fa2.sqlite.gz``
replicated ``--copies`` times along the time axis (kernels, runtime calls, copies, syncs,
NVTX; correlation ids shifted per copy): 50 copies are 226 MB, 1.22M kernels and 2.89M
runtime calls. Each case runs in a fresh process with an empty cache of its own; wall
time and peak RSS from ``os.wait4``, and the MB the command left in its cache (the entry
the next command maps). With ``--baseline REF`` the cold case also runs on a
``git worktree`` of REF (alternating with this checkout). ``--cached convert,report,annotate``
also runs those verbs on the export already read into the cache (each tree's own; each run
on a fresh copy of it, so each is the first command of its kind, as a user's second
command is), their outputs written to a temporary folder.

    python benchmarks/bench_nsys.py [--copies 50] [--repeat 3] [--baseline main]
    python benchmarks/bench_nsys.py --repeat 2 --baseline main --cached convert,report
"""

from __future__ import annotations

import argparse
import gzip
import os
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
SOURCE = REPO.parent / "shared" / "fixtures" / "h200-nsys" / "policy_fa2.sqlite.gz"
TABLES = ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_RUNTIME",
          "CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET",
          "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION", "NVTX_EVENTS")
FLOOR = ("SELECT s.value, count(*), sum(k.end - k.start), min(k.end - k.start), "
         "max(k.end - k.start) FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN StringIds s "
         "ON s.id = k.shortName GROUP BY k.shortName ORDER BY 3 DESC")


def build(copies: int) -> Path:
    out = HERE / "out" / f"nsys-{copies}x.sqlite"
    if out.exists():
        return out
    out.parent.mkdir(exist_ok=True)
    with gzip.open(SOURCE, "rb") as f, open(out, "wb") as g:
        shutil.copyfileobj(f, g)
    con = sqlite3.connect(out)
    have = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    span = con.execute('SELECT max("end") - min(start) + 1000 FROM '
                       "CUPTI_ACTIVITY_KIND_RUNTIME").fetchone()[0]
    for t in (t for t in TABLES if t in have):
        cols = [r[1] for r in con.execute(f"PRAGMA table_info({t})")]
        lo = con.execute(f"SELECT min(start) FROM {t}").fetchone()[0]
        for k in range(1, copies):
            sel = [f'"{c}" + {k * span}' if c in ("start", "end") else
                   f"correlationId + {k * 10_000_000}" if c == "correlationId" else f'"{c}"'
                   for c in cols]
            names = ", ".join(f'"{c}"' for c in cols)
            con.execute(f"INSERT INTO {t} ({names}) SELECT {', '.join(sel)} FROM {t} "
                        f"WHERE start < {lo} + {span}")
    con.commit()
    con.close()
    return out


#: The verbs ``--cached`` may run, their output in ``{out}``.
CACHED = {"convert": ["convert", "{db}", "{out}/c.pftrace"],
          "report": ["report", "{db}", "-o", "{out}/r.md"],
          "annotate": ["annotate", "{db}", "-o", "{out}/a.pftrace"]}


def run(argv: list[str], tree: Path, cache_from: Path | None = None
        ) -> tuple[float, float, float]:
    """(wall s, peak RSS MiB, MB the cache holds after it) of one fresh process, its cache
    empty (a copy of ``cache_from`` where given)."""
    with tempfile.TemporaryDirectory() as cache:
        if cache_from is not None:
            shutil.copytree(cache_from, cache, dirs_exist_ok=True)
        env = {**os.environ, "TRACEFORGE_CACHE": cache, "PYTHONPATH": str(tree)}
        t = time.perf_counter()
        p = subprocess.Popen(argv, env=env, cwd=tempfile.gettempdir(),
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        _, status, usage = os.wait4(p.pid, 0)
        wall = time.perf_counter() - t
        if status:
            sys.exit(f"failed ({status}): {' '.join(argv)}")
        held = sum(f.stat().st_size for f in Path(cache).rglob("*") if f.is_file())
        return wall, usage.ru_maxrss / 1024, held / 1e6


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--copies", type=int, default=50)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--baseline", help="also run the cold case on this git ref")
    ap.add_argument("--cached", default="",
                    help=f"also run these on the cached export: {','.join(CACHED)}")
    args = ap.parse_args()
    verbs = [v for v in args.cached.split(",") if v]
    if any(v not in CACHED for v in verbs):
        sys.exit(f"--cached: one of {', '.join(CACHED)}")
    if not SOURCE.exists():
        sys.exit(f"needs {SOURCE}")
    db = build(args.copies)
    print(f"{db.name}: {db.stat().st_size / 1e6:.0f} MB")
    floor = [sys.executable, "-c", f"import sqlite3; sqlite3.connect({str(db)!r})"
             f".execute({FLOOR!r}).fetchall()"]
    cold = [sys.executable, "-m", "traceforge", "top-kernels", str(db), "-n", "5"]
    trees = {"this checkout": REPO}
    tmp = None
    if args.baseline:
        tmp = Path(tempfile.mkdtemp()) / "base"
        subprocess.run(["git", "-C", str(REPO), "worktree", "add", "--detach", str(tmp),
                        args.baseline], check=True, capture_output=True)
        trees[args.baseline] = tmp
    got: dict[str, list[tuple[float, float, float]]] = {}
    work = Path(tempfile.mkdtemp())
    out = work / "out"
    out.mkdir()
    try:
        caches: dict[str, Path] = {}
        for label, tree in trees.items() if verbs else ():
            caches[label] = work / f"cache-{len(caches)}"
            subprocess.run(cold, env={**os.environ, "TRACEFORGE_CACHE": str(caches[label]),
                                      "PYTHONPATH": str(tree)}, cwd=tempfile.gettempdir(),
                           check=True, capture_output=True)
        for _ in range(args.repeat):
            got.setdefault("SQL kernel summary (floor)", []).append(run(floor, REPO))
            for label, tree in trees.items():
                got.setdefault(f"cold top-kernels ({label})", []).append(run(cold, tree))
            for verb in verbs:
                argv = [sys.executable, "-m", "traceforge",
                        *(a.format(db=db, out=out) for a in CACHED[verb])]
                for label, tree in trees.items():
                    got.setdefault(f"{verb}, cached ({label})", []).append(
                        run(argv, tree, caches[label]))
    finally:
        shutil.rmtree(work, ignore_errors=True)
        if tmp is not None:
            subprocess.run(["git", "-C", str(REPO), "worktree", "remove", "--force", str(tmp)],
                           check=False, capture_output=True)
    base = statistics.median(w for w, _, _ in got["SQL kernel summary (floor)"])
    print(f"{'':<44} {'wall':>9} {'peak':>11} {'cache':>10}")
    for label, runs in got.items():
        wall = statistics.median(w for w, _, _ in runs)
        peak = statistics.median(m for _, m, _ in runs)
        held = statistics.median(c for _, _, c in runs)
        print(f"{label:<44} {wall:7.2f} s {peak:7.0f} MiB {held:7.0f} MB "
              f"{wall / base:6.1f}x the floor")


if __name__ == "__main__":
    main()
