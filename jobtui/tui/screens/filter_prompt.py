"""The `/` prompt: one line of filter text, checked before it is accepted.

BINDINGS:
    enter    apply
    esc      cancel (the filter stays as it was)
"""

from __future__ import annotations

from collections.abc import Callable
from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Input, Static


class FilterScreen(ModalScreen[str | None]):
    """Returns the accepted filter text ("" clears), or None when cancelled."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "cancel", "Cancel", id="filter.cancel")
    ]

    def __init__(self, title: str, current: str, hint: str, check: Callable[[str], object]) -> None:
        super().__init__()
        self._title = title
        self._current = current
        self._hint = hint
        self._check = check

    def compose(self) -> ComposeResult:
        with Vertical(id="filter-box") as box:
            box.border_title = self._title
            yield Input(
                value=self._current, placeholder="empty shows everything", id="filter-input"
            )
            yield Static(Text(self._hint), id="filter-hint")
            yield Static("", id="filter-error")

    def on_mount(self) -> None:
        self.query_one(Input).focus()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        text = event.value.strip()
        try:
            self._check(text)
        except ValueError as exc:
            self.query_one("#filter-error", Static).update(Text(str(exc)))
            return
        self.dismiss(text)

    def action_cancel(self) -> None:
        self.dismiss(None)
