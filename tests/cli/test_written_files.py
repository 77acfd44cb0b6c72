"""Files verbs write: every one named on stderr, compare's runs by sample name, and a
report without matplotlib written without charts (issue 25, item 8)."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

from tests.conftest import FIXTURES, cli_main

EAGER = str(FIXTURES / "eager.pt.trace.json.gz")
COMPILED = str(FIXTURES / "compiled.pt.trace.json.gz")
DDP = [FIXTURES / f"capture_h200x2.ddp_train.sdpa.rank{r}.pt.trace.json.gz" for r in (0, 1)]


def _files(root: Path) -> set[Path]:
    return {p for p in root.rglob("*") if p.is_file()}


def _run_dir(tmp: Path) -> str:
    d = tmp / "ddp"
    d.mkdir()
    for p in DDP:
        shutil.copy(p, d / p.name)
    return str(d)


WRITERS = {
    "report": lambda t: ["report", EAGER, "-o", str(t / "r.html")],
    "annotate": lambda t: ["annotate", EAGER, "-o", str(t / "a.json.gz")],
    "convert": lambda t: ["convert", COMPILED, str(t / "c.json")],
    "compare": lambda t: ["compare", EAGER, COMPILED, "--report", str(t / "cmp.md"),
                          "--chart", str(t / "chart"), "-o", str(t / "tables")],
    "scaling": lambda t: ["scaling", _run_dir(t), "--report", str(t / "s.html"),
                          "-o", str(t / "st")],
    "idle": lambda t: ["idle", EAGER, "-o", str(t / "idle")],
    "info": lambda t: ["info", COMPILED, "-o", str(t / "info"), "--format", "csv"],
}


@pytest.mark.parametrize("verb", sorted(WRITERS))
def test_every_file_written_is_named_on_stderr(verb: str, tmp_path: Path) -> None:
    args = WRITERS[verb](tmp_path)
    before = _files(tmp_path)
    code, out, err = cli_main(*args)
    assert code == 0, err
    new = _files(tmp_path) - before
    assert new
    named = {Path(line.split("wrote ", 1)[1].split(" (")[0])
             for line in err.splitlines() if line.startswith("traceforge: wrote ")}
    assert named == new
    assert "wrote" not in out  # stdout stays the verb's answer


def test_calibrate_names_its_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.cli.test_roofline_cli import fake_measure
    from traceforge.capture import calibrate as cal

    monkeypatch.setattr(cal, "measure", fake_measure)
    code, _, err = cli_main("calibrate", "-o", str(tmp_path / "peaks.json"))
    assert code == 0 and f"traceforge: wrote {tmp_path / 'peaks.json'}" in err


def test_compare_takes_sample_names() -> None:
    code, out, err = cli_main("compare", "sample:h100-eager", "sample:h100-compiled",
                              "--table", "runs", "--format", "csv")
    assert code == 0, err
    assert "h100-eager" in out and "h100-compiled" in out


@pytest.mark.parametrize("suffix", [".md", ".html"])
def test_report_without_matplotlib_has_no_chart_and_says_what_adds_it(
        suffix: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for mod in [m for m in sys.modules if m == "matplotlib" or m.startswith("matplotlib.")]:
        monkeypatch.delitem(sys.modules, mod)
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    rep = tmp_path / f"cmp{suffix}"
    code, _, err = cli_main("compare", EAGER, COMPILED, "--report", str(rep))
    assert code == 0, err
    assert _files(tmp_path) == {rep}
    assert "traceforge[charts]" in rep.read_text() and "traceforge[charts]" in err
    assert f"traceforge: wrote {rep}" in err
    # Asked for by name, a chart is still an error that names the extra.
    code, _, err = cli_main("compare", EAGER, COMPILED, "--chart", str(tmp_path / "c"))
    assert code == 2 and "traceforge[charts]" in err
