"""What the nsys and rocprof backends share: finding the profiler and the inner command.

An outer profiler records the whole process; inside it traceforge still runs the target
in-process (``--backend nvtx``) to apply the mode, mark steps as NVTX/roctx ranges and write
the run summary, which the outer backend then completes with its own files.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import IO, Any

from traceforge.capture.options import CaptureOptions
from traceforge.capture.target import Target
from traceforge.capture.trace_file import read_summary, write_summary
from traceforge.errors import CaptureError
from traceforge.executables import Tool, find


def find_profiler(tool: Tool, explicit: str | None) -> str:
    """The profiler executable (``traceforge.executables.find``), or a CaptureError."""
    try:
        return find(tool, explicit)
    except LookupError as e:
        raise CaptureError(str(e)) from None


def inner_command(target: Target, opts: CaptureOptions) -> list[str]:
    """``python -m traceforge capture --backend nvtx ... -- python TARGET`` for the outer tool."""
    return [
        sys.executable, "-m", "traceforge", "capture", "--backend", "nvtx",
        "--mode", opts.mode, "--compile-mode", opts.compile_mode, "-o", str(opts.out),
        "--name", opts.name, "--", sys.executable, *target.command(),
    ]


def run_outer(cmd: list[str], env: dict[str, str] | None = None,
              stdout: IO[str] | None = None) -> int:
    """Run the profiler command, passing Ctrl-C to it rather than dying before it writes."""
    try:
        proc = subprocess.Popen(cmd, env=env, stdout=stdout)
    except OSError as e:
        raise CaptureError(f"{cmd[0]}: cannot start ({e.strerror or e})") from None
    while True:
        try:
            return proc.wait()
        except KeyboardInterrupt:
            # The child got the same SIGINT from the terminal; wait for it to write its report.
            continue


def complete_summary(path: Path, backend: str, extra: dict[str, Any], rc: int) -> dict[str, Any]:
    """Add the outer profiler's facts to the summary the inner run wrote (or start one)."""
    summary = read_summary(path) if path.exists() else {"exit_status": rc, "notes": [
        "the target ended before traceforge could write its summary"]}
    summary["backend"] = backend
    summary[backend] = extra
    write_summary(path, summary)
    return summary


def tool_version(exe: str) -> str | None:
    try:
        out = subprocess.run([exe, "--version"], capture_output=True, text=True, timeout=30,
                             check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    text = (out.stdout or out.stderr).strip()
    return text.splitlines()[-1] if text else None
