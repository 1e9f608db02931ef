"""A confirmation that names exactly what will happen and lets the operator pick the scope.

A choice that acts on every row matching a filter (a bulk scope) looks different from one on
named rows (ALL in reverse video, a warning button, a ‼ mark: legible without colour) and is
not taken by one keystroke: picking it opens a field where the operator types the count (or
the word the choice names); anything else does nothing and says so.

The way out is worded "back, change nothing", never "cancel": in a "Cancel jobs?" dialog a key
reading "cancel" could mean either.

BINDINGS:
    1..9     pick that choice (a bulk choice then asks for the typed confirmation)
    esc / n  back: close the dialog and change nothing
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Static
from textual.widgets.button import ButtonVariant

from jobtui.inert import inert
from jobtui.targets import Target

BACK_LABEL = "esc  back, change nothing"


@dataclass(frozen=True)
class Choice:
    """One way to go on: `value` is returned when picked; `label` says the exact count.

    `typed`: for a bulk scope, the text the operator must type to confirm it (the count).
    """

    value: str
    label: str
    typed: str | None = None

    def button_label(self, index: int) -> Text:
        if self.typed is None:
            return Text(f"{index}  {self.label}")
        return Text.assemble(
            f"{index}  ",
            ("‼ ALL", "bold reverse"),
            " ",
            self.label,
            (f"  (type {self.typed})", "bold"),
        )


def target_line(target: Target | None) -> Text | None:
    """`on target EU prod ⚠ DANGER`: which database a confirmed write goes to (issue 28)."""
    if target is None:
        return None
    text = Text.assemble(("on target ", "bold"), inert(target.title, style="bold"))
    if target.danger:
        text.append(" ⚠ DANGER (production)", style="bold reverse")
    return text


class ConfirmScreen(ModalScreen[str | None]):
    """Returns the chosen Choice.value, or None when the operator went back."""

    CSS_PATH = "confirm.tcss"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "back", "Back", id="confirm.back"),
        Binding("n", "back", "Back", show=False, id="confirm.no"),
        *[Binding(str(i), f"pick({i})", show=False) for i in range(1, 10)],
    ]

    def __init__(
        self, title: str, body: Text, choices: list[Choice], *, danger: bool = False
    ) -> None:
        super().__init__(classes="-danger" if danger else "")
        self._title = title
        self._body = body
        self._choices = choices
        self._typing: Choice | None = None  # the bulk choice waiting for its typed text

    def compose(self) -> ComposeResult:
        with Vertical(id="confirm-box") as box:
            box.border_title = self._title
            # --- targets (issue 28): a write names the database it goes to ---
            target = target_line(getattr(self.app, "target", None))
            if target is not None:
                box.border_subtitle = target.copy()  # a Text: a label is never markup
                yield Static(target, id="confirm-target")
            # --- end targets ---
            yield Static(self._body, id="confirm-body")
            # One compact button per line: fits 80×24 even with four choices.
            with Vertical(id="confirm-buttons"):
                for index, choice in enumerate(self._choices, start=1):
                    yield Button(
                        choice.button_label(index),
                        id=f"choice-{index}",
                        variant=self._variant(choice),
                        classes="-bulk" if choice.typed is not None else "",
                        compact=True,
                    )
                yield Button(Text(BACK_LABEL), id="choice-back", compact=True)
            with Vertical(id="confirm-typed"):
                yield Static("", id="confirm-typed-prompt")
                yield Input(id="confirm-typed-input")
                yield Static("", id="confirm-typed-error")

    def _variant(self, choice: Choice) -> ButtonVariant:
        if self.has_class("-danger"):
            return "error"
        return "warning" if choice.typed is not None else "primary"

    def on_mount(self) -> None:
        self.query_one("#confirm-typed").display = False
        self.query_one("#choice-1", Button).focus()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        event.stop()
        if event.button.id == "choice-back":
            self.dismiss(None)
            return
        index = int((event.button.id or "choice-0").rsplit("-", 1)[1])
        self.action_pick(index)

    def action_pick(self, index: int) -> None:
        if not 1 <= index <= len(self._choices):
            return
        choice = self._choices[index - 1]
        if choice.typed is None:
            self.dismiss(choice.value)
            return
        self._typing = choice
        self.query_one("#confirm-buttons").display = False
        self.query_one("#confirm-typed").display = True
        self.query_one("#confirm-typed-prompt", Static).update(
            Text.assemble(
                ("‼ ALL ", "bold reverse"),
                choice.label,
                "\nType ",
                (choice.typed, "bold"),
                " and press enter to go on; esc: back, change nothing.",
            )
        )
        self.query_one("#confirm-typed-input", Input).focus()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        choice = self._typing
        if choice is None:
            return
        if event.value.strip() == choice.typed:
            self.dismiss(choice.value)
            return
        event.input.value = ""
        self.query_one("#confirm-typed-error", Static).update(
            Text.assemble(
                ("Not confirmed: ", "bold"),
                f"that is not {choice.typed}. Nothing was done; type {choice.typed} or press esc.",
            )
        )

    def action_back(self) -> None:
        self.dismiss(None)
