"""Cold and warm traceforge verbs on a large Kineto trace, side by side with baselines.

Every case runs in a fresh subprocess, so wall time and peak RSS (from the child's rusage)
are comparable. Two times per case:

* ``wall s``: the whole command, interpreter start-up and imports included (what a user
  waits for);
* ``in-proc s``: the verb alone, timed inside the process after Python, pandas, numpy,
  pyarrow and the verb's module are imported (what the library spends on the trace).
  The cold traceforge cases are the exception: they run as the program does, the CLI
  importing the verb's modules itself, since a cold command's first chunks are decoded
  while it imports them (``traceforge.formats.prefetch``); their ``in-proc s`` counts
  from before those imports.

Cases: the typed msgspec decode (the floor: decoding only the fields an analysis needs,
args left raw, in one process), cold ``top-kernels`` with an empty cache (parse + cache
write; the reader decodes a large file in chunks on every core), the same in one process
(``TRACEFORGE_PARSE_WORKERS=1``), cold with ``--no-cache``, the import floor of a warm
verb (``python -c "import pandas, pyarrow"``), warm (cached) ``top-kernels``, ``idle``,
``overlap``, ``ops``, ``launch`` and ``report`` (all but the first twice in a row: first
computing and storing its derived tables, then reading them back; the cache is emptied
at the start of every round), the HTML report with its tables stored (then with its
charts stored too), and HTA 0.5.0
parse + kernel breakdown when it is installed. Ratios are printed against the decode
floor (wall and CPU: user + system time of the command and every process it waited for)
and HTA, and warm cases' wall time above the import floor, all measured in the same
invocation. Before each timed case a throwaway process touches 1 GiB (``--settle``): on a
virtual machine that hands idle memory back to its host, that keeps a case's time from
depending on how long the machine idled before it. Where this user can make memory
cgroups (Linux, root), the cases that read the trace run once more, each in a fresh cgroup
with the trace evicted from the page cache, for a peak that counts every page once across
the command and its workers.

    python benchmarks/bench_load.py [--trace big.json] [--repeat 3] [--no-hta] [--settle GIB]

Without --trace, builds benchmarks/out/big.json (~288 MB) from fixtures/eager.pt.trace.json.gz.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
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

DECODE = """
import msgspec
class E(msgspec.Struct, gc=False):
    ph: str = ""; cat: str = ""; name: str = ""
    pid: int | str = 0; tid: int | str = 0
    ts: float | None = None; dur: float | None = None
    args: msgspec.Raw = msgspec.Raw()
class D(msgspec.Struct, gc=False):
    traceEvents: list[E] = []
import time; t0 = time.perf_counter()
msgspec.json.decode(open(P, 'rb').read(), type=D)
INPROC = time.perf_counter() - t0
"""

HTA = """
import os, shutil, tempfile, warnings, logging
warnings.filterwarnings('ignore'); logging.disable(logging.WARNING)
from hta.trace_analysis import TraceAnalysis
import time; t0 = time.perf_counter()
d = tempfile.mkdtemp()
os.symlink(os.path.abspath(P), os.path.join(d, 'rank-0.json'))
a = TraceAnalysis(trace_dir=d)
a.get_gpu_kernel_breakdown(visualize=False)
shutil.rmtree(d)
INPROC = time.perf_counter() - t0
"""

#: The import floor of a warm verb: the interpreter with pandas and pyarrow imported.
IMPORTS = """
import time; t0 = time.perf_counter()
import pandas, pyarrow
INPROC = time.perf_counter() - t0
"""

#: Warm single-table verbs (target: within 0.2 s of IMPORTS in wall time).
SINGLE = ("top-kernels", "idle", "overlap", "ops", "launch")


def verb(module: str, *args: str, imported: bool = True) -> str:
    """A CLI run of ``traceforge ARGS`` with its verb module imported before the clock
    (``imported``), else with the CLI importing it as the program does."""
    argv = ["traceforge", *args]
    imports = (f"import numpy, pandas, pyarrow\n"
               f"importlib.import_module('traceforge.commands.{module}')" if imported else "")
    return f"""
