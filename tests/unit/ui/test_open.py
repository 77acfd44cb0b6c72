"""``traceforge open``: the one-file loopback server, tested over real HTTP."""

from __future__ import annotations

import gzip
import json
import socket
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from click.testing import CliRunner

import traceforge as tf
from tests.conftest import shared
from traceforge.analyzers.timeline.core import timeline
from traceforge.analyzers.timeline.steps import parse_spec
from traceforge.cli import cli
from traceforge.errors import AnalysisError, TraceforgeError, UsageError
from traceforge.ui import perfetto as ui
from traceforge.ui import server as srv

ORIGIN = "https://ui.perfetto.dev"


def _get(url: str, method: str = "GET") -> tuple[int, dict[str, str], bytes]:
    req = urllib.request.Request(url, method=method, data=b"x" if method == "POST" else None)
    try:
        with urllib.request.urlopen(req, timeout=5) as r:
            return r.status, dict(r.headers), r.read()
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers), b""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_serves_one_path_with_cors_then_exits() -> None:
    data = b'{"traceEvents": []}'
    server = srv.bind("t.json", data, origin=ORIGIN, port=0)
    host, port = server.server_address[:2]
    assert host == "127.0.0.1"  # loopback only
    done: list[bool] = []
    th = threading.Thread(target=lambda: done.append(srv.serve_until_fetched(server, timeout_s=20)))
    th.start()
    base = f"http://127.0.0.1:{port}"
    tok = f"{base}/{server.token}"
    assert len(server.token) >= 16
    assert _get(base + "/other.json")[0] == 404
    assert _get(base + "/")[0] == 404
    assert _get(base + "/t.json")[0] == 404  # the name alone: no token, no trace
    assert _get(tok + "/t.json/../etc/passwd")[0] == 404
    assert _get(tok + "/t.json", "POST")[0] == 404
    assert th.is_alive()  # none of those was the fetch
    status, headers, body = _get(tok + "/t.json?x=1")
    assert status == 200 and body == data
    assert headers["Access-Control-Allow-Origin"] == ORIGIN
    th.join(5)
    assert not th.is_alive() and done == [True]
    with pytest.raises(OSError):  # the port is closed after the fetch
        socket.create_connection(("127.0.0.1", port), timeout=1)


def test_busy_port_is_one_clear_error() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        with pytest.raises(TraceforgeError, match=f"port {port} .* busy"):
            srv.bind("t.json", b"{}", port=port)


def test_link_and_parsers() -> None:
    assert ui.ui_url("a b.json") == (
        "https://ui.perfetto.dev/#!/?url=http://127.0.0.1:9001/a%20b.json"
    )
    assert ui.ui_url("x.json", origin="http://localhost:10000/").startswith(
        "http://localhost:10000/#!/?url="
    )
    assert ui.parse_window("10ms:2s") == (10_000_000, 2_000_000_000)
    assert ui.parse_window(":300us")[1] == 300_000
    assert parse_spec("2-4,7") == [2, 3, 4, 7] and parse_spec("none") is None
    with pytest.raises(UsageError):
        ui.parse_window("5:1")
    assert ui.loaded_size(gzip.compress(b"x" * 10_000)) == 10_000


def test_trimmed_payload_reads_back(tmp_path: Path) -> None:
    src = shared("h100/compiled.pt.trace.json.gz")
    name, whole = ui.payload(src)
    assert name == src.name and whole == src.read_bytes()  # Kineto files are served as is
    name, data = ui.payload(src, steps=[3])
    assert name == "compiled.traceforge.json"
    out = tmp_path / name
    out.write_bytes(data)
    t, back = tf.load(src), tf.load(out)
    assert list(timeline(back).steps.ranges["step"]) == [3]
    assert 0 < len(back.kernels()) < len(t.kernels())
    with pytest.raises(AnalysisError, match="no step 99"):
        ui.payload(src, steps=[99])


