"""A multi-rank run: one trace file per rank, read in parallel and ordered by rank.

Ranks come from each file's ``distributedInfo`` (``meta.rank``), else from the file name
(``rank3``, ``rank-3``, ``rank_3``, ``worker3``: HTA takes the first ``"rank": N`` it finds
and falls back to rank 0, so two rank-less files silently collide there, HTA#107).

A folder is read at its top level only (:mod:`traceforge.formats.folder`): run summaries,
latency tables and other companions are skipped with a note on the first rank's
``meta.notes``, subfolders are never walked into. A rocprofv3 output folder is one trace
of all its processes, split per process like a multi-process nsys report.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import replace
from pathlib import Path

from traceforge.errors import AnalysisError, TraceFormatError
from traceforge.formats import load, resolve, rocprof
from traceforge.formats.folder import scan
from traceforge.formats.nsys import split_processes
from traceforge.model import Trace

_RANK_IN_NAME = re.compile(r"(?:rank|worker)[-_]?(\d+)", re.IGNORECASE)


def rank_from_name(path: str | Path) -> int | None:
    """The rank a file name states (``worker3_step_12...``, ``rank-0.Apr...``), if any."""
    m = _RANK_IN_NAME.search(Path(path).name)
    return int(m.group(1)) if m else None


def _files(paths: Sequence[str | Path] | str | Path) -> tuple[list[Path], str | None]:
    """The files of a run and a note on what a folder held besides them."""
    if not isinstance(paths, (str, Path)):
        return [resolve(x) for x in paths], None
    p = resolve(paths)
    if not p.exists():
        raise TraceFormatError(p, "no such file or directory")
    if not p.is_dir() or rocprof.sniff(p, b""):
        return [p], None
    found = scan(p)
    if not found.files:
        raise TraceFormatError(p, "directory holds no trace files at its top level "
                               f"(subfolders are not read; {found.note() or 'it is empty'})")
    return list(found.files), found.note()


def _load_all(files: list[Path], workers: int | None) -> list[Trace]:
    n = min(len(files), workers or os.cpu_count() or 1)
    if n <= 1:
        return [load(f) for f in files]
    # Parsing is CPU-bound and holds the GIL: one process per file. Errors come back
    # pickled (every TraceforgeError pickles); a worker that dies (out of memory, a
    # signal) breaks the pool, which is reported naming the files, not as an internal
    # error.
    try:
        with ProcessPoolExecutor(max_workers=n) as pool:
            return list(pool.map(load, files))
    except BrokenProcessPool:
        raise AnalysisError(
            f"{', '.join(map(str, files))}: a reader process died (out of memory?); "
            "read them one at a time") from None


def load_run(paths: Sequence[str | Path] | str | Path, *, workers: int | None = None
             ) -> list[Trace]:
    """Read the traces of one run (a directory or a list of files), sorted by rank.

    A single file holding several processes with GPU work (an nsys report of torchrun)
    is split into one trace per process (:func:`traceforge.formats.nsys.split_processes`).

    Files are parsed in a process pool when there are several (parsing is CPU-bound and
    holds the GIL). Raises AnalysisError naming the files when two claim the same rank or
    when the files come from different runs (different world sizes or NCCL versions).
    """
    files, note = _files(paths)
    if len(files) == 1:
        traces = [load(files[0])]
        t0 = traces[0]
        if t0.meta.rank is None and (t0.meta.world_size or 0) > 1:
            # One report of several processes (torchrun under nsys, a merged rocpd
            # database, a rocprofv3 folder): one trace per process, ranks as the reader
            # numbered them.
            traces = split_processes(t0)
            files = files * len(traces)
    else:
        traces = _load_all(files, workers)
    ranked: list[tuple[int, Trace]] = []
    for f, t in zip(files, traces, strict=True):
        r = t.meta.rank if t.meta.rank is not None else rank_from_name(f)
        if r is None:
            r = 0 if len(files) == 1 else None
        if r is None:
            raise AnalysisError(f"{f}: no rank in distributedInfo or in the file name")
        if t.meta.rank is None:
            t = replace(t, meta=replace(t.meta, rank=r))
            t.events["rank"] = r
        ranked.append((r, t))
    _check_one_run(ranked)
    ranked.sort(key=lambda x: x[0])
    out = [t for _, t in ranked]
    if note:
        out[0] = replace(out[0], meta=replace(out[0].meta, notes=(*out[0].meta.notes, note)))
    return out


def _check_one_run(ranked: list[tuple[int, Trace]]) -> None:
    seen: dict[int, str] = {}
    for r, t in ranked:
        if r in seen:
            raise AnalysisError(f"{seen[r]} and {t.meta.path} both claim rank {r}")
        seen[r] = t.meta.path
    for key in ("world_size", "nccl_version", "backend"):
        vals = {t.meta.path: t.meta.distributed.get(key) for _, t in ranked
                if t.meta.distributed.get(key) is not None}
        if len(set(map(str, vals.values()))) > 1:
            a, b = _two_different(vals)
            raise AnalysisError(
                f"{a} and {b} come from different runs ({key} {vals[a]} vs {vals[b]})")


def _two_different(vals: dict[str, object]) -> tuple[str, str]:
    items = list(vals.items())
    first = items[0]
    other = next(k for k, v in items if str(v) != str(first[1]))
    return first[0], other
