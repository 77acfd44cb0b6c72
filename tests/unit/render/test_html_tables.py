"""The HTML report's tables are for people (issue 25, item 5): spelled-out headers with
their units (no snake_case), humane units in the cells, the exact value in each cell's
tooltip, sortable by that exact value, and no table wider than the page (a wide one
scrolls sideways in its own box). Checked in the page as Chromium lays it out."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from tests.conftest import cli_main
from traceforge.render.page import table

SNAKE = re.compile(r"[A-Za-z0-9]_[A-Za-z0-9]")

_PROBE = """<script>
window.addEventListener('load', function () {
  var page = document.documentElement.clientWidth;
  var over = [];
  document.querySelectorAll('table').forEach(function (t, i) {
    var box = t.parentElement.getBoundingClientRect();
    if (box.right > page + 1) { over.push(i + ':' + Math.round(box.right)); }
  });
  var snake = [];
  document.querySelectorAll('th').forEach(function (th) {
    if (/[A-Za-z0-9]_[A-Za-z0-9]/.test(th.textContent)) { snake.push(th.textContent); }
  });
  var sorted = 'none';
  var th = Array.prototype.find.call(document.querySelectorAll('th.n'),
                                     function (h) { return h.closest('tbody') === null; });
  if (th) {
    var t = th.closest('table'), idx = Array.prototype.indexOf.call(th.parentNode.children, th);
    th.click(); th.click();  // descending
    var vals = Array.prototype.map.call(t.tBodies[0].rows, function (r) {
      return parseFloat(r.cells[idx].getAttribute('data-v')); });
    sorted = 'yes';
    for (var i = 1; i < vals.length; i++) { if (vals[i] > vals[i - 1]) { sorted = 'no'; } }
  }
  var root = document.documentElement;
  root.setAttribute('data-over', over.join(','));
  root.setAttribute('data-snake', snake.join('|'));
  root.setAttribute('data-sorted', sorted);
  root.setAttribute('data-scroll', String(root.scrollWidth <= page + 1));
  root.setAttribute('data-done', '1');
});
</script>"""

_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
          "--disable-background-networking", "--disable-component-update", "--disable-sync"]


def test_headers_units_and_tooltips() -> None:
    df = pd.DataFrame({"name": ["k" * 600], "calls": [12.0], "total_us": [1789.503],
                       "busy_pct": [8.0], "window_ns": np.array([78_898_276], dtype=np.int64)})
    html = table(df)
    heads = re.findall(r"<th[^>]*>([^<]*)</th>", html)
    assert heads == ["name", "calls", "total (us)", "busy %", "window (ms)"]
    assert not any(SNAKE.search(h) for h in heads)
    assert ">12<" in html and "12.000" not in html and "12.00" not in html  # a count
    assert 'title="78,898,276 ns"' in html and ">78.898<" in html  # exact value in the tip
    assert 'title="1789.503 us"' in html and 'data-v="1789.503"' in html
    assert 'title="JSON/CSV: total_ns"' in html
    assert 'title="' + "k" * 600 + '"' in html and "…" in html  # the full name in the tip
    assert html.startswith('<div class="scroll">')


@pytest.mark.slow
def test_no_table_overflows_and_no_header_is_snake_case_in_chromium(tmp_path: Path) -> None:
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        pytest.skip("chromium not installed (apt-get install -y chromium)")
    page = tmp_path / "report.html"
    code, _, err = cli_main("report", "sample:h100-eager", "sample:h100-compiled", "-o",
                            str(page))
    assert code == 0, err
    text = page.read_text(encoding="utf-8")
    heads = re.findall(r"<th[^>]*>([^<]*)</th>", text)
    assert heads and not [h for h in heads if SNAKE.search(h)]
    probed = tmp_path / "probed.html"
    probed.write_text(text.replace("<head>", "<head>" + _PROBE, 1), encoding="utf-8")
    for width in (1200, 700):  # a desktop window and a narrow one
        dom = subprocess.run(
            [chromium, *_FLAGS, f"--user-data-dir={tmp_path / f'profile{width}'}",
             f"--window-size={width},900", "--virtual-time-budget=5000", "--dump-dom",
             probed.as_uri()],
            capture_output=True, text=True, timeout=120, check=False).stdout
        assert 'data-done="1"' in dom, "the page did not finish loading"
        assert 'data-over=""' in dom, re.search(r'data-over="[^"]*"', dom)
        assert 'data-snake=""' in dom, re.search(r'data-snake="[^"]*"', dom)
        assert 'data-sorted="yes"' in dom
        assert 'data-scroll="true"' in dom
