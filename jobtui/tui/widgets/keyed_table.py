"""A DataTable whose rows are keyed by id, so refreshes keep the cursor, scroll and marks.

BINDINGS:
    j / k      cursor down / up (as the arrows)
    g / G      first / last row (as home / end)
    space      mark or unmark the row under the cursor and move down
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from rich.text import Text
from textual.binding import Binding, BindingType
from textual.message import Message
from textual.widgets import DataTable

from jobtui.tui.texts import TextKey, text_key

MARK = "●"


class KeyedTable(DataTable[Text]):
    """Rows are `(key, cells)`; `sync` replaces the content without losing the operator's place.

    Cells are compared by `text_key` (style included): a cell is updated only when it would
    look different, and the table is redrawn only when one is.
    """

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("j", "cursor_down", "Down", show=False, id="down"),
        Binding("k", "cursor_up", "Up", show=False, id="up"),
        Binding("home,g", "scroll_top", "First row", show=False, id="first"),
        Binding("end,G", "scroll_bottom", "Last row", show=False, id="last"),
        Binding("space", "toggle_mark", "Mark", id="mark"),
    ]

    class MarksChanged(Message):
        """The set of marked rows changed."""

        def __init__(self, table: KeyedTable) -> None:
            super().__init__()
            self.table = table

    def __init__(self, *, markable: bool = False, id: str | None = None) -> None:
        super().__init__(
            id=id, cursor_type="row", zebra_stripes=False, cursor_foreground_priority="css"
        )
        self.markable = markable
        self.marked: set[str] = set()
        self._cells: dict[str, tuple[TextKey, ...]] = {}
        self._order: list[str] = []
        self._columns: list[str] = []

    def setup_columns(self, *columns: tuple[str, str, int | None]) -> None:
        """Columns as `(key, label, width)`; a mark column comes first when markable."""
        if self.markable:
            self.add_column(" ", key="_mark", width=1)
        for key, label, width in columns:
            self.add_column(label, key=key, width=width)
        self._columns = [key for key, _, _ in columns]

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "toggle_mark":
            return self.markable
        return True

    @property
    def current_key(self) -> str | None:
        """The key of the row under the cursor, or None when the table is empty."""
        if not self._order or not 0 <= self.cursor_row < len(self._order):
            return None
        return self._order[self.cursor_row]

    @property
    def keys(self) -> list[str]:
        return list(self._order)

    def selection(self) -> list[str]:
        """The marked keys in display order, else the key under the cursor."""
        if self.marked:
            return [k for k in self._order if k in self.marked]
        key = self.current_key
        return [key] if key is not None else []

    def _mark_cell(self, key: str) -> Text:
        return Text(MARK if key in self.marked else " ", style="bold")

    def sync(self, rows: Sequence[tuple[str, Sequence[Text]]]) -> None:
        """Show exactly `rows`, in order; unchanged rows are left alone."""
        keys = [key for key, _ in rows]
        if keys == self._order:
            for key, cells in rows:
                new = tuple(text_key(c) for c in cells)
                old = self._cells.get(key)
                if old == new:
                    continue
                for index, column in enumerate(self._columns):
                    if old is None or old[index] != new[index]:
                        self.update_cell(key, column, cells[index])
                self._cells[key] = new
            return
        cursor_key = self.current_key
        cursor_index = self.cursor_row
        scroll_y = self.scroll_y
        present = set(keys)
        gone_marks = self.marked - present
        self.marked &= present
        with self.app.batch_update():
            self.clear(columns=False)
            self._cells = {}
            for key, cells in rows:
                self._cells[key] = tuple(text_key(c) for c in cells)
                prefix = (self._mark_cell(key),) if self.markable else ()
                self.add_row(*prefix, *cells, key=key)
            self._order = keys
            if keys:
                if cursor_key in present:
                    target = keys.index(cursor_key)
                else:
                    target = min(cursor_index, len(keys) - 1)
                self.move_cursor(row=target, animate=False, scroll=False)
                self.scroll_to(y=scroll_y, animate=False, immediate=True)
                self.move_cursor(row=target, animate=False, scroll=True)
        if gone_marks:
            self.post_message(self.MarksChanged(self))

    def clear_marks(self) -> None:
        changed = bool(self.marked)
        old, self.marked = self.marked, set()
        for key in old:
            if key in self._cells:
                self.update_cell(key, "_mark", self._mark_cell(key))
        if changed:
            self.post_message(self.MarksChanged(self))

    def action_toggle_mark(self) -> None:
        key = self.current_key
        if key is None or not self.markable:
            return
        if key in self.marked:
            self.marked.discard(key)
        else:
            self.marked.add(key)
        self.update_cell(key, "_mark", self._mark_cell(key))
        self.post_message(self.MarksChanged(self))
        self.action_cursor_down()
