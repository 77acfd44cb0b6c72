"""The one-file HTTP server behind ``traceforge open``: loopback only, one path, CORS.

The UI's address and the one local port it may fetch from live here. It answers
``GET /<token>/<name>`` with the bytes and ``Access-Control-Allow-Origin`` set to the UI's
origin (the UI fetches cross-origin), 404 to every other path or method, and lets
:func:`serve_until_fetched` stop after the first complete transfer, as Perfetto's
``open_trace_in_ui`` does.

Other local processes and web pages can reach a loopback port too, so: the path holds a
random token (only the printed link fetches the trace, and nothing else can use up the one
fetch); a request whose ``Host`` is not ``127.0.0.1`` or ``localhost`` (DNS rebinding) gets
403; each connection is served on its own thread with a socket timeout
(:data:`CONNECTION_TIMEOUT_S`), so an idle or slow connection blocks neither other requests
nor the ``--timeout``.
"""

from __future__ import annotations

import errno
import secrets
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import unquote, urlsplit

from traceforge.errors import TraceforgeError, UsageError

UI_ORIGIN = "https://ui.perfetto.dev"
#: The only local port the UI's content-security policy lets it fetch from (it is also
#: trace_processor's ``--httpd`` port, hence the busy-port error).
PORT = 9001
HOST = "127.0.0.1"
#: Seconds a connection may sit idle (or between two reads or writes) before it is closed.
CONNECTION_TIMEOUT_S = 10.0
#: Host header values served (with or without the port).
LOCAL_HOSTS = ("127.0.0.1", "localhost")


@dataclass
class _State:
    name: str
    data: bytes
    origin: str
    token: str = field(default_factory=lambda: secrets.token_urlsafe(16))
    fetched: bool = False
    requests: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def path(self) -> str:
        """The one path served: ``/<token>/<name>``."""
        return f"/{self.token}/{self.name}"


class OneFileServer(ThreadingHTTPServer):
    # SO_REUSEADDR, as Perfetto's open_trace_in_ui sets it: a second `open` right after the
    # first must not fail on the first one's TIME_WAIT connections. On Linux and macOS it
    # still refuses a port that another socket listens on, which is the busy-port error.
    allow_reuse_address = True
    daemon_threads = True

    def __init__(self, port: int, state: _State) -> None:
        self.state = state
        super().__init__((HOST, port), _Handler)

    @property
    def token(self) -> str:
        """The secret first part of the served path (it goes into the UI link)."""
        return self.state.token


class _Handler(BaseHTTPRequestHandler):
    server: OneFileServer
    timeout = CONNECTION_TIMEOUT_S

    def _local(self) -> bool:
        """Whether the request names this machine's loopback as its Host (else 403)."""
        host = (self.headers.get("Host") or "").strip().lower()
        name = host.rsplit(":", 1)[0] if host.count(":") == 1 else host
        if name in LOCAL_HOSTS:
            return True
        self.send_error(403)
        return False

    def _cors(self) -> None:
        self.send_header("Access-Control-Allow-Origin", self.server.state.origin)
        self.send_header("Cache-Control", "no-cache")

    def do_GET(self) -> None:  # noqa: N802 - http.server's naming
        st = self.server.state
        st.requests += 1
        if not self._local():
            return
        if unquote(urlsplit(self.path).path) != st.path:
            self.send_error(404)
            return
        with st.lock:
            if st.fetched:
                self.send_error(410)
                return
            self._send(st)

    def _send(self, st: _State) -> None:
        self.send_response(200)
        self._cors()
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Content-Length", str(len(st.data)))
        self.end_headers()
        try:
            self.wfile.write(st.data)
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError, TimeoutError):
            return  # the tab went away mid-transfer: keep serving, it may retry
        st.fetched = True

    def do_POST(self) -> None:  # noqa: N802
        self.server.state.requests += 1
        self.send_error(404)

    def do_OPTIONS(self) -> None:  # noqa: N802
        if not self._local():
            return
        self.send_response(204)
        self._cors()
        self.send_header("Access-Control-Allow-Methods", "GET")
        self.end_headers()

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002
        pass  # one line per request would bury the link we printed


def bind(name: str, data: bytes, *, origin: str = UI_ORIGIN, port: int = PORT) -> OneFileServer:
    """A server for one file on loopback at ``/<token>/<name>`` (``server.token``); a busy
    port is one clear TraceforgeError."""
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
