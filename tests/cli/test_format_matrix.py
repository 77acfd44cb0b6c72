"""Every format through the same commands: the analyzers never see a format."""

from __future__ import annotations

import csv
import importlib.util
import io
from pathlib import Path

import pytest
from click.testing import CliRunner

import traceforge as tf
from tests.conftest import shared
from traceforge.cli import COMMANDS as COMMAND_MODULES
from traceforge.cli import cli
from traceforge.errors import TraceFormatError

#: One file of each format (format name as the reader reports it).
FILES = {
    "kineto": "h100/compiled.pt.trace.json.gz",
    "nsys-sqlite": "external/nvfuser/8fa9ec29/report1.sqlite",
    "rocprofv3-json": "external/tracelens/rocprof/908_results.json.gz",
    "rocprofv3-csv": "external/rocprofiler-sdk/kernel_trace.csv",
    "rocprof-csv": "external/hpctrainingexamples/finite-difference/results.csv",
    "rocprof-db": "external/kokkos_rocprof/6f0a1c4a/results.db",
    "rocprof-json": "external/kokkos_rocprof/6f0a1c4a/results.json",
}
COMMANDS = ("top-kernels", "idle", "overlap")


@pytest.fixture(scope="module")
def pftrace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    pytest.importorskip("perfetto")
    out = tmp_path_factory.mktemp("matrix") / "nsys.pftrace"
    res = CliRunner().invoke(cli, ["convert", str(shared(FILES["nsys-sqlite"])), str(out)])
    assert res.exit_code == 0, res.output
    return out


def _path(fmt: str, pftrace_path: Path | None) -> Path:
    return pftrace_path if fmt == "perfetto" and pftrace_path else shared(FILES[fmt])


@pytest.mark.parametrize("fmt", [*FILES, "perfetto"])
@pytest.mark.parametrize("command", COMMANDS)
def test_commands_run_on_every_format(fmt: str, command: str, request: pytest.FixtureRequest
                                      ) -> None:
    mod = command.replace("-", "_")
    if mod not in COMMAND_MODULES or importlib.util.find_spec(f"traceforge.commands.{mod}") is None:
        pytest.skip(f"{command} not available")
    p = _path(fmt, request.getfixturevalue("pftrace") if fmt == "perfetto" else None)
    t = tf.load(p)
    assert t.meta.format == fmt
    limit = ["-n", "0"] if command == "top-kernels" else []
    res = CliRunner().invoke(cli, [command, str(p), *limit, "--format", "csv"])
    assert res.exit_code == 0, res.output
    if command == "top-kernels":
        rows = list(csv.DictReader(io.StringIO(res.output)))
        assert sum(int(r["calls"]) for r in rows) == len(t.kernels()) > 0
    else:
        assert res.output.strip()


def test_unknown_format_lists_supported(tmp_path: Path) -> None:
    p = tmp_path / "notes.txt"
    p.write_text("hello\n")
    with pytest.raises(TraceFormatError, match=r"not a supported trace \(supported: .*Nsight"):
        tf.load(p)
    res = CliRunner().invoke(cli, ["top-kernels", str(p)])
    assert res.exit_code != 0
