"""Many-rank runs: time vs workers, the driver's peak memory vs ranks, and HTA on the files.

Builds (once, under OUT/inputs) RANKS synthetic Kineto rank traces of ~MB each from the
two DDP rank fixtures with ``make_big_trace.py`` (even ranks from rank 0, odd from rank 1;
``distributedInfo`` stamped with the rank and world size), then runs, each case in a fresh
driver process so that its peak RSS is its own:

* ``overlap`` + ``breakdown`` of the run the way the CLI runs them
  (:func:`traceforge.map_ranks` over ``STEP_KINDS``: per-rank summaries on the engine,
  reduced in the driver),
  on the ``local`` process pool and on a Dask ``LocalCluster`` (started by the run, and
  counted in its time), with each worker count: first run on an empty cache (parse +
  cache write) and warm (cached);
* the driver's peak RSS (``getrusage(RUSAGE_SELF)``: the driver only, not its workers)
  at 8, 32 and 64 ranks, beside the one-process path (``load_run`` + ``overlap`` +
  ``breakdown``: every rank's table in the driver, what the verbs did before);
* HTA 0.5.0 (``TraceAnalysis`` + ``get_comm_comp_overlap`` + ``get_temporal_breakdown``)
  on the first 8 rank files, against traceforge on the same 8, in the same invocation;
* the pickled size of each verb's per-rank summary (what crosses the network), for
  docs/scale.md.

Writes OUT/multirank.json and OUT/multirank.md and prints the tables. No GPU is used.

    python benchmarks/bench_multirank.py OUT                        # 2 cores: 1, 2 workers
    python benchmarks/bench_multirank.py OUT --workers 1,4,8,16     # a 16-core machine
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
SOURCES = [REPO / "fixtures" / f"capture_h200x2.ddp_train.sdpa.rank{r}.pt.trace.json.gz"
           for r in (0, 1)]
#: Stand-ins for the rank and world size, replaced in the serialized text per rank.
_RANK, _WORLD = 987654321, 987654322


# -- inputs --------------------------------------------------------------------------------
def build_inputs(out: Path, ranks: int, mb: float) -> list[Path]:
    """RANKS files of ~MB each under out/inputs (reused when already built alike)."""
    sys.path.insert(0, str(HERE))
    import make_big_trace
    import orjson

    d = out / "inputs"
    stamp = d / "inputs.json"
    want = {"ranks": ranks, "mb": mb, "sources": [str(s) for s in SOURCES]}
    files = [d / f"rank{r}.pt.trace.json" for r in range(ranks)]
    if stamp.exists() and json.loads(stamp.read_text()) == want and all(
            f.exists() for f in files):
        return files
    d.mkdir(parents=True, exist_ok=True)
    bodies = []
    for k, src in enumerate(SOURCES):
        base = d / f"base{k}.json"
        make_big_trace.build(src, base, mb)
        doc = orjson.loads(base.read_bytes())
        base.unlink()
        info = dict(doc.get("distributedInfo") or {})
        info.update(rank=_RANK, world_size=_WORLD)
        info.pop("pg_config", None)  # lists ranks 0 and 1 only
        doc["distributedInfo"] = info
        # json.dumps, as make_big_trace does: Kineto's spacing, so the size per event holds.
        text = json.dumps(doc).encode()
        assert text.count(str(_RANK).encode()) == 1 and text.count(str(_WORLD).encode()) == 1
        bodies.append(text)
    for r, f in enumerate(files):
        f.write_bytes(bodies[r % 2].replace(str(_RANK).encode(), str(r).encode())
                      .replace(str(_WORLD).encode(), str(ranks).encode()))
    stamp.write_text(json.dumps(want))
    return files


# -- one case, in its own process ----------------------------------------------------------
def rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


def summarize(trace: Any) -> tuple[Any, Any]:
    """The per-rank work: overlap's and breakdown's summaries."""
    from traceforge.analyzers.runs.rank_summaries import breakdown_summary, overlap_summary

    return overlap_summary(trace), breakdown_summary(trace)


def _case(spec: dict[str, Any]) -> dict[str, Any]:
    import pandas  # noqa: F401  (imported before the baseline, like the work's modules)

    import traceforge as tf
    from traceforge.analyzers.runs import rank_summaries as rs

    files = [Path(f) for f in spec["files"]]
    kind = spec["kind"]
    if kind == "hta":
        import logging
        import warnings

        from hta.trace_analysis import TraceAnalysis

        logging.disable(logging.WARNING)
        warnings.simplefilter("ignore")
    if kind == "engine" and spec["engine"] == "dask":
        import distributed  # noqa: F401
    base = rss_mib()
    t0 = time.perf_counter()
    if kind == "engine":
        ranked = tf.map_ranks(files, summarize, kinds=rs.STEP_KINDS,
                              engine=spec["engine"], workers=spec["workers"])
        rs.overlap_reduce([x.value[0] for x in ranked])
        rs.breakdown_reduce([x.value[1] for x in ranked])
    elif kind == "load_run":
        traces = tf.load_run(files, workers=spec["workers"])
        tf.overlap(traces)
        tf.breakdown(traces)
    elif kind == "hta":
        ta = TraceAnalysis(trace_files={i: str(f) for i, f in enumerate(files)})
        ta.get_comm_comp_overlap(visualize=False)
        ta.get_temporal_breakdown(visualize=False)
    seconds = time.perf_counter() - t0
    return {**spec, "files": len(files), "seconds": seconds, "driver_peak_mib": rss_mib(),
            "driver_base_mib": base}


def _sizes(spec: dict[str, Any]) -> dict[str, Any]:
    """Pickled bytes of each verb's summary of one rank, and of its event table."""
    from functools import partial

    import traceforge as tf
    from traceforge.analyzers.critical_path import rank_graph
    from traceforge.analyzers.runs import rank_summaries as rs
    from traceforge.analyzers.runs.scaling import scaling_summary
    from traceforge.analyzers.timing.kernels import run_kernel_totals

    f = Path(spec["files"][0])
    verbs: dict[str, Any] = {
        "overlap": (rs.overlap_summary, rs.STEP_KINDS),
        "breakdown": (rs.breakdown_summary, rs.STEP_KINDS),
        "scaling": (scaling_summary, rs.STEP_KINDS),
        "top-kernels": (run_kernel_totals, None),
        "idle (-n 10)": (partial(rs.idle_summary, limit=10), None),
        "critical-path": (rank_graph, None),
    }
    out: dict[str, Any] = {"file_bytes": f.stat().st_size}
    t = tf.load(f)
    out["events"] = len(t.events)
    out["event_table_bytes"] = len(pickle.dumps(t.events, protocol=5))
    sizes = {}
    for name, (fn, kinds) in verbs.items():
        got = tf.map_ranks([f], fn, kinds=kinds)
        sizes[name] = len(pickle.dumps(got[0], protocol=5))
    out["summary_bytes"] = sizes
    return out


