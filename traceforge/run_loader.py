"""Runs named on the command line (``scaling``, ``compare``): trace files, folders of rank
traces, ``traceforge capture`` output folders and ``capture --nproc`` sweeps.

A capture output folder holds traces and ``*.summary.json`` run summaries; its traces are
the Kineto ``*.pt.trace.json.gz`` files (one per rank; ``*.failed.*`` left out), else an
nsys SQLite export (split into one trace per rank), else an ``.nsys-rep``. Its facts
(unprofiled latency, peak memory, ...) come from the summaries, read with the capture
layer's own definitions (:func:`traceforge.capture.compare.row`). A sweep folder (written
by ``capture --nproc``, marked by ``sweep.summary.json``) stands for its per-count run
folders, in GPU-count order.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from traceforge.analyzers.runs.inputs import Fact, TraceRun
from traceforge.capture.sweep import SWEEP_FILE
from traceforge.errors import TraceFormatError, UsageError

if TYPE_CHECKING:
    from traceforge.formats import SourceFile

_KINETO = (".pt.trace.json.gz", ".pt.trace.json")
_JSON = (".json", ".json.gz")


def _trace_files(folder: Path) -> list[Path]:
    files = sorted(p for p in folder.iterdir() if p.is_file())
    kineto = [p for p in files if p.name.endswith(_KINETO) and ".failed." not in p.name]
    if kineto:
        return kineto
    for suffix in (".sqlite", ".nsys-rep"):
        found = [p for p in files if p.name.endswith(suffix)]
        if found:
            return found[:1]  # one report of the launcher's whole process tree
    other = [p for p in files if p.name.endswith(_JSON) and not p.name.endswith(".summary.json")
             and ".failed." not in p.name]
    if other:
        return other
    raise TraceFormatError(folder, "directory holds no trace files (Kineto JSON, nsys "
                           "SQLite or .nsys-rep) at its top level")


def _summaries(folder: Path) -> list[dict[str, Any]]:
    from traceforge.capture.trace_file import read_summary

    return [read_summary(p) for p in sorted(folder.glob("*.summary.json"))
            if p.name != SWEEP_FILE]


def _sweep_entry(folder: Path) -> dict[str, Any]:
    """This count folder's entry in its sweep's summary, and the sweep-wide facts."""
    sweep = folder.parent / SWEEP_FILE
    if not sweep.is_file():
        return {}
    data = _read_json(sweep)
    entry = next((r for r in data.get("runs", []) if r.get("folder") == folder.name), None)
    if entry is None:
        return {}
    return {"gpus": entry.get("gpus"), "batch_per_gpu": data.get("batch_per_gpu"),
            "tokens_per_gpu": data.get("tokens_per_gpu"), "mode": entry.get("mode")}


def _read_json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as e:
        raise TraceFormatError(path, f"cannot read ({e})") from None
    if not isinstance(data, dict):
        raise TraceFormatError(path, "not a traceforge sweep summary (no JSON object)")
    return data


def facts_of(summaries: Sequence[dict[str, Any]], extra: dict[str, Any] | None = None
             ) -> dict[str, Fact]:
    """A run's facts from its rank summaries: the slowest rank's latency, the largest
    rank's peak memory; ``extra`` (sweep facts) fills what the summaries do not say."""
    from traceforge.analyzers.runs.inputs import step_facts
    from traceforge.capture.compare import row

    facts: dict[str, Fact] = {}
    rows = [row(s, None) for s in summaries]
    # The run's step time: the slowest rank's (traceforge.step_time.run_step_time).
    # Samples and tokens per step: the capture's --batch/--tokens-per-step, else the sweep's.
    summaries = [{**s, **{k: s.get(k) or (extra or {}).get(k)
                          for k in ("batch_per_gpu", "tokens_per_gpu")}} for s in summaries]
    for k in ("batch_per_gpu", "tokens_per_gpu"):
        given = [s[k] for s in summaries if isinstance(s.get(k), (int, float))]
        if given:
            facts[k] = given[0]
    facts.update({k: v for k, v in step_facts(summaries).items() if v is not None})
    peaks = [r["peak_gib"] for r in rows if r["peak_gib"] is not None]
    if peaks:
        facts["peak_gib"] = max(peaks)
    first = [r["first_step_s"] for r in rows if r["first_step_s"] is not None]
    if first:
        facts["first_step_s"] = max(first)
    modes = {r["mode"] for r in rows if r["mode"]}
    if len(modes) == 1:
        facts["mode"] = str(modes.pop())
    gpus = [g.get("name") for s in summaries for g in (s.get("gpus") or []) if g.get("name")]
    if gpus:
        facts["device"] = str(gpus[0])
    for k, v in (extra or {}).items():
        if v is not None and k not in facts:
            facts[k] = v
    return facts


