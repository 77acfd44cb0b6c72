"""A folder of one run's traces wherever several traces are taken (issue 25, item 9)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.conftest import FIXTURES, cli_main

RUNS = [FIXTURES / "eager.pt.trace.json.gz", FIXTURES / "compiled.pt.trace.json.gz"]


def _calls(*args: str) -> dict[str, int]:
    code, out, err = cli_main("top-kernels", *args, "-n", "0", "--format", "json")
    assert code == 0, err
    return {r["name"]: r["calls"] for r in json.loads(out)}


def test_top_kernels_of_a_folder_of_single_gpu_runs(tmp_path: Path) -> None:
    for p in RUNS:
        shutil.copy(p, tmp_path / p.name)
    (tmp_path / "latency.json").write_text("{}")
    got = _calls(str(tmp_path))
    # Oracle: each file alone, added up.
    want: dict[str, int] = {}
    for p in RUNS:
        for k, v in _calls(str(p)).items():
            want[k] = want.get(k, 0) + v
    assert got == want
    code, out, _ = cli_main("top-kernels", str(tmp_path), "-n", "3")
    assert code == 0 and "2 traces that state no rank" in out and "traceforge compare" in out


@pytest.mark.parametrize("verb", ["top-kernels", "idle", "overlap", "breakdown",
                                  "critical-path", "launch", "report"])
def test_an_empty_folder_is_one_line(verb: str, tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("hi")
    args = [verb, str(tmp_path)] + (["-o", str(tmp_path / "r.md")] if verb == "report" else [])
    code, out, err = cli_main(*args)
    assert code == 2 and err.count("\n") == 1, err
    assert str(tmp_path) in err and "no trace files" in err


def test_rankless_files_as_ranks_say_what_to_do(tmp_path: Path) -> None:
    for p in RUNS:
        shutil.copy(p, tmp_path / p.name)
    code, _, err = cli_main("idle", str(tmp_path))
    assert code == 2 and err.count("\n") == 1
    assert "no rank" in err and "traceforge compare" in err
