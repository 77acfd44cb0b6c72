"""``convert`` and the Chrome JSON writer: round trips keep every kernel."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

import traceforge as tf
from tests.conftest import ev, make_trace, shared
from traceforge.cli import cli
from traceforge.render.chrome_json import trace_to_chrome, write_chrome

KINETO = "h100/fa2.pt.trace.json.gz"
NSYS = "external/nvfuser/8fa9ec29/report1.sqlite"


def _kernels(t: tf.Trace) -> list[tuple[str, int, int]]:
    k = t.kernels()
    return sorted(zip(k["name"].astype(str), k["ts"].tolist(), k["dur"].tolist(), strict=True))


def test_kineto_to_pftrace_keeps_every_kernel(tmp_path: Path) -> None:
    pytest.importorskip("perfetto")
    src = shared(KINETO)
    out = tmp_path / "t.pftrace"
    res = CliRunner().invoke(cli, ["convert", str(src), str(out)])
    assert res.exit_code == 0, res.output
    a, b = tf.load(src), tf.load(out)
    assert b.meta.format == "perfetto"
    assert _kernels(a) == _kernels(b)
    assert a.counts() == b.counts()
    # Smaller than the same document as plain JSON.
    assert out.stat().st_size < len(gzip.decompress(src.read_bytes()))


def test_nsys_to_chrome_json_reads_back_as_kineto(tmp_path: Path) -> None:
    src = shared(NSYS)
    out = tmp_path / "t.json.gz"
    res = CliRunner().invoke(cli, ["convert", str(src), str(out)])
    assert res.exit_code == 0, res.output
    a, b = tf.load(src), tf.load(out)
    assert b.meta.format == "kineto"
    assert _kernels(a) == _kernels(b)
    assert a.counts() == b.counts()
    assert [d.name for d in a.meta.devices] == [d.name for d in b.meta.devices]
    # Launch -> kernel flows were synthesized from correlation ids (nsys has no flows).
    doc = json.loads(gzip.decompress(out.read_bytes()))
    starts = {e["id"] for e in doc["traceEvents"] if e.get("ph") == "s" and e["cat"] == "ac2g"}
    launches = set(a.of_kind("runtime", "driver")["corr"].tolist())
    assert starts == set(a.gpu()["corr"].tolist()) & launches
    assert len(starts) >= len(a.kernels())


def test_chrome_document_shape_and_extra_events() -> None:
    t = make_trace([
        ev("cudaLaunchKernel", "runtime", ts=1000, dur=500, pid=1, tid=2, corr=9, device=-1,
           stream=-1),
        ev("k", ts=2001, dur=1234, pid=0, tid=7, corr=9, device=0, stream=7),
    ])
    extra = [{"ph": "i", "name": "note", "pid": 1, "tid": 2, "ts": 1.5, "s": "t"}]
    doc = trace_to_chrome(t, extra_events=extra)
    xs = [e for e in doc["traceEvents"] if e["ph"] == "X"]
    k = next(e for e in xs if e["name"] == "k")
    assert (k["ts"], k["dur"], k["cat"]) == (2.001, 1.234, "kernel")
    assert k["args"] == {"correlation": 9, "device": 0, "stream": 7}
    assert doc["traceEvents"][-1] == extra[0]
    flows = [e for e in doc["traceEvents"] if e["ph"] in ("s", "f")]
    assert [(f["ph"], f["ts"]) for f in flows] == [("s", 1.0), ("f", 2.001)]


def test_write_chrome_gz_round_trip(tmp_path: Path) -> None:
    t = make_trace([ev("a", ts=0, dur=7, pid=0, tid=7),
                    ev("b", "cpu_op", ts=3, dur=1_000_001, pid=5, tid=5, device=-1, stream=-1)])
    p = write_chrome(t, tmp_path / "x.json.gz")
    u = tf.load(p)
    assert u.events[["ts", "dur"]].values.tolist() == t.events[["ts", "dur"]].values.tolist()


def test_convert_unknown_suffix_is_usage_error(tmp_path: Path) -> None:
    src = tmp_path / "x.json"
    write_chrome(make_trace([ev("a", ts=0, dur=7)]), src)
    res = CliRunner().invoke(cli, ["convert", str(src), str(tmp_path / "y.txt")])
    assert res.exit_code != 0
    assert not (tmp_path / "y.txt").exists()
