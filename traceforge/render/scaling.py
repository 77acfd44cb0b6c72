"""How a :class:`~traceforge.analyzers.runs.scaling.ScalingReport` is shown: its tables (for
every format, printed by the command), its JSON object, the two charts (efficiency vs
GPUs, stacked loss bars) and a Markdown/HTML report."""

from __future__ import annotations

import html
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from traceforge.analyzers.runs.scaling import TERMS, ScalingReport
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
    svg_string,
    write_text,
)
from traceforge.render.tables import Table

#: The table names (``--table``), in the order they are shown.
TABLE_NAMES: tuple[str, ...] = ("runs", "losses", "ranks", "fit")

_TERM_NOTE = ("terms (each rank's step minus s x the reference run's rank mean, s = 1 weak, "
              "N0/N strong): compute; exposed_comm = exposed communication outside straggler "
              "wait; straggler_wait = exposed time a collective waited for the last rank to "
              "start it; idle; memory = exposed copies/memsets; imbalance = slowest rank's "
              "step - this rank's; residual = host step time outside the GPU windows + "
              "unrecorded. They add up to growth = T(N) - T_ideal(N); points = ms / T(N) x 100 "
              "add up to 100 - efficiency")

_FIT_NOTE = ("amdahl: S(n) = 1/(f + (1-f)/n); gustafson (weak only): S(n) = n - f(n-1); "
             "n = N/N0; least squares over the runs with n > 1; projected at 2x the largest "
             "count")


_COMM_NOTE = ("busbw = sum of bytes x nccl-tests factor / sum of synchronized collective "
              "times; bandwidth_ms = exposed_comm_ms x (1 - busbw / ceiling), at_link_ms "
              "the rest; wait_ms = straggler wait (as in losses); per step, mean of ranks")


def scaling_tables(r: ScalingReport, *, mark_empty: bool = True) -> list[Table]:
    """The report's display tables (NaN-only columns dropped), titled, with notes on what
    each holds and how it is computed; ``mark_empty`` adds "(none)" to an empty one's
    notes (as the CLI and the Markdown report show it)."""
    ml = r.mean_losses()
    eff = r.runs.set_index("gpus")["efficiency_pct"]
    losses = ml[["gpus", "step_ms", "growth_ms"]].assign(
        efficiency_pct=eff.reindex(ml["gpus"]).to_numpy())
    for t in TERMS:
        losses[f"{t}_pts"] = ml[f"{t}_pts"].to_numpy()
    per_rank = r.losses[r.losses["rank"] >= 0]
    ranks = per_rank[["gpus", "rank", "step_ms", "growth_ms", *(f"{t}_ms" for t in TERMS)]]
    out = [
        Table("runs", drop_empty(r.runs), "Scaling per GPU count",
              (r.formula, f"steps from {r.step_source}", *r.notes)),
        Table("losses", losses.reset_index(drop=True),
              "Where the efficiency went (mean over ranks; efficiency points lost)",
              (_TERM_NOTE,)),
        Table("ranks", ranks.reset_index(drop=True),
              "Loss terms per rank (ms per step over ideal)"),
        Table("fit", r.fit, "Serial fraction fit and projection", (_FIT_NOTE,), digits=4),
    ]
    if len(r.comm) and (r.comm["collectives"] > 0).any():
        out.append(Table("comm", r.comm, "Communication per step: bandwidth (busbw below "
                         "the link) and wait (skew)", (_COMM_NOTE,)))
    if mark_empty:
        out = [replace(t, notes=(*t.notes, "(none)")) if t.frame.empty else t for t in out]
    return out


def scaling_document(r: ScalingReport) -> dict[str, Any]:
    """The JSON object of ``traceforge scaling``: the full frames and the chart data."""
    return {"weak": r.weak, "formula": r.formula, "steps_from": r.step_source,
            "runs": r.runs, "losses": r.losses, "ranks": r.ranks, "fit": r.fit,
            "chart": r.chart_data(), "comm": r.comm, "notes": list(r.notes)}


