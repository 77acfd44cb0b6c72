"""Tables fit the terminal (issue 25, item 3): at 100 columns no line is wider and no row
wraps; long names are shortened in the middle; numbers keep every digit.

``python -m tests.unit.render.test_terminal_width`` rewrites docs/terminal-100.txt, the transcript
of the verbs on the bundled samples at 100 columns.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from tests.conftest import REPO, cli_main
from traceforge.render import terminal
from traceforge.render.frame import render_frame
from traceforge.render.text import plain, shorten, shorten_all

TRANSCRIPT = REPO / "docs" / "terminal-100.txt"
VERBS = (["top-kernels"], ["idle"], ["launch"], ["critical-path"])
SAMPLES = ("sample:h100-eager", "sample:h100-compiled")


def _checked_render(seen: list[tuple[int, int]]) -> Any:
    original = terminal.render

    def render(headers: Sequence[str], columns: Sequence[Sequence[str]],
               numeric: Sequence[bool], *, title: str = "", notes: Sequence[str] = (),
               width: int | None = None) -> str:
        out: str = original(headers, columns, numeric, title=title, notes=notes, width=width)
        rows = len(columns[0]) if columns else 0
        lines = out.rstrip("\n").split("\n")
        rule = max(i for i, ln in enumerate(lines) if ln.startswith("━"))  # the last block's
        after = lines[rule + 1 + rows:]
        # one line per row: right after the last row come the notes (or nothing)
        if notes:
            assert after and after[0].split()[:1] == plain(notes[0]).split()[:1], out
        else:
            assert after in ([], [""]), out
        seen.append((rows, max(len(ln) for ln in lines)))
        return out

    return render


@pytest.mark.parametrize("sample", SAMPLES)
@pytest.mark.parametrize("verb", VERBS, ids=lambda v: v[0])
def test_the_verbs_fit_100_columns_without_a_wrapped_row(
        verb: list[str], sample: str, monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[tuple[int, int]] = []
    monkeypatch.setattr(terminal, "render", _checked_render(seen))
    code, out, err = cli_main(*verb, sample, "--width", "100")
    assert code == 0, err
    assert seen, "no table was printed"
    assert max(len(ln) for ln in out.splitlines()) <= 100


def test_names_shorten_in_the_middle_and_numbers_stay_whole() -> None:
    df = pd.DataFrame({"name": ["cutlass_80_wmma_tensorop_bf16_s161616gemm_bf16_32x32_128x2"
                                "_nn_align2"], "calls": [1234567], "total_ns": [9_876_543_210]})
    out = render_frame(df, "table", width=40)
    assert all(len(ln) <= 40 for ln in out.splitlines())
    row = out.splitlines()[-1]
    assert row.startswith("cutlass") and "…" in row and row.split()[0].endswith("align2")
    assert "1,234,567" in row and "9.877" in row and "(s)" in out
    # piped (no width): whole rows, whatever their length
    assert "nn_align2" in render_frame(df, "table", width=None).splitlines()[-1]


def test_a_table_too_wide_for_its_header_words_prints_in_blocks() -> None:
    """Where fitting would break header words into letters (compare's 14-column runs table at
    100 columns read ``g/p/u/s``), the columns print in blocks, each led by the first."""
    heads = ["run", *[f"metric{i} (ms)" for i in range(12)]]
    cols = [["h100-eager", "h100-compiled"], *[["1", "22"]] * 12]
    out = terminal.render(heads, cols, [False, *[True] * 12], width=60)
    lines = out.splitlines()
    assert max(len(ln) for ln in lines) <= 60
    assert sum(ln.startswith("━") for ln in lines) >= 2
    for i in range(12):  # every header word whole, every column once
        assert sum(f"metric{i}" in ln.split() for ln in lines) == 1, out
    assert sum(ln.startswith("h100-c") for ln in lines) == sum(
        ln.startswith("━") for ln in lines)
    # a table that fits stays one block
    one = terminal.render(heads[:3], cols[:3], [False, True, True], width=60)
    assert sum(ln.startswith("━") for ln in one.splitlines()) == 1
    # the compare runs table at 100 columns: no header broken into letters
    code, out, err = cli_main("compare", "sample:h100-eager", "sample:h100-compiled",
                              "--width", "100")
    assert code == 0, err
    assert max(len(ln) for ln in out.splitlines()) <= 100
    assert "kernels" in out.split() and "speedup" in out.split()


#: Three GEMMs of the H100 sample whose names differ only in the middle (issue 25, item 3).
NVJET = ["nvjet_sm90_tst_24x64_64x16_4x1_v_bz_bias_TNN",
         "nvjet_sm90_tst_40x64_64x16_4x1_v_bz_bias_TNN",
         "nvjet_sm90_tst_8x64_64x16_2x1_v_bz_bias_TNN"]


@pytest.mark.parametrize("width", [31, 24, 16, 12, 8])
def test_names_alike_at_both_ends_keep_the_part_that_differs(width: int) -> None:
    # The usual middle cut prints them alike (the bug) ...
    assert len({shorten(n, width) for n in NVJET}) == 1
    others = ["nvjet_sm90_tst_128x64_64x8_4x1_v_bz_bias_TNT", "aten::mm", "aten::mm"]
    got = shorten_all([*NVJET, *others], width)
    assert all(len(g) <= width for g in got)
    # ... shortened together they stay apart, showing where they differ,
    assert len(set(got[:3])) == 3
    if width >= 12:
        for g, tile in zip(got[:3], ("24x64", "40x64", "8x64"), strict=True):
            assert tile in g, (g, width)
    # and what did not collide is left as the usual cut makes it (equal names stay equal).
    assert got[3:] == [shorten(n, width) for n in others]


def test_top_kernels_names_stay_distinguishable_at_100_columns() -> None:
    code, out, err = cli_main("top-kernels", "sample:h100-eager", "-n", "0", "--width", "100")
    assert code == 0, err
    code, js, err = cli_main("top-kernels", "sample:h100-eager", "-n", "0", "--format", "json")
    full = [r["name"] for r in json.loads(js)]
    lines = out.splitlines()
    rule = next(i for i, ln in enumerate(lines) if ln.startswith("━"))
    shown = [ln.split("  ")[0] for ln in lines[rule + 1:rule + 1 + len(full)]]
    assert len(set(shown)) == len(set(full)) == len(full)
    assert any("24x64" in s for s in shown) and any("40x64" in s for s in shown)


def test_width_comes_from_the_option_the_environment_or_the_terminal(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRACEFORGE_WIDTH", "77")
    assert terminal.table_width() == 77
    monkeypatch.delenv("TRACEFORGE_WIDTH")
    monkeypatch.setattr(sys.stdout, "isatty", lambda: False, raising=False)
    assert terminal.table_width() is None
    code, _, err = cli_main("top-kernels", "sample:h100-eager", "--width", "5")
    assert code == 2 and "--width" in err


def test_the_transcript_fits_100_columns() -> None:
    text = TRANSCRIPT.read_text(encoding="utf-8")
    for verb in VERBS:
        assert f"$ traceforge {verb[0]} " in text
    assert max(len(ln) for ln in text.splitlines()) <= 100


def transcript() -> str:
    """The transcript: each verb on each bundled sample at --width 100."""
    parts = []
    for sample in SAMPLES:
        for verb in VERBS:
            code, out, err = cli_main(*verb, sample, "--width", "100")
            assert code == 0, err
            parts.append(f"$ traceforge {' '.join(verb)} {sample} --width 100\n{out}")
    return "\n".join(parts)


def test_diff_head_lines_wrap_at_the_width() -> None:
    code, out, err = cli_main("diff", *SAMPLES, "--width", "100")
    assert code == 0, err
    assert max(len(ln) for ln in out.splitlines()) <= 100
    assert "step-time speedup" in out


if __name__ == "__main__":  # pragma: no cover
    Path(TRANSCRIPT).write_text(transcript(), encoding="utf-8")
    print(f"wrote {TRANSCRIPT}")
