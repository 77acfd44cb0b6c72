"""Where users look at memory (issue 27 item 3): the report's memory section and
annotate's counter tracks show ``traceforge memory``'s numbers, on the H100 capture whose
peak equals ``torch.cuda.max_memory_allocated`` (746,520,576 bytes)."""

from __future__ import annotations

import json
from pathlib import Path

from tests.conftest import FIXTURES
from traceforge.cli import main

F = FIXTURES / "capture_h100.memory_train.both.pt.trace.json.gz"
PEAK = 746_520_576


def _run(*args: str) -> None:
    try:
        main(list(args))
    except SystemExit as e:
        assert not e.code, e.code


def test_report_memory_section_has_the_peak(cdir: Path, tmp_path: Path) -> None:
    out = tmp_path / "r.md"
    _run("report", str(F), "-o", str(out))
    text = out.read_text()
    assert "Memory per device" in text and "Allocated memory per step" in text
    row = next(line for line in text.splitlines() if "| cuda:0 | recorded |" in line)
    assert f"| {PEAK / 2**20:,.2f} |" in row  # MiB


def test_annotate_writes_memory_counter_tracks(cdir: Path, tmp_path: Path) -> None:
    out = tmp_path / "a.json"
    _run("annotate", str(F), "-o", str(out))
    doc = json.loads(out.read_text())
    evs = doc["traceEvents"] if isinstance(doc, dict) else doc
    cuda = [e for e in evs if e.get("ph") == "C" and e.get("name") == "memory cuda:0 (rank 0)"]
    assert cuda and max(e["args"]["allocated_bytes"] for e in cuda) == PEAK
    assert all("reserved_bytes" in e["args"] for e in cuda)