import importlib, io, contextlib, sys, time
from traceforge.cli import end as END, main
{imports}
sys.argv = {argv!r}
sys.argv = [a.replace('@P', P).replace('@OUT', OUT) for a in sys.argv]
t0 = time.perf_counter()
with contextlib.redirect_stdout(io.StringIO()):
    try:
        main()
    except SystemExit as e:
        if e.code:
            raise
INPROC = time.perf_counter() - t0
"""


def run_case(code: str, trace: Path, env: dict[str, str], out: Path,
             cgroup: Path | None = None) -> tuple[float, float, float, float]:
    """(wall s, in-process s, peak RSS GiB, CPU s) of one fresh interpreter running
    ``code``. CPU is user + system time of the interpreter and every process it started
    and waited for (the reader's chunk workers, a forked cache writer).

    Peak RSS is the interpreter's own peak plus the largest peak of the processes it
    started (the reader's chunk workers): an upper bound on what they held at once.
    With ``cgroup`` (a fresh memory cgroup), the interpreter starts inside it.
    """
    with tempfile.NamedTemporaryFile("r", suffix=".json") as res:
        prog = (f"P = {str(trace)!r}\nOUT = {str(out)!r}\n{code}\n"
                "import json, resource\n"
                "RSS = sum(resource.getrusage(w).ru_maxrss for w in "
                "(resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN))\n"
                f"json.dump([INPROC, RSS], open({res.name!r}, 'w'))\n"
                # A traceforge case ends as the program does (cli.end: no teardown).
                "if 'END' in globals(): END(0)")
        cmd = [sys.executable, "-c", prog]
        if cgroup is not None:  # join the cgroup first, then become the interpreter
            cmd = ["sh", "-c", 'echo $$ > "$0/cgroup.procs" && exec "$@"', str(cgroup), *cmd]
        t0 = time.perf_counter()
        proc = subprocess.Popen(cmd, cwd=REPO, env=env,
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        assert proc.stderr is not None
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - t0
        cpu = usage.ru_utime + usage.ru_stime
        err = proc.stderr.read().decode(errors="replace")
        rc = os.waitstatus_to_exitcode(status)
        if rc != 0:
            raise RuntimeError(f"exit {rc}: {err.strip().splitlines()[-1:] or ''}")
        inproc, rss_kib = json.load(res)
        return wall, float(inproc), rss_kib / 2**20, cpu


def settle(gib: float) -> None:
    """Touch ``gib`` GiB in a throwaway process, so that the case run next gets memory
    this machine already holds.

    On a virtual machine that hands free memory back to its host (virtio-balloon free
    page reporting, as this project's 2-core machine does), memory idle for a few seconds
    is returned, and the next process to touch it waits for the host to supply it again.
    That made a case's time depend on what ran before it: a first warm ``idle`` took
    0.25 s in-process right after other cases and 0.35-0.39 s after HTA's 28 s run or a
    28 s pause, and 0.26 s after a pause followed by this. Every case, the baselines
    included, gets the same; a bare-metal machine gains nothing from it.
    """
    if gib > 0:
        subprocess.run([sys.executable, "-c", "import numpy as np\n"
                        f"np.ones({int(gib * 2**30) // 8})"], check=True)


def _cgroup_root() -> tuple[Path, str] | None:
    """Where fresh memory cgroups can be made here, and the file holding one's peak
    (cgroup v1 or v2); None without the rights or the controller."""
    for root, peak in ((Path("/sys/fs/cgroup/memory"), "memory.max_usage_in_bytes"),
                       (Path("/sys/fs/cgroup"), "memory.peak")):
        probe = root / f"tf-bench-probe-{os.getpid()}"
        try:
            probe.mkdir()
        except OSError:
            continue
        ok = (probe / peak).exists()
        probe.rmdir()
        if ok:
            return root, peak
    return None


def pages_once_peak(code: str, trace: Path, env: dict[str, str], out: Path,
                    where: tuple[Path, str]) -> float:
    """Peak GiB of one run of ``code`` and every process it starts, each page counted
    once: the peak of a fresh memory cgroup it runs in. The trace's pages are dropped
    from the page cache first, so that the pages it maps or reads count as they do in
    RSS; the cache entry a cold run writes counts too."""
    root, peak = where
    fd = os.open(trace, os.O_RDONLY)
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)
    group = root / f"tf-bench-{os.getpid()}-{time.monotonic_ns()}"
    group.mkdir()
    try:
        run_case(code, trace, env, out, cgroup=group)
        return int((group / peak).read_text()) / 2**30
    finally:
        group.rmdir()


def big_trace() -> Path:
    """benchmarks/out/big.json (~288 MB), built from fixtures/eager.pt.trace.json.gz once."""
    trace = HERE / "out" / "big.json"
    if not trace.exists():
        trace.parent.mkdir(exist_ok=True)
        subprocess.run([sys.executable, str(HERE / "make_big_trace.py"),
                        str(REPO / "fixtures" / "eager.pt.trace.json.gz"), str(trace)],
                       check=True)
    return trace


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--trace", type=Path)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--no-hta", action="store_true")
    ap.add_argument("--only", help="run only the cases whose name contains one of these "
                                   "comma-separated words (the floors always run)")
    ap.add_argument("--settle", type=float, default=1.0, metavar="GIB",
                    help="memory a throwaway process touches before each timed case "
                         "(0: none); see settle()")
    a = ap.parse_args()
    trace = a.trace or big_trace()
    work = Path(tempfile.mkdtemp(prefix="tf-bench-"))
    cache = work / "cache"
    out = work / "report.md"
    # Bytecode is written (an installed package has it): with PYTHONDONTWRITEBYTECODE set,
    # as in some sandboxes, every case compiled traceforge's modules, ~0.18 s of a warm verb.
    base_env = {k: v for k, v in os.environ.items()
                if not k.startswith("TRACEFORGE_") and k != "PYTHONDONTWRITEBYTECODE"}
    base_env["TRACEFORGE_CACHE"] = str(cache)
    tk = ("top-kernels", "@P", "--format", "json")
    # (name, code, cache state before each run: "empty" | "warm" | "any")
    cases: list[tuple[str, str, str]] = [
        ("typed msgspec decode (floor)", DECODE, "any"),
        ("cold top-kernels (parse + cache write)", verb("top_kernels", *tk, imported=False),
         "empty"),
        # The same with the file decoded in one process (no chunk workers).
        ("cold top-kernels, one process", "import os\nos.environ['TRACEFORGE_PARSE_WORKERS']"
         " = '1'\n" + verb("top_kernels", *tk, imported=False), "empty"),
        # --no-cache is a group option: it goes before the verb.
        ("cold top-kernels --no-cache", verb("top_kernels", "--no-cache", *tk,
                                             imported=False), "any"),
        ("import pandas, pyarrow (warm floor)", IMPORTS, "any"),
    ]
    # First the verb on a cached entry computes its derived tables (the timeline, the
    # ops' FLOPs, ...) and stores them; the same verb again reads them back.
    for v in SINGLE:
        args = (v, "@P", "--format", "json") if v != "top-kernels" else tk
        mod = v.replace("-", "_")
        cases.append((f"warm {v}", verb(mod, *args), "warm"))
        if v != "top-kernels":
            cases.append((f"warm {v}, tables stored", verb(mod, *args), "warm"))
    cases += [
        ("warm report (md)", verb("report", "report", "@P", "-o", "@OUT"), "warm"),
        ("warm report, tables stored", verb("report", "report", "@P", "-o", "@OUT"), "warm"),
        ("warm report html, tables stored",
         verb("report", "report", "@P", "-o", "@OUT.html"), "warm"),
        # The same again: its charts' SVGs are read back too (kept by their data).
        ("warm report html, charts stored",
         verb("report", "report", "@P", "-o", "@OUT.html"), "warm"),
    ]
    if not a.no_hta and importlib.util.find_spec("hta") is not None:
        cases.append(("HTA 0.5.0 parse + kernel breakdown", HTA, "any"))
    if a.only:
        words = a.only.split(",")
        cases = [c for c in cases if "floor" in c[0] or any(w in c[0] for w in words)]
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(REPO / "traceforge")],
                   env=base_env, check=False)
    size = trace.stat().st_size / 1e6
    print(f"trace: {trace} ({size:.1f} MB); {a.repeat} rounds of every case, median shown; "
          f"{os.cpu_count()} CPUs; python {sys.version.split()[0]}; settle {a.settle:g} GiB")
    # Round-robin (every case once per repeat), so that load from other processes on a
    # shared machine spreads over all cases instead of skewing one of them.
    samples: dict[str, list[tuple[float, float, float, float]]] = {name: [] for name, _, _ in cases}
    failed: set[str] = set()
    for _ in range(a.repeat):
        for name, code, state in cases:
            if name in failed:
                continue
            if state == "empty":
                shutil.rmtree(cache, ignore_errors=True)
            elif state == "warm" and not cache.exists():
                run_case(verb("top_kernels", *tk), trace, base_env, out)
            settle(a.settle)
            try:
                samples[name].append(run_case(code, trace, base_env, out))
            except RuntimeError as e:
                print(f"  {name}: {e}")
                failed.add(name)
    results = {
        name: (statistics.median(s[0] for s in got), statistics.median(s[1] for s in got),
               max(s[2] for s in got), statistics.median(s[3] for s in got))
        for name, got in samples.items() if got
    }
    # Peak RSS adds the command's and its workers' peaks, counting the pages they share
    # (the mapped trace, libraries) twice. Where memory cgroups can be made, each case
    # that reads the trace runs once more in one, for the peak with every page once.
    where = _cgroup_root()
    together: dict[str, float] = {}
    for name, code, state in cases:
        if where is None or state == "warm" or name not in results:
            continue
        if state == "empty":
            shutil.rmtree(cache, ignore_errors=True)
        together[name] = pages_once_peak(code, trace, base_env, out, where)
    floor = results.get("typed msgspec decode (floor)")
    hta = results.get("HTA 0.5.0 parse + kernel breakdown")
    imports = results.get("import pandas, pyarrow (warm floor)")
    cache_mb = sum(p.stat().st_size for p in cache.glob("*.arrow")) / 1e6
    derived_mb = sum(p.stat().st_size for p in cache.glob("*.derived")) / 1e6
    print(f"{'case':40} {'wall s':>7} {'CPU s':>6} {'in-proc s':>9} {'peak GiB':>8} "
          f"{'pages-once':>10} {'/ floor':>8} {'CPU /':>6} {'HTA / it':>8} {'- imports':>9}")
    for name, (w, ip, r, cpu) in results.items():
        vs = f"{w / floor[0]:.2f}x" if floor else ""
        vc = f"{cpu / floor[3]:.2f}x" if floor else ""
        # Warm cases: seconds above the import floor (pandas + pyarrow) in wall time.
        above = f"{w - imports[0]:+.2f}" if imports and name.startswith("warm") else ""
        # HTA parses and tables kernels: compared with the top-kernels cases only.
        vh = f"{hta[0] / w:.1f}x" if hta and "top-kernels" in name else ""
        once = f"{together[name]:.2f}" if name in together else ""
        print(f"{name:40} {w:7.2f} {cpu:6.2f} {ip:9.3f} {r:8.2f} {once:>10} {vs:>8} "
              f"{vc:>6} {vh:>8} {above:>9}")
    if where is None:
        print("pages-once peaks need a memory cgroup this user can make (Linux, root)")
    print(f"cache entry: {cache_mb:.1f} MB for a {size:.1f} MB trace, derived tables "
          f"{derived_mb:.1f} MB")
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
