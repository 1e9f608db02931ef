"""A DataTable whose rows are keyed by id, so refreshes keep the cursor, scroll and marks.

Columns have priorities: when the table is narrower than its columns, the least important
drop (a `+N→` column at the right says how many) and the spare width goes to the one column
marked `flex` (the one that says what is wrong). A column marked `fit` (ids, counts, ages) is
as wide as its longest cell, so a number is never cut; any other cell too long for its column
ends in `…`, never cut silently. `w` shows every column, with a horizontal
scroll; `g`/home go back to the first row and the left edge.

BINDINGS:
    j / k      cursor down / up (as the arrows)
    g / G      first row and left edge / last row (as home / end)
    space      mark or unmark the row under the cursor and move down
    s / S      sort by the next column / reverse the sort (the header shows ▲ or ▼)
    w          wide: every column, scrolled sideways (again: fit the screen)
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import ClassVar

from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual._two_way_dict import TwoWayDict
from textual.binding import Binding, BindingType
from textual.cache import LRUCache
from textual.coordinate import Coordinate
from textual.events import Resize
from textual.message import Message
from textual.widgets import DataTable
from textual.widgets.data_table import ColumnKey, RowKey

from jobtui.tui.sorting import sort_value
from jobtui.tui.texts import TextKey, text_key

MARK = "●"
# Cells drawn, kept by what they look like (see KeyedTable._render_cell): a screenful of the
# widest table, with and without the cursor and the focus, several times over.
CELLS_KEPT = 4000
CELL_PADDING = 2  # DataTable pads each cell by one column on either side
GHOST_STYLE = "dim strike"


@dataclass(frozen=True)
class Column:
    """`priority` 0 never drops; higher numbers drop first. `flex` takes the spare width.
    `fit`: never cut; the column widens to its longest cell (`width` is the least it gets).
    `shrink` (flex only): cells it gives up before a column drops (by default down to half
    its width, as a row too wide does; more when `shrink` says so)."""

    key: str
    label: str
    width: int
    priority: int = 1
    flex: bool = False
    fit: bool = False
    shrink: int = 0


ColumnSpec = Column | tuple[str, str, int | None]


def fit_columns(columns: Sequence[Column], available: int, fixed: int) -> tuple[list[str], int]:
    """(keys of the columns shown, width to add to the flex column) within `available` cells.

    `fixed` is what the table spends outside the columns (mark column, `+N→` marker).
    Columns drop in order of priority (highest number first; the rightmost of equals first)
    until the rest fit; priority 0 never drops.
    """
    shown = list(columns)

    def need(cols: Sequence[Column], hidden: int) -> int:
        marker = marker_width(hidden) if hidden else 0
        return fixed + marker + sum(c.width + CELL_PADDING for c in cols)

    droppable = sorted(
        (c for c in columns if c.priority > 0),
        key=lambda c: (-c.priority, -columns.index(c)),
    )
    flex = next((c for c in columns if c.flex), None)
    # The flex column (its text already cut with `…`) gives up `shrink` cells before a
    # column drops: where a shorter status beats a hidden figure.
    give = min(flex.shrink, flex.width - 1) if flex is not None else 0
    for column in droppable:
        if need(shown, len(columns) - len(shown)) <= available + give:
            break
        shown.remove(column)
    # Negative: the flex one gives up to half its width, or its `shrink` if more (beyond
    # that, the table scrolls sideways).
    spare = available - need(shown, len(columns) - len(shown))
    if spare < 0:
        most = max(give, flex.width // 2) if flex is not None else 0
        spare = max(spare, -most) if flex is not None and flex in shown else 0
    return [c.key for c in shown], spare


def marker_label(hidden: int) -> str:
    return f"+{hidden}→"


def marker_width(hidden: int) -> int:
    return len(marker_label(hidden)) + CELL_PADDING


class KeyedTable(DataTable[Text]):
    """Rows are `(key, cells)`; `sync` replaces the content without losing the operator's place.

    Cells are compared by `text_key` (style included): a cell is updated only when it would
    look different, and then only that cell is redrawn (DataTable's own `update_cell` redraws
    the whole table, which over SSH is most of what an idle console would send).

    Drawing a cell (rich's wrap, pad and crop of its Text) is most of drawing a table, and
    DataTable forgets every drawn cell whenever any cell changes or the table gains or loses
    the focus: a tab key redrew every cell of the tab, often twice (the focus, then a new age
    in one cell). `_render_cell` keeps each drawn cell by what it depends on instead.
    """

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("j", "cursor_down", "Down", show=False, id="down"),
        Binding("k", "cursor_up", "Up", show=False, id="up"),
        Binding("home,g", "scroll_top", "First row", show=False, id="first"),
        Binding("end,G", "scroll_bottom", "Last row", show=False, id="last"),
        Binding("space", "toggle_mark", "Mark", id="mark"),
        Binding("s", "sort_next", "Sort", show=False, id="sort"),
        Binding("S", "sort_reverse", "Reverse sort", show=False, id="sort.reverse"),
        Binding("w", "toggle_wide", "All columns", show=False, id="wide"),
    ]

    class MarksChanged(Message):
        """The set of marked rows changed."""

        def __init__(self, table: KeyedTable) -> None:
            super().__init__()
            self.table = table

    class Relaid(Message):
        """The columns shown or their widths changed (a resize, `w`): cells may be re-fitted."""

        def __init__(self, table: KeyedTable) -> None:
            super().__init__()
            self.table = table

    def __init__(self, *, markable: bool = False, id: str | None = None) -> None:
        super().__init__(
            # The cell's own style shows through the cursor: a failing row stays bold/red
            # (reverse under NO_COLOR) with the cursor on it.
            id=id,
            cursor_type="row",
            zebra_stripes=False,
            cursor_foreground_priority="renderable",
        )
        self.markable = markable
        self.marked: set[str] = set()
        self.wide = False
        self.sort_column: str | None = None  # None: the order the pane gives
        self.sort_reverse = False
        self.ghost: str | None = None  # a row that is gone, kept under the cursor (see sync)
        self._new_view = False
        self._specs: list[Column] = []
        self._rows: dict[str, list[Text]] = {}  # every row's cells, hidden columns included
        self._given: list[str] = []  # the keys in the pane's order
        self._cells: dict[str, tuple[TextKey, ...]] = {}
        self._order: list[str] = []
        self._columns: list[str] = []  # the columns now in the DataTable
        self._widths: dict[str, int] = {}
        self._fitted: dict[str, int] = {}  # widths `fit` columns need for their longest cell
        self._hidden = 0
        self._scrolled = False  # wide and scrolled sideways: the header says so
        self._drawn: LRUCache[tuple[object, ...], list[list[Segment]]] = LRUCache(CELLS_KEPT)
        # `settle_s` > 0: rows coming and going (which moves every row below, a repaint of the
        # whole table) are shown at most that often while nobody presses a key; in between,
        # rows that went stay struck through and new ones wait (`waiting` counts them).
        self.settle_s = 0.0
        self.waiting = 0
        self._gone: set[str] = set()
        self._placed_at = 0.0
        self._touched = False

    # --- columns -------------------------------------------------------------------------

    def setup_columns(self, *columns: ColumnSpec) -> None:
        """Columns as `Column`s or `(key, label, width)` (then the rightmost drop first and the
        first never does)."""
        specs = []
        for index, col in enumerate(columns):
            if isinstance(col, Column):
                specs.append(col)
            else:
                key, label, width = col
                specs.append(Column(key, label, width or len(label), priority=index))
        self._specs = specs
        self._fitted = {}
        self._refit()
        self._relayout(force=True)

    def _sized(self) -> list[Column]:
        """The columns with each `fit` column as wide as its longest cell."""
        return [
            replace(c, width=self._fitted[c.key]) if c.key in self._fitted else c
            for c in self._specs
        ]

    def _refit(self) -> bool:
        """Measure the `fit` columns' longest cells; True when a width must change. A column
        grows at once and narrows only by two or more, so a count going 9,999 <-> 10,000
        does not lay the table out on every refresh."""
        changed = False
        for index, c in enumerate(self._specs):
            if not c.fit:
                continue
            longest = max(
                (cells[index].cell_len for cells in self._rows.values() if index < len(cells)),
                default=0,
            )
            need = max(c.width, longest, len(c.label))
            now = self._fitted.get(c.key, c.width)
            if need > now or need <= now - 2:
                self._fitted[c.key] = need
                changed = changed or need != now
        return changed

    @property
    def hidden_columns(self) -> list[str]:
        """Labels of the columns not shown (dropped for width)."""
        return [c.label for c in self._specs if c.key not in self._columns]

    @property
    def shown_columns(self) -> list[str]:
        return list(self._columns)

    def width_of(self, column: str) -> int:
        """The width cells of `column` get now (0 when it is hidden)."""
        return self._widths.get(column, 0)

    def _available(self) -> int:
        width = self.size.width
        return width - 1 if width else 0  # the vertical scrollbar

    def _relayout(self, *, force: bool = False) -> None:
        fixed = 1 + CELL_PADDING if self.markable else 0
        available = self._available()
        sized = self._sized()
        if self.wide:
            # Every column, those that never drop first: they stay while the rest scroll.
            specs = sorted(sized, key=lambda c: c.priority != 0)
            keys, spare = [c.key for c in specs], 0
        elif not available:
            keys, spare = [c.key for c in sized], 0
        else:
            keys, spare = fit_columns(sized, available, fixed)
        widths = {}
        for c in sized:
            if c.key in keys:
                widths[c.key] = c.width + (spare if c.flex else 0)
        if not force and keys == self._columns and widths == self._widths:
            return
        self._columns, self._widths = keys, widths
        self._hidden = len(self._specs) - len(keys)
        self._rebuild()
        self.post_message(self.Relaid(self))

    def _label(self, column: Column) -> Text:
        if column.key != self.sort_column:
            return Text(column.label)
        return Text(column.label + ("▼" if self.sort_reverse else "▲"), style="bold")

    def _rebuild(self) -> None:
        """Columns and rows again from the stored cells (a resize or a column change)."""
        cursor = self.cursor_row
        cursor_key = self._key_at(cursor)
        with self.app.batch_update():
            self.clear(columns=True)
            if self.markable:
                self.add_column(" ", key="_mark", width=1)
            by_key = {c.key: c for c in self._specs}
            for key in self._columns:
                self.add_column(self._label(by_key[key]), key=key, width=self._widths[key])
            if self._hidden:
                label = marker_label(self._hidden)
                self.add_column(Text(label, style="bold"), key="_more", width=len(label))
            self.fixed_columns = (int(self.markable) + self._leading_fixed()) if self.wide else 0
            self._scrolled = False
            self._place(self._arranged(), cursor, cursor_key)

    def _leading_fixed(self) -> int:
        """How many of the shown columns, from the left, never drop."""
        priority = {c.key: c.priority for c in self._specs}
        count = 0
        for key in self._columns:
            if priority[key] != 0:
                break
            count += 1
        return count

    def watch_scroll_x(self, old_value: float, new_value: float) -> None:
        """Scrolled sideways (wide): the last fixed column's header gets `←`, saying that
        columns are out of view on the left; `g`/home scroll back."""
        super().watch_scroll_x(old_value, new_value)
        scrolled = self.wide and new_value > 0 and self.fixed_columns > int(self.markable)
        if scrolled == self._scrolled:
            return
        self._scrolled = scrolled
        key = self._columns[self._leading_fixed() - 1]
        spec = next(c for c in self._specs if c.key == key)
        label = self._label(spec)
        if scrolled:  # within the column's width, or the arrow would be cut off
            label.truncate(max(0, self._widths[key] - 2))
            label = Text.assemble(label, (" ←", "bold"))
        column = self.columns.get(ColumnKey(spec.key))
        if column is not None:
            column.label = label
            self._update_count += 1
            self.refresh()

    def _visible(self, cells: Sequence[Text]) -> list[Text]:
        by_key = {c.key: cell for c, cell in zip(self._specs, cells, strict=False)}
        out = [by_key.get(key, Text("")) for key in self._columns]
        for cell in out:
            # One line, and `…` where it is cut (a folded cell's second line is just lost).
            if cell.overflow is None:
                cell.overflow = "ellipsis"
                cell.no_wrap = True
        if self._hidden:
            out.append(Text(""))
        return out

    def on_resize(self, event: Resize) -> None:
        self._relayout()

    def _render_cell(
        self,
        row_index: int,
        column_index: int,
        base_style: Style,
        width: int,
        cursor: bool = False,
        hover: bool = False,
    ) -> list[list[Segment]]:
        """DataTable's drawing of a cell, reused while everything it depends on is the same:
        the cell's look (`text_key`), its place, width and height, and the styles the focus,
        the cursor and the mouse give it."""
        found = self._text_at(row_index, column_index)
        if found is None:  # the header, row labels, anything but a Text: DataTable's own way
            return super()._render_cell(row_index, column_index, base_style, width, cursor, hover)
        cell, height = found
        styles = self._get_styles_to_render_cell(
            False,
            False,
            row_index < self.fixed_rows or column_index < self.fixed_columns,
            hover,
            cursor,
            self.show_cursor,
            self._show_hover_cursor,
            self.cursor_foreground_priority == "css",
            self.cursor_background_priority == "css",
        )
        key = (
            text_key(cell),
            cell.justify,
            cell.overflow,
            cell.no_wrap,
            row_index,  # DataTable puts the place in the style (for the mouse)
            column_index,
            base_style,
            width,
            height,
            styles,
            self.cell_padding,
        )
        lines = self._drawn.get(key)
        if lines is None:
            lines = super()._render_cell(row_index, column_index, base_style, width, cursor, hover)
            self._drawn[key] = lines
        return lines

    def _text_at(self, row_index: int, column_index: int) -> tuple[Text, int] | None:
        """The Text of a data cell and its row's height; None for anything else."""
        row_key = self._row_locations.get_key(row_index)
        column_key = self._column_locations.get_key(column_index)
        if row_key is None or column_key is None or row_key not in self.rows:
            return None
        cell = self._data.get(row_key, {}).get(column_key)
        return (cell, self.rows[row_key].height) if isinstance(cell, Text) else None

    # --- rows ----------------------------------------------------------------------------

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "toggle_mark":
            return self.markable
        return True

    @property
    def current_key(self) -> str | None:
        """The key of the row under the cursor; None when the table is empty or the row is
        one that is gone (`ghost`)."""
        if not self._order or not 0 <= self.cursor_row < len(self._order):
            return None
        key = self._order[self.cursor_row]
        return None if key == self.ghost or key in self._gone else key

    def _key_at(self, index: int) -> str | None:
        return self._order[index] if 0 <= index < len(self._order) else None

    @property
    def on_ghost(self) -> bool:
        """The cursor is on a row that is gone (kept so the cursor does not jump)."""
        key = self._key_at(self.cursor_row)
        return key is not None and (key == self.ghost or key in self._gone)

    @property
    def shown_keys(self) -> list[str]:
        """Every row listed, struck-through ones included."""
        return list(self._order)

    @property
    def keys(self) -> list[str]:
        return [k for k in self._order if k != self.ghost and k not in self._gone]

    def selection(self) -> list[str]:
        """The marked keys in display order, else the key under the cursor."""
        if self.marked:
            return [k for k in self._order if k in self.marked]
        key = self.current_key
        return [key] if key is not None else []

    def _mark_cell(self, key: str) -> Text:
        return Text(MARK if key in self.marked else " ", style="bold")

    def _arranged(self) -> list[str]:
        """The keys in display order: the pane's order, or sorted by `sort_column`."""
        keys = list(self._given)
        if self.sort_column is not None and self._specs:
            index = next(i for i, c in enumerate(self._specs) if c.key == self.sort_column)
            keys.sort(
                key=lambda k: sort_value(self._rows[k][index].plain), reverse=self.sort_reverse
            )
        return keys

    def _put(self, key: str, column: str, value: Text) -> None:
        """Set one cell and redraw only that cell's region."""
        row_key, column_key = RowKey(key), ColumnKey(column)
        self._data[row_key][column_key] = value
        self._update_count += 1  # DataTable's render caches are keyed on it
        row = self._row_locations.get(row_key)
        col = self._column_locations.get(column_key)
        if row is not None and col is not None:
            self.refresh_coordinate(Coordinate(row, col))

    def sync(self, rows: Sequence[tuple[str, Sequence[Text]]]) -> None:
        """Show exactly `rows` (sorted if a sort is chosen); unchanged cells are left alone.

        When the row under the cursor is gone (an action removed it), it stays, struck through,
        until the cursor leaves it: the cursor never lands on another row by itself, so a
        repeated key cannot act on a row the operator did not choose.
        """
        if self.ghost is not None and (
            self._new_view or not self.on_ghost or any(key == self.ghost for key, _ in rows)
        ):
            self.ghost = None  # left, or a new view, or the row is back: a row like any other
        cursor_key = None if self._new_view else self._key_at(self.cursor_row)
        fresh = self._new_view
        self._new_view = False
        if self._hold(rows, fresh):
            return
        # A list of cells is kept as given (not copied): the very list given last time is
        # taken as the same cells (a pane that keeps a row's cells never changes them).
        old_rows = self._rows
        new_rows = {key: cells if isinstance(cells, list) else list(cells) for key, cells in rows}
        given = [key for key, _ in rows]
        if cursor_key is not None and cursor_key not in new_rows and self.has_focus:
            old = self._rows.get(cursor_key)
            if old is not None:
                self.ghost = cursor_key
                new_rows[cursor_key] = [Text(c.plain, style=GHOST_STYLE) for c in old]
                position = self._given.index(cursor_key) if cursor_key in self._given else 0
                given.insert(min(position, len(given)), cursor_key)
        self._rows, self._given = new_rows, given
        if self._refit():  # a number grew past its column: lay the table out again
            present = set(self._arranged()) - {self.ghost}
            gone_marks = self.marked - present
            self.marked &= present
            self._relayout(force=True)
            if gone_marks:
                self.post_message(self.MarksChanged(self))
            return
        keys = self._arranged()
        kept = len(self._order)
        if keys == self._order:
            self._update_cells(keys, old_rows)
            return
        if kept and keys[:kept] == self._order:
            # Rows added below the ones shown (the next page): the shown rows stay where they
            # are and only the new ones are added (clearing and adding every row again took
            # most of the console's time on `]` and `end` once several pages were loaded).
            self._update_cells(self._order, old_rows)
            with self.app.batch_update():
                for key in keys[kept:]:
                    self._add(key)
            self._order = keys
            return
        present = set(keys) - {self.ghost}
        gone_marks = self.marked - present
        self.marked &= present
        with self.app.batch_update():
            self._place(keys, self.cursor_row, cursor_key)
        if gone_marks:
            self.post_message(self.MarksChanged(self))

    def _hold(self, rows: Sequence[tuple[str, Sequence[Text]]], fresh: bool) -> bool:
        """Within `settle_s` of the last change of rows, and with no key pressed since, keep
        the rows where they are: update the cells of those still there, strike through those
        that went, count the new ones (`waiting`). True when the rows were held."""
        now = time.monotonic()
        given = {key: cells for key, cells in rows}
        structural = set(given) != set(self._order) - {self.ghost}
        if not structural:
            # The same rows: cells only, as always. None is struck through any more (a row
            # that went came back: held again, it must be struck again), and once the hold is
            # over no new row waits (one came and went: "new rows" said so for ever).
            self._gone = set()
            if now - self._placed_at >= self.settle_s:
                self.waiting = 0
            return False
        if (
            fresh
            or self._touched
            or not self.settle_s
            or not self._order
            or now - self._placed_at >= self.settle_s
        ):
            # A new view, a first fill or a key is not a live change: the first live change
            # after it is shown at once, and the ones that follow it within settle_s wait.
            self._placed_at = 0.0 if fresh or self._touched or not self._order else now
            self._touched = False
            self._gone, self.waiting = set(), 0
            return False
        old_rows = self._rows
        held: dict[str, list[Text]] = {}
        for key in self._order:
            if key in given:
                cells = given[key]
                held[key] = cells if isinstance(cells, list) else list(cells)
            elif key in self._gone or key == self.ghost:
                held[key] = old_rows[key]
            else:
                self._gone.add(key)
                held[key] = [Text(c.plain, style=GHOST_STYLE) for c in old_rows[key]]
        # Once new rows came, "new rows" stays until they are shown (a row that came and
        # went again within the hold flapped the filter line on and off every refresh).
        self.waiting = max(self.waiting, len(set(given) - set(self._order)))
        self._rows = held
        self._update_cells(self._order, old_rows)
        return True

    def on_key(self, event: object) -> None:
        """A key pressed here: the next refresh shows the rows as they are at once."""
        self._touched = True

    def _update_cells(self, keys: list[str], old_rows: dict[str, list[Text]]) -> None:
        """Redraw the cells of `keys` (rows already shown) that would look different; a row
        given as the same list as before (`old_rows`) is the same."""
        for key in keys:
            given = self._rows[key]
            if old_rows.get(key) is given:
                continue
            cells = self._visible(given)
            new = tuple(text_key(c) for c in cells)
            old_key = self._cells.get(key)
            if old_key == new:
                continue
            for index, column in enumerate(self._columns):
                if old_key is None or old_key[index] != new[index]:
                    self._put(key, column, cells[index])
            self._cells[key] = new

    def _add(self, key: str) -> None:
        """Add the row `key` at the bottom."""
        cells = self._visible(self._rows[key])
        self._cells[key] = tuple(text_key(c) for c in cells)
        prefix = (self._mark_cell(key),) if self.markable else ()
        self.add_row(*prefix, *cells, key=key)

    def _place(self, keys: list[str], cursor_index: int, cursor_key: str | None = None) -> None:
        if cursor_key is None:
            cursor_key = self._key_at(cursor_index)
        scroll_y = self.scroll_y
        self.clear(columns=False)
        self._cells = {}
        for key in keys:
            self._add(key)
        self._order = keys
        if keys:
            if cursor_key in keys:
                target = keys.index(cursor_key)
            else:
                target = min(max(cursor_index, 0), len(keys) - 1)
            self.move_cursor(row=target, animate=False, scroll=False)
            self.scroll_to(y=scroll_y, animate=False, immediate=True)
            self.move_cursor(row=target, animate=False, scroll=True)

    def new_view(self) -> None:
        """The next rows answer a different question (another filter or group): rows that
        are not in them are not gone, so none is kept under the cursor."""
        self._new_view = True
        self.ghost = None

    def more_of_the_same(self) -> None:
        """The next rows add to these (a search going on by itself): they are shown at once,
        as after a key, not held as live changes (`waiting`, "new rows")."""
        self._touched = True

    def clear_marks(self) -> None:
        changed = bool(self.marked)
        old, self.marked = self.marked, set()
        for key in old:
            if key in self._cells:
                self._put(key, "_mark", self._mark_cell(key))
        if changed:
            self.post_message(self.MarksChanged(self))

    # --- actions -------------------------------------------------------------------------

    def action_toggle_mark(self) -> None:
        key = self.current_key
        if key is None or not self.markable:
            return
        if key in self.marked:
            self.marked.discard(key)
        else:
            self.marked.add(key)
        self._put(key, "_mark", self._mark_cell(key))
        self.post_message(self.MarksChanged(self))
        self.action_cursor_down()

    def action_scroll_top(self) -> None:
        super().action_scroll_top()
        self.scroll_to(x=0, animate=False)

    def action_sort_next(self) -> None:
        """Sort by the next shown column; after the last, back to the pane's own order."""
        shown = list(self._columns)
        if self.sort_column is None:
            self.sort_column = shown[0] if shown else None
        elif self.sort_column in shown and shown.index(self.sort_column) + 1 < len(shown):
            self.sort_column = shown[shown.index(self.sort_column) + 1]
        else:
            self.sort_column = None
        self.sort_reverse = False
        self._resort()

    def sort_by(self, column: str | None, *, reverse: bool = False) -> None:
        """Sort by `column` (None: the pane's own order)."""
        self.sort_column, self.sort_reverse = column, reverse
        self._resort()

    def action_sort_reverse(self) -> None:
        if self.sort_column is None:
            return
        self.sort_reverse = not self.sort_reverse
        self._resort()

    def _resort(self) -> None:
        """The rows in the new order and the header's ▲/▼ moved, the cursor on its row.

        The rows are reordered where they are (as DataTable.sort does), not cleared and added
        again: that took most of `s`/`S` on a few pages of jobs."""
        key = self.current_key
        keys = self._arranged()
        if self._scrolled or sorted(keys) != sorted(self._order):
            self._rebuild()  # the `←` of a sideways scroll is in a label: drawn afresh
        else:
            by_key = {c.key: c for c in self._specs}
            for column_key in self._columns:
                self.columns[ColumnKey(column_key)].label = self._label(by_key[column_key])
            self._row_locations = TwoWayDict({RowKey(k): i for i, k in enumerate(keys)})
            self._order = keys
            self._update_count += 1  # DataTable's render caches are keyed on it
            self._require_update_dimensions = True
            self.refresh()
        if key is not None and key in self._order:
            self.move_cursor(row=self._order.index(key), animate=False)

    def action_toggle_wide(self) -> None:
        self.wide = not self.wide
        self._relayout()
        if not self.wide:
            self.scroll_to(x=0, animate=False)