def test_cli_open_exits_after_fetch(monkeypatch: pytest.MonkeyPatch) -> None:
    src = shared("h100/compiled.pt.trace.json.gz")
    port = _free_port()
    monkeypatch.setattr(ui, "PORT", port)
    monkeypatch.setattr(srv.secrets, "token_urlsafe", lambda n: "tok")
    result: list[object] = []
    th = threading.Thread(target=lambda: result.append(CliRunner().invoke(
        cli, ["open", str(src), "--no-browser", "--timeout", "20"])))
    th.start()
    deadline = time.monotonic() + 10
    status = 0
    while time.monotonic() < deadline:
        try:
            status, headers, body = _get(f"http://127.0.0.1:{port}/tok/{src.name}")
            break
        except urllib.error.URLError:
            time.sleep(0.05)
    assert status == 200 and body == src.read_bytes()
    assert headers["Access-Control-Allow-Origin"] == ORIGIN
    th.join(10)
    r = result[0]
    assert r.exit_code == 0, r.output  # type: ignore[attr-defined]
    assert f"#!/?url=http://127.0.0.1:{port}/tok/{src.name}" in r.output  # type: ignore[attr-defined]


def test_open_in_perfetto_for_notebooks() -> None:
    # GIVEN a Trace in memory, WHEN opened with a fake browser on a free port
    t = tf.load(shared("h100/compiled.pt.trace.json.gz"))
    opened: list[str] = []
    url = tf.open_in_perfetto(t, port=0, opener=opened.append)
    # THEN the link the browser got serves the trace as Chrome JSON, once
    assert opened == [url]
    served = url.split("url=", 1)[1]
    status, headers, body = _get(served)
    assert status == 200 and headers["Access-Control-Allow-Origin"] == ORIGIN
    doc = json.loads(body)
    kernels = [x for x in doc["traceEvents"] if x.get("cat") == "kernel"]
    assert len(kernels) == len(t.kernels())


def test_port_is_free_again_right_after_a_fetch() -> None:
    # A second `traceforge open` right after the first must not see a busy port.
    port = _free_port()
    for _ in range(2):
        server = srv.bind("t.json", b"{}", port=port)
        th = threading.Thread(target=srv.serve_until_fetched, args=(server,),
                              kwargs={"timeout_s": 10})
        th.start()
        assert _get(f"http://127.0.0.1:{port}/{server.token}/t.json")[0] == 200
        th.join(5)
        assert not th.is_alive()


def test_cli_busy_port_is_one_line(monkeypatch: pytest.MonkeyPatch,
                                   capsys: pytest.CaptureFixture[str]) -> None:
    from traceforge.cli import main

    src = shared("h100/compiled.pt.trace.json.gz")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        monkeypatch.setattr(ui, "PORT", s.getsockname()[1])
        with pytest.raises(SystemExit) as exc:
            main(["open", str(src), "--no-browser"])
    assert exc.value.code == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "busy" in err[0] and "Traceback" not in err[0]


def test_cli_warns_on_large_traces_and_times_out(monkeypatch: pytest.MonkeyPatch) -> None:
    src = shared("h100/compiled.pt.trace.json.gz")
    monkeypatch.setattr(ui, "PORT", _free_port())
    monkeypatch.setattr(ui, "WARN_BYTES", 1000)  # the fixture unpacks to far more than that
    r = CliRunner().invoke(cli, ["open", str(src), "--no-browser", "--timeout", "0.3"])
    assert r.exit_code == 1
    assert "warning" in r.output and "--steps" in r.output
    assert "no fetch before the timeout" in r.output


def test_idle_connection_and_foreign_host_do_not_stall_or_fetch() -> None:
    """An idle TCP connection once blocked the single-threaded server past --timeout; a
    request with another Host (DNS rebinding) once got the trace. Now: the timeout fires
    with an idle connection open, and a foreign Host gets 403 without using up the fetch."""
    server = srv.bind("t.json", b"{}", port=0)
    port = server.server_address[1]
    idle = socket.create_connection(("127.0.0.1", port))
    try:
        t0 = time.monotonic()
        assert srv.serve_until_fetched(server, timeout_s=1.0) is False
        assert time.monotonic() - t0 < 5
    finally:
        idle.close()
    server = srv.bind("t.json", b"{}", port=0)
    port = server.server_address[1]
    th = threading.Thread(target=srv.serve_until_fetched, args=(server,),
                          kwargs={"timeout_s": 10})
    th.start()
    idle = socket.create_connection(("127.0.0.1", port))
    try:
        url = f"http://127.0.0.1:{port}/{server.token}/t.json"
        req = urllib.request.Request(url, headers={"Host": "evil.example:9001"})
        with pytest.raises(urllib.error.HTTPError) as e:
            urllib.request.urlopen(req, timeout=5)
        assert e.value.code == 403
        assert th.is_alive()
        assert _get(url)[0] == 200  # served while the idle connection is still open
        th.join(5)
        assert not th.is_alive()
    finally:
        idle.close()
