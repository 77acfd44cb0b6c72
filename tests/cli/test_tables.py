"""Every table of a verb is reachable in every format; the notebook names mirror the CLI."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pandas as pd
import pytest

import traceforge as tf
from tests.conftest import FIXTURES, cli_main

EAGER = str(FIXTURES / "eager.pt.trace.json.gz")
SDPA = str(FIXTURES / "sdpa.pt.trace.json.gz")


@pytest.mark.parametrize("verb,names", [
    (["idle", EAGER], ["summary", "histogram", "gaps"]),
    (["launch", EAGER], ["steps", "kernels"]),
    (["overlap", EAGER], ["ranks", "skew"]),
    (["info", EAGER], ["facts", "kinds", "devices"]),
    (["diff", EAGER, SDPA], ["summary", "by_class", "by_neutral", "by_family", "replacements",
                             "only_a",
                             "only_b", "ops", "comm"]),
    (["scaling", EAGER], ["runs", "losses", "ranks", "fit"]),
    (["compare", EAGER, SDPA], ["runs", "classes", "families", "counts", "comm"]),
])
def test_each_table_by_name_and_all_to_a_folder(verb: list[str], names: list[str],
                                               tmp_path: Path) -> None:
    # CSV without --table: the main table, and the others named on stderr.
    code, out, err = cli_main(*verb, "--format", "csv")
    assert code == 0, err
    assert all(n in err for n in names[1:]) and "--table" in err
    main = pd.read_csv(io.StringIO(out))
    for name in names:
        code, out, err = cli_main(*verb, "--format", "csv", "--table", name)
        assert code == 0, err
        if name == names[0]:
            assert pd.read_csv(io.StringIO(out)).equals(main)
    code, _, err = cli_main(*verb, "--format", "csv", "-o", str(tmp_path / "out"))
    assert code == 0, err
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == sorted(f"{n}.csv"
                                                                        for n in names)
    code, out, _ = cli_main(*verb, "--format", "json", "--table", names[0])
    assert isinstance(json.loads(out), list)
    code, _, err = cli_main(*verb, "--table", "nope")
    assert code == 2 and "no such table" in err and names[0] in err


@pytest.mark.parametrize("verb,names", [
    (["scaling", EAGER], ["runs", "losses", "ranks", "fit"]),
    (["compare", EAGER, SDPA], ["runs", "classes", "families", "counts", "comm"]),
])
def test_scaling_and_compare_list_their_tables_and_refuse_bad_input(
        verb: list[str], names: list[str], tmp_path: Path) -> None:
    code, out, _ = cli_main(verb[0], "--help")
    assert code == 0 and "Tables: " + ", ".join(names) in " ".join(out.split())
    assert "--report FILE" in out and "--out-dir DIR" in out
    afile = tmp_path / "afile"
    afile.write_text("")
    for bad, says in ((["--table", "nosuch"], "--table nosuch: no such table (have: "
                                              + ", ".join(names) + ")"),
                      (["--report", str(tmp_path / "x.txt")], "the report is .md or .html"),
                      (["-o", str(afile / "sub")], "cannot write"),
                      (["-o", str(tmp_path / "r.md")], "write the report with --report"),
                      (["-o", str(afile)], "is a file")):
        code, out, err = cli_main(*verb, *bad)
        assert code == 2 and err.count("\n") == 1 and says in err, (bad, err)
        assert out == ""
    assert not (tmp_path / "r.md").exists() and not (tmp_path / "x.txt").exists()


def test_compare_and_scaling_keep_their_json_and_wide_tables(tmp_path: Path) -> None:
    # JSON stays the verbs' own object (not the tables keyed by name).
    code, out, err = cli_main("compare", EAGER, SDPA, "--format", "json")
    assert code == 0, err
    assert list(json.loads(out)) == ["baseline", "runs", "by_class", "by_family", "comm",
                                     "steps_from", "notes"]
    code, out, err = cli_main("scaling", EAGER, "--format", "json")
    assert code == 0, err
    assert list(json.loads(out)) == ["weak", "formula", "steps_from", "runs", "losses",
                                     "ranks", "fit", "chart", "comm", "notes"]
    # Markdown (and -o DIR in md) lines the runs up in columns; CSV has one row per run.
    code, _, err = cli_main("compare", EAGER, SDPA, "--format", "md", "-o", str(tmp_path))
    assert code == 0, err
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "classes.md", "comm.md", "counts.md", "families.md", "runs.md"]
    assert "| class | eager ms | sdpa ms | sdpa vs eager |" in (tmp_path / "classes.md").read_text()
    assert "_baseline: eager_" in (tmp_path / "runs.md").read_text()
    code, out, _ = cli_main("compare", EAGER, SDPA, "--format", "csv", "--table", "classes")
    assert out.splitlines()[0] == "class,run,ms,calls,share_pct,speedup"


def test_idle_gaps_table_keeps_exact_ns() -> None:
    code, out, _ = cli_main("idle", EAGER, "--format", "csv", "--table", "gaps", "-n", "0")
    gaps = pd.read_csv(io.StringIO(out))
    r = tf.idle(tf.load(EAGER), n=0)
    assert sorted(gaps["dur"].tolist()) == sorted(r.gaps["dur"].tolist())
    assert sorted(r.raw.gaps["dur"].tolist()) == sorted(r.gaps["dur"].tolist())


def test_notebook_names_mirror_the_verbs() -> None:
    t = tf.load(EAGER)
    assert tf.launch is tf.launch_overhead
    assert tf.info(t).facts["steps"] == [2, 3]
    for res in (tf.idle(t), tf.launch(t), tf.overlap(t), tf.info(t)):
        html = res._repr_html_()
        assert html.startswith("<div>") and "<table" in html
    names = dir(tf)
    assert "importlib" not in names and "TYPE_CHECKING" not in names
    assert set(names) == set(tf.__all__) | {"__version__"}


def test_notebook_report_is_the_cli_report(tmp_path: Path) -> None:
    """tf.report mirrors the verb: the same runs, findings and, written, the same bytes."""
    a, b = tf.load(EAGER), tf.load(SDPA)
    rep = tf.report(a, b)
    assert isinstance(rep, tf.Report) and callable(tf.report)
    assert [r.label for r in rep.runs] == ["eager", "sdpa"] and len(rep.diffs) == 1
    assert list(rep.comparison["run"]) == ["eager", "sdpa"]
    for suffix in (".html", ".md"):
        mine = tf.write_report(rep, tmp_path / f"api{suffix}")
        code, _, err = cli_main("report", EAGER, SDPA, "-o", str(tmp_path / f"cli{suffix}"))
        assert code == 0, err
        assert mine.read_bytes() == (tmp_path / f"cli{suffix}").read_bytes()
    page = rep._repr_html_()
    assert "findings" in page and "comparison" in page and "eager: overview" in page
    with pytest.raises(tf.UsageError, match="name the report .html or .md"):
        tf.write_report(rep, tmp_path / "x.txt")


def test_diff_and_run_tables_render_in_jupyter() -> None:
    d = tf.diff(tf.load(EAGER), tf.load(SDPA))
    page = d._repr_html_()
    assert all(f"<h4>{n}" in page for n in ("summary", "by_class", "by_neutral", "ops"))
    run = tf.report(tf.load(EAGER)).runs[0]
    assert "<h4>top_kernels" in run._repr_html_()
