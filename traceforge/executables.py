"""Finding the profilers traceforge runs: ``nsys`` (capture, and reading ``.nsys-rep``)
and ``rocprofv3``/``rocprof`` (capture).

One finder for every caller, so that ``traceforge capture --backend nsys`` and reading a
``.nsys-rep`` agree on which nsys they use. The order: an explicit path (a command-line
option), then the environment variable, then PATH, then where the vendors' installers put
the tool. NVIDIA's packages do not add nsys to PATH: the Nsight Systems .deb/.run installs
under ``/opt/nvidia/nsight-systems/<version>/``, the CUDA toolkit puts a launcher in
``/usr/local/cuda-<version>/bin`` (and, from the runfile, a copy of Nsight Systems beside
it), and Nsight Compute bundles an nsys under ``host/target-linux-x64/``. Stock GPU images
often carry only one of those.

Errors are ``LookupError`` with a one-line message; callers rewrap it in their own
``TraceforgeError`` (a ``CaptureError``, or a ``TraceFormatError`` naming the input).
"""

from __future__ import annotations

import os
import re
import shutil
from dataclasses import dataclass
from pathlib import Path

#: Roots of the vendor install locations (module attributes, so tests can point them at
#: a temporary directory).
OPT_NVIDIA = Path("/opt/nvidia")
USR_LOCAL = Path("/usr/local")
OPT = Path("/opt")


@dataclass(frozen=True)
class Tool:
    """How to find one profiler."""

    names: tuple[str, ...]  # executable names, preferred first
    env_var: str
    option: str  # the command-line option that names it, for messages
    how: str  # how to install it, for messages
    #: Vendor locations: groups tried in order, each a root attribute of this module and
    #: globs below it; within a group the newest version comes first, then glob order.
    locations: tuple[tuple[str, tuple[str, ...]], ...] = ()
    where: str = ""  # the locations in words, for messages


NSYS = Tool(
    names=("nsys",), env_var="TRACEFORGE_NSYS", option="--nsys",
    how="install Nsight Systems (developer.nvidia.com/nsight-systems)",
    locations=(
        ("OPT_NVIDIA", ("nsight-systems*/bin/nsys", "nsight-systems*/*/bin/nsys",
                        "nsight-systems*/target-linux-x64/nsys",
                        "nsight-systems*/*/target-linux-x64/nsys")),
        ("USR_LOCAL", ("cuda*/bin/nsys", "cuda*/nsight-systems*/bin/nsys")),
        ("OPT_NVIDIA", ("nsight-compute/*/host/target-linux-x64/nsys",)),
        ("USR_LOCAL", ("cuda*/nsight-compute*/host/target-linux-x64/nsys",)),
    ),
    where="/opt/nvidia/nsight-systems*, /usr/local/cuda*/bin, Nsight Compute's bundled nsys",
)

NCU = Tool(
    names=("ncu",), env_var="TRACEFORGE_NCU", option="--ncu",
    how="install Nsight Compute (developer.nvidia.com/nsight-compute)",
    locations=(("OPT_NVIDIA", ("nsight-compute/*/ncu", "nsight-compute*/ncu")),
               ("USR_LOCAL", ("cuda*/bin/ncu", "cuda*/nsight-compute*/ncu"))),
    where="/opt/nvidia/nsight-compute*, /usr/local/cuda*/bin",
)

ROCPROF = Tool(
    names=("rocprofv3", "rocprof"), env_var="TRACEFORGE_ROCPROF", option="--rocprof",
    how="install ROCm's rocprofiler-sdk (rocprofv3) or rocprof",
    locations=(("OPT", ("rocm*/bin/rocprofv3",)), ("OPT", ("rocm*/bin/rocprof",))),
    where="/opt/rocm*/bin",
)

_VERSION = re.compile(r"\d+(?:\.\d+)+")


def _version_key(path: Path) -> tuple[int, ...]:
    """The dotted versions in a path (``nsight-systems/2024.5.1``, ``cuda-12.4``) as numbers,
    for sorting; ``x64`` and other undotted numbers are no version."""
    return tuple(int(n) for v in _VERSION.findall(str(path)) for n in v.split("."))


def is_executable(path: str | Path) -> bool:
    """A regular file this process may execute."""
    return os.path.isfile(path) and os.access(path, os.X_OK)


def vendor_paths(tool: Tool) -> list[Path]:
    """The tool's executables found in the vendor locations, in the order they are tried."""
    found: list[Path] = []
    for root_name, patterns in tool.locations:
        root: Path = globals()[root_name]
        hits: list[tuple[tuple[int, ...], int, Path]] = []
        for order, pattern in enumerate(patterns):
            try:
                hits += [(_version_key(p.relative_to(root)), -order, p)
                         for p in root.glob(pattern) if is_executable(p)]
            except OSError:  # an unreadable folder on the way: nothing there for us
                continue
        found += [p for _, _, p in sorted(hits, key=lambda h: h[:2], reverse=True)]
    return list(dict.fromkeys(found))


def find(tool: Tool, explicit: str | None = None) -> str:
    """The executable of ``tool``: ``explicit``, then ``$env_var``, then PATH, then the
    vendor locations. Raises ``LookupError`` (one line) when none is there, or when the
    explicit path or the variable names something that is not an executable."""
    for cand, origin in ((explicit, tool.option), (os.environ.get(tool.env_var), tool.env_var)):
        if cand:
            if is_executable(cand):
                return cand
            raise LookupError(f"{origin}={cand}: not an executable {tool.names[0]}")
    for name in tool.names:
        on_path = shutil.which(name)
        if on_path:
            return on_path
    vendor = vendor_paths(tool)
    if vendor:
        return str(vendor[0])
    raise LookupError(
        f"{' or '.join(tool.names)} not found on PATH nor in {tool.where}: {tool.how}, set "
        f"{tool.env_var}=/path/to/{tool.names[0]} or pass {tool.option} PATH")


def find_nsys(explicit: str | None = None) -> str:
    """The nsys executable (see :func:`find`)."""
    return find(NSYS, explicit)
