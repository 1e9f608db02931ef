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

Section = tuple[str, list[tuple[str, str, str]]]  # (title, [(keys, description, binding id)])


class HelpScreen(ScrollModal):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "close", "Close", id="help.close"),
        Binding("question_mark", "close", "Close", show=False),
    ]
    box_id = "help-box"

    def __init__(self, sections: list[Section], notes: list[str]) -> None:
        super().__init__()
        self._sections = sections
        self._notes = notes

    def compose(self) -> ComposeResult:
        table = Table.grid(padding=(0, 2))
        table.add_column(style="bold", no_wrap=True)
        table.add_column()
        table.add_column(style="dim", no_wrap=True)
        for title, rows in self._sections:
            table.add_row(Text(title, style="bold underline"), Text(""), Text(""))
            for keys, description, binding_id in rows:
                table.add_row(Text(keys), Text(description), Text(binding_id))
            table.add_row(Text(""), Text(""), Text(""))
        with VerticalScroll(id="help-box") as box:
            box.border_title = "jobtui keys"
            box.border_subtitle = "esc close"
            yield Static(table, id="help-table")
            for note in self._notes:
                yield Static(Text(note), classes="help-note")
