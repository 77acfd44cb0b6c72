"""``traceforge open TRACE``: show a trace in ui.perfetto.dev, served once from loopback."""

from __future__ import annotations

import click

from traceforge.analyzers.timeline.steps import parse_spec
from traceforge.commands import values
from traceforge.commands.options import steps_from_option, trace_argument
from traceforge.errors import UsageError
from traceforge.formats import resolve
from traceforge.ui import perfetto as ui
from traceforge.ui import server


@click.command("open")
@trace_argument
@click.option("--no-browser", is_flag=True, help="Only print the link; do not open a browser.")
@click.option("--origin", default=ui.UI_ORIGIN, show_default=True,
              help="Perfetto UI origin, for a self-hosted UI.")
@click.option("--steps", "steps_text", metavar="N|N-M|N,M",
              help="Serve only these steps (for traces too big for the browser).")
@steps_from_option
@click.option("--window", "window_text", metavar="START:END",
              help="Serve only this time range since the trace start (e.g. 100ms:250ms).")
@click.option("--timeout", "timeout_s", type=values.DURATION, default=None,
              help="Give up after this many seconds without a fetch.")
def command(trace: str, no_browser: bool, origin: str, steps_text: str | None,
            steps_from: str | None, window_text: str | None, timeout_s: float | None) -> None:
    """Open TRACE in the Perfetto UI (any format traceforge reads; exits after the fetch)."""
    steps = parse_spec(steps_text) if steps_text else None
    if steps_text and steps is None:
        raise UsageError("--steps none: serve the whole trace by leaving --steps out")
    window = ui.parse_window(window_text) if window_text else None
    # sample:NAME names a bundled sample; the payload needs its file.
    name, data = ui.payload(resolve(trace), steps=steps, window=window, steps_from=steps_from)
    size = ui.loaded_size(data)
    if size > ui.WARN_BYTES:
        click.echo(
            f"traceforge: warning: {size / 2**20:,.0f} MiB to load; the UI may run out of "
            "memory (about 2 GB per tab): trim with --steps or --window",
            err=True,
        )
    # ui.PORT is read at call time so that tests can move the server off 9001.
    srv = server.bind(name, data, origin=origin, port=ui.PORT)
    url = ui.ui_url(name, origin=origin, port=ui.PORT, token=srv.token)
    click.echo(url)
    if not no_browser:
        import webbrowser

        webbrowser.open(url)
    click.echo(f"Serving {name} on http://{ui.HOST}:{ui.PORT}/ (secret path) until the UI "
               "fetches it (Ctrl-C to stop)", err=True)
    if not server.serve_until_fetched(srv, timeout_s=timeout_s):
        click.echo("traceforge: no fetch before the timeout; stopped", err=True)
        raise SystemExit(1)
