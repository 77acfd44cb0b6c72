"""How a :class:`~traceforge.analyzers.runs.diff.TraceDiff` is shown: the one list of its
sections, used by ``traceforge diff`` and by both report formats."""

from __future__ import annotations

import pandas as pd

from traceforge.analyzers.runs.diff import TraceDiff
from traceforge.render.frame import render_frame

#: (attribute of TraceDiff, title, rows shown in a report) in the order they are shown.
SECTIONS: tuple[tuple[str, str, int], ...] = (
    ("summary", "Summary (b vs a)", 100),
    ("by_class", "GPU time per step by kernel class (us)", 20),
    ("by_neutral", "GPU time per step by vendor-neutral family (us)", 15),
    ("by_family", "GPU time per step by kernel family (us)", 15),
    ("replacements", "Fused kernels in B and the A kernels their ops launched", 10),
    ("only_a", "Kernels only in A (per step)", 10),
    ("only_b", "Kernels only in B (per step)", 10),
    ("ops", "Operators in both runs (self GPU us per step)", 10),
    ("comm", "Collective bus bandwidth by kind (GB/s, nccl-tests; ratio = B / A)", 10),
)


def diff_doc(d: TraceDiff) -> dict[str, object]:
    """The diff as one JSON-ready object keyed by section, with ratios and step sources."""
    return {k: getattr(d, k) for k, _, _ in SECTIONS} | {
        "step_time_speedup": d.step_time_speedup, "gpu_time_speedup": d.gpu_time_speedup,
        "span_ratio": d.span_ratio, "steps_from": list(d.step_sources), "notes": list(d.notes)}


def render_diff(d: TraceDiff, fmt: str, a: str, b: str, limit: int | None) -> str:
    """Every section of ``d`` as a terminal table or Markdown (``fmt``), under a head that
    names the runs and the three ratios; ``limit`` rows per section (the summary whole).
    JSON and CSV go through :func:`diff_doc` and the sections one at a time."""
    parts = []
    for key, title, _ in SECTIONS:
        df: pd.DataFrame = getattr(d, key)
        shown = df if limit is None or key == "summary" else df.head(limit)
        notes: tuple[str, ...] = ()
        if len(shown) < len(df):
            notes = (f"{len(df) - len(shown)} more rows (use -n 0 for all)",)
        if df.empty:
            notes = ("(none)",)
        parts.append(render_frame(shown, fmt, title=title, notes=notes, digits=3))
    head = f"A = {a}  (steps from {d.step_sources[0]})\nB = {b}  (steps from {d.step_sources[1]})\n"
    head += d.headline() + "\n"
    head += "".join(f"note: {n}\n" for n in d.notes) + "\n"
    if fmt == "table":
        from traceforge.render.terminal import wrap

        head = wrap(head)
    return head + "\n".join(parts)
