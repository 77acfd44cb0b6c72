"""``traceforge critical-path TRACE|DIR``: what bounds each step, and what a speedup buys."""

from __future__ import annotations

import os
import re
from functools import partial
from typing import Any

import click
import numpy as np
import pandas as pd

from traceforge.commands.engine import Engine, engine_options, run_paths
from traceforge.commands.options import (
    emit_frame,
    emit_json,
    format_option,
    resolve_steps,
    step_options,
    traces_argument,
)

_SPEC = re.compile(r"^[A-Za-z_][\w.-]*=[0-9.eE+-]+$")


def _split(traces: tuple[str, ...], what_if: tuple[str, ...]) -> tuple[list[str], list[str]]:
    """``--what-if gemm=2 nccl=1.5``: the words after the first spec are what-ifs too,
    unless they are files (click reads them as TRACES)."""
    paths, specs = [], list(what_if)
    for t in traces:
        if what_if and _SPEC.match(t) and not os.path.exists(t):
            specs.append(t)
        else:
            paths.append(t)
    if not paths:
        raise click.UsageError("give a trace file or directory")
    return paths, specs


def _ms(df: pd.DataFrame, cols: tuple[str, ...]) -> pd.DataFrame:
    """The ns columns in ms, in place and renamed (``length_ns`` -> ``length_ms``)."""
    out = df.copy()
    for c in cols:
        out[c] = out[c] / 1e6
    renamed: pd.DataFrame = out.rename(columns={c: c[:-2] + "ms" for c in cols})
    return renamed


def _short(names: pd.Series) -> pd.Series:
    from traceforge.analyzers.names.kernel_names import short_name

    return names.astype(str).map(lambda n: short_name(n) if len(n) > 60 else n)


def _path_rows(segments: pd.DataFrame) -> Any:
    """``rows(step, rank)``: that path's segments. A path's pieces come as one run of
    rows (paths are made step by step, rank by rank), so each is a slice of the frame;
    a mask per path instead compared every row for every step (all steps: quadratic in
    the trace), and took the rows from Arrow strings that many chunks made slow."""
    seg_cols = ["rank", "kind", "name", "category", "ts", "dur", "row", "pid", "tid"]
    cols = segments[seg_cols]
    step, rank = segments["step"].to_numpy(), segments["for_rank"].to_numpy()
    cut = np.flatnonzero((step[1:] != step[:-1]) | (rank[1:] != rank[:-1])) + 1
    runs: dict[tuple[int, int], tuple[int, int]] = {}
    for a, b in zip(np.r_[0, cut].tolist(), np.r_[cut, len(step)].tolist(), strict=True):
        if a < b and runs.setdefault((int(step[a]), int(rank[a])), (a, b)) != (a, b):
            # A path in several runs (not made so): a mask per path, as ever.
            return lambda s, k: cols.loc[(segments["step"] == s)
                                         & (segments["for_rank"] == k)]
    return lambda s, k: cols.iloc[slice(*runs.get((s, k), (0, 0)))]


def _json(r: Any) -> dict[str, Any]:
    out = []
    rows = _path_rows(r.segments)
    for st in r.steps.to_dict("records"):
        cat = r.by_category[(r.by_category["step"] == st["step"])
                            & (r.by_category["for_rank"] == st["rank"])]
        wi = r.what_if[(r.what_if["step"] == st["step"]) & (r.what_if["rank"] == st["rank"])]
        out.append({"step": st["step"], "rank": st["rank"], "critical": st["critical"],
                    "length_ns": st["length_ns"], "ts": st["ts"], "end": st["end"],
                    "by_category": {str(c): int(n) for c, n in zip(cat["category"], cat["ns"],
                                                                   strict=True)},
                    # The frame: to_json_bytes writes its records column by column
                    # (to_dict boxed every cell: 3 s of a 200k-kernel path's JSON).
                    "segments": rows(st["step"], st["rank"]),
                    "what_if": wi[["scenario", "new_length_ns", "saved_ns", "saved_pct"]]
                    .to_dict("records")})
    crit = [s for s in out if s["critical"]]
    # One entry per step: its critical path, with every rank's own path under "ranks".
    steps = []
    for c in crit:
        ranks = [s for s in out if s["step"] == c["step"]]
        steps.append({**c, "ranks": ranks if len(ranks) > 1 else []})
    return {"steps_from": r.step_source, "steps": steps, "notes": list(r.notes)}


@click.command("critical-path")
@traces_argument
@step_options
@click.option("--what-if", "what_if", metavar="CLASS=FACTOR", multiple=True,
              help="Speed up kernels of a class (gemm, attention, communication, ...) or "
              "family (nccl, nvjet_sm90, triton_poi_fused, ...) by FACTOR and report the "
              "new path length, computed on the graph: --what-if gemm=2 nccl=1.5.")
@click.option("--top", "top_n", type=click.IntRange(min=1), default=10, show_default=True,
              help="How many ops and kernels on the path to list per step.")
@format_option
@engine_options
def command(traces: tuple[str, ...], steps_from: str | None, steps_text: str | None,
            step_list: tuple[int, ...], what_if: tuple[str, ...], top_n: int,
            fmt: str, engine: Engine) -> None:
    """Critical path of each step across CPU threads, GPU streams and ranks.

    TRACES: one trace, several trace files of one run, or a directory of them. The path
    is the chain of dependent work (ops, launches, kernels, syncs, collectives across
    ranks) that sets the step's length; its length equals the step's GPU window.
    CSV gives the path's segments.
    """
    from traceforge.analyzers.critical_path import (
        critical_only,
        critical_path_of,
        parse_what_if,
        rank_graph,
    )

    paths, specs = _split(traces, what_if)
    factors = parse_what_if(specs)
    rule, steps = resolve_steps(steps_from, steps_text, step_list)
    # Each rank's graph is built where its file is read; the paths across ranks here.
    ranks = engine.ranks(run_paths(paths), partial(rank_graph, steps=steps), steps_from=rule)
    r = critical_path_of([x.value for x in ranks], what_if=factors, top_n=top_n)
    if fmt == "json":
        emit_json(_json(r))
        return
    if fmt == "csv":
        emit_frame(critical_only(r, r.segments), fmt)
        return
    multi = r.steps["rank"].nunique() > 1
    st = r.steps if multi else r.steps[r.steps["critical"]]
    cols = ["step", "rank", "critical", "length_ns", "ranks_crossed"] if multi else [
        "step", "length_ns"]
    emit_frame(_ms(st[cols], ("length_ns",)), fmt,
               title=f"Critical path per step (steps from {r.step_source})",
               notes=r.notes, digits=3)
    cat = critical_only(r, r.by_category).drop(columns="for_rank")
    emit_frame(_ms(cat, ("ns",)), fmt, title="Time on the path by category",
               digits=3)
    top = critical_only(r, r.top).drop(columns="for_rank")
    top = top.assign(name=_short(top["name"]))
    emit_frame(_ms(top, ("ns",)), fmt, title="Top ops and kernels on the path",
               digits=3)
    if not r.what_if.empty:
        wi = r.what_if if multi else critical_only(r, r.what_if).drop(columns=["rank",
                                                                             "critical"])
        emit_frame(_ms(wi, ("length_ns", "new_length_ns", "saved_ns")), fmt,
                   title="What if: the path with those kernels sped up", digits=3)
