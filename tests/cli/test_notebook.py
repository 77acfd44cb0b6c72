"""The notebook API returns what the CLI shows: the same facts, tables, names and units
(issue 25, item 14)."""

from __future__ import annotations

import json

import pandas as pd
import pytest

import traceforge as tf
from tests.conftest import FIXTURES, cli_main

EAGER = str(FIXTURES / "eager.pt.trace.json.gz")
DDP = [str(FIXTURES / f"capture_h200x2.ddp_train.sdpa.rank{r}.pt.trace.json.gz")
       for r in (0, 1)]


def _frame(rows: list[dict[str, object]], like: pd.DataFrame) -> pd.DataFrame:
    return pd.DataFrame(rows, columns=list(like.columns))


def test_info_has_the_facts_the_cli_prints() -> None:
    code, out, err = cli_main("info", EAGER, "--format", "json")
    assert code == 0, err
    cli = json.loads(out)
    s = tf.info(tf.load(EAGER))
    # The same facts under the same names and units (integer ns: span_ns, step_time_ns).
    mine = json.loads(json.dumps(s.facts, default=str))
    assert cli["facts"] == mine
    assert isinstance(s.facts["span_ns"], int) and "span_ms" not in s.facts
    assert len(cli["facts"]) == len(mine)
    assert s.kinds.to_dict("records") == cli["kinds"]
    assert list(s.notes) == cli["notes"]
    assert tf.info(EAGER).facts == s.facts  # a path works too
    html = s._repr_html_()
    assert "<h4>facts</h4>" in html and "steps from" in html  # shown in Jupyter


@pytest.mark.parametrize("args,kw", [((), {}), (("-n", "3", "--min-gap-us", "100"),
                                                {"n": 3, "min_gap_us": 100})])
def test_idle_returns_the_cli_tables(args: tuple[str, ...], kw: dict[str, float]) -> None:
    code, out, err = cli_main("idle", EAGER, *args, "--format", "json")
    assert code == 0, err
    cli = json.loads(out)
    r = tf.idle(tf.load(EAGER), **kw)  # type: ignore[arg-type]
    for name in ("summary", "histogram", "gaps"):
        mine = getattr(r, name)
        pd.testing.assert_frame_equal(mine.reset_index(drop=True).astype(object),
                                      _frame(cli[name], mine).astype(object),
                                      check_dtype=False)
    assert r.steps_from == cli["steps_from"] and r.span_ns == cli["span_ns"]
    assert len(r.gaps) == (kw.get("n") or 10)
    # The raw frames are one attribute away: every gap at least min_gap_us long.
    assert len(r.raw.gaps) >= len(r.gaps)
    assert (r.raw.gaps["dur"] >= kw.get("min_gap_us", 0) * 1e3).all()
    assert set(r.gaps["dur"]) <= set(r.raw.gaps["dur"])


def test_idle_of_a_run_matches_the_cli() -> None:
    code, out, err = cli_main("idle", *DDP, "--format", "json", "-n", "5")
    assert code == 0, err
    cli = json.loads(out)
    r = tf.idle(DDP, n=5)
    assert r.gaps["dur"].tolist() == [g["dur"] for g in cli["gaps"]]
    assert r.gaps["rank"].tolist() == [g["rank"] for g in cli["gaps"]]
    assert r.summary["idle_ns"].tolist() == [s["idle_ns"] for s in cli["summary"]]
