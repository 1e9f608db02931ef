"""The `A` screen on the Overview: every alarm firing, in the alarm list's order, one a line.

The Overview's alarm list shows the first few and counts the rest; this shows them all,
scrollable, as they were when it opened (the list behind it stays live).

BINDINGS:
    esc / q / A   close (A: the `overview.alarms` key, as remapped)
    j / k         scroll
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.widgets import Static

from jobtui.alarm_order import critical_count, ordered
from jobtui.alerts import Firing
from jobtui.tui.screens.scroll_modal import ScrollModal
from jobtui.tui.widgets.alarms import alarm_lines


class AlarmsScreen(ScrollModal):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "close", "Close", id="alarms.close"),
        # The key that opened it closes it: the same id, so a remapped `overview.alarms` does too.
        Binding("A", "close", "Close", show=False, id="overview.alarms"),
    ]
    box_id = "alarms-box"

    def __init__(self, firings: Sequence[Firing]) -> None:
        super().__init__()
        self._firings = ordered(firings)

    def compose(self) -> ComposeResult:
        lines = alarm_lines(self.app, self._firings) or [Text("No alarm fires.")]
        with VerticalScroll(id="alarms-box") as box:
            n, crit = len(self._firings), critical_count(self._firings)
            box.border_title = f"{n} alarm{'' if n == 1 else 's'}, {crit} critical"
            box.border_subtitle = "esc close"
            for line in lines:
                yield Static(line, classes="alarm-line")
