"""A confirmation that names exactly what will happen and lets the operator pick the scope.

BINDINGS:
    1..9     pick that choice
    esc / n  cancel
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Static


@dataclass(frozen=True)
class Choice:
    """One way to go on: `value` is returned when picked; `label` says the exact count."""

    value: str
    label: str


class ConfirmScreen(ModalScreen[str | None]):
    """Returns the chosen Choice.value, or None when cancelled."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "cancel", "Cancel", id="confirm.cancel"),
        Binding("n", "cancel", "Cancel", show=False, id="confirm.no"),
        *[Binding(str(i), f"pick({i})", show=False) for i in range(1, 10)],
    ]

    def __init__(
        self, title: str, body: Text, choices: list[Choice], *, danger: bool = False
    ) -> None:
        super().__init__(classes="-danger" if danger else "")
        self._title = title
        self._body = body
        self._choices = choices

    def compose(self) -> ComposeResult:
        with Vertical(id="confirm-box") as box:
            box.border_title = self._title
            yield Static(self._body, id="confirm-body")
            # One compact button per line: fits 80×24 even with four choices.
            with Vertical(id="confirm-buttons"):
                for index, choice in enumerate(self._choices, start=1):
                    yield Button(
                        Text(f"{index}  {choice.label}"),
                        id=f"choice-{index}",
                        variant="error" if self.has_class("-danger") else "primary",
                        compact=True,
                    )
                yield Button(Text("esc  cancel"), id="choice-cancel", compact=True)

    def on_mount(self) -> None:
        self.query_one("#choice-1", Button).focus()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        event.stop()
        if event.button.id == "choice-cancel":
            self.dismiss(None)
            return
        index = int((event.button.id or "choice-0").rsplit("-", 1)[1])
        self.action_pick(index)

    def action_pick(self, index: int) -> None:
        if 1 <= index <= len(self._choices):
            self.dismiss(self._choices[index - 1].value)

    def action_cancel(self) -> None:
        self.dismiss(None)
