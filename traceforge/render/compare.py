"""How a :class:`~traceforge.analyzers.runs.compare.Comparison` is shown: the runs table, the
class and family tables lined up run by run (printed by the command), its JSON object, a
comparison chart and a Markdown/HTML report."""

from __future__ import annotations

import html
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from traceforge.analyzers.runs.compare import Comparison
from traceforge.render.figures import (
    NO_CHARTS,
    charts_available,
    drop_empty,
    html_page,
    html_section,
    md_section,
    new_figure,
    save_figure,
    svg_inline,
    write_text,
)
from traceforge.render.tables import Table
from traceforge.render.text import display, plain

#: The table names (``--table``), in the order they are shown.
TABLE_NAMES: tuple[str, ...] = ("runs", "classes", "families", "counts", "comm")

_NOTE = ("times: GPU activity launched in the steps, durations summed, per step and per GPU "
         "(mean over ranks); step_ms: slowest rank's mean host step; latency_ms: the run's "
         "step time from its capture summaries (latency_from says over which steps), "
         "hz/samples/tokens per s from it")


def compare_tables(c: Comparison, *, wide: bool = True) -> list[Table]:
    """The comparison's tables: ``wide``, runs lined up column by column (table and md
    output, the report); else the long tables, one row per run (JSON and CSV)."""
    if wide:
        fam = c.wide("by_family")
        libs = c.by_family.pivot_table(index=["class", "family"], columns="run",
                                       values="library", aggfunc="first", sort=False)
        for lab in c.labels:
            col = libs[lab] if lab in libs else pd.Series(dtype=object)
            pos = list(fam.columns).index(f"{lab} ms")
            fam.insert(pos, f"{lab} library", col.reindex(
                pd.MultiIndex.from_frame(fam[["class", "family"]])).fillna("").to_numpy())
        frames = (drop_empty(c.runs), c.wide("by_class"), fam, c.wide("by_class", "calls"))
    else:
        frames = (c.runs, c.by_class, c.by_family, c.by_class[["class", "run", "calls"]])
    runs, classes, families, counts = frames
    return [
        Table("runs", runs, "Runs (per step, per GPU; speedup = baseline / run)",
              (f"baseline: {c.baseline}", _NOTE, *c.notes), digits=3),
        Table("classes", classes, "GPU time per step by vendor-neutral class (ms)", digits=3),
        Table("families", families, "GPU time per step by vendor-neutral family (ms) and the "
                                    "library per run", digits=3),
        Table("counts", counts, "GPU activities (kernels, copies, memsets) per step by class",
              digits=3),
        Table("comm", c.comm, "Collective bus bandwidth by kind (GB/s, nccl-tests; NCCL and "
                              "RCCL lined up)", () if len(c.comm) else ("(none)",)),
    ]


def compare_document(c: Comparison) -> dict[str, Any]:
    """The JSON object of ``traceforge compare``: the long tables and the runs' step
    sources."""
    return {"baseline": c.baseline, "runs": c.runs, "by_class": c.by_class,
            "by_family": c.by_family, "comm": c.comm, "steps_from": c.step_sources,
            "notes": list(c.notes)}


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
        ax.barh(y + i * h, w[f"{lab} ms"], height=h, label=display(lab, 60))
    ax.set_yticks(y + h * (len(c.labels) - 1) / 2, w["class"].tolist())
    ax.invert_yaxis()
    ax.set_xlabel("GPU time per step (ms, per GPU)")
    ax.legend(fontsize=8)
    ax.grid(axis="x", alpha=0.3)
    runs = c.runs
    sp = runs["speedup"].fillna(0.0).to_numpy(dtype=float)
    bx.bar(np.arange(len(runs)), sp, color=[f"C{i}" for i in range(len(runs))])
    bx.axhline(1.0, color="black", linewidth=0.8)
    bx.set_xticks(np.arange(len(runs)), [display(r, 60) for r in runs["run"]], rotation=20,
                  ha="right")
    bx.set_ylabel(display(f"step-time speedup vs {c.baseline}", 80))
    for i, v in enumerate(sp):
        bx.annotate(f"{v:.2f}x", (i, v), ha="center", va="bottom", fontsize=8)
    return save_figure(fig, stem)


def compare_report(c: Comparison, path: Path) -> list[Path]:
    """A Markdown (``.md``) or HTML (``.html``) comparison report with the chart (written
    beside it as PATH-STEM.compare.png/.svg); returns every file written."""
    # Without matplotlib the report is written without its chart, saying what adds it.
    charts = (compare_chart(c, path.with_name(f"{path.stem}.compare"))
              if charts_available() else [])
    shown = compare_tables(c)
    title = f"traceforge compare: {' vs '.join(c.labels)}"
    if path.suffix == ".html":
        chart = (svg_inline(charts[1]) if charts
                 else f'<p class="note">{html.escape(NO_CHARTS)}</p>\n')
        body = chart + "".join(
            html_section(t.title, t.frame, digits=t.digits, notes=t.notes) for t in shown)
        text = html_page(title, body)
    else:
        chart = (f"![comparison]({html.escape(charts[0].name)})" if charts else f"_{NO_CHARTS}_")
        text = f"# {plain(title)}\n\n{chart}\n\n" + "\n".join(
            md_section(t.title, t.frame, digits=t.digits, notes=t.notes) for t in shown)
    write_text(path, text)
    return [path, *charts]
