"""Every file under shared/fixtures either loads or is refused in one clear line.

Trace files must load; summaries, sidecars and docs must raise TraceFormatError (never
another exception, never a partial silent result).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import SHARED
from traceforge import load
from traceforge.errors import TraceFormatError

# Not traces: documentation, latency tables, TraceLens sidecars, summaries (stats CSVs,
# nsys stats CSVs), rocminfo dumps, and the nsys-rep (needs nsys, absent here).
NOT_TRACES = (
    ".md", "latency", "execution_details.json", "sysinfo.txt", "stats.csv", "_stats_",
    "pipit/nbody-nvtx/trace.csv", "counter_collection.csv", "kernel_names.csv",
    "hip_api_stats.csv", "nsys-rep",
)


def _files() -> list[Path]:
    if not SHARED.exists():
        return []
    return sorted(p for p in SHARED.rglob("*") if p.is_file())


def _is_trace(p: Path) -> bool:
    s = str(p)
    return not any(m in s for m in NOT_TRACES)


@pytest.mark.parametrize("path", _files(), ids=lambda p: str(p.relative_to(SHARED)))
def test_loads_or_is_refused_in_one_line(path: Path) -> None:
    if _is_trace(path):
        t = load(path)
        assert len(t.events) > 0
        assert (t.events["dur"] >= 0).all()
        return
    with pytest.raises(TraceFormatError) as e:
        load(path)
    assert "\n" not in str(e.value) and str(path) in str(e.value)


@pytest.mark.parametrize("path", [p for p in _files() if _is_trace(p)],
                         ids=lambda p: str(p.relative_to(SHARED)))
def test_timeline_analyses_run_on_every_trace(path: Path) -> None:
    # What ops, launch, idle, info, breakdown, overlap and diff compute, on every real
    # trace (loaded once): a result or an AnalysisError, never another exception.
    import dataclasses

    import pandas as pd

    import traceforge as tf
    from traceforge.analyzers.timing.summary import summary
    from traceforge.errors import AnalysisError
    from traceforge.render import render_frame
    from traceforge.render.diff import render_diff

    t = load(path)
    for fn in (tf.ops, tf.launch_overhead, tf.idle_gaps, summary, tf.breakdown, tf.overlap,
               lambda x: render_diff(tf.diff(x, x), "table", "a", "b", None)):
        try:
            res = fn(t)
        except AnalysisError as e:
            assert "\n" not in str(e)
            continue
        frames = [res] if isinstance(res, pd.DataFrame) else [
            getattr(res, f.name) for f in dataclasses.fields(res)
        ] if dataclasses.is_dataclass(res) else []
        for df in frames:
            if isinstance(df, pd.DataFrame):
                render_frame(df.head(50), "table")
