"""Text from trace data made safe to show: names come from whoever wrote the trace.

Every renderer passes a string that came from a trace (kernel, op, annotation, file and
device names) through these before it reaches a terminal, a Markdown file, a spreadsheet,
an HTML page or an SVG chart:

- :func:`plain`: C0 and C1 control characters (``ESC``, ``BEL``, ``CR``, ...), ``DEL`` and
  the Unicode bidirectional overrides are written as visible escapes (``\\x1b``,
  ``\\u202e``), so a name cannot retitle or clear a terminal, hide text or reorder a line;
- :func:`shorten`: a long name keeps its start and end around an ellipsis (kernel names
  differ at both ends: templates at the start, tile shapes at the end);
  :func:`shorten_all` does it for a table's column, keeping the part where two names
  differ when the usual form would print them alike;
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
    if s.isascii() and all(safe_ascii(s[i:i + _CHUNK].encode("ascii"))
                           for i in range(0, len(s), _CHUNK)):
        return s  # nothing to escape (checked 4x faster than the regex scans)
    return _UNSAFE_INLINE.sub(_u_escape, s)


def safe_ascii(b: bytes) -> bool:
    """Whether ``b`` is ASCII without a character :func:`plain_lines` escapes."""
    return b.isascii() and not b.translate(None, _SAFE_BYTES)


#: Every byte but the ASCII ones :func:`plain_lines` escapes (C0 but the line feed, and
#: DEL): ``bytes.translate`` deleting these leaves only those (nothing, mostly).
_SAFE_BYTES = bytes(c for c in range(256) if not (c < 0x20 and c != 0x0A or c == 0x7F))
_CHUNK = 1 << 23


def shorten(s: str, width: int) -> str:
    """``s`` in at most ``width`` characters: its start and end around an ellipsis."""
    if len(s) <= width:
        return s
    if width <= 1:
        return ELLIPSIS[:width]
    tail = (width - 1) // 2
    head = width - 1 - tail
    return s[:head] + ELLIPSIS + (s[-tail:] if tail else "")


def _split(s: str, width: int, head: int) -> str:
    return s[:head] + ELLIPSIS + (s[len(s) - (width - 1 - head):] if width - 1 - head else "")


def _windows(group: list[str], width: int) -> list[list[str]]:
    """Ways to show every name of ``group`` (names longer than ``width`` that read alike
    when shortened the usual way) in ``width`` characters, one rule for all of them, best
    first: the part where they differ (after their common start, before their common end)
    kept whole -- before one ellipsis, after it, or between two --, then its start between
    two ellipses, then the one ellipsis moved off the middle, nearest first."""
    pre = len(_common(group))
    short = min(len(s) for s in group)
    suf = min(len(_common([s[::-1] for s in group])), short - pre)
    out = []
    head = max(len(s) - suf for s in group)  # where the last one's differing part ends
    if head <= width - 2:
        out.append([_split(s, width, head) for s in group])
    tail = max(len(s) - pre for s in group)  # from where they start to differ
    if tail <= width - 2:
        out.append([_split(s, width, width - 1 - tail) for s in group])
    core = max(len(s) - suf - pre for s in group)
    room = width - 2 - core
    if room >= 2:
        k1 = min(pre, max(1, room // 2))
        k2 = room - k1
        out.append([s[:k1] + ELLIPSIS + s[pre:pre + core] + ELLIPSIS + s[len(s) - k2:]
                    for s in group])
    k = max(1, (width - 2) // 5)  # its start, between a little of both ends
    if width - 2 - 2 * k >= 1:
        out.append([s[:k] + ELLIPSIS + s[pre:pre + width - 2 - 2 * k] + ELLIPSIS
                    + s[len(s) - k:] for s in group])
    mid = width - 1 - (width - 1) // 2
    heads = sorted(range(1, width - 1), key=lambda h: (abs(h - mid), -h))
    out += [[_split(s, width, h) for s in group] for h in heads]
    return out


def _common(names: list[str]) -> str:
    import os.path

    return os.path.commonprefix(names)


def shorten_all(names: list[str], width: int) -> list[str]:
    """``names`` (one table column) each in at most ``width`` characters, shortened in the
    middle (:func:`shorten`) -- except where two different names would then read alike
    (``nvjet_sm90_tst_…1_v_bz_bias_TNN`` for three GEMMs): those keep the part where they
    differ (the ellipsis moved, or start, differing part and end around two ellipses),
    one rule for the whole group. Names no rule tells apart in ``width`` keep the usual
    form (the full names are in JSON and CSV)."""
    short = [shorten(s, width) for s in names]
    if width < 5:
        return short
    groups: dict[str, set[str]] = {}
    for s, t in zip(names, short, strict=True):
        if s != t:
            groups.setdefault(t, set()).add(s)
    alike = {t: sorted(g) for t, g in groups.items() if len(g) > 1}
    if not alike:
        return short
    taken = set(short)
    chosen: dict[str, str] = {}
    for t, group in alike.items():
        others = taken - {t}
        for rows in _windows(group, width):
            if len(set(rows)) == len(rows) and not others & set(rows):
                chosen.update(zip(group, rows, strict=True))
                taken |= set(rows)
                break
    return [chosen.get(s, t) for s, t in zip(names, short, strict=True)]


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
