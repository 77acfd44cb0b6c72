"""The public surface: every name in __all__ resolves and says what it does."""

from __future__ import annotations

import subprocess
import sys

import traceforge


def test_all_lists_exactly_the_lazy_exports() -> None:
    assert traceforge.__all__ == sorted(traceforge._EXPORTS)


def test_every_public_name_resolves_with_a_docstring() -> None:
    for name in traceforge.__all__:
        obj = getattr(traceforge, name)
        assert (obj.__doc__ or "").strip(), name


def test_import_is_light() -> None:
    # Importing the package must not drag in pandas, the HTTP server or the capture code.
    code = ("import sys, traceforge; "
            "print(sorted(m for m in ('pandas', 'http.server', 'traceforge.capture') "
            "if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.strip()
    assert out == "[]"


def test_networkx_waits_for_a_path() -> None:
    # networkx is ~60 ms of start-up: commands import it only when they work out a path
    # (the report does that on a thread, beside its other analyses).
    code = ("import sys, traceforge.cli, traceforge.commands.report, "
            "traceforge.commands.critical_path; print('networkx' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.strip()
    assert out == "False"
