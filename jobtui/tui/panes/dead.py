"""Dead letters tab: groups by (kind, error signature) above the dead letters of the group.

BINDINGS:
    /          filter (kind:NAME error:TEXT sig:SIGNATURE free text)
    tab        switch between the groups and the rows
    enter      detail (rows) / focus the rows of the group (groups)
    space      mark a row
    u          clear marks
    r          requeue: the group (groups), the marked rows or the cursor row, or all matching
    d          delete, with the same choices (asks first, always)
    e          export the marked or matching rows to a JSON-lines or CSV file in the current dir
    y / Y      copy the id, payload or traceback of the cursor row / save it to a file (rows)
    ] / n      load the next page of rows
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from datetime import datetime
from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.events import DescendantFocus
from textual.widgets import DataTable

from jobtui import browse
from jobtui.inert import inert, one_line, payload_preview
from jobtui.models import DeadFilter, DeadGroup, DeadLetterRow
from jobtui.tui.actions import DELETE, REQUEUE
from jobtui.tui.connection import Link
from jobtui.tui.filters import format_dead_filter, parse_dead_filter
from jobtui.tui.host import DetailAsked, ExportAsked, WriteAsked
from jobtui.tui.palette import cell_styles
from jobtui.tui.panes.pane import (
    SETTLE_S,
    InfoLine,
    Pane,
    ask_filter,
    load_pages,
    loading_rows,
)
from jobtui.tui.screens.copy_prompt import CopyFlow
from jobtui.tui.server import server_now
from jobtui.tui.texts import KIND_COLUMN_WIDTH, coarse_age, differing_part, kind_label
from jobtui.tui.widgets.keyed_table import Column, KeyedTable

ALL = "*"
HINT = "kind:NAME  key:UNIQUE-KEY  error:TEXT  sig:SIGNATURE  free text (id or payload text)"


def group_key(kind: str, signature: str) -> str:
    return json.dumps([kind, signature])


@dataclass
class DeadData:
    groups: list[DeadGroup]
    rows: list[DeadLetterRow]
    more: bool
    now: datetime  # the server's clock: every age is measured against it
    flt: DeadFilter  # the filter these rows answer (the group's, when one is selected)


class DeadPane(Pane):
    BINDINGS: ClassVar[list[BindingType]] = [
        # A priority key: the prompt opens before the keys that follow it in one burst (a
        # paste, a slow link) are handed on, so they are typed into it instead of acting here.
        Binding("slash", "filter", "Filter", id="filter", priority=True),
        # One key, two scopes: on the rows table r/d act on the marked rows or the cursor row;
        # on the groups table on every dead letter of the group (or all matching), and the
        # footer says so in capitals.
        Binding("r", "requeue", "Requeue", id="requeue"),
        Binding("r", "requeue_group", "Requeue GROUP…", id="requeue.group"),
        Binding("d", "delete", "Delete", id="delete"),
        Binding("d", "delete_group", "Delete GROUP…", id="delete.group"),
        Binding("e", "export", "Export", id="export"),
        Binding("y", "copy(False)", "Copy", show=False, id="dead.copy"),
        Binding("Y", "copy(True)", "Save to file", show=False, id="dead.save"),
        Binding("u", "clear_marks", "Unmark", show=False, id="clear_marks"),
        Binding("right_square_bracket,n", "next_page", "More", show=False, id="next_page"),
    ]
    main_table = "#dead-groups"

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.flt = DeadFilter()
        self.group: tuple[str, str] | None = None
        self.groups: dict[str, DeadGroup] = {}
        self.pages = 1
        self.more = False
        self._table = "dead-groups"
        self._shown_for: DeadFilter | None = None  # the filter of the rows on screen

    def compose(self) -> ComposeResult:
        yield InfoLine(id="dead-info", classes="info")
        yield KeyedTable(id="dead-groups")
        yield KeyedTable(markable=True, id="dead-rows")

    def on_mount(self) -> None:
        self.query_one("#dead-groups", KeyedTable).setup_columns(
            Column("kind", "kind", KIND_COLUMN_WIDTH, priority=0),
            Column("count", "count", 6, priority=0, fit=True),
            Column("sig", "error signature", 24, priority=0, flex=True),
            Column("last", "last", 6, priority=1, fit=True),
            Column("first", "first", 6, priority=2, fit=True),
        )
        self.query_one("#dead-rows", KeyedTable).settle_s = SETTLE_S
        self.query_one("#dead-rows", KeyedTable).setup_columns(
            Column("id", "id", 6, priority=0, fit=True),
            Column("kind", "kind", KIND_COLUMN_WIDTH, priority=0),
            Column("died", "died ago", 8, priority=1, fit=True),
            Column("error", "error", 20, priority=0, flex=True),
            Column("payload", "payload", 30, priority=2),
            Column("reason", "reason", 9, priority=3),
            Column("att", "att", 5, priority=4, fit=True),
        )
        self.query_one("#dead-groups").border_title = "groups"
        self.query_one("#dead-rows").border_title = "dead letters"
        self._info()

    def row_filter(self) -> DeadFilter:
        """The filter of the rows list: the `/` filter narrowed to the selected group."""
        if self.group is None:
            return self.flt
        kind, signature = self.group
        return replace(self.flt, kind=kind, signature=signature)

    async def load(self, link: Link) -> DeadData:
        groups = await link.run(browse.dead_groups, self.flt)
        size = self.console.config.page_size
        flt = self.row_filter()
        rows, before = await load_pages(
            link, browse.list_dead, flt, pages=self.pages, size=size, searching=bool(flt.text)
        )
        return DeadData(groups, rows, before is not None, await link.run(server_now), flt)

    def show(self, data: DeadData) -> None:
        st = cell_styles(self.app)
        now = data.now

        def ago(ts: datetime) -> Text:
            return Text(coarse_age((now - ts).total_seconds()))

        self.groups = {group_key(g.kind, g.error_signature): g for g in data.groups}
        kinds = {g.kind for g in data.groups} | {d.kind for d in data.rows}
        total = sum(g.count for g in data.groups)
        group_rows = [
            (
                ALL,
                [
                    Text("(all)", style="bold"),
                    Text(f"{total:,}", style="bold"),
                    Text(
                        f"{len(data.groups)} group{'' if len(data.groups) == 1 else 's'}",
                        style=st.muted,
                    ),
                    Text(""),
                    Text(""),
                ],
            )
        ]
        sig_width = self.query_one("#dead-groups", KeyedTable).width_of("sig")
        signatures = [one_line(g.error_signature, 400) for g in data.groups]
        for g, signature in zip(data.groups, signatures, strict=True):
            group_rows.append(
                (
                    group_key(g.kind, g.error_signature),
                    [
                        inert(kind_label(g.kind, kinds, KIND_COLUMN_WIDTH), style="bold"),
                        Text(f"{g.count:,}", style=st.error),
                        Text(differing_part(signature, signatures, sig_width)),
                        ago(g.last_seen),
                        ago(g.first_seen),
                    ],
                )
            )
        self.query_one("#dead-groups", KeyedTable).sync(group_rows)
        self.more = data.more
        error_width = self.query_one("#dead-rows", KeyedTable).width_of("error")
        errors = [one_line(d.last_error or "", 400) for d in data.rows]
        rows = []
        for d, error in zip(data.rows, errors, strict=True):
            rows.append(
                (
                    str(d.id),
                    [
                        Text(str(d.id)),
                        inert(kind_label(d.kind, kinds, KIND_COLUMN_WIDTH), style="bold"),
                        ago(d.died_at),
                        Text(differing_part(error, errors, error_width), style=st.danger),
                        Text(payload_preview(d.payload), style=st.muted),
                        Text(d.reason, style=st.warning),
                        Text(f"{d.attempts}/{d.max_attempts}"),
                    ],
                )
            )
        self.query_one("#dead-rows", KeyedTable).sync(rows)
        self._shown_for = data.flt
        self._info()

    def _info(self) -> None:
        rows = self.query_one("#dead-rows", KeyedTable)
        parts: list[Text | str] = [
            Text("filter ", style="dim"),
            inert(format_dead_filter(self.flt) or "none (all dead letters)", style="bold"),
        ]
        if self.group is not None:
            parts += [Text("  group ", style="dim"), inert(self.group[0], style="bold")]
        if self._shown_for != self.row_filter():
            # The rows below still answer the filter before: say so until the new ones come.
            parts.append(loading_rows())
            self.query_one("#dead-info", InfoLine).set(*parts)
            return
        parts.append(Text(f"   {len(rows.keys):,} rows shown", style="dim"))
        if self.more:
            more = "search older rows" if self.flt.text else "more"
            parts.append(Text(f"  · ] {more}", style="dim"))
        if rows.marked:
            parts.append(Text(f"   {len(rows.marked)} marked", style="bold"))
        self.query_one("#dead-info", InfoLine).set(*parts)

    # --- selection -----------------------------------------------------------------------

    def _focused_table(self) -> str:
        """The table the operator is in: the one focused last (while the command palette or
        a dialog has the focus, still that one)."""
        return self._table

    def on_descendant_focus(self, event: DescendantFocus) -> None:
        if isinstance(event.widget, KeyedTable) and event.widget.id:
            self._table = event.widget.id

    def current_group(self) -> DeadGroup | None:
        key = self.query_one("#dead-groups", KeyedTable).current_key
        return self.groups.get(key) if key and key != ALL else None

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        if event.data_table.id == "dead-groups":
            if self.query_one("#dead-groups", KeyedTable).on_ghost:
                return  # the group just went (requeued, deleted): its rows list stays
            key = event.row_key.value
            group = self.groups.get(key) if key and key != ALL else None
            new = (group.kind, group.error_signature) if group else None
            if new != self.group:
                self.group = new
                self.pages = 1
                self.query_one("#dead-rows", KeyedTable).clear_marks()
                self.query_one("#dead-rows", KeyedTable).new_view()
                self._info()
                self.console.refresh_now()
        elif event.data_table.id == "dead-rows":
            table = self.query_one("#dead-rows", KeyedTable)
            if self.more and event.cursor_row >= table.row_count - 1:
                self.action_next_page()

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        event.stop()
        if event.data_table.id == "dead-groups":
            self.query_one("#dead-rows").focus()
        elif event.row_key.value is not None:
            self.post_message(DetailAsked("dead", int(event.row_key.value)))

    def on_keyed_table_marks_changed(self, event: KeyedTable.MarksChanged) -> None:
        self._info()

    # --- actions -------------------------------------------------------------------------

    def set_filter(self, flt: DeadFilter) -> None:
        self.flt = flt
        self.pages = 1
        self.query_one("#dead-rows", KeyedTable).clear_marks()
        for table in self.query(KeyedTable):
            table.new_view()
        self._info()
        self.console.refresh_now()

    def action_filter(self) -> None:
        kinds = sorted({g.kind for g in self.groups.values()})
        ask_filter(
            self, "filter dead letters", format_dead_filter(self.flt), HINT, parse_dead_filter,
            kinds, self.set_filter,
        )  # fmt: skip

    def _gone(self) -> bool:
        """The cursor is on a row an action just removed: keys do nothing there (the next
        row has not moved under the cursor, so a repeated key acts on nothing)."""
        if any(t.has_focus and t.on_ghost for t in self.query(KeyedTable)):
            self.app.notify("That row is gone; move the cursor to another.", timeout=3)
            return True
        return False

    def _target(self) -> tuple[list[int], DeadFilter, str | None]:
        """(ids, matching filter, group label): what an action under the cursor applies to."""
        if self._focused_table() == "dead-rows":
            table = self.query_one("#dead-rows", KeyedTable)
            return [int(k) for k in table.selection()], self.row_filter(), None
        group = self.current_group()
        if group is None:
            return [], self.flt, None
        flt = replace(self.flt, kind=group.kind, signature=group.error_signature)
        return [], flt, f"{group.kind}: {group.error_signature}"

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        allowed = super().check_action(action, parameters)
        if not allowed:
            return allowed
        on_rows = self._focused_table() == "dead-rows"
        if action in ("requeue", "delete", "copy"):
            return on_rows
        if action in ("requeue_group", "delete_group"):
            return not on_rows
        return True

    def action_requeue_group(self) -> None:
        self.action_requeue()

    def action_delete_group(self) -> None:
        self.action_delete()

    def action_requeue(self) -> None:
        if self._gone():
            return
        ids, flt, label = self._target()
        self.post_message(WriteAsked(REQUEUE, ids, flt, group=label))

    def action_delete(self) -> None:
        if self._gone():
            return
        ids, flt, label = self._target()
        self.post_message(WriteAsked(DELETE, ids, flt, group=label))

    def action_export(self) -> None:
        if self._gone():
            return
        ids, flt, label = self._target()
        self.post_message(ExportAsked(ids, flt, label))

    def action_copy(self, to_file: bool) -> None:
        """Copy (or save) the id, payload or traceback of the dead letter under the cursor."""
        if self._gone():
            return
        key = self.query_one("#dead-rows", KeyedTable).current_key
        if key is not None:
            CopyFlow(self.app).ask_row(self.console.link, "dead", int(key), to_file=to_file)

    def action_clear_marks(self) -> None:
        self.query_one("#dead-rows", KeyedTable).clear_marks()

    def action_next_page(self) -> None:
        if self.more:
            self.pages += 1
            self.console.refresh_now()

    def palette_commands(self) -> list[tuple[str, str, str]]:
        out = [("Filter dead letters…", "kind, error, signature, text", "filter")]
        ids, _, label = self._target()
        if self.console.read_only:
            what = f"{len(ids)} selected" if ids else "matching"
            return [*out, (f"Export {what} dead letters…", "JSON lines or CSV", "export")]
        if ids:
            what = f"{len(ids)} marked" if len(ids) > 1 else f"#{ids[0]}"
            out += [
                (f"Requeue dead letter {what}…", "or all matching", "requeue"),
                (f"Delete dead letter {what}…", "asks first", "delete"),
                (f"Export dead letter {what}…", "JSON lines or CSV", "export"),
            ]
        else:
            what = f"group {label}" if label else "all matching dead letters"
            out += [
                (f"Requeue {what}…", "asks first, names the count", "requeue_group"),
                (f"Delete {what}…", "asks first, names the count", "delete_group"),
                (f"Export {what}…", "JSON lines or CSV", "export"),
            ]
        return out
