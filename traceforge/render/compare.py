"""How a :class:`~traceforge.analyzers.compare.Comparison` is shown: the runs table, the
class and family tables lined up run by run, a comparison chart and a Markdown/HTML
report."""

from __future__ import annotations

import html
from pathlib import Path

import numpy as np
import pandas as pd

from traceforge.analyzers.compare import Comparison
from traceforge.render.figures import (
    drop_empty,
    html_page,
    html_section,
    md_section,
    new_figure,
    save_figure,
    svg_inline,
    write_text,
)
from traceforge.render.frame import render_frame, to_json_bytes

#: Table names (``--table``) and titles, in the order they are shown.
TABLES: tuple[tuple[str, str], ...] = (
    ("runs", "Runs (per step, per GPU; speedup = baseline / run)"),
    ("classes", "GPU time per step by vendor-neutral class (ms)"),
    ("families", "GPU time per step by vendor-neutral family (ms) and the library per run"),
    ("counts", "GPU activities (kernels, copies, memsets) per step by class"),
)

_NOTE = ("times: GPU activity launched in the steps, durations summed, per step and per GPU "
         "(mean over ranks); step_ms: slowest rank's mean host step; latency/hz/peak from "
         "capture summaries (unprofiled steps)")


def tables(c: Comparison) -> dict[str, pd.DataFrame]:
    """The display tables by name. JSON and CSV use the long tables instead."""
    fam = c.wide("by_family")
    libs = c.by_family.pivot_table(index=["class", "family"], columns="run", values="library",
                                   aggfunc="first", sort=False)
    for lab in c.labels:
        col = libs[lab] if lab in libs else pd.Series(dtype=object)
        pos = list(fam.columns).index(f"{lab} ms")
        fam.insert(pos, f"{lab} library", col.reindex(
            pd.MultiIndex.from_frame(fam[["class", "family"]])).fillna("").to_numpy())
    return {"runs": drop_empty(c.runs), "classes": c.wide("by_class"), "families": fam,
            "counts": c.wide("by_class", "calls")}


def render_compare(c: Comparison, fmt: str, table: str | None = None) -> str:
    """The comparison in ``fmt``: JSON one object of long tables; CSV the long tables
    (``table`` picks one); table and md the wide, lined-up tables."""
    if fmt == "json" and table is None:
        return to_json_bytes({"baseline": c.baseline, "runs": c.runs, "by_class": c.by_class,
                              "by_family": c.by_family, "steps_from": c.step_sources,
                              "notes": list(c.notes)}).decode() + "\n"
    shown = tables(c) if fmt in ("table", "md") else {
        "runs": c.runs, "classes": c.by_class, "families": c.by_family,
        "counts": c.by_class[["class", "run", "calls"]]}
    parts = []
    for key, title in TABLES:
        if table is not None and key != table:
            continue
        if fmt in ("csv", "json") and table is None and key == "counts":
            continue  # the long class table already holds the counts
        notes: tuple[str, ...] = ()
        if fmt in ("table", "md") and key == "runs":
            notes = (f"baseline: {c.baseline}", _NOTE, *c.notes)
        parts.append(render_frame(shown[key], fmt, title=title, digits=3, notes=notes))
    return "\n".join(parts)


def compare_chart(c: Comparison, stem: Path) -> list[Path]:
    """Grouped bars of GPU time per step by neutral class, one bar per run, beside the
    runs' step-time speedups against the baseline; PNG and SVG."""
    w = c.wide("by_class")
    cols = [f"{lab} ms" for lab in c.labels]
    w = w[(w[cols] > 0).any(axis=1)]
    fig, (ax, bx) = new_figure(11.0, max(3.0, 0.45 * len(w) + 1.5), cols=2,
                              widths=(3, 1))
    y = np.arange(len(w))
    h = 0.8 / max(1, len(c.labels))
    for i, lab in enumerate(c.labels):
        ax.barh(y + i * h, w[f"{lab} ms"], height=h, label=lab)
    ax.set_yticks(y + h * (len(c.labels) - 1) / 2, w["class"].tolist())
    ax.invert_yaxis()
    ax.set_xlabel("GPU time per step (ms, per GPU)")
    ax.legend(fontsize=8)
    ax.grid(axis="x", alpha=0.3)
    runs = c.runs
    sp = runs["speedup"].fillna(0.0).to_numpy(dtype=float)
    bx.bar(np.arange(len(runs)), sp, color=[f"C{i}" for i in range(len(runs))])
    bx.axhline(1.0, color="black", linewidth=0.8)
    bx.set_xticks(np.arange(len(runs)), runs["run"].tolist(), rotation=20, ha="right")
    bx.set_ylabel(f"step-time speedup vs {c.baseline}")
    for i, v in enumerate(sp):
        bx.annotate(f"{v:.2f}x", (i, v), ha="center", va="bottom", fontsize=8)
    return save_figure(fig, stem)


def compare_report(c: Comparison, path: Path) -> list[Path]:
    """A Markdown (``.md``) or HTML (``.html``) comparison report with the chart (written
    beside it as PATH-STEM.compare.png/.svg); returns every file written."""
    charts = compare_chart(c, path.with_name(f"{path.stem}.compare"))
    shown = tables(c)
    title = f"traceforge compare: {' vs '.join(c.labels)}"
    notes = {"runs": (f"baseline: {c.baseline}", _NOTE, *c.notes)}
    if path.suffix == ".html":
        body = svg_inline(charts[1]) + "".join(
            html_section(t, shown[k], digits=3, notes=notes.get(k, ())) for k, t in TABLES)
        text = html_page(title, body)
    else:
        text = f"# {title}\n\n![comparison]({html.escape(charts[0].name)})\n\n" + "\n".join(
            md_section(t, shown[k], digits=3, notes=notes.get(k, ())) for k, t in TABLES)
    write_text(path, text)
    return [path, *charts]
