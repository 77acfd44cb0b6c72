"""The one-file HTTP server behind ``traceforge open``: loopback only, one path, CORS.

The UI's address and the one local port it may fetch from live here. It answers
``GET /<name>`` with the bytes and ``Access-Control-Allow-Origin`` set to the UI's origin
(the UI fetches cross-origin), 404 to every other path or method, and lets
:func:`serve_until_fetched` stop after the first complete transfer, as Perfetto's
``open_trace_in_ui`` does.
"""

from __future__ import annotations

import errno
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, HTTPServer
from urllib.parse import unquote, urlsplit

from traceforge.errors import TraceforgeError, UsageError

UI_ORIGIN = "https://ui.perfetto.dev"
#: The only local port the UI's content-security policy lets it fetch from (it is also
#: trace_processor's ``--httpd`` port, hence the busy-port error).
PORT = 9001
HOST = "127.0.0.1"


@dataclass
class _State:
    name: str
    data: bytes
    origin: str
    fetched: bool = False
    requests: int = 0


class OneFileServer(HTTPServer):
    # SO_REUSEADDR, as Perfetto's open_trace_in_ui sets it: a second `open` right after the
    # first must not fail on the first one's TIME_WAIT connections. On Linux and macOS it
    # still refuses a port that another socket listens on, which is the busy-port error.
    allow_reuse_address = True

    def __init__(self, port: int, state: _State) -> None:
        self.state = state
        super().__init__((HOST, port), _Handler)


class _Handler(BaseHTTPRequestHandler):
    server: OneFileServer

    def _cors(self) -> None:
        self.send_header("Access-Control-Allow-Origin", self.server.state.origin)
        self.send_header("Cache-Control", "no-cache")

    def do_GET(self) -> None:  # noqa: N802 - http.server's naming
        st = self.server.state
        st.requests += 1
        if unquote(urlsplit(self.path).path) != "/" + st.name:
            self.send_error(404)
            return
        self.send_response(200)
        self._cors()
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Content-Length", str(len(st.data)))
        self.end_headers()
        try:
            self.wfile.write(st.data)
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            return  # the tab went away mid-transfer: keep serving, it may retry
        st.fetched = True

    def do_POST(self) -> None:  # noqa: N802
        self.server.state.requests += 1
        self.send_error(404)

    def do_OPTIONS(self) -> None:  # noqa: N802
        self.send_response(204)
        self._cors()
        self.send_header("Access-Control-Allow-Methods", "GET")
        self.end_headers()

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002
        pass  # one line per request would bury the link we printed


def bind(name: str, data: bytes, *, origin: str = UI_ORIGIN, port: int = PORT) -> OneFileServer:
    """A server for one file on loopback; a busy port is one clear TraceforgeError."""
    if "/" in name or not name:
        raise UsageError(f"cannot serve {name!r}: give a plain file name")
    try:
        return OneFileServer(port, _State(name, data, origin))
    except OSError as e:
        if e.errno == errno.EADDRINUSE:
            raise TraceforgeError(
                f"port {port} on {HOST} is busy (a running `trace_processor --httpd` or "
                "another `traceforge open`?): stop it and retry; the Perfetto UI only "
                f"fetches from port {PORT}"
            ) from None
        raise TraceforgeError(f"cannot listen on {HOST}:{port} ({e.strerror})") from None


def serve_until_fetched(server: OneFileServer, *, timeout_s: float | None = None) -> bool:
    """Handle requests until the file was fetched once (True) or ``timeout_s`` ran out."""
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    server.timeout = 0.25  # wake up now and then to check the deadline and Ctrl-C
    try:
        while not server.state.fetched:
            if deadline is not None and time.monotonic() >= deadline:
                return False
            server.handle_request()
        return True
    finally:
        server.server_close()
