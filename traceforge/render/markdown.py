"""The Markdown report: the HTML report's tables and findings, for pull requests."""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from traceforge.analyzers.runs.diff import TraceDiff
from traceforge.analyzers.runs.scaling import ScalingReport
from traceforge.render import sections
from traceforge.render.diff import SECTIONS as DIFF_SECTIONS
from traceforge.render.frame import render_frame
from traceforge.render.text import plain_lines
from traceforge.report.analysis import RunAnalysis
from traceforge.report.findings import Finding


def _t(df: pd.DataFrame, title: str, *, limit: int | None = None, digits: int = 2) -> str:
    if df.empty:
        return f"### {title}\n\n_(none)_\n"
    shown = df if limit is None else df.head(limit)
    notes = (f"{len(df) - len(shown)} more rows not shown",) if len(shown) < len(df) else ()
    return render_frame(shown, "md", title=title, digits=digits, notes=notes)


def _run(r: RunAnalysis) -> str:
    f = r.facts
    head = [f"## Run: {r.label}", ""]
    head += [f"- trace: `{p}`" for p in r.paths]
    head.append(f"- device: {r.device_name or 'unknown'}, ranks: {r.ranks}, "
                f"span {f.get('span_ms', 0):,.2f} ms")
    if "step_ms" in f:
        head.append(f"- steps: {int(f.get('steps', 0))} x {f['step_ms']:,.2f} ms")
    if "kernels_per_step" in f:
        head.append(f"- kernels per step: {int(f['kernels_per_step']):,}")
    if "busy_pct" in f:
        mean = " (mean of ranks)" if r.ranks > 1 else ""
        head.append(f"- GPU busy{mean}: {f['busy_pct']:.1f}% of step time")
    hfu = sections.hfu_card(r)
    if hfu is not None:
        head.append(f"- {hfu[0]}: {hfu[1]} ({hfu[2]})")
    head += [f"- {k}: {v} ({w})" for k, v, w in sections.run_time_cards(r)]
    head += [f"- note: {n}" for n in r.notes]
    for name, why in sorted(r.unavailable.items()):
        head.append(f"- {name} analysis unavailable: {why}")
    parts = ["\n".join(head) + "\n", _t(r.overview, "Overview per rank")]
    idle = r.idle_summary
    if "idle_ns" in idle:
        idle = idle.assign(idle_ms=idle["idle_ns"] / 1e6).drop(columns="idle_ns")
    has_comm = "comm_ns" in r.overlap and float(r.overlap["comm_ns"].sum()) > 0
    rf, cp = r.roofline, r.critical_path
    why_roof = r.unavailable.get("roofline", "no GPU activity")
    why_path = r.unavailable.get("critical_path", "no GPU activity")
    below = f"Ops furthest below their bound (time at stake at {rf.target_pct:g}% of the bound)"
    tables = [
        (r.by_class.drop(columns=["name"], errors="ignore"), "GPU time by kernel class", ""),
        (r.by_neutral, "GPU time by vendor-neutral family", ""),
        (r.top_kernels.drop(columns=["full_name"], errors="ignore"), "Top kernels", ""),
        (r.ops, "Operators by self GPU time",
         "no GPU time could be attributed to framework operators"),
        (sections.below(r) if not rf.empty else rf.below.iloc[0:0], below, why_roof),
        (sections.roofline_ops(r).head(sections.ROWS), "Roofline by operator", why_roof),
        (sections.roofline_classes(r), "Roofline by kernel class", why_roof),
        (sections.mfu(r), "FLOPs utilization per step", why_roof),
        (idle, "Idle time by cause", ""),
        (r.breakdown, "Step breakdown", ""),
        (sections.path_bar(r), f"{sections.path_title(r)}: time by category", why_path),
        (sections.path_what_if(r), "What if: the step with those kernels sped up (on the graph)",
         why_path),
        (sections.path_top(r), "Top ops and kernels on the path", why_path),
        (r.overlap if has_comm else r.overlap.iloc[0:0],
         "Communication / compute overlap per rank", "no communication kernels in the steps"),
        (r.skew, "Collective start skew per rank", "single rank"),
        (sections.memory_devices(r) if not r.memory.empty else pd.DataFrame(),
         "Memory per device", r.unavailable.get("memory") or "no memory events in the trace "
         "(traceforge capture --memory records them)"),
        (sections.memory_steps(r) if not r.memory.empty else pd.DataFrame(),
         "Allocated memory per step", "no memory events"),
        (r.comm, COMM_TITLE, "no collectives (NCCL/RCCL)"),
        (r.launch, "Launch overhead per step", ""),
        (r.copies, "Host-device copies inside steps", "none inside steps"),
        (r.syncs, "Synchronizing calls inside steps", "none inside steps"),
    ]
    notes = {"GPU time by vendor-neutral family": [sections.NEUTRAL_NOTE],
             below: sections.roofline_lines(r),
             "Roofline by kernel class": list(rf.notes),
             "FLOPs utilization per step": [sections.HFU_NOTE],
             "Memory per device": [f"From {r.memory.source}. {sections.MEMORY_NOTE}",
                                   *r.memory.notes],
             COMM_TITLE: list(r.comm_notes),
             f"{sections.path_title(r)}: time by category":
                 [*sections.path_lines(r), *cp.notes]}
    skipped = []
    for df, title, why in tables:
        if df.empty and why:
            skipped.append(f"{title}: {why}")
            continue
        parts.append(_t(df, title, digits=3 if "path" in title or "What if" in title else 2))
        parts += [f"_{n}_\n" for n in notes.get(title, [])]
    if skipped:
        parts.append("_Left out: " + "; ".join(skipped) + "._\n")
    return "\n".join(parts)


#: The report's section of ``traceforge comm``'s by_size table.
COMM_TITLE = "Collective bandwidth by kind and message size (busbw as nccl-tests)"


def render_markdown(runs: Sequence[RunAnalysis], found: Sequence[Finding], *,
                    comparison: pd.DataFrame | None = None,
                    title: str = "traceforge report",
                    diffs: Sequence[tuple[str, str, TraceDiff]] = (),
                    scaling: ScalingReport | None = None) -> str:
    """The report as Markdown: comparison, scaling, findings with evidence, then each
    run's tables. Charts are the HTML report's; Markdown has the same tables."""
    out = [f"# {title}", ""]
    if comparison is not None and len(comparison):
        out.append(_t(comparison, "Comparison"))
    if scaling is not None:
        from traceforge.render.scaling import scaling_tables
        from traceforge.render.tables import render_table

        out += ["## Scaling", "", "\n".join(render_table(t, "md")
                                             for t in scaling_tables(scaling))]
    out += ["## Findings", ""]
    if not found:
        out.append("No rule fired: nothing stands out.\n")
    for f in found:
        run = f" ({', '.join(f.runs)})" if len(runs) > 1 else ""
        out.append(f"- **{f.severity.upper()}: {f.title}**{run}  \n"
                   f"  {f.evidence}  \n  _Try:_ {f.advice}")
    out.append("")
    for a, b, d in diffs:
        out += [f"## Diff: {b} vs {a}", "", d.headline(), ""]
        out += [f"_{n}_\n" for n in d.notes]
        out += [_t(getattr(d, k), t, limit=n, digits=3) for k, t, n in DIFF_SECTIONS]
    out += [_run(r) for r in runs]
    return plain_lines("\n".join(out).rstrip() + "\n")