def scaling_chart(r: ScalingReport, stem: Path) -> list[Path]:
    """:func:`scaling_figure` written as ``STEM.png`` and ``STEM.svg``."""
    return save_figure(scaling_figure(r), stem)


def scaling_svg(r: ScalingReport) -> str:
    """:func:`scaling_figure` as an ``<svg>`` element, for an HTML report."""
    return svg_string(scaling_figure(r))


def scaling_figure(r: ScalingReport) -> Any:
    """Efficiency vs GPUs (measured, ideal, fitted models and their projection) beside
    stacked bars of the mean efficiency points lost per term."""
    data = r.chart_data()
    fig, (ax, bx) = new_figure(11.0, 4.2, cols=2)
    meas = data[~data["projected"]]
    gpus = data["gpus"].to_numpy(dtype=float)
    ax.axhline(100.0, color="#999", linestyle="--", linewidth=1, label="ideal")
    for model, style in (("amdahl", ":"), ("gustafson", "-.")):
        col = f"{model}_pct"
        if col in data:
            ax.plot(gpus, data[col], linestyle=style, marker="", label=f"{model} fit")
            ax.plot(gpus[-1:], data[col].to_numpy()[-1:], marker="o", fillstyle="none",
                    linestyle="", color=ax.lines[-1].get_color())
    ax.plot(meas["gpus"], meas["efficiency_pct"], marker="o", linewidth=2, label="measured")
    ax.set_xscale("log", base=2)
    ax.set_xticks(gpus, [f"{int(g)}" for g in gpus])
    ax.set_xlabel("GPUs")
    ax.set_ylabel("scaling efficiency (%)")
    ax.set_ylim(0, max(110.0, float(np.nanmax(meas["efficiency_pct"])) + 5))
    ax.set_title("weak scaling" if r.weak else "strong scaling", fontsize=10, loc="right")
    ax.legend(fontsize=8, loc="lower left")
    ax.grid(alpha=0.3)
    x = np.arange(len(meas))
    pos = np.zeros(len(meas))
    neg = np.zeros(len(meas))
    for t in TERMS:
        v = meas[f"{t}_pts"].fillna(0.0).to_numpy(dtype=float)
        bottom = np.where(v >= 0, pos, neg)
        bx.bar(x, v, bottom=bottom, label=t.replace("_", " "))
        pos += np.where(v >= 0, v, 0)
        neg += np.where(v < 0, v, 0)
    bx.plot(x, 100.0 - meas["efficiency_pct"].to_numpy(dtype=float), marker="D",
            linestyle="", color="black", label="total lost")
    bx.axhline(0, color="black", linewidth=0.8)
    bx.set_xticks(x, [f"{int(g)}" for g in meas["gpus"]])
    bx.set_xlabel("GPUs")
    bx.set_ylabel("efficiency points lost (mean over ranks)")
    bx.legend(fontsize=8, ncols=2)
    bx.grid(axis="y", alpha=0.3)
    return fig


def scaling_report(r: ScalingReport, path: Path) -> list[Path]:
    """A Markdown (``.md``) or HTML (``.html``) report with the tables and the chart
    (written beside it as PATH-STEM.scaling.png/.svg); returns every file written."""
    # Without matplotlib the report is written without its chart, saying what adds it.
    charts = (scaling_chart(r, path.with_name(f"{path.stem}.scaling"))
              if charts_available() else [])
    shown = scaling_tables(r, mark_empty=False)
    title = "traceforge scaling"
    if path.suffix == ".html":
        chart = (svg_inline(charts[1]) if charts
                 else f'<p class="note">{html.escape(NO_CHARTS)}</p>\n')
        body = chart + "".join(
            html_section(t.title, t.frame, digits=t.digits, notes=t.notes) for t in shown)
        text = html_page(title, body)
    else:
        chart = (f"![scaling]({html.escape(charts[0].name)})" if charts else f"_{NO_CHARTS}_")
        text = f"# {title}\n\n{chart}\n\n" + "\n".join(
            md_section(t.title, t.frame, digits=t.digits, notes=t.notes) for t in shown)
    write_text(path, text)
    return [path, *charts]
