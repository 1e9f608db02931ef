"""The `/` prompt: one line of filter text, checked before it is accepted.

`kind:` completes to the known kinds (shown greyed; → accepts), and the kinds the typed text
matches are listed under the input as it is typed.

BINDINGS:
    enter    apply
    →        accept the completion
    esc      cancel (the filter stays as it was)
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.suggester import Suggester
from textual.widgets import Input, Static

from jobtui.inert import inert
from jobtui.tui.filters import complete_kind, kinds_matching


class KindSuggester(Suggester):
    """Completes a trailing `kind:PREFIX` to the first known kind that starts with it."""

    def __init__(self, kinds: Sequence[str]) -> None:
        super().__init__(use_cache=False, case_sensitive=True)
        self.kinds = list(kinds)

    async def get_suggestion(self, value: str) -> str | None:
        return complete_kind(value, self.kinds)


class FilterScreen(ModalScreen[str | None]):
    """Returns the accepted filter text ("" clears), or None when cancelled."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "cancel", "Cancel", id="filter.cancel")
    ]

    def __init__(
        self,
        title: str,
        current: str,
        hint: str,
        check: Callable[[str], object],
        kinds: Sequence[str] = (),
    ) -> None:
        super().__init__()
        self._title = title
        self._current = current
        self._hint = hint
        self._check = check
        self._kinds = list(kinds)

    def compose(self) -> ComposeResult:
        with Vertical(id="filter-box") as box:
            box.border_title = self._title
            yield Input(
                value=self._current,
                placeholder="empty shows everything",
                suggester=KindSuggester(self._kinds) if self._kinds else None,
                id="filter-input",
            )
            yield Static(Text(self._hint), id="filter-hint")
            yield Static("", id="filter-kinds")
            yield Static("", id="filter-error")

    def on_mount(self) -> None:
        self.query_one(Input).focus()

    def on_input_changed(self, event: Input.Changed) -> None:
        """Which known kinds the `kind:` being typed matches, so a typo never just shows 0."""
        last = event.value.rpartition(" ")[2]
        name, sep, typed = last.partition(":")
        text = Text("")
        if sep and name.lower() == "kind" and typed and self._kinds:
            found = kinds_matching(typed, self._kinds)
            if found:
                text = Text.assemble(
                    ("kinds: ", "dim"),
                    inert(", ".join(found[:8]) + (" …" if len(found) > 8 else "")),
                )
            else:
                text = Text.assemble(
                    ("no kind with jobs waiting or dead letters matches ", "dim"), inert(typed)
                )
        self.query_one("#filter-kinds", Static).update(text)

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
