"""Terminal tables that fit the width they are given, with cells that are plain text.

The width is the terminal's (``COLUMNS`` when set) when standard output is one, ``--width
N`` (``TRACEFORGE_WIDTH``) when given, and unlimited when output is piped or redirected
(a file gets whole rows). A table wider than that is fitted without wrapping a row:

numeric columns keep every digit (they never wrap or shorten), and in turn

1. the widest text columns are shortened in the middle (``nvjet_sm90_tst…bias_TNN``) to
   :data:`COMFORTABLE_TEXT` characters (names that would then read alike keep the part
   where they differ: :func:`~traceforge.render.text.shorten_all`);
2. number headers wrap between words (``total (us)`` over two lines);
3. text columns shorten further, the widest first, down to their header's longest word
   (at least :data:`MIN_TEXT`);
4. columns close up from :data:`GAP` spaces to one;
5. a number header's word longer than its numbers breaks, unless splitting the columns into
   blocks printed one under another (each led by the first column, as pandas wraps a wide
   frame) keeps every header word whole: :func:`column_blocks`;

and a table whose numbers alone are wider is printed whole, as wide as they need. Titles
and notes wrap at the width too (not when piped).

Every cell, title and note is a :class:`rich.text.Text`: nothing from a trace is read as
markup or emoji, and nothing is highlighted.
"""

from __future__ import annotations

import io
import os
import shutil
import sys
from collections.abc import Sequence

from traceforge.render.text import plain, shorten_all

#: Spaces between two columns.
GAP = 2

#: Text columns are not shortened below this many characters (or their header's longest word).
MIN_TEXT = 12

#: Text columns are shortened to this width before number headers are wrapped.
COMFORTABLE_TEXT = 32


def table_width() -> int | None:
    """The width tables fit: ``TRACEFORGE_WIDTH`` (``--width``), else the terminal's when
    standard output is one, else None (unlimited)."""
    env = os.environ.get("TRACEFORGE_WIDTH", "")
    if env.strip().isdigit() and int(env) > 0:
        return int(env)
    try:
        tty = sys.stdout.isatty()
    except (AttributeError, ValueError):
        tty = False
    return shutil.get_terminal_size().columns if tty else None


def wrap(text: str, width: int | None = None) -> str:
    """Lines of prose (a verb's head and notes around its tables) wrapped between words to
    ``width`` (default :func:`table_width`; unlimited: as they are)."""
    import textwrap

    width = table_width() if width is None else width
    if width is None:
        return text
    out = []
    for line in text.split("\n"):
        out += textwrap.wrap(line, width, break_long_words=False, break_on_hyphens=False,
                             subsequent_indent="  ") or [""]
    return "\n".join(out)


def _word(h: str) -> int:
    return max((len(w) for w in h.split()), default=0)


def fit(headers: Sequence[str], columns: Sequence[Sequence[str]], numeric: Sequence[bool],
        width: int | None) -> tuple[list[int], int]:
    """Each column's width, and the spaces between columns (:data:`GAP`, or one where
    two do not fit), so that the table fits ``width`` where the numbers allow."""
    n = len(headers)
    cells = [max((len(c) for c in col), default=0) for col in columns]
    natural = [max(len(h), c) for h, c in zip(headers, cells, strict=True)]
    if width is None:
        return natural, GAP
    gaps = max(n - 1, 0)
    if sum(natural) <= width - GAP * gaps:
        return natural, GAP
    floor = [max(c, _word(h)) if num else max(_word(h), min(c, MIN_TEXT))
             for h, c, num in zip(headers, cells, numeric, strict=True)]
    widths = list(natural)
    # Long names give way first, then number headers wrap, then names shorten further,
    # then columns close up to one space, then long header words break.
    comfortable = [nat if num else max(f, min(nat, COMFORTABLE_TEXT))
                   for nat, f, num in zip(natural, floor, numeric, strict=True)]
    wrapped = [f if num else w for f, w, num in zip(floor, comfortable, numeric, strict=True)]
    for stage in (comfortable, wrapped, floor):
        _shrink(widths, stage, sum(widths) - (width - GAP * gaps))
    gap = GAP if sum(widths) <= width - GAP * gaps else 1
    folded = [max(c, 1) if num else f for c, f, num in zip(cells, floor, numeric, strict=True)]
    _shrink(widths, folded, sum(widths) - (width - gap * gaps))
    return widths, gap


