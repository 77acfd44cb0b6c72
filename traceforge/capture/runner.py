"""Running an unmodified Python program in this process, like ``python -m cProfile``.

The target sees the ``sys.argv`` and ``__main__`` it would see under ``python``; its
exceptions and exit codes become the capture's exit status instead of ending traceforge.
"""

from __future__ import annotations

import os
import runpy
import sys
import traceback
from pathlib import Path

from traceforge.capture.options import CaptureOptions
from traceforge.capture.session import Run, capture
from traceforge.capture.target import Target
from traceforge.errors import UsageError

_SKIP_FILES = (runpy.__file__, __file__)


def exit_code(e: SystemExit) -> int:
    """The process exit status ``sys.exit(e.code)`` would give (printing a message code)."""
    if e.code is None:
        return 0
    if isinstance(e.code, int):
        return e.code
    print(e.code, file=sys.stderr)
    return 1


def _print_target_traceback(e: BaseException) -> None:
    """The target's own traceback, without the runpy and traceforge frames above it."""
    tb = e.__traceback__
    while tb is not None and (tb.tb_frame.f_code.co_filename in _SKIP_FILES
                              or tb.tb_frame.f_code.co_filename.startswith("<frozen runpy")
                              or "/traceforge/capture/" in tb.tb_frame.f_code.co_filename):
        tb = tb.tb_next
    traceback.print_exception(type(e), e, tb, file=sys.stderr)


def run_target(target: Target, options: CaptureOptions, command: list[str]) -> Run:
    """Run ``target`` under a capture in ``options.mode``; never raises for the target's sake."""
    if not target.is_module and not Path(target.path).is_file():
        raise UsageError(f"{target.path}: no such script")
    saved_argv, saved_path = sys.argv[:], sys.path[:]
    sys.argv = target.argv
    # python SCRIPT puts the script's folder first on sys.path; python -m puts the cwd.
    sys.path.insert(0, os.path.dirname(os.path.abspath(target.path)) if not target.is_module
                    else os.getcwd())
    try:
        with capture(options.mode, options.out, backend=options.backend,
                     steps=options.schedule(), name=options.name,
                     record_shapes=options.record_shapes, with_stack=options.with_stack,
                     memory=options.memory, memory_snapshot=options.memory_snapshot,
                     compile_mode=options.compile_mode,
                     command=command, script=None if target.is_module else target.path) as run:
            try:
                if target.is_module:
                    runpy.run_module(target.path, run_name="__main__", alter_sys=True)
                else:
                    runpy.run_path(target.path, run_name="__main__")
            except SystemExit as e:
                run.exit_status = exit_code(e)
                if run.exit_status:
                    run.error = f"exited with status {run.exit_status}"
            except KeyboardInterrupt:
                # Ctrl-C: keep what was recorded so far, exit like Python does on SIGINT.
                run.interrupted, run.exit_status = True, 130
                run.error = "interrupted"
            except Exception as e:  # noqa: BLE001 - the target's failure, reported as Python would
                _print_target_traceback(e)
                run.exit_status, run.error = 1, f"{type(e).__name__}: {e}"
    finally:
        sys.argv, sys.path[:] = saved_argv, saved_path
    return run
