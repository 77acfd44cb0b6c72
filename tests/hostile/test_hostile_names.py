"""Names from traces are untrusted text (issue 31, items 6 and 10): every output shows them
as plain text, with control characters escaped, never as markup, emoji or a formula.

Each trace here is generated in the test: two steps in which a CPU op launches a kernel
named by the test, beside ordinary kernels.
"""

from __future__ import annotations

import csv
import io
import json
import re
import warnings
from pathlib import Path

import pytest

from tests.conftest import cli_main

MARKUP = ["ncclDevKernel_AllReduce [/tmp/x]", "fused[bold]_kernel", "kern :fire: :x:",
          "[link=http://x]click[/link]", "a\\[b]"]
CONTROL = ["title\x1b]0;owned\x07_kernel", "clear\x1b[2J\x1b[H_kernel", "bell\x07\x08\x7f",
           "c1\x9b31m_kernel", "bidi\u202egnp.exe", "tab\tnew\nline\rret"]
FORMULA = ["=HYPERLINK(\"http://x\",\"y\")", "+cmd|' /C calc'!A0", "-2+3+cmd", "@SUM(1+1)"]
#: Bytes no output may hold: C0 (but newline), DEL, C1, bidirectional overrides.
UNSAFE = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def write_trace(path: Path, names: list[str], steps: int = 2) -> Path:
    """A Kineto trace: ``steps`` ProfilerSteps, each launching one kernel per name and a
    plain GEMM, a gap between them (so idle, launch and critical-path have rows)."""
    evs: list[dict[str, object]] = []
    t, corr = 1000.0, 1
    for s in range(steps):
        start = t
        for name in [*names, "nvjet_sm90_tst_128x64_64x8_1x2_h_bz_TNT"]:
            evs.append({"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1,
                        "ts": t, "dur": 8.0, "args": {"External id": corr}})
            evs.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel",
                        "pid": 1, "tid": 1, "ts": t + 1, "dur": 3.0,
                        "args": {"External id": corr, "correlation": corr}})
            evs.append({"ph": "X", "cat": "kernel", "name": name, "pid": 0, "tid": 7,
                        "ts": t + 6, "dur": 4.0 + corr % 3,
                        "args": {"External id": corr, "correlation": corr, "device": 0,
                                 "stream": 7, "grid": [4, 1, 1], "block": [128, 1, 1]}})
            t += 20.0
            corr += 1
        evs.append({"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{s}",
                    "pid": 1, "tid": 1, "ts": start - 1, "dur": t - start + 2})
        t += 50.0
    path.write_text(json.dumps({"schemaVersion": 1, "traceEvents": evs}))
    return path


def run(*args: str) -> str:
    code, out, err = cli_main(*args)
    assert code == 0, err
    assert not UNSAFE.search(out), repr(UNSAFE.search(out))
    assert not UNSAFE.search(err), repr(UNSAFE.search(err))
    return out


@pytest.mark.parametrize("verb", [["top-kernels"], ["idle"], ["launch"], ["roofline", "--by",
                                                                            "kernel"]])
def test_markup_in_names_is_shown_as_written(tmp_path: Path, verb: list[str]) -> None:
    # GIVEN names rich would read as markup or emoji (one crashed it with MarkupError)
    tr = write_trace(tmp_path / "t.json", MARKUP)
    out = run(*verb, str(tr), "--width", "400")
    # THEN each verb ends well and, where it lists kernels, shows the names as written
    if verb == ["top-kernels"]:
        for name in MARKUP:
            assert name in out, name
        assert "\N{FIRE}" not in out and "\N{CROSS MARK}" not in out


def test_markup_in_diff_and_critical_path(tmp_path: Path) -> None:
    a = write_trace(tmp_path / "a.json", MARKUP)
    b = write_trace(tmp_path / "b.json", MARKUP[:2])
    out = run("diff", str(a), str(b), "--width", "400")
    assert "kern :fire: :x:" in out and "[link=http://x]click[/link]" in out
    run("critical-path", str(a), "--width", "400")


@pytest.mark.parametrize("fmt", ["table", "md", "csv", "json"])
def test_control_characters_never_reach_the_output(tmp_path: Path, fmt: str) -> None:
    tr = write_trace(tmp_path / "t.json", CONTROL)
    out = run("top-kernels", str(tr), "--format", fmt, "--width", "400")
    if fmt == "json":  # JSON escapes them itself: the full name is there, exactly
        names = {r["name"] for r in json.loads(out)}
        assert set(CONTROL) <= names
    else:  # the others show them as visible escapes
        assert "title\\x1b]0;owned\\x07_kernel" in out
        assert "bidi\\u202egnp.exe" in out and "tab\\tnew\\nline\\rret" in out


def test_csv_cells_never_start_a_formula(tmp_path: Path) -> None:
    tr = write_trace(tmp_path / "t.json", FORMULA)
    out = run("top-kernels", str(tr), "--format", "csv")
    rows = list(csv.DictReader(io.StringIO(out)))
    names = [r["name"] for r in rows]
    for name in FORMULA:
        assert "'" + name in names, (name, names)
    assert all(n[:1] not in "=+-@" for n in names)
    # numbers stay numbers
    assert all(float(r["calls"]) == 2 for r in rows)