def _shrink(widths: list[int], floor: Sequence[int], excess: int) -> None:
    """Narrow the widest columns above their ``floor`` together, by ``excess`` in all."""
    n = len(widths)
    while excess > 0:
        free = [i for i in range(n) if widths[i] > floor[i]]
        if not free:
            return
        top = max(widths[i] for i in free)
        widest = [i for i in free if widths[i] == top]
        below = [widths[i] for i in free if widths[i] < top]
        nxt = max([*below, max(floor[i] for i in widest)])
        step = max(1, min(top - nxt, -(-excess // len(widest))))
        for i in widest:
            cut = min(step, excess, widths[i] - floor[i])
            widths[i] -= cut
            excess -= cut


def lines(headers: Sequence[str], columns: Sequence[Sequence[str]], numeric: Sequence[bool],
          widths: Sequence[int], gap: int) -> list[str]:
    """The table's lines at the given widths: headers wrapped between words (a word longer
    than its column breaks) and aligned at the bottom, one heavy rule, one line per row;
    numbers right-aligned, text left-aligned, ``gap`` spaces between columns. Laid out
    here rather than by rich, whose column widths and padding differ between releases."""
    import textwrap

    heads = [textwrap.wrap(plain(h), w, break_long_words=True, break_on_hyphens=False) or [""]
             for h, w in zip(headers, widths, strict=True)]
    depth = max((len(x) for x in heads), default=0)
    sep = " " * gap

    def line(cells: Sequence[str]) -> str:
        return sep.join(c.rjust(w) if num else c.ljust(w)
                        for c, w, num in zip(cells, widths, numeric, strict=True))

    out = [line([x[k - depth + len(x)] if k >= depth - len(x) else "" for x in heads])
           for k in range(depth)]
    out.append("\u2501" * (sum(widths) + gap * max(len(widths) - 1, 0)))
    out += [line(row) for row in zip(*columns, strict=True)]
    return out


#: A block of a table's columns: their indexes, widths and the spaces between them.
Block = tuple[list[int], list[int], int]


def column_blocks(headers: Sequence[str], columns: Sequence[Sequence[str]],
                  numeric: Sequence[bool], width: int | None) -> list[Block]:
    """The table's columns in blocks printed one under another, each led by the first
    column, where one block would break a header's word (``kernels`` over ``k``/``e``/...):
    as pandas wraps a wide frame. One block (all columns) when the table fits."""
    n = len(headers)
    whole = _block(headers, columns, numeric, width, list(range(n)))
    if width is None or n < 3 or not _breaks(headers, whole):
        return [whole]
    blocks: list[Block] = []
    block = _block(headers, columns, numeric, width, [0, 1])
    for i in range(2, n):
        wider = _block(headers, columns, numeric, width, [*block[0], i])
        if _breaks(headers, wider):
            blocks.append(block)
            wider = _block(headers, columns, numeric, width, [0, i])
        block = wider
    blocks.append(block)
    return blocks


def _block(headers: Sequence[str], columns: Sequence[Sequence[str]], numeric: Sequence[bool],
           width: int | None, part: list[int]) -> Block:
    widths, gap = fit([headers[i] for i in part], [columns[i] for i in part],
                      [numeric[i] for i in part], width)
    return part, widths, gap


def _breaks(headers: Sequence[str], block: Block) -> bool:
    """Whether the block's widths break one of its header words."""
    return any(_word(headers[i]) > w for i, w in zip(block[0], block[1], strict=True))


def render(headers: Sequence[str], columns: Sequence[Sequence[str]], numeric: Sequence[bool],
           *, title: str = "", notes: Sequence[str] = (), width: int | None = None) -> str:
    """A table of plain-text cells (already formatted and escaped) fitted to ``width``."""
    from rich.console import Console
    from rich.text import Text

    blocks = []
    for part, widths, gap in column_blocks(headers, columns, numeric, width):
        num = [numeric[i] for i in part]
        fitted = [list(columns[i]) if numeric[i] else shorten_all(list(columns[i]), w)
                  for i, w in zip(part, widths, strict=True)]
        blocks.append(lines([headers[i] for i in part], fitted, num, widths, gap))
    total = max((len(x) for b in blocks for x in b), default=0)
    buf = io.StringIO()
    console = Console(file=buf, width=max(width or 0, total, 20), force_terminal=False,
                      color_system=None, markup=False, emoji=False, highlight=False)
    for line in ([title] if title else []):
        console.print(Text(plain(line)), soft_wrap=width is None)
    buf.write("\n".join("".join(x + "\n" for x in b) for b in blocks))
    for n in notes:
        console.print(Text(plain(n)), soft_wrap=width is None)
    return "\n".join(line.rstrip() for line in buf.getvalue().split("\n"))
