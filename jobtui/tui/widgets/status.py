"""The status line at the top of the console, in three parts that redraw independently.

The "updated Ns ago" age changes every second while everything else on the line changes
rarely; Textual sends a whole widget to the terminal when it is updated, so the age lives in a
small widget of its own and each part is updated only when its text actually differs.
"""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Horizontal
from textual.widgets import Static

from jobtui.tui.texts import same

PARTS = ("head", "age", "tail")


class StatusBar(Horizontal):
    """Database and refresh (`head`), the age of the data (`age`), alarms (`tail`)."""

    def compose(self) -> ComposeResult:
        for part in PARTS:
            yield Static(id=f"status-{part}", classes="status-part")

    def show(self, head: Text, age: Text, tail: Text) -> None:
        for part, text in zip(PARTS, (head, age, tail), strict=True):
            widget = self.query_one(f"#status-{part}", Static)
            if not same(widget.content, text):
                widget.update(text)

    @property
    def plain(self) -> str:
        """The whole line as plain text."""
        parts = (self.query_one(f"#status-{part}", Static).content for part in PARTS)
        return "".join(p.plain if isinstance(p, Text) else str(p) for p in parts)
