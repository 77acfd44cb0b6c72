"""The Markdown report: the HTML report's tables and findings, for pull requests."""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from traceforge.analyzers.analysis import RunAnalysis
from traceforge.analyzers.diff import TraceDiff
from traceforge.analyzers.findings import Finding
from traceforge.render.frame import render_frame
from traceforge.render.html import DIFF_SECTIONS


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
    head.append(f"- device: {r.device_name or 'unknown'}, ranks: {int(f.get('ranks', 1))}, "
                f"span {f.get('span_ms', 0):,.2f} ms")
    if "step_ms" in f:
        head.append(f"- steps: {int(f.get('steps', 0))} x {f['step_ms']:,.2f} ms")
    if "busy_pct" in f:
        head.append(f"- GPU busy: {f['busy_pct']:.1f}% of step time")
    for name, why in sorted(r.unavailable.items()):
        head.append(f"- {name} analysis unavailable: {why}")
    parts = ["\n".join(head) + "\n"]
    idle = r.idle_summary
    if "stream" in idle:
        idle = idle[idle["stream"] == -1]
        idle = idle.assign(idle_ms=idle["idle_ns"] / 1e6).drop(columns="idle_ns")
    parts += [
        _t(r.by_class.drop(columns=["name"], errors="ignore"), "GPU time by kernel class"),
        _t(r.top_kernels.drop(columns=["full_name"], errors="ignore"), "Top kernels"),
        _t(r.ops, "Operators by self GPU time"),
        _t(idle, "Idle time by cause"),
        _t(r.breakdown, "Step breakdown"),
        _t(r.overlap, "Communication / compute overlap per rank"),
        *([_t(r.skew, "Collective start skew per rank")] if len(r.skew) else []),
        _t(r.launch, "Launch overhead per step"),
        _t(r.copies, "Host-device copies inside steps"),
        _t(r.syncs, "Synchronizing calls inside steps"),
        _t(r.gemm, "GEMM throughput"),
    ]
    return "\n".join(parts)


def render_markdown(runs: Sequence[RunAnalysis], found: Sequence[Finding], *,
                    comparison: pd.DataFrame | None = None,
                    title: str = "traceforge report",
                    diffs: Sequence[tuple[str, str, TraceDiff]] = ()) -> str:
    """The report as Markdown: comparison, findings with evidence, then each run's tables."""
    out = [f"# {title}", ""]
    if comparison is not None and len(comparison):
        out.append(_t(comparison, "Comparison"))
    out += ["## Findings", ""]
    if not found:
        out.append("No rule fired: nothing stands out.\n")
    for f in found:
        run = f" ({f.run})" if len(runs) > 1 else ""
        out.append(f"- **{f.severity.upper()}: {f.title}**{run}  \n"
                   f"  {f.evidence}  \n  _Try:_ {f.advice}")
    out.append("")
    for a, b, d in diffs:
        out += [f"## Diff: {b} vs {a}", "",
                f"span speedup {d.span_speedup:.2f}x, GPU time speedup {d.gpu_speedup:.2f}x "
                "(per profiler step)", ""]
        out += [f"_{n}_\n" for n in d.notes]
        out += [_t(getattr(d, k), t, limit=n, digits=3) for k, t, n in DIFF_SECTIONS]
    out += [_run(r) for r in runs]
    return "\n".join(out).rstrip() + "\n"
