"""Progress on stderr where a person watches, nothing when piped or --quiet (issue 25,
item 6)."""

from __future__ import annotations

import pytest

from tests.conftest import FIXTURES, cli_main
from traceforge.commands import progress
from traceforge.formats.multirank import pool_map

DDP = [str(FIXTURES / f"capture_h200x2.ddp_train.sdpa.rank{r}.pt.trace.json.gz")
       for r in (0, 1)]
EAGER = str(FIXTURES / "eager.pt.trace.json.gz")


@pytest.fixture(autouse=True)
def _clean(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(progress.FORCE_ENV, raising=False)
    monkeypatch.delenv(progress.QUIET_ENV, raising=False)


def test_piped_output_is_unchanged() -> None:
    assert not progress.enabled()  # stderr here is not a terminal
    code, out, err = cli_main("top-kernels", *DDP, "-n", "2")
    assert code == 0 and err == ""


def test_a_terminal_sees_what_is_read_and_files_done(monkeypatch: pytest.MonkeyPatch) -> None:
    _, plain, _ = cli_main("top-kernels", *DDP, "-n", "2")
    monkeypatch.setenv(progress.FORCE_ENV, "1")
    code, out, err = cli_main("top-kernels", *DDP, "-n", "2")
    assert code == 0 and out == plain  # stdout untouched
    assert "reading and analysing the run's files" in err and "2/2" in err
    code, _, err = cli_main("info", EAGER)
    assert code == 0 and "traceforge: reading" in err and "eager.pt.trace.json.gz" in err


def test_quiet_silences_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(progress.FORCE_ENV, "1")
    code, _, err = cli_main("--quiet", "top-kernels", *DDP, "-n", "2")
    assert code == 0 and err == ""
    code, _, err = cli_main("-q", "info", EAGER)
    assert code == 0 and err == ""


def test_pool_map_reports_each_result() -> None:
    seen: list[tuple[int, int]] = []
    assert pool_map(abs, [-1, -2, -3], 1, files=[], hint="", done=lambda k, n: seen.append(
        (k, n))) == [1, 2, 3]
    assert seen == [(1, 3), (2, 3), (3, 3)]
