"""The `?` screen: every binding of the console with the keys in effect (after the keymap).

BINDINGS:
    esc / q / ?   close
"""

from __future__ import annotations

from typing import ClassVar

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.widgets import Static

from jobtui.tui.screens.scroll_modal import ScrollModal

KEYS_WIDTH = 8  # the keys column at least (most keys are one or two characters)
Section = tuple[str, list[tuple[str, str, str]]]  # (title, [(keys, description, binding id)])


class HelpScreen(ScrollModal):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "close", "Close", id="help.close"),
        # The key that opened it closes it: the same id, so a remapped `help` does too.
        Binding("question_mark", "close", "Close", show=False, id="help"),
    ]
    box_id = "help-box"

    def __init__(self, sections: list[Section], notes: list[str]) -> None:
        super().__init__()
        self._sections = sections
        self._notes = notes

    def compose(self) -> ComposeResult:
        # Two columns: the keys, then what they do with the binding id (for the keymap) after
        # it, dim. A third column for the ids left a description about 15 columns at 80×24
        # (entries wrapped over 3-6 lines) and none at all at 60 columns.
        # Each section its own table under its own title line, so the keys column is as wide
        # as the longest keys (13), not the longest title.
        with VerticalScroll(id="help-box") as box:
            box.border_title = "jobtui keys"
            box.border_subtitle = "esc close"
            for title, rows in self._sections:
                table = Table.grid(padding=(0, 2), expand=True)
                table.add_column(style="bold", no_wrap=True, min_width=KEYS_WIDTH)
                table.add_column(ratio=1)
                for keys, description, binding_id in rows:
                    what = Text(description)
                    if binding_id:
                        what.append(f"  {binding_id}", style="dim")
                    table.add_row(Text(keys), what)
                yield Static(Text(title, style="bold underline"), classes="help-title")
                yield Static(table, classes="help-table")
            for note in self._notes:
                yield Static(Text(note), classes="help-note")
