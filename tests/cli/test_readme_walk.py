"""What a new user met walking the README on the repo's fixtures (issue 25): each fix
with the check that failed before it."""

from __future__ import annotations

import re

from tests.conftest import FIXTURES, REPO, cli_main

GRAPHS = FIXTURES / "h200-graphs"


def test_info_notes_are_whole_under_the_table_not_cut_in_a_cell() -> None:
    code, out, err = cli_main("info", str(GRAPHS), "--width", "100")
    assert code == 0, err
    # The note names the file it did not read and what to do with it, whole (wrapped).
    assert "latency_d768.json" in out and "report --latency" in out
    assert all(len(ln) <= 100 for ln in out.splitlines())
    # Facts say what they are, counts read like the other tables' counts.
    assert "outlier steps (left out of step time)" in out and "outlier_steps" not in out
    assert re.search(r"^events\s+2,158$", out, re.M) and re.search(r"^kernels\s+1,929$", out,
                                                                      re.M)
    # CSV keeps the notes as rows of the facts table.
    code, out, err = cli_main("info", str(GRAPHS), "--format", "csv")
    assert code == 0, err
    assert "note," in out


def test_readme_names_the_options_the_verbs_have() -> None:
    # The roofline row and examples said --step, which --help does not list (hidden alias).
    text = (REPO / "README.md").read_text(encoding="utf-8")
    assert not re.search(r"--step [N0-9]", text)
    code, out, err = cli_main("roofline", "--help")
    assert code == 0 and "--steps" in out and "--flops-from" in out


def test_compare_leaves_out_columns_with_no_value() -> None:
    # Under pandas 3 text columns are "str", not object: "latency from" and "peak memory
    # from" (both runs without a capture summary) were printed as blank columns.
    import pandas as pd

    from traceforge.render.tables import drop_empty

    df = pd.DataFrame({"a": ["", ""], "b": [None, None], "c": ["x", ""], "d": [1.0, None],
                       "e": [float("nan")] * 2})
    assert drop_empty(df).columns.tolist() == ["c", "d"]
    assert drop_empty(df.astype({"a": "string", "c": "string"})).columns.tolist() == ["c", "d"]
    code, out, err = cli_main("compare", "sample:h100-eager", "sample:h100-compiled",
                              "--table", "runs", "--width", "200")
    assert code == 0, err
    assert "latency from" not in out and "peak memory from" not in out
