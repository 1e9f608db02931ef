"""Small display widgets for the Overview: number tiles and labelled sparklines.

Both redraw only when what they show changes: every `update()` or title change makes Textual
send the whole widget to the terminal again, and the Overview is refreshed every 2 s with
mostly the same figures (a console left open over SSH should cost next to no bandwidth).
"""

from __future__ import annotations

from collections.abc import Sequence

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import Sparkline, Static

LEVELS = ("-ok", "-warn", "-crit")


class Tile(Static):
    """One headline figure under its label; `level` colours it via CSS classes.

    Two lines and no border so eight tiles fit in 80 columns; `narrow` puts the value after a
    short label on one line (below 80 columns, so the label never wraps over the value). A
    `note` (such as `!` for warn and `!!` for crit) follows the value, so the level reads
    without colour (NO_COLOR).
    """

    def __init__(self, label: str, short: str | None = None, *, id: str | None = None) -> None:
        super().__init__(id=id, classes="tile")
        self.label = label
        self.short = short or label
        self.narrow = False
        self.note = ""
        self.value = ""
        self._show("–")

    def _show(self, value: str, *, force: bool = False) -> None:
        if value == self.value and not force:
            return
        self.value = value
        if self.narrow:
            text = Text.assemble((self.short, "dim"), " ", (value, "bold"))
        else:
            text = Text.assemble((self.label, "dim"), "\n", (value, "bold"))
        self.update(text, layout=False)

    def set_narrow(self, narrow: bool) -> None:
        if narrow != self.narrow:
            self.narrow = narrow
            self._show(self.value, force=True)

    def set(self, value: str, level: str | None = None, note: str = "") -> None:
        """Show `value`; `level` is one of ok, warn, crit (or None for a plain tile)."""
        for name in LEVELS:
            self.set_class(level is not None and name == f"-{level}", name)
        self.note = note
        self._show(value + note)


class Spark(Vertical):
    """A sparkline with its title and current value in the border."""

    def __init__(self, label: str, *, id: str | None = None) -> None:
        super().__init__(id=id, classes="spark")
        self.border_title = label
        self._label = label
        self._values: list[float] | None = None
        self._title = label
        self._subtitle: str | None = None

    def compose(self) -> ComposeResult:
        yield Sparkline([], summary_function=max)

    def set(
        self, values: Sequence[float], current: str, peak: str, stopped: str | None = None
    ) -> None:
        """`current` goes in the title (it matters most), the peak of the hour below, or,
        when the history behind the chart `stopped`, that instead (`stopped 14m ago`)."""
        data = list(values) if values else [0.0]
        if data != self._values:
            self._values = data
            self.query_one(Sparkline).data = data
        title = f"{self._label} {current}".rstrip()
        if title != self._title:
            self._title = title
            self.border_title = title
        subtitle = stopped or f"max {peak}"
        if subtitle != self._subtitle:
            self._subtitle = subtitle
            self.border_subtitle = subtitle
