"""A bar chart with its axes, as text: the scale on the left, time labels underneath.

Drawn with block glyphs (▁…█) so the bars read the same without colour; a row of a chart for
something bad (failures) is marked by its caller, not by colour alone. Fits 80 columns: a
5-character scale, a rule, and one column per bucket (60 for an hour, 72 for a day).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime

from rich.text import Text

BLOCKS = " ▁▂▃▄▅▆▇█"
SCALE_W = 5


def count_text(value: float) -> str:
    """A scale label for counts: 0, 7, 12.5, 1.2k, 3.4M."""
    if value >= 1_000_000:
        return f"{value / 1_000_000:.1f}M"
    if value >= 1_000:
        return f"{value / 1_000:.1f}k"
    if value == int(value):
        return str(int(value))
    return f"{value:.1f}"


def ms_text(value: float) -> str:
    """A scale label for run times: 850ms, 1.2s, 3.0m."""
    if value >= 60_000:
        return f"{value / 60_000:.1f}m"
    if value >= 1_000:
        return f"{value / 1_000:.1f}s"
    return f"{value:.0f}ms"


def bars(
    values: Sequence[float | None],
    height: int = 3,
    label: Callable[[float], str] = count_text,
    style: str = "",
) -> list[Text]:
    """`height` rows of bars for `values` (None: no data, drawn blank), the top one labelled
    with the largest value and the bottom one with 0."""
    top = max((v for v in values if v is not None), default=0.0)
    rows: list[Text] = []
    for r in range(height):
        if r == 0:
            scale = label(top)
        elif r == height - 1:
            scale = "0"
        else:
            scale = ""
        line = Text(f"{scale:>{SCALE_W}}┤" if scale else f"{'':>{SCALE_W}}│", style="dim")
        floor = (height - 1 - r) * 8  # eighths below this row
        cells = []
        for v in values:
            if v is None or top <= 0:
                cells.append(" ")
                continue
            eighths = round(v / top * height * 8)
            if v > 0:
                eighths = max(eighths, 1)  # something happened: never draw it as nothing
            cells.append(BLOCKS[max(0, min(8, eighths - floor))])
        line.append("".join(cells), style=style)
        rows.append(line)
    return rows


def time_axis(starts: Sequence[datetime], ticks: int = 4) -> Text:
    """Clock times (HH:MM) under the chart: at its start, `ticks - 1` points along, and "now"
    at its end."""
    n = len(starts)
    cells = [" "] * (n + 8)
    marks = [" "] * n
    for t in range(ticks):
        i = t * (n - 1) // ticks
        label = starts[i].strftime("%H:%M")
        marks[i] = "╵"
        cells[i : i + len(label)] = label
    marks[n - 1] = "╵"
    end = "now"
    cells[n - len(end) : n] = end
    axis = Text(" " * SCALE_W + "└" + "".join(marks), style="dim")
    axis.append("\n" + " " * (SCALE_W + 1) + "".join(cells).rstrip(), style="dim")
    return axis
