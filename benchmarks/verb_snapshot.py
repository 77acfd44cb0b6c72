"""Before/after proof for refactors: every read-only verb over a set of traces, hashed.

Runs each verb in one process (click's runner, so Python and pandas load once) with
``--format json`` where the verb has it, plus ``report -o x.md``, ``convert`` and
``annotate`` to JSON (the written file is hashed), ``diff``/``compare`` of trace pairs.
For each case it records the exit code and SHA-256 of stdout, stderr and any file
written (the temporary directory's path is replaced by ``<TMP>`` first), one line a case,
in a digest file. The parse cache is pointed at a fresh temporary directory.

    python benchmarks/verb_snapshot.py -o before.txt           # on the old tree
    python benchmarks/verb_snapshot.py -o after.txt            # on the new tree
    python benchmarks/verb_snapshot.py --compare before.txt after.txt

``--compare`` lists the cases whose outputs differ (exit 1 if any). Traces missing on
this machine (the shared fixtures) are skipped and named in the digest's header, so two
digests taken on one machine compare case by case. A refactor that moves code without
changing behaviour must leave every line the same.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared" / "fixtures"

#: Single traces (relative to the repository, or "shared:" for ../shared/fixtures).
TRACES = [
    "fixtures/eager.pt.trace.json.gz",
    "fixtures/compiled.pt.trace.json.gz",
    "fixtures/fa2.pt.trace.json.gz",
    "fixtures/sdpa.pt.trace.json.gz",
    "fixtures/capture_h100.policy_infer.eager.pt.trace.json.gz",
    "fixtures/h200-graphs/cudagraphs.pt.trace.json.gz",
    "fixtures/capture_h200x2.ddp_train.sdpa.rank0.pt.trace.json.gz",
    "shared:h200-nsys/policy_fa2.sqlite.gz",
    "shared:h200-ddp",
    "shared:external/hta/amd_trace/mi250_minitoy_train_ROCm6_2_kineto.json.gz",
    "shared:external/hta/critical_path/simple_add/benchmark_result_493459_1694039959_trace.json.gz",
    "shared:external/hta/critical_path/cuda_event_sync_multi_stream/event_sync_trace.json.gz",
    "shared:external/hta/cpu_only/rank-34.Jul_15_10_52_41.1074.pt.trace.json.gz",
    "shared:external/kokkos_rocprof/6f0a1c4a/results.db",
    "shared:external/rocprofiler-sdk",
    "shared:external/hpctrainingexamples/finite-difference/results.db",
    "shared:external/aorta/smci350-zts-gtu-c6-25_200691.1758927066581847260.pt.trace.json",
]
#: Pairs for the two-run verbs (diff, compare).
PAIRS = [
    ("fixtures/eager.pt.trace.json.gz", "fixtures/compiled.pt.trace.json.gz"),
    ("fixtures/fa2.pt.trace.json.gz", "fixtures/sdpa.pt.trace.json.gz"),
    ("shared:external/hta/trace_diff/control/control.json.gz",
     "shared:external/hta/trace_diff/test/test.json.gz"),
]
JSON_VERBS = ["info", "top-kernels", "ops", "idle", "overlap", "breakdown", "launch",
              "critical-path", "roofline", "mfu"]


def _path(name: str) -> Path:
    return SHARED / name.removeprefix("shared:") if name.startswith("shared:") else REPO / name


def _cases(tmp: Path) -> Iterator[tuple[str, list[str], Path | None]]:
    """(case name, argv, file the verb writes or None)."""
    for name in TRACES:
        p = str(_path(name))
        for verb in JSON_VERBS:
            yield f"{verb} {name}", [verb, p, "--format", "json"], None
        out = tmp / "report.md"
        yield f"report-md {name}", ["report", p, "-o", str(out)], out
        out = tmp / "converted.json"
        yield f"convert-json {name}", ["convert", p, str(out)], out
        out = tmp / "annotated.json"
        yield f"annotate-json {name}", ["annotate", p, "-o", str(out)], out
    for a, b in PAIRS:
        pa, pb = str(_path(a)), str(_path(b))
        yield f"diff {a} {b}", ["diff", pa, pb, "--format", "json"], None
        yield f"compare {a} {b}", ["compare", pa, pb, "--format", "json"], None


def _digest(data: bytes, tmp: Path) -> str:
    data = data.replace(str(tmp).encode(), b"<TMP>")
    return hashlib.sha256(data).hexdigest()[:16]


def snapshot(out: Path, only: str | None) -> int:
    from click.testing import CliRunner

    tmp = Path(tempfile.mkdtemp(prefix="tf-snap-"))
    os.environ["TRACEFORGE_CACHE"] = str(tmp / "cache")
    from traceforge.cli import cli

    lines = [f"# missing: {n}" for n in TRACES if not _path(n).exists()]
    runner = CliRunner()
    for case, argv, written in _cases(tmp):
        if only and only not in case:
            continue
        if not Path(argv[1]).exists():
            continue
        if written is not None and written.exists():
            written.unlink()
        r = runner.invoke(cli, argv, catch_exceptions=True)
        err = r.stderr_bytes or b""
        exc = "" if r.exception is None or isinstance(r.exception, SystemExit) else (
            f" exc={type(r.exception).__name__}:{_digest(str(r.exception).encode(), tmp)}")
        file_hash = _digest(written.read_bytes(), tmp) if written and written.exists() else "-"
        lines.append(f"{case}\trc={r.exit_code}{exc}\tout={_digest(r.stdout_bytes, tmp)}"
                     f"\terr={_digest(err, tmp)}\tfile={file_hash}")
        print(lines[-1], file=sys.stderr)
    out.write_text("\n".join(lines) + "\n")
    return 0


def compare(a: Path, b: Path) -> int:
    def load(p: Path) -> dict[str, str]:
        rows = [ln.split("\t", 1) for ln in p.read_text().splitlines() if not ln.startswith("#")]
        return {r[0]: r[1] if len(r) > 1 else "" for r in rows}

    da, db = load(a), load(b)
    differ = [c for c in da if c in db and da[c] != db[c]]
    only = sorted(set(da) ^ set(db))
    for c in differ:
        print(f"DIFFERS {c}\n  {da[c]}\n  {db[c]}")
    for c in only:
        print(f"ONLY IN {'A' if c in da else 'B'}: {c}")
    print(f"{len(set(da) & set(db)) - len(differ)} identical, {len(differ)} differ, "
          f"{len(only)} in one digest only")
    return 1 if differ or only else 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("-o", "--out", type=Path, default=Path("verb_snapshot.txt"))
    ap.add_argument("--only", help="run only the cases whose name contains this")
    ap.add_argument("--compare", nargs=2, type=Path, metavar=("A", "B"))
    args = ap.parse_args()
    if args.compare:
        return compare(*args.compare)
    return snapshot(args.out, args.only)


if __name__ == "__main__":
    sys.exit(main())
