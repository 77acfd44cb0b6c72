"""capture where traceforge's Python has no torch: one line saying so and how to point
capture at the Python that has it, exit 2 (issue 25, item 2). Runs without torch."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tests.conftest import cli_main


@pytest.fixture
def no_torch(monkeypatch: pytest.MonkeyPatch) -> None:
    for mod in [m for m in sys.modules if m == "torch" or m.startswith("torch.")]:
        monkeypatch.delitem(sys.modules, mod)
    monkeypatch.setitem(sys.modules, "torch", None)


def test_capture_without_torch_is_one_line(no_torch: None, tmp_path: Path) -> None:
    script = tmp_path / "infer.py"
    script.write_text("print('ran')\n")
    code, out, err = cli_main("capture", "-o", str(tmp_path / "out"), "--", "python",
                              str(script))
    assert code == 2 and err.count("\n") == 1, err
    assert "has no torch" in err and "traceforge[torch]" in err
    assert "-m traceforge capture" in err and "ran" not in out
    assert not (tmp_path / "out").exists()


def test_the_line_names_the_python_the_script_was_meant_for(no_torch: None,
                                                            tmp_path: Path) -> None:
    other = tmp_path / "python3.99"
    other.write_text("#!/bin/sh\n")
    other.chmod(0o755)
    script = tmp_path / "infer.py"
    script.write_text("print('ran')\n")
    code, _, err = cli_main("capture", "--mode", "eager,sdpa", "-o", str(tmp_path / "o"),
                            "--", str(other), str(script))
    assert code == 2 and err.count("\n") == 1
    assert f"{other} -m traceforge capture" in err
