"""report --flops-from and --steps, as mfu and the other verbs have them (issue 25,
item 12)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import cli_main
from traceforge.formats import load
from traceforge.report.document import build_report

COMPILED, EAGER = "sample:h100-compiled", "sample:h100-eager"


def _mfu_json(*args: str) -> list[dict[str, object]]:
    code, out, err = cli_main("mfu", COMPILED, *args, "--format", "json")
    assert code == 0, err
    rows: list[dict[str, object]] = json.loads(out)["steps"]
    return rows


def test_report_flops_from_gives_a_compiled_run_the_mfu_verbs_flops() -> None:
    want = _mfu_json("--flops-from", EAGER)
    rep = build_report(load(COMPILED), flops_from=load(EAGER))
    got = rep.runs[0].roofline.mfu
    assert got["gflops"].tolist() == pytest.approx([r["gflops"] for r in want])
    assert got["hfu_pct"].tolist() == pytest.approx([r["hfu_pct"] for r in want])
    # Without it, no FLOPs (the compiled run records no shapes).
    assert build_report(load(COMPILED)).runs[0].roofline.mfu["gflops"].fillna(0).eq(0).all()
    # A run with its own FLOPs keeps them.
    both = build_report(load(EAGER), load(COMPILED), flops_from=load(EAGER))
    own = build_report(load(EAGER)).runs[0].roofline.mfu["gflops"].tolist()
    assert both.runs[0].roofline.mfu["gflops"].tolist() == pytest.approx(own)


def test_report_cli_takes_steps_and_flops_from(tmp_path: Path) -> None:
    out = tmp_path / "r.md"
    code, _, err = cli_main("report", COMPILED, "--flops-from", EAGER, "--steps", "3",
                            "-o", str(out))
    assert code == 0, err
    text = out.read_text()
    table = text[text.index("### FLOPs utilization per step"):]
    table = table[:table.index("\n\n", table.index("|---"))]
    rows = [line for line in table.splitlines() if line.startswith("| 0 |")]
    want = next(r for r in _mfu_json("--flops-from", EAGER) if r["step"] == 3)
    assert len(rows) == 1 and rows[0].startswith("| 0 | 3 |")
    assert f"{want['gflops']:.2f}" in rows[0]
