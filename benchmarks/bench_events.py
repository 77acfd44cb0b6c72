"""Peak memory per verb at many events, against the columns traceforge keeps (issue 31,
item 5: peak memory a small multiple of the columns kept, never of Python objects per
event).

A trace of N tiny kernels (``bench_critical_path_cli.tiny_trace``: 1 us kernels, 1 us
apart, on one stream; ~150 bytes of JSON an event) is read once into a fresh cache
(``top-kernels``, cold: parse and cache write), then every verb runs on it in a fresh
process, as a user runs them one after the other (each verb's first run: it stores what
it derives). Each run is measured from outside: wall and CPU time (the command and every
process it waited for), max RSS (the largest single process; forked workers share their
parent's pages) and, where this user can make memory cgroups, the run's cgroup peak
(every page once, the children's included, and the page cache of the files the run
reads or writes: an upper bound of what the run holds).

The columns kept: the cache entry (the events' columns) plus the stored timeline (the
GPU activities' columns every analysis starts from), measured from the cache folder
after the runs. Each verb's max RSS is printed per million events and as a multiple of
those columns; the bound stated in ``docs/security.md`` is checked here (a benchmark,
never a timed test). ``--empty`` adds issue 31's other case: a file of N empty ``{}``
events, which must end in one line ("no events") without holding memory per event.

    python benchmarks/bench_events.py [--events 1000000] [--verbs idle,report] [--empty]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(HERE))

from bench_critical_path_cli import tiny_trace  # noqa: E402  (a sibling script)
from bench_growth import measure, uncached  # noqa: E402
from bench_load import _cgroup_root  # noqa: E402

#: The stated bound: a verb's largest process holds at most this many times the columns
#: kept (docs/security.md, "Bounded memory").
BOUND = 8.0

VERBS = {
    "info": ["info", "@P"],
    "top-kernels": ["top-kernels", "@P"],
    "idle": ["idle", "@P"],
    "overlap": ["overlap", "@P"],
    "breakdown": ["breakdown", "@P"],
    "launch": ["launch", "@P"],
    "ops": ["ops", "@P"],
    "roofline": ["roofline", "@P"],
    "mfu": ["mfu", "@P"],
    "comm": ["comm", "@P"],
    "critical-path": ["critical-path", "@P"],
    "critical-path --format json": ["critical-path", "@P", "--format", "json"],
    "sql (every event, JSON)": ["sql", "@P", "select * from events", "--format", "json"],
    "diff (the trace with itself)": ["diff", "@P", "@P"],
    "report (Markdown)": ["report", "@P", "-o", "@OUT/report.md"],
    "report (HTML)": ["report", "@P", "-o", "@OUT/report.html"],
    "annotate -o .pftrace": ["annotate", "@P", "-o", "@OUT/annotated.pftrace"],
    "annotate -o .json": ["annotate", "@P", "-o", "@OUT/annotated.json"],
    "convert -o .pftrace": ["convert", "@P", "@OUT/converted.pftrace"],
    "convert -o .json": ["convert", "@P", "@OUT/converted.json"],
}


def run(argv: list[str], env: dict[str, str], cgroup: tuple[Path, str] | None
        ) -> tuple[int, float, float, float, float | None, str]:
    """:func:`bench_growth.measure` of ``traceforge ARGV``, the files it names dropped
    from the page cache first (their pages are charged to this run)."""
    for path in {Path(x) for x in argv if Path(x).is_file()}:
        uncached(path)
    return measure(argv, env, cgroup)


def empty_events(path: Path, n: int) -> Path:
    """A trace file of ``n`` empty events (``{}``): no event has a phase."""
    if not path.exists():
        tmp = path.with_suffix(".part")
        with tmp.open("w") as f:
            f.write('{"traceEvents": [')
            f.write(",".join(["{}"] * min(n, 1 << 20)))
            for _ in range((n - 1) // (1 << 20)):
                f.write("," + ",".join(["{}"] * (1 << 20)))
            f.write("]}\n")
        tmp.rename(path)
    return path


def main() -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--events", type=int, default=1_000_000)
    ap.add_argument("--dir", type=Path, default=Path(tempfile.gettempdir()) / "tf-bench")
    ap.add_argument("--verbs", default="", help="comma-separated names of VERBS (default all)")
    ap.add_argument("--empty", action="store_true", help="also N empty events")
    a = ap.parse_args()
    chosen = [v for v in VERBS if not a.verbs or v in a.verbs.split(",")]
    trace = tiny_trace(a.dir / f"tiny-{a.events}.json", a.events)
    where = _cgroup_root()
    work = Path(tempfile.mkdtemp(prefix="tf-events-", dir=a.dir))
    cache = work / "cache"
    # Bytecode is written, as for an installed package (see bench_load).
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["TRACEFORGE_CACHE"] = str(cache)
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(REPO / "traceforge")],
                   env=env, check=False)
    million = a.events / 1e6
    print(f"{os.cpu_count()} CPUs; python {sys.version.split()[0]}; {a.events:,} tiny kernels "
          f"({trace.stat().st_size / 1e6:,.0f} MB); TRACEFORGE_MAX_MEMORY="
          f"{os.environ.get('TRACEFORGE_MAX_MEMORY', '(default)')}")
    rows: list[tuple[str, int, float, float, float, float | None, str]] = []
    try:
        for name in ["top-kernels (cold: parse + cache write)", "idle (stores the timeline)",
                     *chosen]:
            argv = VERBS.get(name, [name.split()[0], "@P"])
            argv = [x.replace("@P", str(trace)).replace("@OUT", str(work)) for x in argv]
            rows.append((name, *run(argv, env, where)))
            got = rows[-1]
            print(f"  {name}: {got[2]:.1f} s, {got[4]:.2f} GiB max RSS"
                  + (f" (exit {got[1]}: {got[6]})" if got[1] else ""), flush=True)
            for f in work.iterdir():
                if f.is_file():
                    f.unlink()
        entry = sum(f.stat().st_size for f in cache.glob("*.arrow"))
        derived = sorted((f.stat().st_size for f in cache.glob("*.derived")), reverse=True)
        # The stored timeline is the largest derived table a first `idle` writes.
        timeline = derived[0] if derived else 0
    finally:
        shutil.rmtree(work, ignore_errors=True)
    kept = (entry + timeline) / 2**30
    print(f"\ncolumns kept: cache entry {entry / 2**20:,.0f} MiB + stored timeline "
          f"{timeline / 2**20:,.0f} MiB = {kept:.2f} GiB ({kept / million * 1024:,.0f} MiB "
          f"per million events); bound: max RSS <= {BOUND:g}x the columns kept\n")
    print(f"{'case':42} {'wall s':>7} {'CPU s':>7} {'max RSS GiB':>11} {'cgroup GiB':>10} "
          f"{'GiB / M':>8} {'x kept':>7}")
    worst = 0.0
    for name, code, wall, cpu, rss, peak, err in rows:
        ratio = rss / kept if kept else 0.0
        worst = max(worst, ratio)
        cg = f"{peak:10.2f}" if peak is not None else f"{'-':>10}"
        flag = "" if code == 0 else f"  exit {code}: {err}"
        print(f"{name:42} {wall:7.1f} {cpu:7.1f} {rss:11.2f} {cg} {rss / million:8.2f} "
              f"{ratio:6.1f}x{' over the bound' if ratio > BOUND and million >= 1 else ''}"
              f"{flag}")
    if a.empty:
        blank = empty_events(a.dir / f"empty-{a.events}.json", a.events)
        code, wall, cpu, rss, peak, err = run(["top-kernels", str(blank)], env, where)
        print(f"\n{a.events:,} empty events ({blank.stat().st_size / 1e6:,.0f} MB): exit {code} "
              f"in {wall:.1f} s, {rss:.2f} GiB max RSS: {err}")
    print(f"\nworst: {worst:.1f}x the columns kept (bound {BOUND:g}x)")
    if a.events < 1_000_000:
        print("(the bound is for 1M events and more: below, the interpreter and its imports, "
              "~0.1 GiB, outweigh the columns)")
        return 0
    return 0 if worst <= BOUND else 1


if __name__ == "__main__":
    sys.exit(main())
