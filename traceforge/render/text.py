"""Text from trace data made safe to show: names come from whoever wrote the trace.

Every renderer passes a string that came from a trace (kernel, op, annotation, file and
device names) through these before it reaches a terminal, a Markdown file, a spreadsheet,
an HTML page or an SVG chart:

- :func:`plain`: C0 and C1 control characters (``ESC``, ``BEL``, ``CR``, ...), ``DEL`` and
  the Unicode bidirectional overrides are written as visible escapes (``\\x1b``,
  ``\\u202e``), so a name cannot retitle or clear a terminal, hide text or reorder a line;
- :func:`shorten`: a long name keeps its start and end around an ellipsis (kernel names
  differ at both ends: templates at the start, tile shapes at the end);
- :func:`display`: both, cheaply, for tables: a name is cut to :data:`DISPLAY_CAP`
  characters before it is escaped, so a 50 MB name costs no more than a short one (the
  full name stays in JSON and CSV);
- :func:`csv_cell`: a spreadsheet cell never starts a formula (``= + - @``, OWASP's rule):
  such a text gets a leading ``'``; a number written as text (``-1.5``) is left alone.

Rich renders every cell, title and note as :class:`rich.text.Text`, never as markup, so
``[bold]``, ``[/tmp/x]`` and ``:fire:`` in a name are shown as written.
"""

from __future__ import annotations

import re

#: The longest name shown in a table, Markdown or HTML cell (middle shortened beyond).
DISPLAY_CAP = 400

ELLIPSIS = "…"

_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")
_UNSAFE_INLINE = re.compile(
    "[\x00-\x09\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")
_SHORT = {"\t": "\\t", "\n": "\\n", "\r": "\\r"}
_NUMBER = re.compile(r"[-+]?(\d[\d,]*\.?\d*|\.\d+)([eE][-+]?\d+)?%?")


def _escape(m: re.Match[str]) -> str:
    ch = m.group(0)
    if ch in _SHORT:
        return _SHORT[ch]
    code = ord(ch)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def plain(s: object) -> str:
    """``s`` as text with every control character written as a visible escape."""
    text = s if isinstance(s, str) else str(s)
    return _UNSAFE.sub(_escape, text)


def _u_escape(m: re.Match[str]) -> str:
    return f"\\u{ord(m.group(0)):04x}"


def plain_lines(s: str) -> str:
    """A whole document or output (``s``): control characters escaped as ``\\uXXXX``
    (valid inside a JSON string too), line breaks kept."""
    return _UNSAFE_INLINE.sub(_u_escape, s)


def shorten(s: str, width: int) -> str:
    """``s`` in at most ``width`` characters: its start and end around an ellipsis."""
    if len(s) <= width:
        return s
    if width <= 1:
        return ELLIPSIS[:width]
    tail = (width - 1) // 2
    head = width - 1 - tail
    return s[:head] + ELLIPSIS + (s[-tail:] if tail else "")


def display(s: object, cap: int = DISPLAY_CAP) -> str:
    """``s`` to show in a table: escaped, and at most ``cap`` characters."""
    text = s if isinstance(s, str) else str(s)
    if len(text) > 4 * cap:  # a huge name: escape only what can be shown
        text = text[: 2 * cap] + ELLIPSIS + text[-2 * cap:]
    return shorten(plain(text), cap)


def csv_cell(v: object) -> object:
    """A CSV cell: text escaped and never read as a formula; other values as they are."""
    if not isinstance(v, str):
        return v
    text = plain(v)
    if text[:1] in ("=", "+", "-", "@") and not _NUMBER.fullmatch(text):
        return "'" + text
    return text
