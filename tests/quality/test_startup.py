"""Start-up (issue 26): ``traceforge --help`` lists the verbs from their modules' source
without importing them (the listing must say exactly what the imported commands say), the
capture wrapper, which runs inside the profiled process, loads no pandas or numpy, and a
verb on a Kineto trace loads no other format's reader."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import click
import pytest

from traceforge.cli import COMMANDS, cli, listing

SAMPLE = Path(__file__).resolve().parents[2] / "fixtures" / "eager.pt.trace.json.gz"


@pytest.mark.parametrize("mod", COMMANDS)
def test_the_listing_says_what_the_command_says(mod: str) -> None:
    name = mod.replace("_", "-")
    stand_in = listing(name)
    assert stand_in is not None, f"commands/{mod}.py: give `command` a docstring, or list it"
    real = cli.get_command(click.Context(cli), name)
    assert real is not None and not real.hidden
    for limit in (20, 45, 60, 74, 120, 400):
        assert stand_in.get_short_help_str(limit) == real.get_short_help_str(limit)


def test_help_imports_no_verb_module() -> None:
    code = ("import sys\nfrom traceforge.cli import main\ntry:\n    main(['--help'])\n"
            "except SystemExit:\n    pass\n"
            "print(sorted(m for m in sys.modules if m.startswith('traceforge.commands.')),"
            " file=sys.stderr)")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0, r.stderr
    assert "top-kernels" in r.stdout
    assert r.stderr.strip().splitlines()[-1] == "['traceforge.commands.values']"


def test_the_capture_wrapper_loads_no_data_libraries() -> None:
    code = ("import sys, click\nfrom traceforge.cli import cli\n"
            "cli.get_command(click.Context(cli), 'capture')\n"
            "import traceforge.capture.dispatch, traceforge.capture.runner\n"
            "print([m for m in ('numpy', 'pandas', 'pyarrow') if m in sys.modules])")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "[]"


def test_a_kineto_trace_read_loads_no_other_reader(tmp_path: Path) -> None:
    """A verb on a Kineto trace (read, then again from the cache) loads neither the SQLite
    readers (nsys, rocpd, legacy rocprof) nor a process pool: the engine that maps a run's
    ranks imports them only where a folder, a process tree or a pool asks for them."""
    code = ("import sys\nfrom traceforge.cli import main\n"
            "try:\n    main(['top-kernels', sys.argv[1], '-n', '1'])\n"
            "except SystemExit:\n    pass\n"
            "print([m for m in ('traceforge.formats.nsys', 'traceforge.formats.rocprof', "
            "'traceforge.formats.sqlite_db', 'concurrent.futures.process') "
            "if m in sys.modules], file=sys.stderr)")
    env = {**os.environ, "TRACEFORGE_CACHE": str(tmp_path / "cache")}
    for _ in range(2):  # (a miss sniffs with every reader; a hit asks none)
        r = subprocess.run([sys.executable, "-c", code, str(SAMPLE)], capture_output=True,
                           text=True, timeout=120, env=env)
        assert r.returncode == 0, r.stderr
    assert r.stderr.strip().splitlines()[-1] == "[]"
