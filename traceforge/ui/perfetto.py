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
from urllib.parse import quote

from traceforge.analyzers.timeline.core import timeline
from traceforge.errors import UsageError
from traceforge.model import Trace
from traceforge.ui import server
from traceforge.ui.server import HOST, PORT, UI_ORIGIN

__all__ = ["HOST", "PORT", "UI_ORIGIN", "open_in_perfetto", "payload", "ui_url"]
#: Above this many bytes of trace JSON the UI tab may run out of memory (it holds 2-4x the
#: trace in memory and a tab tops out near 2 GB; a 900 MB JSON crashed it, google/perfetto#99).
WARN_BYTES = 500 * 1024 * 1024


def ui_url(name: str, *, origin: str = UI_ORIGIN, port: int = PORT, token: str = "") -> str:
    """The UI deep link that makes the UI fetch ``name`` from our loopback server (under
    the server's secret ``token``)."""
    path = f"{quote(token)}/{quote(name)}" if token else quote(name)
    return f"{origin.rstrip('/')}/#!/?url=http://{HOST}:{port}/{path}"


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


def steps_window(trace: Trace, steps: list[int]) -> tuple[int, int]:
    """The time range of the given steps: from the first step's host start to the end of
    the last one's GPU window (kernels finish after the host has left the step)."""
    tl = timeline(trace)
    if tl.steps.empty:
        raise UsageError(f"{trace.meta.path}: has no steps to serve ({tl.step_source}); "
                         "use --window or --steps-from")
    w = tl.select(steps)
    return int(w["host_ts"].min()), int(max(w["end"].max(), w["host_end"].max()))


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
    from traceforge.render.chrome_json import ChromeSource
    from traceforge.render.document import dumps_chrome

    return dumps_chrome(ChromeSource(trace))  # its events built a batch at a time


def payload(
    path: str | Path, *, steps: list[int] | None = None, window: tuple[int, int] | None = None,
    steps_from: str | None = None,
) -> tuple[str, bytes]:
    """(name, bytes) to serve for a trace file: Kineto/Chrome JSON as is when not trimmed
    (the UI reads it, gzip included, with every arg intact); anything else converted."""
    from traceforge.formats import load

    p = Path(path)
    trace = load(p).with_steps(steps_from)
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
    srv = server.bind(name, data, origin=origin, port=port)
    url = ui_url(name, origin=origin, port=srv.server_address[1], token=srv.token)
    threading.Thread(
        target=server.serve_until_fetched, args=(srv,), kwargs={"timeout_s": 300.0},
        daemon=True,
    ).start()
    if browser:
        if opener is None:
            import webbrowser

            opener = webbrowser.open
        opener(url)
    return url