def expand(paths: Sequence[str]) -> list[Path]:
    """The run paths: a sweep folder becomes its count folders (by GPU count), a
    ``sample:NAME`` the bundled sample's file."""
    from traceforge.formats import resolve

    out: list[Path] = []
    for p in map(resolve, paths):  # sample:NAME is the bundled file
        sweep = p / SWEEP_FILE
        if p.is_dir() and sweep.is_file():
            runs = sorted(_read_json(sweep).get("runs", []), key=lambda r: int(r.get("gpus", 0)))
            found = [p / str(r["folder"]) for r in runs if (p / str(r.get("folder"))).is_dir()]
            if not found:
                raise TraceFormatError(sweep, "names no run folder that exists")
            out += found
        else:
            out.append(p)
    return out


def default_labels(paths: Sequence[Path]) -> list[str]:
    """Short distinct labels: the names without trace suffixes; where those collide, the
    parent folders' names (``h100`` vs ``mi300``); else both."""
    def stem(p: Path) -> str:
        for s in (*_KINETO, ".json.gz", ".json", ".sqlite", ".nsys-rep"):
            if p.name.endswith(s):
                return p.name[: -len(s)]
        return p.name

    names = [stem(p) for p in paths]
    if len(set(names)) == len(names):
        return names
    parents = [p.resolve().parent.name for p in paths]
    if len(set(parents)) == len(parents):
        return parents
    return [f"{a}/{b}" for a, b in zip(parents, names, strict=True)]


@dataclass(frozen=True)
class RunFiles:
    """A run named on the command line, before anything is parsed: its label, its rank
    files (found once, handed on to the reader as they are), its capture facts, and the
    path it was named by."""

    label: str
    files: list[SourceFile]
    facts: dict[str, Fact]
    path: str


def run_files(paths: Sequence[str | Path], *, labels: Sequence[str] | None = None
              ) -> list[RunFiles]:
    """One :class:`RunFiles` per path (sweeps expanded): a trace file, a folder of rank
    traces, or a capture output folder with its summaries' facts."""
    from traceforge.formats import identify

    expanded = expand([str(p) for p in paths])
    if labels is not None and len(labels) != len(expanded):
        raise UsageError(f"--labels: {len(labels)} labels for {len(expanded)} runs")
    names = list(labels) if labels is not None else default_labels(expanded)
    out = []
    for p, label in zip(expanded, names, strict=True):
        src = identify(p, "no such file or directory")
        if src.is_dir:
            files = [identify(f) for f in _trace_files(p)]
            facts = facts_of(_summaries(p), _sweep_entry(p))
        else:
            files, facts = [src], {}
        out.append(RunFiles(label, files, facts, str(p)))
    return out


def load_runs(paths: Sequence[str | Path], *, steps_from: str | None = None,
              labels: Sequence[str] | None = None) -> list[TraceRun]:
    """One :class:`~traceforge.analyzers.runs.inputs.TraceRun` per path (sweeps expanded): a
    trace file (a multi-process nsys report is split per rank), a folder of rank traces,
    or a capture output folder with its summaries' facts."""
    from traceforge.formats.multirank import load_run

    runs = []
    for r in run_files(paths, labels=labels):
        traces = tuple(t.with_steps(steps_from) for t in load_run(r.files))
        runs.append(TraceRun(r.label, traces, r.facts, r.path))
    return runs
