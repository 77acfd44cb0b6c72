"""Open a trace in the Perfetto UI the way Perfetto's own ``tools/open_trace_in_ui`` does.

The UI (a web page) cannot read local files by path, so we serve exactly one file over HTTP
on ``127.0.0.1:9001`` and point the UI at ``#!/?url=http://127.0.0.1:9001/<name>``. Port
9001 is not a choice: it is the only local port the UI's content-security policy lets it
fetch from (it is also trace_processor's ``--httpd`` port, hence the busy-port error). The
server answers only ``GET /<name>``, binds to loopback only, and stops once the UI has
fetched the file.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import quote

from traceforge.errors import UsageError
from traceforge.model import GPU_KINDS, Trace

if TYPE_CHECKING:
    from traceforge.ui_server import OneFileServer

UI_ORIGIN = "https://ui.perfetto.dev"
PORT = 9001
HOST = "127.0.0.1"
#: Above this many bytes of trace JSON the UI tab may run out of memory (it holds 2-4x the
#: trace in memory and a tab tops out near 2 GB; a 900 MB JSON crashed it, google/perfetto#99).
WARN_BYTES = 500 * 1024 * 1024


def ui_url(name: str, *, origin: str = UI_ORIGIN, port: int = PORT) -> str:
    """The UI deep link that makes the UI fetch ``name`` from our loopback server."""
    return f"{origin.rstrip('/')}/#!/?url=http://{HOST}:{port}/{quote(name)}"


def bind(name: str, data: bytes, *, origin: str = UI_ORIGIN, port: int = PORT) -> OneFileServer:
    """A server for one file on loopback; a busy port is one clear TraceforgeError."""
    # http.server loads only here: every CLI verb imports this package, few serve files.
    from traceforge import ui_server

    return ui_server.bind(name, data, origin=origin, port=port)


def serve_until_fetched(server: OneFileServer, *, timeout_s: float | None = None) -> bool:
    """Handle requests until the file was fetched once (True) or ``timeout_s`` ran out."""
    from traceforge import ui_server

    return ui_server.serve_until_fetched(server, timeout_s=timeout_s)


def loaded_size(data: bytes) -> int:
    """Bytes the UI will parse: gzip's recorded size (mod 4 GiB) for gzip data, else the length."""
    if data[:2] == b"\x1f\x8b" and len(data) >= 4:
        return max(len(data), int.from_bytes(data[-4:], "little"))
    return len(data)


# -- what to serve -------------------------------------------------------------------------

_UNITS = {"ns": 1, "us": 1_000, "ms": 1_000_000, "s": 1_000_000_000}


def parse_time(text: str) -> int:
    """``"12.5ms"``, ``"300us"``, ``"2s"``, ``"40"`` (ms) -> ns since the trace start."""
    m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*(ns|us|ms|s)?\s*", text)
    if not m:
        raise UsageError(f"cannot read time {text!r} (write e.g. 12.5ms, 300us, 2s)")
    return int(round(float(m.group(1)) * _UNITS[m.group(2) or "ms"]))


def parse_window(text: str) -> tuple[int, int]:
    """``START:END`` (each as :func:`parse_time`) -> ns range; END may be empty (to the end)."""
    if ":" not in text:
        raise UsageError(f"--window wants START:END, got {text!r}")
    a, b = text.split(":", 1)
    start = parse_time(a) if a.strip() else 0
    end = parse_time(b) if b.strip() else 2**62
    if end <= start:
        raise UsageError(f"--window {text!r}: END must be after START")
    return start, end


def parse_steps(text: str) -> list[int]:
    """``"3"``, ``"2-4"`` or ``"2,5"`` -> step numbers."""
    out: list[int] = []
    for part in text.split(","):
        m = re.fullmatch(r"\s*(\d+)\s*(?:-\s*(\d+)\s*)?", part)
        if not m:
            raise UsageError(f"--steps wants N, N-M or N,M, got {text!r}")
        lo = int(m.group(1))
        hi = int(m.group(2) or lo)
        out += range(lo, hi + 1)
    return out


def steps_window(trace: Trace, steps: list[int]) -> tuple[int, int]:
    """The time range of the given profiler steps, extended to the end of the GPU work
    launched in them (kernels finish after the host has left the step)."""
    st = trace.steps()
    sel = st[st["step"].isin(steps)]
    if sel.empty:
        have = ", ".join(map(str, st["step"])) or "none"
        raise UsageError(f"{trace.meta.path}: no profiler step {steps} (steps: {have})")
    start, end = int(sel["ts"].min()), int(sel["end"].max())
    ev = trace.events
    launch = ev[ev["kind"].isin(("runtime", "driver")) & (ev["ts"] >= start) & (ev["ts"] < end)]
    gpu = ev[ev["kind"].isin(GPU_KINDS) & ev["corr"].isin(set(launch["corr"]) - {-1})]
    if not gpu.empty:
        end = max(end, int((gpu["ts"] + gpu["dur"]).max()))
    return start, end


def trimmed(trace: Trace, *, steps: list[int] | None, window: tuple[int, int] | None) -> Trace:
    """``trace`` cut to the steps or window asked for (unchanged when neither is given)."""
    if steps and window:
        raise UsageError("give --steps or --window, not both")
    if steps:
        return trace.window(*steps_window(trace, steps))
    if window:
        return trace.window(*window)
    return trace


def chrome_bytes(trace: Trace) -> bytes:
    """The trace as Chrome JSON bytes, the form the UI reads from every source format."""
    from traceforge.render.chrome_json import dumps_chrome, trace_to_chrome

    return dumps_chrome(trace_to_chrome(trace))


def payload(
    path: str | Path, *, steps: list[int] | None = None, window: tuple[int, int] | None = None
) -> tuple[str, bytes]:
    """(name, bytes) to serve for a trace file: Kineto/Chrome JSON as is when not trimmed
    (the UI reads it, gzip included, with every arg intact); anything else converted."""
    from traceforge.formats import load

    p = Path(path)
    trace = load(p)
    if not steps and not window and trace.meta.format == "kineto" and p.is_file():
        return p.name, p.read_bytes()
    trace = trimmed(trace, steps=steps, window=window)
    stem = re.sub(r"(\.pt\.trace)?\.json(\.gz)?$|\.[^.]*$", "", p.name) or "trace"
    return f"{stem}.traceforge.json", chrome_bytes(trace)


def open_in_perfetto(
    trace: Trace | str | Path,
    *,
    origin: str = UI_ORIGIN,
    browser: bool = True,
    port: int = PORT,
    opener: Callable[[str], object] | None = None,
) -> str:
    """Open ``trace`` (a Trace or a file) in the Perfetto UI; returns the link.

    For notebooks: the file is served from a background thread that stops after the UI's
    first fetch (or after 5 minutes), so the cell returns at once.
    """
    if isinstance(trace, Trace):
        name = (Path(trace.meta.path).name.split(".")[0] or "trace") + ".traceforge.json"
        data = chrome_bytes(replace(trace))
    else:
        name, data = payload(trace)
    server = bind(name, data, origin=origin, port=port)
    url = ui_url(name, origin=origin, port=server.server_address[1])
    threading.Thread(
        target=serve_until_fetched, args=(server,), kwargs={"timeout_s": 300.0}, daemon=True
    ).start()
    if browser:
        if opener is None:
            import webbrowser

            opener = webbrowser.open
        opener(url)
    return url
