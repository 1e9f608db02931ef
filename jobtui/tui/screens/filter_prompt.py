"""The `/` prompt: one line of filter text, checked before it is accepted.

`kind:` completes to the known kinds (shown greyed; → accepts), and the kinds the typed text
matches are listed under the input as it is typed.

Keys that arrive in the same burst as the `/` (a paste, keys bunched by a slow SSH link) come
before the input exists; the app hands them to `take_early` in the order they came, and they are
typed into the input (text, backspace, Ctrl-U/W, Enter, Esc) before it takes the focus, so none
is dropped and none overtakes another.

BINDINGS:
    enter    apply
    →        accept the completion
    esc      cancel (the filter stays as it was)
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import ClassVar

from rich.text import Text
from textual import events
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.suggester import Suggester
from textual.widgets import Input, Static
from textual.widgets.input import Selection

from jobtui.inert import inert
from jobtui.tui.filters import complete_kind, kinds_matching

# Editing keys of a burst, as the input's own bindings would apply them (Input.BINDINGS).
EDIT_KEYS = {
    "enter": "submit",
    "backspace": "delete_left",
    "ctrl+u": "delete_left_all",
    "ctrl+w": "delete_left_word",
}


class FilterInput(Input):
    """An Input that applies its editing keys where they arrive, in order with the typed
    text. Input leaves them to its bindings, which run once the key has bubbled up to the
    app, after text typed later in the same burst: Ctrl-U then `kind:x` deleted the `kind:x`
    ("fragments" of it, depending on timing)."""

    async def on_key(self, event: events.Key) -> None:
        edit = EDIT_KEYS.get(event.key)
        if edit is None:
            return
        event.stop()
        event.prevent_default()
        if edit == "submit":
            await self.action_submit()
        else:
            getattr(self, f"action_{edit}")()


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
        self._early: list[events.Key | events.Paste] = []
        self._ready = False

    def compose(self) -> ComposeResult:
        with Vertical(id="filter-box") as box:
            box.border_title = self._title
            yield FilterInput(
                value=self._current,
                placeholder="empty shows everything",
                suggester=KindSuggester(self._kinds) if self._kinds else None,
                id="filter-input",
            )
            yield Static(Text(self._hint), id="filter-hint")
            yield Static("", id="filter-kinds")
            yield Static("", id="filter-error")

    def on_mount(self) -> None:
        field = self.query_one(Input)
        done = self._type_early(field)
        self._early.clear()
        self._ready = True
        if not done:
            self.set_focus(field)  # now, not on the next message: no key can slip between

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

    def take_early(self, event: events.Key | events.Paste) -> bool:
        """Keep a key or paste that came while the prompt was opening (the app hands them
        over in the order they came); False once the input has them itself."""
        if self._ready:
            return False
        self._early.append(event)
        return True

    def _type_early(self, field: Input) -> bool:
        """Apply the kept keys to the input in order, as its own handling would; True when
        one of them was Enter (the filter was submitted) or Esc."""
        if self._early and field.select_on_focus:
            # As the input would on its focus: the current filter selected, so what is typed
            # replaces it; selected once only (a focus later would select the typed text).
            field.selection = Selection(0, len(field.value))
            field.select_on_focus = False

        def type_in(text: str) -> None:
            if field.selection.is_empty:
                field.insert_text_at_cursor(text)
            else:
                field.replace(text, *field.selection)

        for event in self._early:
            if isinstance(event, events.Paste):
                if event.text:
                    type_in(event.text.splitlines()[0])
                continue
            if event.key == "escape":
                self.dismiss(None)
                return True
            if event.key == "enter":
                self._submit(field.value)
                return True
            edit = EDIT_KEYS.get(event.key)
            if edit is not None:
                getattr(field, f"action_{edit}")()
            elif event.is_printable and event.character is not None:
                type_in(event.character)
        return False

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self._submit(event.value)

    def _submit(self, value: str) -> None:
        text = value.strip()
        try:
            self._check(text)
        except ValueError as exc:
            self.query_one("#filter-error", Static).update(Text(str(exc)))
            return
        self.dismiss(text)

    def action_cancel(self) -> None:
        self.dismiss(None)
