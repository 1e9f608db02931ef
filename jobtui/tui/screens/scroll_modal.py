"""What the read-only modal screens (help, alarms) share: one scrolling box, keys to close it.

BINDINGS:
    esc / q   close
    j / k     scroll
"""

from __future__ import annotations

from typing import ClassVar

from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.screen import ModalScreen


class ScrollModal(ModalScreen[None]):
    """A modal whose content is one `VerticalScroll` with the id `box_id`."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("q", "close", "Close", show=False),
        Binding("j", "scroll_down", show=False),
        Binding("k", "scroll_up", show=False),
    ]
    box_id = ""

    def on_mount(self) -> None:
        self.query_one(f"#{self.box_id}").focus()

    def action_close(self) -> None:
        self.dismiss(None)

    def action_scroll_down(self) -> None:
        self.query_one(f"#{self.box_id}", VerticalScroll).scroll_down()

    def action_scroll_up(self) -> None:
        self.query_one(f"#{self.box_id}", VerticalScroll).scroll_up()
