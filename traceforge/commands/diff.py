"""``traceforge diff A B``: what changed between two runs of the same workload."""

from __future__ import annotations

import click
import pandas as pd

from traceforge.analyzers.diff import TraceDiff, diff
from traceforge.commands import values
from traceforge.commands.options import emit, format_option
from traceforge.formats import load
from traceforge.render import render_frame
from traceforge.render.frame import to_json_bytes

#: (attribute of TraceDiff, title) in the order they are shown.
SECTIONS: tuple[tuple[str, str], ...] = (
    ("summary", "Summary (b vs a)"),
    ("by_class", "GPU time per step by kernel class (us)"),
    ("by_family", "GPU time per step by kernel family (us)"),
    ("only_a", "Kernels only in A (per step)"),
    ("only_b", "Kernels only in B (per step)"),
    ("replacements", "Fused kernels in B and the A kernels their ops launched"),
    ("ops", "Operators in both runs (self GPU us per step)"),
)


def render_diff(d: TraceDiff, fmt: str, a: str, b: str, limit: int | None) -> str:
    """Every section of ``d`` in ``fmt``; JSON is one object keyed by section."""
    if fmt == "json":
        doc = {k: getattr(d, k) for k, _ in SECTIONS} | {"notes": list(d.notes)}
        return to_json_bytes(doc).decode() + "\n"
    parts = []
    for key, title in SECTIONS:
        df: pd.DataFrame = getattr(d, key)
        shown = df if limit is None or key == "summary" else df.head(limit)
        notes: tuple[str, ...] = ()
        if len(shown) < len(df):
            notes = (f"{len(df) - len(shown)} more rows (use -n 0 for all)",)
        if df.empty:
            notes = ("(none)",)
        if fmt == "csv":
            parts.append(f"# {key}\n" + render_frame(shown, "csv"))
        else:
            parts.append(render_frame(shown, fmt, title=title, notes=notes, digits=3))
    head = f"A = {a}\nB = {b}\n"
    head += f"span speedup {d.span_speedup:.2f}x, GPU time speedup {d.gpu_speedup:.2f}x\n"
    head += "".join(f"note: {n}\n" for n in d.notes) + "\n"
    return (head if fmt != "csv" else "") + "\n".join(parts)


@click.command("diff")
@click.argument("a", type=click.Path(dir_okay=True, path_type=str))
@click.argument("b", type=click.Path(dir_okay=True, path_type=str))
@click.option("-n", "limit", type=values.COUNT, default=15, show_default=True,
              help="Rows per table (0: all).")
@format_option
def command(a: str, b: str, limit: int, fmt: str) -> None:
    """Compare two runs (eager vs compiled, FA2 vs SDPA, before vs after), any formats."""
    d = diff(load(a), load(b))
    emit(render_diff(d, fmt, a, b, None if limit <= 0 else limit))