def run_case(spec: dict[str, Any], cache: Path, script: str = __file__) -> dict[str, Any]:
    """``script --case SPEC`` in a fresh process (its peak RSS its own) on the cache
    ``cache``: the JSON it prints last. bench_comm.py runs its cases through this too."""
    env = {**os.environ, "TRACEFORGE_CACHE": str(cache)}
    env.pop("TRACEFORGE_NO_CACHE", None)
    r = subprocess.run([sys.executable, script, "--case", json.dumps(spec)], env=env,
                       capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit(f"case {spec['kind']} failed:\n{r.stderr[-3000:]}")
    res: dict[str, Any] = json.loads(r.stdout.strip().splitlines()[-1])
    return res


# -- the whole benchmark -------------------------------------------------------------------
def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", type=Path, nargs="?")
    ap.add_argument("--ranks", type=int, default=64)
    ap.add_argument("--mb", type=float, default=20.0, help="size of each rank file")
    ap.add_argument("--workers", default="1,2", help="worker counts, e.g. 1,4,8,16")
    ap.add_argument("--rank-counts", default="8,32,64",
                    help="run sizes for the driver-memory table")
    ap.add_argument("--hta-ranks", type=int, default=8)
    ap.add_argument("--no-hta", action="store_true")
    ap.add_argument("--case", help=argparse.SUPPRESS)
    ap.add_argument("--build", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.case:
        spec = json.loads(a.case)
        print(json.dumps(_sizes(spec) if spec["kind"] == "sizes" else _case(spec)))
        return
    if a.out is None:
        ap.error("give an output folder")
    out: Path = a.out
    if a.build:
        build_inputs(out, a.ranks, a.mb)
        return
    out.mkdir(parents=True, exist_ok=True)
    workers = [int(x) for x in a.workers.split(",")]
    counts = [int(x) for x in a.rank_counts.split(",") if int(x) <= a.ranks]
    t_build = time.perf_counter()
    # In a child process: Linux keeps a process's peak RSS across fork and exec, so every
    # case would report at least this (parent) process's peak.
    subprocess.run([sys.executable, __file__, str(out), "--build", "--ranks", str(a.ranks),
                    "--mb", str(a.mb)], check=True)
    files = [out / "inputs" / f"rank{r}.pt.trace.json" for r in range(a.ranks)]
    print(f"inputs: {len(files)} ranks x {files[0].stat().st_size / 1e6:.1f} MB "
          f"({time.perf_counter() - t_build:.0f} s to build)", flush=True)
    cache = out / "cache"
    results: dict[str, Any] = {"machine": {"cpus": os.cpu_count()}, "ranks": a.ranks,
                               "mb": a.mb, "cases": []}

    def case(spec: dict[str, Any], *, fresh: bool = False) -> dict[str, Any]:
        if fresh:
            shutil.rmtree(cache, ignore_errors=True)
        use = spec.pop("use")
        r = run_case({**spec, "files": [str(f) for f in use]}, cache)
        results["cases"].append(r)
        print(f"  {r['kind']:8} {r.get('engine', ''):5} workers={r.get('workers', '-')!s:>2} "
              f"ranks={r['files']:>3} {r.get('cache', ''):5} {r['seconds']:7.2f} s  driver "
              f"peak {r['driver_peak_mib']:6.0f} MiB", flush=True)
        return r

    results["sizes"] = run_case({"kind": "sizes", "files": [str(files[0])]}, cache)
    # Time vs workers, all ranks: first run on an empty cache, then warm.
    for engine in ("local", "dask"):
        for w in workers:
            for mode in ("first", "warm"):
                case({"kind": "engine", "engine": engine, "workers": w, "cache": mode,
                      "use": files}, fresh=mode == "first")
    # Driver memory vs ranks (warm cache), beside the one-process path.
    wmax = max(workers)
    for n in counts:
        for engine in ("local", "dask"):
            case({"kind": "engine", "engine": engine, "workers": wmax, "cache": "warm",
                  "use": files[:n]})
        case({"kind": "load_run", "workers": wmax, "cache": "warm", "use": files[:n]})
    # HTA on the first files, and traceforge on the same ones (first run and warm).
    h = files[:a.hta_ranks]
    case({"kind": "engine", "engine": "local", "workers": wmax, "cache": "first", "use": h},
         fresh=True)
    case({"kind": "engine", "engine": "local", "workers": wmax, "cache": "warm", "use": h})
    if not a.no_hta:
        case({"kind": "hta", "use": h})
    md = tables(results, workers, counts, a.hta_ranks)
    (out / "multirank.json").write_text(json.dumps(results, indent=2))
    (out / "multirank.md").write_text(md)
    print()
    print(md)


def _find(results: dict[str, Any], **kw: Any) -> dict[str, Any] | None:
    for c in results["cases"]:
        if all(c.get(k) == v for k, v in kw.items()):
            return c
    return None


def tables(results: dict[str, Any], workers: list[int], counts: list[int], hta_n: int) -> str:
    n, mb, cpus = results["ranks"], results["mb"], results["machine"]["cpus"]
    lines = [f"Time vs workers: overlap + breakdown of {n} ranks x {mb:g} MB, {cpus} CPUs "
             "(seconds; a Dask run includes starting its LocalCluster)", "",
             "| engine | workers | first run s (parse + cache) | warm s | speedup vs 1 worker "
             "(warm) | driver peak MiB (warm) |", "|---|---:|---:|---:|---:|---:|"]
    for engine in ("local", "dask"):
        one = _find(results, kind="engine", engine=engine, workers=workers[0], cache="warm",
                    files=n)
        for w in workers:
            f = _find(results, kind="engine", engine=engine, workers=w, cache="first", files=n)
            c = _find(results, kind="engine", engine=engine, workers=w, cache="warm", files=n)
            if f is None or c is None or one is None:
                continue
            lines.append(f"| {engine} | {w} | {f['seconds']:.2f} | {c['seconds']:.2f} | "
                         f"{one['seconds'] / c['seconds']:.2f}x | "
                         f"{c['driver_peak_mib']:.0f} |")
    wmax = max(workers)
    lines += ["", f"Driver peak RSS vs ranks (MiB, warm cache, {wmax} workers; the driver "
              "process only)", "",
              "| ranks | local engine | dask engine | load_run + overlap + breakdown (every "
              "table in the driver) | local s | load_run s |",
              "|---:|---:|---:|---:|---:|---:|"]
    for k in counts:
        lo = _find(results, kind="engine", engine="local", workers=wmax, cache="warm", files=k)
        da = _find(results, kind="engine", engine="dask", workers=wmax, cache="warm", files=k)
        old = _find(results, kind="load_run", files=k)
        if lo is None or da is None or old is None:
            continue
        lines.append(f"| {k} | {lo['driver_peak_mib']:.0f} | {da['driver_peak_mib']:.0f} | "
                     f"{old['driver_peak_mib']:.0f} | {lo['seconds']:.2f} | "
                     f"{old['seconds']:.2f} |")
    hta = _find(results, kind="hta")
    first = _find(results, kind="engine", engine="local", workers=wmax, cache="first",
                  files=hta_n)
    warm = _find(results, kind="engine", engine="local", workers=wmax, cache="warm",
                 files=hta_n)
    if hta and first and warm:
        lines += ["", f"HTA 0.5.0 on the same {hta_n} rank files (same invocation)", "",
                  "| | seconds | driver peak MiB | HTA / it |", "|---|---:|---:|---:|",
                  f"| HTA TraceAnalysis + comm/comp overlap + temporal breakdown | "
                  f"{hta['seconds']:.2f} | {hta['driver_peak_mib']:.0f} | |",
                  f"| traceforge local, first run (parse + cache write) | "
                  f"{first['seconds']:.2f} | {first['driver_peak_mib']:.0f} | "
                  f"{hta['seconds'] / first['seconds']:.1f}x |",
                  f"| traceforge local, warm | {warm['seconds']:.2f} | "
                  f"{warm['driver_peak_mib']:.0f} | {hta['seconds'] / warm['seconds']:.1f}x |"]
    s = results["sizes"]
    lines += ["", f"Per-rank summary sizes (pickled bytes) for one {s['file_bytes'] / 1e6:.1f} MB "
              f"rank ({s['events']} events; its event table pickles to "
              f"{s['event_table_bytes'] / 1e6:.1f} MB)", "",
              "| verb | bytes per rank |", "|---|---:|"]
    for verb, b in s["summary_bytes"].items():
        lines.append(f"| {verb} | {b:,} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
