"""Rich tables that never cut a number, at any width (`plan`, `results score`, `results compare`).

Rich fits a table that is too wide by folding its cells (43.7 became '43.' over '7') or cutting
them ('43.…'). Here a table is shown in the first of these layouts whose natural width (every
cell on one line) fits the console, so rich never has to squeeze one:
  1. full: every column, heavy box;
  2. compact: columns whose value is the same in every row leave the table for one line under
     it, cells take their short form (Col.short), light box with two-space gaps;
  3. split: the compact columns over several tables, each repeating the key columns;
  4. records: one block a row, its key cells on a first line and `header value` pairs under it.
Lines outside the tables (titles, notes) wrap at spaces, so their numbers stay whole too.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from dataclasses import dataclass

from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

_HUGE = 10_000  # measuring width: wide enough that nothing in a table is squeezed


def width(piped: int) -> int | None:
    """Console width: the terminal's on a tty; piped, COLUMNS when set (rich reads it when the
    width is None; tests force a width so), else `piped` so that tables are not cut at 80."""
    if sys.stdout.isatty() or os.environ.get("COLUMNS", "").strip().isdigit():
        return None
    return piped


def stdout(piped: int = 140, **kw) -> Console:
    """The results console (as ui.out: stdout, NO_COLOR-aware), honouring COLUMNS when piped."""
    return Console(file=sys.stdout, width=width(piped), no_color=bool(os.environ.get("NO_COLOR")), **kw)


@dataclass(frozen=True)
class Col:
    name: str
    left: bool = False  # names read left-aligned; numbers right-aligned
    key: bool = False  # names the row: kept in every part of a split table, heads a record
    short: Callable[[str], str] | None = None  # a cell's short form, used when space is short
    brief: str = ""  # the header of the compact tables, when shorter than `name` is worth it

    def head(self, compact: bool) -> str:
        return self.brief if compact and self.brief else self.name


def _text(cell) -> Text:
    return cell.copy() if isinstance(cell, Text) else Text(str(cell))


def _table(cols: list[Col], rows: list[list[Text]], compact: bool) -> Table:
    if compact:
        t = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, collapse_padding=True)
    else:
        t = Table()
    for c in cols:
        # no_wrap: measured so, a cell is never folded; were a measure wrong, rich would cut the
        # cell with a visible '…' (which the tests look for) rather than fold a number unseen
        t.add_column(c.head(compact), justify="left" if c.left else "right", no_wrap=True)
    for r in rows:
        t.add_row(*r)
    return t


def _fits(console: Console, table: Table) -> bool:
    return console.measure(table, options=console.options.update(width=_HUGE)).maximum <= console.width


def _shorten(cols: list[Col], rows: list[list[Text]]) -> list[list[Text]]:
    out = []
    for r in rows:
        out.append([Text(c.short(x.plain), style=x.style) if c.short else x for c, x in zip(cols, r)])
    return out


def _constant(cols: list[Col], rows: list[list[Text]]) -> tuple[list[int], list[Text]]:
    """The columns to keep, and `header value` for those that are the same in every row."""
    same = [i for i in range(len(cols)) if len(rows) > 1 and len({r[i].plain for r in rows}) == 1]
    keep = [i for i in range(len(cols)) if i not in same]
    if not any(cols[i].key for i in keep):  # a record or split part needs a key to name its row
        first = next((i for i, c in enumerate(cols) if c.key), None)
        if first is not None:
            same.remove(first)
            keep = sorted([*keep, first])
    notes = [Text(f"{cols[i].name} ").append_text(rows[0][i]) for i in same]
    return keep, notes


def _cell_widths(cols: list[Col], rows: list[list[Text]]) -> list[int]:
    return [max([Text(c.head(True)).cell_len] + [r[i].cell_len for r in rows]) for i, c in enumerate(cols)]


def _pack(widths: list[int], keys: list[int], rest: list[int], limit: int) -> list[list[int]] | None:
    """Greedy: the keys, then as many of `rest` as fit in `limit`, part after part (compact style:
    two-space gaps); None if a column does not fit even beside the keys alone."""
    base = sum(widths[i] + 2 for i in keys)
    parts, part, used = [], [], base
    for i in rest:
        if part and used + widths[i] > limit:
            parts.append(part)
            part, used = [], base
        if used + widths[i] > limit:
            return None
        part.append(i)
        used += widths[i] + 2
    return parts + [part] if part else parts


def _split(console: Console, cols: list[Col], rows: list[list[Text]]) -> list[Table] | None:
    """The columns over as few tables as fit, of widths as even as can be (the last part is not
    left with one column); each repeats the key columns."""
    widths = _cell_widths(cols, rows)
    keys = [i for i, c in enumerate(cols) if c.key]
    rest = [i for i, c in enumerate(cols) if not c.key]
    parts = _pack(widths, keys, rest, console.width)
    if not parts:
        return None
    lo, hi = 1, console.width  # the smallest limit that still packs into as few parts
    while lo < hi:
        mid = (lo + hi) // 2
        p = _pack(widths, keys, rest, mid)
        lo, hi = (lo, mid) if p and len(p) <= len(parts) else (mid + 1, hi)
    parts = _pack(widths, keys, rest, hi) or parts
    return [
        _table([cols[i] for i in keys + p], [[r[i] for i in keys + p] for r in rows], True) for p in parts
    ]


def _flow(head: Text, pieces: list[Text], sep: str, width: int, indent: str = "  ") -> list[Text]:
    """head + pieces joined by sep, in lines of at most `width`, a piece never broken (rich
    would break 'energy (MJ) -' after 'energy'); a line after the first starts with indent."""
    lines, line, n = [], head.copy(), 0  # n: pieces on this line
    for p in pieces:
        gap = sep if n else ""
        if line.plain.strip() and line.cell_len + len(gap) + p.cell_len > width:
            lines.append(line.append(sep.rstrip() if n else ""))
            line, gap, n = Text(indent), "", 0
        line.append(gap).append_text(p)
        n += 1
    return lines + [line] if line.plain.strip() else lines


def _records(console: Console, cols: list[Col], rows: list[list[Text]]) -> list[Text]:
    """A row a block: its key cells, then `header value` pairs packed into lines of the width."""
    lines: list[Text] = []
    for r in rows:
        head = Text("  ").join(x for c, x in zip(cols, r) if c.key)
        head.stylize("bold")
        pairs = [Text(f"{c.name} ", style="dim").append_text(x) for c, x in zip(cols, r) if not c.key]
        lines += [head] + _flow(Text("  "), pairs, "   ", console.width)
    return lines


def show(console: Console, title: str | None, cols: list[Col], cells: list[list], note: str = "") -> None:
    """Print the title, then the table in the first layout that fits (module docstring)."""
    rows = [[_text(x) for x in r] for r in cells]
    if title:
        console.print(title, markup=False, highlight=False)
    full = _table(cols, rows, compact=False)
    if _fits(console, full):
        console.print(full)
        return
    rows = _shorten(cols, rows)
    keep, same = _constant(cols, rows)
    cols, rows = [cols[i] for i in keep], [[r[i] for i in keep] for r in rows]
    compact = _table(cols, rows, compact=True)
    parts = [compact] if _fits(console, compact) else None
    keys = sum(w + 2 for c, w in zip(cols, _cell_widths(cols, rows)) if c.key)
    if parts is None and keys <= console.width // 3:  # long names repeated in every part: records
        parts = _split(console, cols, rows)
    for i, p in enumerate(parts or _records(console, cols, rows)):
        if parts and i:
            console.print()  # a blank line between the parts of a split table
        console.print(p)
    if same:
        for line in _flow(Text(f"same in every {note or 'row'}: ", style="dim"), same, ", ", console.width):
            console.print(line)
