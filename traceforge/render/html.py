"""The self-contained HTML report: one file, styles, script and charts inline, no network.

Charts are matplotlib figures inlined as SVG (:mod:`traceforge.render.charts`); without
matplotlib each chart's place says in one line how to get it, and every table is there.

Renders what :func:`traceforge.report.analysis.analyze` and
:func:`traceforge.report.findings.findings` gathered; it formats, never measures.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from contextvars import ContextVar
from functools import partial
from typing import Any

import pandas as pd

from traceforge.analyzers.runs.diff import TraceDiff
from traceforge.analyzers.runs.scaling import ScalingReport
from traceforge.errors import UsageError
from traceforge.render import charts, sections
from traceforge.render.diff import SECTIONS as DIFF_SECTIONS
from traceforge.render.figures import draw_all
from traceforge.render.page import escape as _e
from traceforge.render.page import table
from traceforge.render.text import plain_lines
from traceforge.report.analysis import RunAnalysis
from traceforge.report.findings import Finding

_CSS = """
body{font:14px/1.45 system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:0;color:#222;
background:#fafafa}
main{max-width:1100px;margin:0 auto;padding:16px 24px 64px}
h1{font-size:22px;margin:8px 0}h2{font-size:18px;margin:28px 0 8px;border-bottom:1px solid #ddd}
h3{font-size:15px;margin:18px 0 6px}
.scroll{overflow-x:auto;max-width:100%;margin:6px 0 12px}
table{border-collapse:collapse;font-size:12.5px;background:#fff}
th,td{border:1px solid #e2e2e2;padding:3px 7px;text-align:left;vertical-align:top}
th{background:#f0f0f0;cursor:pointer;user-select:none;position:relative}
th:after{content:"\\2195";color:#aaa;font-size:10px;margin-left:3px}
td.n,th.n{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
td[title]{text-decoration:underline dotted #bbb}
.cards{display:flex;flex-wrap:wrap;gap:10px;margin:8px 0}
.card{background:#fff;border:1px solid #e2e2e2;border-radius:6px;padding:8px 14px;min-width:120px}
.card b{display:block;font-size:20px}
.finding,.note,li,p{overflow-wrap:anywhere}
.finding{background:#fff;border-left:5px solid #bbb;border-radius:4px;padding:8px 12px;
margin:8px 0}
.finding.high{border-color:#e15759}.finding.medium{border-color:#f28e2b}
.finding.low{border-color:#76b7b2}
.sev{font-size:11px;text-transform:uppercase;color:#666;margin-right:6px}
svg{max-width:100%;height:auto}.note{color:#666;font-size:12.5px}
details{margin:6px 0}summary{cursor:pointer;color:#335}
code{background:#f0f0f0;padding:0 3px;border-radius:3px}
"""

# Sort a table by the clicked column (numbers numerically); nothing else runs.
_JS = """
document.querySelectorAll('table.sortable th').forEach(function (th, col) {
  th.addEventListener('click', function () {
    var table = th.closest('table');
    var body = table.tBodies[0];
    var rows = Array.prototype.slice.call(body.rows);
    var asc = th.getAttribute('data-asc') !== '1';
    th.setAttribute('data-asc', asc ? '1' : '0');
    var idx = Array.prototype.indexOf.call(th.parentNode.children, th);
    function key(r) {
      var c = r.cells[idx];
      if (!c) { return ''; }
      var v = parseFloat(c.getAttribute('data-v') || c.textContent.replace(/,/g, ''));
      return isNaN(v) ? c.textContent : v;
    }
    rows.sort(function (a, b) {
      var x = key(a), y = key(b);
      if (x === y) { return 0; }
      return ((x < y) ? -1 : 1) * (asc ? 1 : -1);
    });
    rows.forEach(function (r) { body.appendChild(r); });
  });
});
"""


def _finding(f: Finding, show_run: bool) -> str:
    run = f" <span class=\"note\">[{_e(', '.join(f.runs))}]</span>" if show_run else ""
    return (f'<div class="finding {_e(f.severity)}"><span class="sev">{_e(f.severity)}</span>'
            f"<b>{_e(f.title)}</b>{run}<br>{_e(f.evidence)}<br><i>Try:</i> {_e(f.advice)}</div>")


def _cards(r: RunAnalysis) -> str:
    f = r.facts
    items = [("device", r.device_name or "unknown"), ("ranks", f"{r.ranks}"),
             ("span", f"{f.get('span_ms', 0):,.2f} ms")]
    if "step_ms" in f:
        items.append(("steps", f"{int(f.get('steps', 0))} x {f['step_ms']:,.2f} ms"))
    if "busy_pct" in f:
        label = "GPU busy" + (" (mean of ranks)" if r.ranks > 1 else "")
        items.append((label, f"{f['busy_pct']:.1f}%"))
    items.append(("kernels", f"{int(f.get('kernels', 0)):,}"))
    if "kernels_per_step" in f:
        items.append(("kernels per step", f"{int(f['kernels_per_step']):,}"))
    cards = [f'<div class="card"><span class="note">{_e(k)}</span><b>{_e(v)}</b></div>'
             for k, v in items]
    hfu = sections.hfu_card(r)
    extra = [hfu] if hfu is not None else []
    for label, value, what in [*extra, *sections.run_time_cards(r)]:
        cards.append(f'<div class="card"><span class="note">{_e(label)}</span><b>{_e(value)}'
                     f'</b><span class="note">{_e(what)}</span></div>')
    return '<div class="cards">' + "".join(cards) + "</div>"


def _unavailable(r: RunAnalysis, name: str) -> str:
    why = r.unavailable.get(name)
    return f'<p class="note">Analysis unavailable: {_e(why)}</p>' if why else ""


def _skipped(title: str, why: str) -> str:
    return f'<h3>{_e(title)}</h3><p class="note">{_e(why)}</p>'


def _rank_label(rank: object, r: RunAnalysis) -> str:
    return f"rank {int(str(rank))} " if r.ranks > 1 else ""


def _run_section(r: RunAnalysis, idx: int) -> str:
    ranks = f" ({r.ranks} ranks)" if r.ranks > 1 and "ranks" not in r.label else ""
    out = [f'<h2 id="run{idx}">Run: {_e(r.label)}{_e(ranks)}</h2>',
           '<p class="note">' + "<br>".join(_e(p) for p in r.paths) + "</p>", _cards(r)]
    out += [f'<p class="note">{_e(n)}</p>' for n in r.notes]
    out.append("<h3>Overview</h3>" + table(r.overview) + table(r.devices))

    out.append("<h3>GPU time by kernel class</h3>")
    bc = r.by_class
    if len(bc):
        labels = [f"{_rank_label(k, r)}{c}" for k, c in zip(bc["rank"], bc["class"], strict=True)]
        out.append(_chart(charts.hbar, labels, list(bc["total_us"].astype(float)), unit="us",
                          colors=[charts.color(str(c)) for c in bc["class"]]))
    out.append(table(bc.drop(columns=["name"], errors="ignore")))
    if len(r.by_neutral):
        out.append("<h3>GPU time by vendor-neutral family</h3>"
                   f'<p class="note">{_e(sections.NEUTRAL_NOTE)}</p>' + table(r.by_neutral))

    out.append("<h3>Top kernels</h3>")
    tk = r.top_kernels
    if len(tk):
        labels = [f"{_rank_label(k, r)}{n}" for k, n in zip(tk["rank"], tk["name"], strict=True)]
        out.append(_chart(charts.hbar, labels, list(tk["total_us"].astype(float)),
                          unit="us", colors=[charts.color(str(c)) for c in tk["class"]]))
    out.append(table(tk.drop(columns=["full_name"], errors="ignore")))

    if len(r.ops) or "ops" in r.unavailable:
        out.append("<h3>Operators by self GPU time</h3>" + _unavailable(r, "ops") + table(r.ops))
    else:
        out.append(_skipped("Operators by self GPU time",
                            "No GPU time could be attributed to framework operators (the "
                            "trace has no cpu_op ranges around its launch calls)."))

    out.append(_roofline(r))

    out.append("<h3>Idle gaps by cause</h3>" + _unavailable(r, "idle"))
    dev = r.idle_summary
    if len(dev) and "cause" in dev:
        rows = []
        for (rank, d), g in dev.groupby(["rank", "device"], sort=True):
            g = g[g["cause"] != "unrecorded"]
            rows.append((f"{_rank_label(rank, r)}GPU {d}",
                         [(str(c), float(p)) for c, p in zip(g["cause"], g["pct"], strict=True)]))
        out.append(_chart(charts.stacked, rows, unit="% of the time"))
        out.append(table(dev.assign(idle_ms=dev["idle_ns"] / 1e6).drop(columns="idle_ns")))
    hist = r.idle_histogram
    if len(hist) and "bin" in hist:
        hd = hist.groupby("bin", sort=False)["gaps"].sum()
        out.append("<h3>Gap-length histogram</h3>")
        out.append(_chart(charts.vbar, list(hd.index.astype(str)), list(hd.astype(float)),
                          unit="gaps"))
    if len(r.idle_gaps) and "ts" in r.idle_gaps:
        g = r.idle_gaps.assign(ts_ms=r.idle_gaps["ts"] / 1e6, dur_us=r.idle_gaps["dur"] / 1e3)
        out.append("<details><summary>Longest gaps</summary>"
                   + table(g.drop(columns=["ts", "dur"]), digits=3) + "</details>")

    out.append("<h3>Step breakdown</h3>" + _unavailable(r, "breakdown"))
    bd = r.breakdown
    if len(bd) and "compute_pct" in bd:
        rows = []
        for rec in bd.to_dict("records"):
            step = int(rec["step"])
            rows.append((f"rank {int(rec['rank'])} " + ("all" if step == -1 else f"step {step}"),
                         [(k, float(rec[f"{k}_pct"]))
                          for k in ("compute", "exposed_comm", "memory", "idle")]))
        out.append(_chart(charts.stacked, rows, unit="% of the time"))
    out.append(table(bd))

    out.append(_critical_path(r))
    out.append(_memory(r))

    ov = r.overlap
    has_comm = len(ov) and "comm_ns" in ov and float(ov["comm_ns"].sum()) > 0
    if has_comm:
        out.append("<h3>Communication / compute overlap per rank</h3>")
        out.append(_chart(charts.hbar, [f"rank {int(x)}" for x in ov["rank"]],
                          list(ov["overlap_pct"].fillna(0).astype(float)),
                          unit="% of comm overlapped", colors=[charts.color("compute")] * len(ov)))
        out.append(_chart(charts.hbar, [f"rank {int(x)}" for x in ov["rank"]],
                          list(ov["exposed_comm_pct"].astype(float)),
                          unit="% of step exposed comm",
                          colors=[charts.color("exposed_comm")] * len(ov)))
        out.append(table(ov))
    else:
        out.append(_skipped("Communication / compute overlap",
                            r.unavailable.get("overlap") or "No communication kernels "
                            "(NCCL/RCCL) in the steps: nothing overlaps."))
    if len(r.skew):
        out.append("<h3>Collective start skew per rank</h3>" + table(r.skew))
    out.append(_comm(r))

    out.append("<h3>Launch overhead per step</h3>" + _unavailable(r, "launch") + table(r.launch))
    for title, df, why in (
        ("Host-device copies inside steps", r.copies, "No host-device copies inside steps."),
        ("Synchronizing calls inside steps", r.syncs,
         "No synchronizing API calls inside steps."),
    ):
        out.append(f"<h3>{_e(title)}</h3>" + table(df) if len(df) else _skipped(title, why))

    if len(r.timeline):
        win = int(r.timeline.attrs.get("window_ns", int((r.timeline["ts"] + r.timeline["dur"])
                                                         .max())))
        rank = r.timeline.attrs.get("rank", 0)
        title = f"step {r.timeline_step}" + (f" of rank {rank}" if r.ranks > 1 else "")
        out.append(f"<h3>Timeline of {_e(title)}</h3>")
        out.append(_chart(charts.timeline, r.timeline, win))
    return "\n".join(out)


def _memory(r: RunAnalysis) -> str:
    m = r.memory
    if m.empty:
        return _skipped("Memory", r.unavailable.get("memory") or sections.NO_MEMORY)
    out = ["<h3>Memory</h3>", _notes([f"From {m.source}. {sections.MEMORY_NOTE}", *m.notes])]
    for rank, g in m.series.groupby("rank", sort=True):
        st = m.steps_ns[m.steps_ns["rank"] == rank] if len(m.steps_ns) else m.steps_ns
        title = f"rank {rank}" if r.ranks > 1 else ""
        out.append(_chart(charts.memory, g, st, title=title))
    out.append(table(sections.memory_devices(r)))
    out.append("<h4>Allocated memory per step</h4>" + table(sections.memory_steps(r)))
    out.append("<details><summary>Ops that allocate most</summary>"
               + table(sections.memory_ops(r)) + "</details>")
    return "\n".join(out)
def _comm(r: RunAnalysis) -> str:
    """Collective bandwidth: busbw against message size with the ceiling, the table."""
    if r.comm.empty:
        return ""
    from traceforge.render.comm_chart import busbw_svg

    ceil = r.comm_ceiling
    return ("<h3>Collective bandwidth by kind and message size</h3>"
            + _chart(busbw_svg, r.comm_points, ceil[0] if ceil else None,
                     ceil[1] if ceil else "")
            + _notes(r.comm_notes) + table(r.comm))


def _notes(notes: Sequence[str]) -> str:
    return "".join(f'<p class="note">{_e(n)}</p>' for n in notes)


#: A chart to draw: its name and data (what the cache keeps it under) and how to draw it.
_Job = tuple[str, Any, Callable[[], tuple[bool, str]]]
#: The charts of the page being built (:func:`render_html`): each ``_chart`` call leaves a
#: placeholder, and the charts are drawn together once the page is laid out.
_CHARTS: ContextVar[list[_Job] | None] = ContextVar("_CHARTS", default=None)


def _chart(draw: Any, *args: Any, **kw: Any) -> str:
    """A matplotlib chart, or one line saying what it needs when matplotlib is missing
    (while :func:`render_html` lays the page out, a placeholder: drawn with the others)."""
    job = (f"{draw.__module__}.{draw.__qualname__}", (args, kw),
           partial(_drawn, draw, *args, **kw))
    pending = _CHARTS.get()
    if pending is None:
        return _charts([job])[0]
    pending.append(job)
    return f"<tf-chart {len(pending) - 1}>"


#: A chart's place in the page until it is drawn: a tag no text from a trace can hold
#: (every such text is escaped, its ``<`` too).
_PLACE = re.compile(r"<tf-chart (\d+)>")


def _drawn(draw: Any, *args: Any, **kw: Any) -> tuple[bool, str]:
    """(drawn, the chart's SVG) or (False, the line saying why it could not be)."""
    try:
        return True, str(draw(*args, **kw))
    except UsageError as e:
        return False, f'<p class="note">{_e(e)}</p>'


def _charts(jobs: list[_Job]) -> list[str]:
    """Each chart's text: read back where the cache holds one drawn from the same data,
    the others drawn together (``figures.draw_all``: on the available cores) and kept."""
    from traceforge.formats.cache_texts import keep_text, stored_text, text_store

    stores = [text_store(name, inputs) for name, inputs, _ in jobs]
    texts = [stored_text(s) if s is not None else None for s in stores]
    todo = [i for i, t in enumerate(texts) if t is None]
    for i, (ok, text) in zip(todo, draw_all([jobs[i][2] for i in todo]), strict=True):
        texts[i] = text
        store = stores[i]
        if ok and store is not None:
            keep_text(store, text)
    return [t or "" for t in texts]


def _roofline(r: RunAnalysis) -> str:
    from traceforge.render.roofline_chart import roofline_svg

    rf = r.roofline
    title = "<h3>Roofline: achieved rates against the device's ceilings</h3>"
    if rf.empty:
        why = r.unavailable.get("roofline") or "No GPU activity to put against the ceilings."
        return title + f'<p class="note">{_e(why)}</p>'
    out = [title, _notes(sections.roofline_lines(r))]
    if rf.chart.get("points"):
        title = "" if r.ranks == 1 else f"Roofline of rank {rf.chart_rank}: {rf.device}"
        out.append(_chart(roofline_svg, rf.chart, title=title))
    if rf.measured_chart.get("points"):
        out.append("<h3>Roofline: measured (hardware counters: DRAM bytes and FLOPs from "
                   "instruction counts, over the trace's kernel time)</h3>")
        out.append(_chart(roofline_svg, rf.measured_chart))
        out.append(_notes(rf.measured_notes))
    out.append(f"<h3>Ops furthest below their bound (time at stake at {rf.target_pct:g}% "
               "of the bound)</h3>" + table(sections.below(r)))
    out.append("<h3>Roofline by operator</h3>" + table(sections.roofline_ops(r),
                                                          limit=sections.ROWS))
    out.append("<h3>Roofline by kernel class</h3>" + table(sections.roofline_classes(r)))
    out.append("<h3>FLOPs utilization per step</h3>"
               f'<p class="note">{_e(sections.HFU_NOTE)}</p>' + table(sections.mfu(r)))
    out.append(_notes(rf.notes))
    return "\n".join(out)


def _critical_path(r: RunAnalysis) -> str:
    cp = r.critical_path
    if cp.empty:
        why = r.unavailable.get("critical_path") or "No GPU activity: no critical path."
        return _skipped("Critical path", why)
    out = [f"<h3>{_e(sections.path_title(r))}</h3>", _notes(sections.path_lines(r))]
    bar = cp.bar
    if len(bar):
        out.append(_chart(charts.stacked, [("on the path", [
            (str(c), float(p)) for c, p in zip(bar["category"], bar["pct"], strict=True)])],
            unit="% of the path"))
        out.append(table(sections.path_bar(r), digits=3))
    if len(cp.what_if):
        out.append("<h3>What if: the step with those kernels sped up (on the graph)</h3>"
                   + table(sections.path_what_if(r), digits=3))
    out.append("<details><summary>Top ops and kernels on the path</summary>"
               + table(sections.path_top(r), digits=3) + "</details>")
    out.append(_notes(cp.notes))
    return "\n".join(out)


def _scaling_section(sc: ScalingReport) -> str:
    from traceforge.render.scaling import scaling_svg, scaling_tables

    out = ["<h2>Scaling</h2>", _chart(scaling_svg, sc)]
    for t in scaling_tables(sc, mark_empty=False):
        out.append(f"<h3>{_e(t.title)}</h3>" + _notes(t.notes) + table(t.frame, digits=t.digits))
    return "\n".join(out)


def _diff_section(a: str, b: str, d: TraceDiff) -> str:
    out = [f"<h2>Diff: {_e(b)} vs {_e(a)}</h2>", f'<p class="note">{_e(d.headline())}</p>']
    out += [f'<p class="note">{_e(n)}</p>' for n in d.notes]
    bc = d.by_class
    if len(bc):
        out.append(_chart(charts.paired, list(bc["class"].astype(str)),
                          list(bc["a_us"].astype(float)), list(bc["b_us"].astype(float)),
                          names=(a, b), unit="us per step"))
    for key, title, rows in DIFF_SECTIONS:
        out.append(f"<h3>{_e(title)}</h3>" + table(getattr(d, key), digits=3, limit=rows))
    return "\n".join(out)


def render_html(runs: Sequence[RunAnalysis], found: Sequence[Finding], *,
                comparison: pd.DataFrame | None = None, title: str = "traceforge report",
                version: str = "", diffs: Sequence[tuple[str, str, TraceDiff]] = (),
                scaling: ScalingReport | None = None) -> str:
    """The whole report as one HTML document (its charts drawn together, once it is laid
    out: on the available cores)."""
    jobs: list[_Job] = []
    mark = _CHARTS.set(jobs)
    try:
        body = _body(runs, found, comparison, title, version, diffs, scaling)
    finally:
        _CHARTS.reset(mark)
    texts = _charts(jobs)
    page = _PLACE.sub(lambda m: texts[int(m.group(1))], "".join(body))
    return plain_lines("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            "<meta name=\"viewport\" content=\"width=device-width\">"
            f"<link rel=\"icon\" href=\"data:,\"><title>{_e(title)}</title>"
            f"<style>{_CSS}</style></head><body><main>{page}</main>"
            f"<script>{_JS}</script></body></html>\n")


def _body(runs: Sequence[RunAnalysis], found: Sequence[Finding],
          comparison: pd.DataFrame | None, title: str, version: str,
          diffs: Sequence[tuple[str, str, TraceDiff]], scaling: ScalingReport | None
          ) -> list[str]:
    """The page's parts, charts as placeholders."""
    body = [f"<h1>{_e(title)}</h1>",
            f'<p class="note">traceforge {_e(version)} · {len(runs)} run(s)</p>']
    if len(runs) > 1:
        body.append("<nav>" + " · ".join(f'<a href="#run{i}">{_e(r.label)}</a>'
                                         for i, r in enumerate(runs)) + "</nav>")
    if comparison is not None and len(comparison):
        body.append("<h2>Comparison</h2>")
        lat = comparison.dropna(subset=["latency_ms"])
        if len(lat):
            body.append(_chart(charts.hbar, list(lat["run"].astype(str)),
                               list(lat["latency_ms"].astype(float)), unit="ms"))
        body.append(table(comparison))
    if scaling is not None:
        body.append(_scaling_section(scaling))
    body.append("<h2>Findings</h2>")
    if found:
        body += [_finding(f, len(runs) > 1) for f in found]
    else:
        body.append('<p class="note">No rule fired: nothing stands out.</p>')
    body += [_diff_section(a, b, d) for a, b, d in diffs]
    body += [_run_section(r, i) for i, r in enumerate(runs)]
    return body
