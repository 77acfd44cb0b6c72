"""load_run: ranks from distributedInfo or file names, duplicates and mixed runs refused."""

from __future__ import annotations

import gzip
import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

import traceforge as tf
from tests.conftest import shared
from traceforge.cli import cli
from traceforge.errors import AnalysisError
from traceforge.formats.multirank import rank_from_name


def _write(p: Path, rank: int | None, world: int = 2) -> Path:
    doc: dict[str, object] = {"traceEvents": [
        {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 0, "dur": 5}]}
    if rank is not None:
        doc["distributedInfo"] = {"rank": rank, "world_size": world}
    p.write_text(json.dumps(doc))
    return p


@pytest.mark.parametrize("name,rank", [("rank3.json", 3), ("x_rank-12.pt.trace.json", 12),
                                       ("worker7_step_12.1.pt.trace.json", 7),
                                       ("a_rank_4.json.gz", 4), ("trace.json", None)])
def test_rank_from_name(name: str, rank: int | None) -> None:
    assert rank_from_name(name) == rank


def test_dlrm_ranks_match_distributed_info() -> None:
    d = shared("external/param/dlrm_kineto")
    traces = tf.load_run(d)
    # Oracle: the "rank" key of each raw file, read with a regex.
    raw = sorted(int(re.search(rb'"rank": ?(\d+)', f.read_bytes()).group(1))  # type: ignore[union-attr]
                 for f in d.iterdir())
    assert [t.meta.rank for t in traces] == raw == list(range(8))


def test_ranks_from_names_and_duplicates(tmp_path: Path) -> None:
    _write(tmp_path / "rank1.json", None)
    _write(tmp_path / "rank0.json", None)
    assert [t.meta.rank for t in tf.load_run(tmp_path)] == [0, 1]
    _write(tmp_path / "other.json", 1)
    dup = r"(rank1|other)\.json and .*(rank1|other)\.json both claim rank 1"
    with pytest.raises(AnalysisError, match=dup):
        tf.load_run(tmp_path)


def test_mixed_runs_are_refused(tmp_path: Path) -> None:
    a = _write(tmp_path / "a.json", 0, world=2)
    b = _write(tmp_path / "b.json", 1, world=8)
    with pytest.raises(AnalysisError, match="different runs"):
        tf.load_run([a, b])


def test_cli_on_a_trace_without_gpu_activity(tmp_path: Path) -> None:
    p = tmp_path / "cpu.json.gz"
    with gzip.open(p, "wt") as f:
        json.dump({"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "aten::mm",
                                    "pid": 1, "tid": 1, "ts": 0, "dur": 5}]}, f)
    for verb in ("idle", "overlap", "breakdown", "launch"):
        res = CliRunner().invoke(cli, [verb, str(p)])
        assert res.exit_code == 0, res.output
        assert "No GPU activity" in res.output
    res = CliRunner().invoke(cli, ["overlap", str(p), "--format", "json"])
    assert json.loads(res.output)["ranks"] == []
