"""Issue 26 item 13: fewer bytes for the same screen, and fewer redraws.

The colour codes are sent as changes (jobtui.tui.terminal): Textual writes each run of text as
its style in full and a reset; `compact_sgr` must leave the terminal showing exactly the same
cells, in the same styles, with fewer bytes. The screen is checked with a small model of a
terminal (cursor positions, text, SGR) below. The Overview holds a cleared alarm with its
figures (see the last test).
"""

from __future__ import annotations

import re

from rich.console import Console
from rich.segment import Segment
from rich.style import Style
from textual.strip import Strip

from jobtui.tui.terminal import compact_sgr

_TOKEN = re.compile(r"\x1b\[([0-9;?]*)([A-Za-z])|\x1b\][^\x07]*\x07|\r|\n|[^\x1b\r\n]")
_OFF = {
    "22": {"1", "2"}, "23": {"3"}, "24": {"4", "21"}, "25": {"5", "6"}, "27": {"7"},
    "28": {"8"}, "29": {"9"}, "54": {"51", "52"}, "55": {"53"},
}  # fmt: skip

Cell = tuple[str, frozenset[str], str | None, str | None]
WIDTH = 80


def screen(data: str) -> tuple[dict[tuple[int, int], Cell], tuple[object, ...]]:
    """Every cell written (its character and style) and the style in force at the end."""
    cells: dict[tuple[int, int], Cell] = {}
    row = col = 0
    attrs: set[str] = set()
    fg: str | None = None
    bg: str | None = None
    for m in _TOKEN.finditer(data):
        if m.group(2) == "m":
            codes = (m.group(1) or "0").split(";")
            i = 0
            while i < len(codes):
                code = codes[i] or "0"
                if code == "0":
                    attrs, fg, bg = set(), None, None
                elif code in _OFF:
                    attrs -= _OFF[code]
                elif code in ("38", "48"):
                    n = 3 if codes[i + 1] == "5" else 5
                    colour = ";".join(codes[i : i + n])
                    fg, bg = (colour, bg) if code == "38" else (fg, colour)
                    i += n - 1
                elif code == "39":
                    fg = None
                elif code == "49":
                    bg = None
                elif 30 <= int(code) <= 37 or 90 <= int(code) <= 97:
                    fg = code
                elif 40 <= int(code) <= 47 or 100 <= int(code) <= 107:
                    bg = code
                else:
                    attrs.add(code)
                i += 1
        elif m.group(2) == "H":
            row, col = (int(x) - 1 for x in m.group(1).split(";"))
        elif m.group(2) == "K":  # erase to the end of the line, in the background in force
            for c in range(col, WIDTH):
                cells[(row, c)] = (" ", frozenset(), None, bg)
        elif m.group(2) or m.group(0).startswith("\x1b"):  # other CSI, OSC
            continue
        elif m.group(0) == "\r":
            col = 0
        elif m.group(0) == "\n":
            row += 1
        else:
            cells[(row, col)] = (m.group(0), frozenset(attrs), fg, bg)
            col += 1
    return cells, (frozenset(attrs), fg, bg)


def table_rows() -> str:
    """Rows as Textual sends them: runs of text, each with its whole style and a reset."""
    console = Console(color_system="256", force_terminal=True, width=80)
    plain = Style.parse("color(253) on color(235)")
    bold = plain + Style(bold=True)
    struck = Style.parse("dim strike color(253) on color(235)")
    cursor = Style.parse("reverse color(23) on color(235)")
    out = []
    for y in range(1, 21):
        body = bold if y % 3 else struck
        strip = Strip(
            [
                Segment(" ", plain),
                Segment(" ", bold),
                Segment(f" {100 + y:<6} ", plain),
                Segment("generate_report", body),
                Segment(" ", plain),
                Segment(" running  ", plain if y % 2 else struck),
                Segment(" 15s ", plain),
                Segment(" " * 30, None),
                Segment(" ", cursor),
            ]
        )
        out.append(f"\x1b[{y};1H" + strip.render(console) + "\r\n")
    return "".join(out) + "\x1b[3;5Hplain text\x1b[1mbold\x1b[0m"


def test_same_screen_in_fewer_bytes() -> None:
    data = table_rows()
    compact = compact_sgr(data)
    assert screen(compact) == screen(data)
    # Before this change the console sent `data` as it is.
    assert len(compact.encode()) < 0.6 * len(data.encode()), (len(compact), len(data))


def test_codes_it_does_not_know_pass_as_they_come() -> None:
    odd = (
        "\x1b[1;2;3;4;5;7;9;38;2;1;2;3;48;5;9mA\x1b[0m\x1b[58;5;3mB\x1b[0m\x1b[1mC\x1b[4mD\x1b[0mE"
    )
    assert screen(compact_sgr(odd)) == screen(odd)
    assert compact_sgr("no styles \x1b[?2026h at all") == "no styles \x1b[?2026h at all"


def test_a_cleared_alarm_waits_for_the_figures_a_new_one_does_not() -> None:
    """The Overview redraws at once for an alarm new or worse than the one drawn, or a kind
    come or gone; an alarm that stops firing waits for the figures' next redraw (a failure
    rate at its threshold flapped the whole tab on and off every refresh)."""
    from jobtui.alerts import Level
    from jobtui.tui.panes.overview import OverviewPane

    pane = OverviewPane()
    kinds = ("a", "b")
    fail = ("failure_rate", "a", Level.WARN)
    dead = ("dead_letters", "b", Level.CRIT)
    pane._shape = ((fail, dead), kinds)
    assert not pane._news(((dead,), kinds))  # the failure alarm stopped: it waits
    assert not pane._news(((fail, dead), kinds))
    assert pane._news(((("failure_rate", "a", Level.CRIT), dead), kinds))  # worse
    assert pane._news(((fail, dead, ("no_worker", "b", Level.WARN)), kinds))  # new
    assert pane._news(((fail, dead), ("a",)))  # a kind went
