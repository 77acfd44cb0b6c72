"""The report's finding for CUDA-graph runs whose replays leave the GPU idle between
nodes (issue 25, item 13)."""

from __future__ import annotations

import json

import pytest

import traceforge as tf
from tests.conftest import FIXTURES, cli_main
from traceforge.report import findings as fmod

GRAPHS = FIXTURES / "h200-graphs" / "cudagraphs.pt.trace.json.gz"


def _graph(rep: tf.Report) -> list[fmod.Finding]:
    return [f for f in rep.findings if f.rule == "graph_gaps"]


def test_graph_idle_finding_with_the_idle_verbs_numbers() -> None:
    code, out, err = cli_main("idle", str(GRAPHS), "--format", "json")
    assert code == 0, err
    row = next(r for r in json.loads(out)["summary"] if r["cause"] == "graph_internal")
    assert row["pct"] > fmod.GRAPH_IDLE_PCT_MIN  # 21.4 % on this H200 run
    (f,) = _graph(tf.report(tf.load(GRAPHS)))
    assert f.severity == "high"
    assert f"{row['pct']:.1f}% of the steps' GPU windows" in f.evidence
    assert f"{row['gaps']:,} gaps" in f.evidence and "longest come before" in f.evidence


def test_no_graph_finding_below_the_threshold_or_without_graphs(
        monkeypatch: pytest.MonkeyPatch) -> None:
    assert not _graph(tf.report(tf.load("sample:h100-eager")))
    monkeypatch.setattr(fmod, "GRAPH_IDLE_PCT_MIN", 50.0)
    assert not _graph(tf.report(tf.load(GRAPHS)))