def test_reports_escape_names(tmp_path: Path) -> None:
    tr = write_trace(tmp_path / "t.json", CONTROL + MARKUP + ["<script>alert(1)</script>"])
    for name in ("r.md", "r.html"):
        run("report", str(tr), "-o", str(tmp_path / name))
        text = (tmp_path / name).read_text(encoding="utf-8")
        assert not UNSAFE.search(text), (name, UNSAFE.search(text))
        assert "title\\x1b]0;owned" in text
    assert "<script>alert" not in (tmp_path / "r.html").read_text(encoding="utf-8")


def test_chart_labels_are_plain_text() -> None:
    pytest.importorskip("matplotlib")
    from traceforge.render import charts

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # "Glyph 27 missing" and mathtext errors fail here
        svg = charts.hbar(["esc\x1b[2J", "$x^2$ money $", "ok"], [1.0, 2.0, 3.0], unit="us")
    assert not UNSAFE.search(svg)
    assert "esc\\x1b[2J" in svg and "$x^2$ money $" in svg


def test_a_huge_name_is_shortened_in_tables_and_whole_in_json(tmp_path: Path) -> None:
    from traceforge.render.text import DISPLAY_CAP

    # GIVEN a 2 MB kernel name (rich's line splitting took 60 s over a 50 MB one)
    huge = "k" + "_tile128x64" * 200_000 + "_end"
    tr = write_trace(tmp_path / "t.json", [huge], steps=1)
    # THEN the table shows at most DISPLAY_CAP characters of it, start and end kept
    out = run("top-kernels", str(tr))
    assert max(len(line) for line in out.splitlines()) < DISPLAY_CAP + 200
    assert "…" in out and "_end" in out
    md = run("top-kernels", str(tr), "--format", "md")
    assert len(md) < 10 * DISPLAY_CAP
    # AND JSON keeps the whole name
    assert huge in {r["name"] for r in json.loads(run("top-kernels", str(tr), "--format",
                                                      "json"))}


@pytest.mark.parametrize("chunk", [3, 1 << 23])
def test_the_escape_fast_path_says_what_the_regex_says(
        chunk: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """``plain_lines`` skips its regex for ASCII text with nothing to escape, checked a
    chunk at a time; every unsafe character, at any place (chunk seams included), in
    ASCII text or not, still takes the regex, and JSON bytes are checked the same way."""
    from traceforge.render import frame, text

    monkeypatch.setattr(text, "_CHUNK", chunk)
    unsafe = [chr(c) for c in range(0x20) if c != 0x0A] + ["\x7f", "\x85", "\u202e"]
    bases = ["", "plain\nlines\n", "k" * 10, "é ok", "ﬁ\n"]
    for base in bases:
        assert text.plain_lines(base) == text._UNSAFE_INLINE.sub(text._u_escape, base)
        for ch in unsafe:
            for at in range(len(base) + 1):
                s = base[:at] + ch + base[at:]
                want = text._UNSAFE_INLINE.sub(text._u_escape, s)
                assert want != s and text.plain_lines(s) == want, (base, ch, at)
    assert text.safe_ascii(b'{\n  "a": 1\n}') and not text.safe_ascii(b"\x1b")
    assert not text.safe_ascii("é".encode())
    doc = {"name": "x\x85y\u202e", "ok": "tab\there"}
    assert b"\\u0085" in frame.to_json_bytes(doc) and b"\\u202e" in frame.to_json_bytes(doc)
    assert json.loads(frame.to_json_bytes(doc)) == doc


def test_csv_cells_of_each_distinct_text_once_equal_cell_by_cell() -> None:
    """A column of text (names repeat) gets ``csv_cell`` of each distinct value once, the
    same cells and dtype as cell by cell; a column with missing values or not all text
    (1, 1.0 and True are one key to a hash) goes cell by cell."""
    import pandas as pd

    from traceforge.render import frame
    from traceforge.render.text import csv_cell

    texts = ["=HYPERLINK(1)", "-1.5", "@x", "+", "k\x1b]0;t\x07", "plain", "é\u202e"]
    columns = [
        pd.Series(texts * 3, dtype=object),
        pd.Series(texts * 3, dtype="string"),
        pd.Series(texts * 3 + [None, float("nan")], dtype=object),
        pd.Series(texts * 2 + [None], dtype="string"),
        pd.Series(texts + [None], dtype="str"),
        pd.Series([1, 1.0, True, "=x", None], dtype=object),
        pd.Series([], dtype=object),
    ]
    for s in columns:
        want = pd.Series([csv_cell(v) for v in s.to_numpy(dtype=object).tolist()],
                         index=s.index, dtype=object)
        got = frame._csv_cells(s)
        pd.testing.assert_series_equal(got, want)
        assert [type(v) for v in got] == [type(v) for v in want]
    # Each cell as itself: an int beside a missing value is not made a float (``1.0``).
    mixed = pd.DataFrame({"v": pd.Series([1, None, "x"], dtype=object), "n": [1, 2, 3]})
    assert frame.render_frame(mixed, "csv") == "v,n\n1,1\n,2\nx,3\n"
