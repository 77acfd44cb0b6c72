"""Did-you-mean for mistyped verbs and options; shell completion as the README says
(issue 25, item 11)."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

from tests.conftest import REPO, cli_main


@pytest.mark.parametrize("args,want", [
    (["idel", "x"], "Did you mean 'idle'?"),
    (["top-kernel", "x"], "Did you mean 'top-kernels'?"),
    (["critical_pth", "x"], "Did you mean 'critical-path'?"),
    (["idle", "sample:h100-eager", "--min-gap-ms", "5"], "Did you mean '--min-gap-us'?"),
    (["idle", "sample:h100-eager", "--per_stream"], "Did you mean '--per-stream'?"),
    (["sample:h100-eager"], "traceforge info sample:h100-eager"),
    (["xyzzy"], "Verbs: annotate,"),
])
def test_did_you_mean(args: list[str], want: str) -> None:
    code, out, err = cli_main(*args)
    assert code == 2 and err.count("\n") == 1 and out == ""
    assert want in err


def test_hidden_options_are_not_suggested() -> None:
    code, _, err = cli_main("idle", "sample:h100-eager", "--stpes", "2")
    assert code == 2 and "'--steps'" in err and "'--step'" not in err


def _complete(env: dict[str, str]) -> str:
    """What the shell's completion hook gets from ``traceforge`` (a real process: click
    writes the script as bytes to stdout)."""
    r = subprocess.run([sys.executable, "-m", "traceforge"], capture_output=True, text=True,
                       env={**os.environ, **env}, timeout=60, cwd=REPO)
    assert r.returncode == 0, r.stderr
    return r.stdout


def test_completion_as_the_readme_says() -> None:
    readme = (REPO / "README.md").read_text()
    for shell in ("bash", "zsh", "fish"):
        assert f"_TRACEFORGE_COMPLETE={shell}_source traceforge" in readme
    assert "_TRACEFORGE_COMPLETE=bash_complete" in _complete(
        {"_TRACEFORGE_COMPLETE": "bash_source"})
    out = _complete({"_TRACEFORGE_COMPLETE": "bash_complete", "COMP_WORDS": "traceforge top-k",
                     "COMP_CWORD": "1"})
    assert re.search(r"\btop-kernels\b", out)
    out = _complete({"_TRACEFORGE_COMPLETE": "bash_complete",
                     "COMP_WORDS": "traceforge idle x --min", "COMP_CWORD": "3"})
    assert "--min-gap-us" in out
