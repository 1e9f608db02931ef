"""The status line at the top of the console, in three parts that redraw independently.

The "updated Ns ago" age changes every second while everything else on the line changes
rarely; Textual sends a whole widget to the terminal when it is updated, so the age lives in a
small widget of its own and each part is updated only when its text actually differs, with a
layout pass only when its width changes.
"""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Horizontal
from textual.widgets import Static

from jobtui.tui.texts import same

PARTS = ("head", "age", "tail")
WIDTH_STEP = 8  # the age part's width grows in steps of this many cells (see `show`)


class StatusBar(Horizontal):
    """Database and refresh (`head`), the age of the data (`age`), alarms (`tail`).

    The head takes what width is left (its end is cut on a narrow screen), so the alarms at
    the right are always on screen.
    """

    def compose(self) -> ComposeResult:
        for part in PARTS:
            yield Static(id=f"status-{part}", classes="status-part")

    def show(self, head: Text, age: Text, tail: Text) -> None:
        # The age's width changes with its digits ("9s" → "10s", "(8 ms)" → "(12 ms)"); padded
        # to a step it changes width, and so needs a layout pass, only now and then.
        age = age.copy()
        age.pad_right(-age.cell_len % WIDTH_STEP)
        for part, text in zip(PARTS, (head, age, tail), strict=True):
            widget = self.query_one(f"#status-{part}", Static)
            old = widget.content
            if not same(old, text):
                # A layout pass makes Textual resend the scrollbars of every table on screen;
                # only a part whose width changes needs one.
                width_changed = not isinstance(old, Text) or old.cell_len != text.cell_len
                widget.update(text, layout=width_changed)

    @property
    def plain(self) -> str:
        """The whole line as plain text."""
        parts = (self.query_one(f"#status-{part}", Static).content for part in PARTS)
        return "".join(p.plain if isinstance(p, Text) else str(p) for p in parts)
