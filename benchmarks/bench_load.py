"""Cold `traceforge top-kernels` on a large Kineto trace, side by side with baselines.

Every case runs in a fresh subprocess (cold: imports, file read, parse, analysis), so wall
time and peak RSS (from the child's rusage) are comparable. Ratios are printed against the
typed-decode baseline (msgspec decoding only the fields an analysis needs, args left raw)
and against HTA 0.5.0 when it is installed.

    python benchmarks/bench_load.py [--trace big.json] [--repeat 3] [--json-stdlib]

Without --trace, builds benchmarks/out/big.json (~280 MB) from fixtures/eager.pt.trace.json.gz.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent

CASES: dict[str, str] = {
    "read bytes": "open(P, 'rb').read()",
    "orjson.loads": "import orjson; orjson.loads(open(P, 'rb').read())",
    "json.loads": "import json; json.loads(open(P, 'rb').read())",
    "typed decode (baseline)": """
import msgspec
class E(msgspec.Struct, gc=False):
    ph: str = ""; cat: str = ""; name: str = ""
    pid: int | str = 0; tid: int | str = 0
    ts: float | None = None; dur: float | None = None
    args: msgspec.Raw = msgspec.Raw()
class D(msgspec.Struct, gc=False):
    traceEvents: list[E] = []
msgspec.json.decode(open(P, 'rb').read(), type=D)
""",
    "traceforge top-kernels": (
        "import sys; from traceforge.cli import main; "
        "sys.argv=['traceforge','top-kernels',P,'--format','json']; "
        "import io, contextlib\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        "    try: main()\n"
        "    except SystemExit: pass"
    ),
    "HTA 0.5.0 parse + kernel breakdown": """
import os, shutil, tempfile, warnings
warnings.filterwarnings('ignore')
from hta.trace_analysis import TraceAnalysis
d = tempfile.mkdtemp()
os.symlink(os.path.abspath(P), os.path.join(d, 'rank-0.json'))
a = TraceAnalysis(trace_dir=d)
a.get_gpu_kernel_breakdown(visualize=False)
shutil.rmtree(d)
""",
}


def run_case(code: str, trace: Path) -> tuple[float, float, int]:
    """(wall seconds, peak RSS GiB, exit code) of one fresh interpreter running ``code``."""
    prog = f"P = {str(trace)!r}\n{code}"
    t0 = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-c", prog], cwd=REPO,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    return wall, usage.ru_maxrss / 2**20, os.waitstatus_to_exitcode(status)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trace", type=Path)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--json-stdlib", action="store_true", help="also time json.loads (slow)")
    ap.add_argument("--no-hta", action="store_true")
    a = ap.parse_args()
    trace = a.trace
    if trace is None:
        trace = HERE / "out" / "big.json"
        if not trace.exists():
            trace.parent.mkdir(exist_ok=True)
            subprocess.run([sys.executable, str(HERE / "make_big_trace.py"),
                            str(REPO / "fixtures" / "eager.pt.trace.json.gz"), str(trace)],
                           check=True)
    cases = dict(CASES)
    if not a.json_stdlib:
        cases.pop("json.loads")
    if a.no_hta or importlib.util.find_spec("hta") is None:
        cases.pop("HTA 0.5.0 parse + kernel breakdown")
    size = trace.stat().st_size / 1e6
    print(f"trace: {trace} ({size:.1f} MB), {a.repeat} cold runs each, median shown")
    results: dict[str, tuple[float, float]] = {}
    for name, code in cases.items():
        walls, rss = [], []
        for _ in range(a.repeat):
            w, r, rc = run_case(code, trace)
            if rc != 0:
                print(f"  {name}: exit code {rc}")
                break
            walls.append(w)
            rss.append(r)
        if walls:
            results[name] = (statistics.median(walls), max(rss))
    base = results.get("typed decode (baseline)")
    hta = results.get("HTA 0.5.0 parse + kernel breakdown")
    print(f"{'case':38} {'wall s':>8} {'peak GiB':>9} {'vs typed':>9} {'HTA / it':>9}")
    for name, (w, r) in results.items():
        vs = f"{w / base[0]:.2f}x" if base else ""
        vh = f"{hta[0] / w:.1f}x" if hta else ""
        print(f"{name:38} {w:8.2f} {r:9.2f} {vs:>9} {vh:>9}")


if __name__ == "__main__":
    main()
