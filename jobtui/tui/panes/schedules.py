"""Schedules tab: every periodic job with its next run, last run and that run's outcome.

BINDINGS:
    P        pause or resume the schedule under the cursor (asks first)
    r        run the schedule now: enqueue one job at once (asks first)
    enter    show the schedule's last job

Ages and "next in" are measured against the server's clock, like every other tab.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.widgets import DataTable

from jobtui import schedules
from jobtui.inert import inert
from jobtui.models import ScheduleRow
from jobtui.tui.connection import Link
from jobtui.tui.host import DetailAsked, ScheduleAsked
from jobtui.tui.palette import CellStyles, cell_styles
from jobtui.tui.panes.pane import InfoLine, Pane, WrappingInfo
from jobtui.tui.server import age_s, server_now
from jobtui.tui.texts import coarse_age
from jobtui.tui.widgets.keyed_table import KeyedTable


@dataclass
class SchedulesData:
    rows: list[ScheduleRow]
    now: datetime  # the server's clock


def _relative(now: datetime, ts: datetime | None) -> str:
    if ts is None:
        return "–"
    delta = age_s(now, ts)
    return f"{coarse_age(delta)} ago" if delta >= 0 else f"in {coarse_age(-delta)}"


LATE_AFTER_S = 5.0


def _next_run(now: datetime, row: ScheduleRow, st: CellStyles) -> Text:
    """`in 4m`, `due` (a worker is about to enqueue it), or `late 3m` (no worker has for a
    while: is one running that declares this schedule?)."""
    if row.paused_at is not None or row.next_tick is None:
        return Text("–", style=st.muted)
    overdue = age_s(now, row.next_tick)
    if overdue < 0:
        return Text(f"in {coarse_age(-overdue)}")
    if overdue < LATE_AFTER_S:
        return Text("due")
    return Text(f"late {coarse_age(overdue)}", style=st.warning)


class SchedulesPane(Pane):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("P", "toggle_pause_schedule", "Pause/resume", id="schedule.pause"),
        Binding("r", "run_schedule_now", "Run now", id="schedule.run_now"),
    ]
    main_table = "#schedules-table"

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.rows: dict[str, ScheduleRow] = {}

    def compose(self) -> ComposeResult:
        yield InfoLine(id="schedules-info", classes="info")
        yield KeyedTable(id="schedules-table")
        # The row under the cursor in full: at 80 columns the table cannot show every field.
        yield WrappingInfo(id="schedule-detail", classes="info")

    def on_mount(self) -> None:
        # The operator's questions first (which, paused?, when next, how did the last go),
        # so they fit in 80 columns; kind and cron follow.
        self.query_one("#schedules-table", KeyedTable).setup_columns(
            ("name", "name", 18),
            ("state", "state", 6),
            ("next", "next run", 9),
            ("last", "last run", 9),
            ("outcome", "outcome", 9),
            ("cron", "cron", 13),
            ("tz", "time zone", 16),
            ("kind", "kind", 16),
        )

    async def load(self, link: Link) -> SchedulesData:
        rows = await link.run(schedules.list_schedules)
        return SchedulesData(rows, await link.run(server_now))

    def show(self, data: SchedulesData) -> None:
        st = cell_styles(self.app)
        self.rows = {r.name: r for r in data.rows}
        outcome_style = {
            "succeeded": st.success,
            "dead": st.error,
            "cancelled": st.muted,
            "retrying": st.warning,
            "running": st.accent,
        }
        rows = []
        for r in data.rows:
            paused = r.paused_at is not None
            rows.append(
                (
                    r.name,
                    [
                        inert(r.name, style="bold"),
                        Text("PAUSED" if paused else "active", st.warning if paused else ""),
                        _next_run(data.now, r, st),
                        Text(_relative(data.now, r.last_enqueued_at)),
                        Text(
                            r.last_state or ("pruned" if r.last_job_id else "–"),
                            outcome_style.get(r.last_state or "", st.muted),
                        ),
                        inert(r.cron),
                        inert(r.timezone),
                        inert(r.kind),
                    ],
                )
            )
        self.query_one("#schedules-table", KeyedTable).sync(rows)
        self._describe_current()
        n_paused = sum(r.paused_at is not None for r in data.rows)
        self.query_one("#schedules-info", InfoLine).set(
            Text(f"{len(data.rows):,} schedules", style="bold"),
            Text(f"   {n_paused} paused" if n_paused else "", style="dim"),
            Text("   P pause/resume · r run now · enter last job", style="dim"),
        )

    def _describe_current(self) -> None:
        row = self.current()
        parts: list[Text | str] = []
        if row is not None:
            parts = [
                inert(row.name, style="bold"),
                Text(" · ", style="dim"),
                inert(f"{row.cron} ({row.timezone})"),
                Text(" · kind ", style="dim"),
                inert(row.kind),
                Text(f" · missed ticks: {row.missed}", style="dim"),
            ]
            if row.paused_at is not None:
                parts += [Text(" · paused by ", style="dim"), inert(row.paused_by or "?")]
            if row.last_job_id is not None:
                parts.append(Text(f" · last job #{row.last_job_id}", style="dim"))
        self.query_one("#schedule-detail", InfoLine).set(*parts)

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        self._describe_current()

    def current(self) -> ScheduleRow | None:
        key = self.query_one("#schedules-table", KeyedTable).current_key
        return self.rows.get(key) if key is not None else None

    def action_toggle_pause_schedule(self) -> None:
        row = self.current()
        if row is not None:
            action = "resume" if row.paused_at is not None else "pause"
            self.post_message(ScheduleAsked(row.name, action))

    def action_run_schedule_now(self) -> None:
        row = self.current()
        if row is not None:
            self.post_message(ScheduleAsked(row.name, "run_now"))

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        event.stop()
        row = self.current()
        if row is not None and row.last_job_id is not None:
            what = "dead" if row.last_state == "dead" else "job"
            self.post_message(DetailAsked(what, row.last_job_id))

    def palette_commands(self) -> list[tuple[str, str, str]]:
        row = self.current()
        if row is None or self.console.read_only:
            return []
        verb = "Resume" if row.paused_at is not None else "Pause"
        return [
            (f"{verb} schedule {row.name}", "asks first", "toggle_pause_schedule"),
            (f"Run schedule {row.name} now", "enqueues one job; asks first", "run_schedule_now"),
        ]
