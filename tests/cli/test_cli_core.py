"""The core CLI verbs end to end, in process (click's CliRunner) and as a subprocess."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from tests.conftest import FIXTURES
from traceforge.analyzers.timing.kernels import TOP_KERNEL_COLUMNS
from traceforge.cli import cli
from traceforge.render.schema import ns_name

EAGER = str(FIXTURES / "eager.pt.trace.json.gz")


def run(*args: str) -> tuple[int, str, str]:
    p = subprocess.run([sys.executable, "-m", "traceforge", *args], capture_output=True,
                       text=True, timeout=120)
    return p.returncode, p.stdout, p.stderr


def test_top_kernels_json_schema_and_limit() -> None:
    r = CliRunner().invoke(cli, ["top-kernels", EAGER, "-n", "5", "--format", "json"])
    assert r.exit_code == 0, r.output
    rows = json.loads(r.output)
    assert len(rows) == 5
    # JSON carries times as integer ns: total_us is written total_ns (render.schema)
    assert list(rows[0])[: len(TOP_KERNEL_COLUMNS)] == [ns_name(c) or c
                                                         for c in TOP_KERNEL_COLUMNS]
    totals = [row["total_ns"] for row in rows]
    assert totals == sorted(totals, reverse=True) and all(isinstance(t, int) for t in totals)
    assert all(r["min_ns"] <= r["avg_ns"] <= r["max_ns"] for r in rows)


def test_top_kernels_csv_and_md() -> None:
    r = CliRunner().invoke(cli, ["top-kernels", EAGER, "--by", "family", "--format", "csv"])
    assert r.exit_code == 0
    header = r.output.splitlines()[0].split(",")
    assert header[:3] == ["name", "class", "family"]
    r = CliRunner().invoke(cli, ["top-kernels", EAGER, "--by", "class", "--format", "md"])
    assert r.exit_code == 0 and "| class |" in r.output and "| gemm |" in r.output


def test_ops_and_info_tables() -> None:
    r = CliRunner().invoke(cli, ["ops", EAGER, "--format", "json", "-n", "3"])
    assert r.exit_code == 0
    rows = json.loads(r.output)
    assert rows[0]["op"] == "aten::addmm" and rows[0]["gflops"] > 0
    r = CliRunner().invoke(cli, ["info", EAGER, "--format", "json"])
    info = json.loads(r.output)
    assert info["facts"]["format"] == "kineto"
    assert info["devices"][0]["name"] == "NVIDIA H100 80GB HBM3"


@pytest.mark.parametrize(
    ("content", "needle"),
    [(None, "no such file"), (b"", "empty file"), (b"{not json", "not valid JSON"),
     (b'{"a": 1}', "not a trace")],
)
def test_bad_input_exits_2_with_one_line(tmp_path: Path, content: bytes | None,
                                         needle: str) -> None:
    p = tmp_path / "in.json"
    if content is not None:
        p.write_bytes(content)
    code, out, err = run("top-kernels", str(p))
    assert code == 2
    assert out == ""
    assert err.count("\n") == 1 and str(p) in err and needle in err
    assert "Traceback" not in err


def test_cpu_only_trace_reports_no_kernels(tmp_path: Path) -> None:
    p = tmp_path / "cpu.json"
    p.write_text(json.dumps({"traceEvents": [
        {"ph": "X", "cat": "cpu_op", "name": "aten::add", "pid": 1, "tid": 1, "ts": 1, "dur": 2}
    ]}))
    code, out, err = run("top-kernels", str(p))
    assert code == 0 and "No GPU kernels" in out


def test_python_dash_m_and_version() -> None:
    code, out, _ = run("--version")
    assert code == 0 and "traceforge" in out


def test_step_option_splits_kernel_calls_between_steps() -> None:
    # The eager fixture has steps 2 and 3 with the same model run twice: every kernel
    # call is in exactly one of them.
    def calls(*extra: str) -> int:
        r = CliRunner().invoke(cli, ["top-kernels", EAGER, "-n", "0", "--format", "json", *extra])
        assert r.exit_code == 0, r.output
        return sum(row["calls"] for row in json.loads(r.output))

    total, s2, s3 = calls(), calls("--step", "2"), calls("--step", "3")
    assert s2 + s3 == total and s2 == s3
    r = CliRunner().invoke(cli, ["ops", EAGER, "--step", "9"])
    assert r.exit_code != 0
