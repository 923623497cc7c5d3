"""What makes the harness's plots readable, shared by `results compare --plot` and `plan --plot`
(in core: the review and planner layers both use it and may not import each other).

- `short_accelerator(name)` and `family(name)`: 'NVIDIA H100-SXM5-80GB' -> 'H100', 'hopper';
- `style(accelerators)`: one marker shape per accelerator family (hopper, blackwell, TPU, ...)
  and a colour per accelerator from the qualitative tab10 palette, so that two accelerators never
  share both (14 pastel hues of one colour map could not be told apart);
- `log_ticks(lo, hi)` / `readable_log_axis(axis)`: at least three labelled ticks on a log axis, in
  plain numbers (an axis spanning less than a decade had one tick, '10', and nothing else);
- `place_labels(ax, points, texts)`: names next to points without overlapping each other, the
  points or the panel's edge; a name that fits nowhere is left off and counted (the caller says so).
"""

from __future__ import annotations

import math
import re

_ACC_RE = re.compile(r"\b(GB\d{3}|[A-Z]{1,2}\d{2,3}[A-Z]?|MI\d{3}X?|Gaudi\s?\d|TPU[-\s]?\w+)", re.I)


def short_accelerator(name) -> str:
    """'NVIDIA H100-SXM5-80GB' -> 'H100', 'AMD Instinct MI300X 192GB HBM3' -> 'MI300X'."""
    if not isinstance(name, str) or not name:
        return "?"
    name = re.sub(r"\((?:R|TM)\)|[®™]", "", name)
    m = _ACC_RE.search(name)
    return m[1].replace(" ", "") if m else name.strip()[:14]


# the families of harness/planner/data/accelerators.yaml, by name (the planner's catalogue is a
# layer above core; these patterns cover every chip it lists and the published rounds name)
_FAMILIES = (
    ("hopper", r"\bG?H[12]00\b|grace hopper"),
    ("blackwell", r"\bG?B[23]00\b|blackwell"),
    ("ampere", r"\bA(100|30|40|10)\b"),
    ("ada", r"\bL40S?\b|\bL4\b"),
    ("cdna3", r"\bMI3[02][05]X\b"),
    ("cdna4", r"\bMI35[05]X\b"),
    ("gaudi", r"gaudi"),
    ("tpu", r"\btpu"),
)
# family (harness/planner/data/accelerators.yaml) -> marker; unknown families share the last one
FAMILY_MARKERS = {
    "hopper": "o",
    "blackwell": "s",
    "ampere": "^",
    "ada": "v",
    "cdna3": "D",
    "cdna4": "P",
    "gaudi": "X",
    "tpu": "*",
}
OTHER_MARKER = "h"


def family(accelerator: object) -> str:
    """'NVIDIA H100-SXM5-80GB' (or 'H100') -> 'hopper'; 'other' for a chip no pattern knows."""
    text = re.sub(r"[-_]", " ", str(accelerator or ""))  # a NaN (no accelerator named) too
    return next((f for f, pat in _FAMILIES if re.search(pat, text, re.I)), "other")


def style(accelerators: dict[str, str]) -> dict[str, dict]:
    """{short name: {marker, color, family}} for {short name: full name}: marker by family, colour
    by position in the family-sorted list (tab10), so (marker, colour) pairs are all distinct."""
    import matplotlib

    tab10 = matplotlib.colormaps["tab10"]
    fams = {a: family(full) for a, full in accelerators.items()}
    order = sorted(accelerators, key=lambda a: (fams[a], a))
    return {
        a: {"marker": FAMILY_MARKERS.get(fams[a], OTHER_MARKER), "color": tab10(i % 10), "family": fams[a]}
        for i, a in enumerate(order)
    }


def log_ticks(lo: float, hi: float) -> list[float]:
    """Tick values in [lo, hi] of the first of 1-per-decade, 1-3, 1-2-5, 1-2-3-5-7, 1..9 that
    gives three or more (a narrow axis gets finer ticks; a wide one stays uncluttered: 1-3 before
    1-2-5, whose '50' and '100' touch on a two-decade panel 3.4 inches wide)."""
    lo, hi = min(lo, hi), max(lo, hi)
    if lo <= 0 or not math.isfinite(lo) or not math.isfinite(hi):
        return []
    ticks: list[float] = []
    for subs in ((1,), (1, 3), (1, 2, 5), (1, 2, 3, 5, 7), tuple(range(1, 10))):
        ticks = [
            s * 10.0**e
            for e in range(math.floor(math.log10(lo)) - 1, math.ceil(math.log10(hi)) + 1)
            for s in subs
            if lo * (1 - 1e-9) <= s * 10.0**e <= hi * (1 + 1e-9)
        ]
        if len(ticks) >= 3:
            return ticks
    return ticks


def readable_log_axis(axis, lo: float, hi: float) -> None:
    """Fixed plain-number major ticks from `log_ticks` on a log-scaled matplotlib axis."""
    import matplotlib.ticker as mt

    axis.set_major_locator(mt.FixedLocator(log_ticks(lo, hi)))
    axis.set_major_formatter(mt.FuncFormatter(lambda v, _p: f"{v:g}"))
    axis.set_minor_formatter(mt.NullFormatter())


def place_labels(ax, points, texts, fontsize: float = 6.5) -> int:
    """Annotate each (x, y) with its text at the first free spot of right, above, below, left
    (display coordinates: call after the figure's layout is final). Returns how many were left off."""
    renderer = ax.figure.canvas.get_renderer()
    box = ax.get_window_extent(renderer)
    marks = [ax.transData.transform(p) for p in points]
    # each point's marker (about 8 px square) is an obstacle for every name
    taken = [(x - 5, y - 5, x + 5, y + 5) for x, y in marks]
    left_off = 0
    spots = [((6, 0), "left", "center"), ((0, 6), "center", "bottom"), ((0, -6), "center", "top")]
    spots.append(((-6, 0), "right", "center"))
    for p, text in zip(points, texts):
        for off, ha, va in spots:
            t = ax.annotate(
                text, p, xytext=off, textcoords="offset points", fontsize=fontsize, ha=ha, va=va, zorder=5
            )
            e = t.get_window_extent(renderer)
            b = (e.x0 - 1, e.y0 - 1, e.x1 + 1, e.y1 + 1)
            inside = box.x0 <= b[0] and b[2] <= box.x1 and box.y0 <= b[1] and b[3] <= box.y1
            if inside and not any(_overlap(b, o) for o in taken):
                taken.append(b)
                break
            t.remove()
        else:
            left_off += 1
    return left_off


def _overlap(a, b) -> bool:
    return a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]
