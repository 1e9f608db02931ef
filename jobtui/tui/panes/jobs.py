"""Jobs tab: a filtered, keyset-paged browser of the `jobs` table: running first, then waiting
ones in the order they will run, then finished ones newest first (a text search: newest first).

It opens on the unfinished jobs (what may need an operator); `a` toggles to every job.

BINDINGS:
    /          filter (state:ready,running kind:email free text; kind: completes)
    a          unfinished jobs / all jobs
    o          the oldest ready job: filter state:ready (of the kind in force), sorted by
               wait, the cursor on the job that has waited longest (read from the database,
               shown on top even when it is pages away from the rows loaded)
    #          count the matching jobs exactly, once (the count of every refresh stops at
               10k+; a text search's is not counted unless asked)
    y / Y      copy the id, payload or traceback of the cursor row / save it to a file
    enter      detail
    space      mark
    u          clear marks
    c          cancel the marked jobs or the one under the cursor (asks first)
    r          run now (makes scheduled/retrying jobs ready at once)
    R          run again: finished (succeeded or cancelled) jobs as new jobs linked to them
    ] / n      load the next page (also when the cursor reaches the last row)

`c` and `r` are offered only when they can apply to the selection: a finished job cannot be
cancelled, and only a job waiting for a later time can be run now.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from datetime import datetime
from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.widgets import DataTable

from jobtui import browse
from jobtui.inert import clean, inert, one_line, payload_preview
from jobtui.models import PENDING_STATES, CappedCount, JobFilter, JobRow
from jobtui.tui.actions import CANCEL, RERUN, RERUN_STATES, RUN_NOW
from jobtui.tui.connection import Link, LinkDown, RefreshDropped
from jobtui.tui.filters import format_job_filter, parse_job_filter
from jobtui.tui.host import DetailAsked, WriteAsked
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
from jobtui.tui.texts import KIND_COLUMN_WIDTH, coarse_age, kind_label
from jobtui.tui.widgets.keyed_table import Column, KeyedTable

COUNT_EVERY_S = 30.0
UNFINISHED = JobFilter(states=PENDING_STATES)
CANCELLABLE = frozenset({"ready", "scheduled", "retrying", "running", "exhausted"})
RUNNABLE_NOW = frozenset({"scheduled", "retrying"})
RERUNNABLE = frozenset(RERUN_STATES)
FITS = {"cancel": CANCELLABLE, "run_now": RUNNABLE_NOW, "run_again": RERUNNABLE}
HINT = (
    "state:ready,scheduled,retrying,running,exhausted,succeeded,cancelled  kind:NAME  "
    "key:UNIQUE-KEY  free text (id, payload, error)"
)


AUTO_SEARCH_PAGES = 8  # a text search goes on by itself until a page of matches, or this far


@dataclass
class JobsData:
    rows: list[JobRow]
    more: bool
    total: CappedCount | None
    now: datetime  # the server's clock: every age is measured against it
    kinds: list[str] | None  # the known kinds, when they were read again
    sought: bool = False  # the oldest ready job was looked for (after `o`)
    oldest: int | None = None  # and found: its id
    pinned: bool = False  # that job is shown though no page loaded holds it
    flt: JobFilter | None = None  # the filter these rows answer


class JobsPane(Pane):
    BINDINGS: ClassVar[list[BindingType]] = [
        # A priority key: the prompt opens before the keys that follow it in one burst (a
        # paste, a slow link) are handed on, so they are typed into it instead of acting here.
        Binding("slash", "filter", "Filter", id="filter", priority=True),
        Binding("a", "toggle_all", "All/unfinished", id="jobs.all"),
        Binding("o", "oldest_ready", "Oldest ready", show=False, id="jobs.oldest"),
        Binding("number_sign", "count_exact", "Exact count", show=False, id="jobs.count_exact"),
        Binding("y", "copy(False)", "Copy", show=False, id="jobs.copy"),
        Binding("Y", "copy(True)", "Save to file", show=False, id="jobs.save"),
        Binding("c", "cancel", "Cancel", id="cancel"),
        Binding("r", "run_now", "Run now", id="run_now"),
        Binding("R", "run_again", "Run again", show=False, id="jobs.run_again"),
        Binding("u", "clear_marks", "Unmark", show=False, id="clear_marks"),
        Binding("right_square_bracket,n", "next_page", "More", id="next_page"),
    ]
    main_table = "#jobs-table"
    # The count shown on every refresh reads at most this many rows (browse.count_jobs_capped).
    count_cap = browse.COUNT_CAP

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.flt = UNFINISHED
        self.pages = 1
        self.more = False
        self.total: CappedCount | None = None
        self._exact: tuple[JobFilter, int] | None = None  # `#`: the exact count of a filter
        self.seek_oldest = False  # `o`: show the oldest ready job, until the filter changes
        self._jump = False  # move the cursor to the oldest ready job once it is shown
        self._pinned: int | None = None  # the oldest ready job, shown beyond the pages loaded
        self.kinds: list[str] = []
        self.states: dict[str, str] = {}  # row key → state as shown
        self._counted_at = 0.0
        self._count_for: JobFilter | None = None
        self._counted_rows: tuple[tuple[int, str], ...] = ()
        self._offered: tuple[bool, bool] | None = None
        self._shown_for: JobFilter | None = None  # the filter of the rows on screen
        self._searching = False  # a text search goes on to older rows by itself
        self._of = ""  # " of N" as the count line shows it, for the filter `_of_for`
        self._of_for: JobFilter | None = None
        # job id → (what its cells show, its payload, the cells), from the last refresh
        self._row_cells: dict[int, tuple[tuple[object, ...], object, list[Text]]] = {}

    def compose(self) -> ComposeResult:
        yield InfoLine(id="jobs-info", classes="info")
        yield KeyedTable(markable=True, id="jobs-table")

    def on_mount(self) -> None:
        # Live, rows come and go every second; each time every row below moves (a repaint).
        self.query_one("#jobs-table", KeyedTable).settle_s = SETTLE_S
        self.query_one("#jobs-table", KeyedTable).setup_columns(
            Column("id", "id", 6, priority=0, fit=True),
            Column("kind", "kind", KIND_COLUMN_WIDTH, priority=0),
            Column("state", "state", 10, priority=0),
            Column("when", "when", 8, priority=1, fit=True),
            Column("error", "last error", 20, priority=0, flex=True, shrink=2),
            Column("payload", "payload", 30, priority=2),
            Column("att", "att", 5, priority=3, fit=True),
            Column("worker", "worker", 22, priority=4),
        )
        self._info()

    async def load(self, link: Link) -> JobsData:
        size = self.console.config.page_size
        seek = self.seek_oldest
        flt = self.flt
        rows, before = await load_pages(
            link,
            browse.list_jobs,
            flt,
            pages=self.pages,
            size=size,
            searching=bool(self.flt.text),
        )
        more = before is not None
        total = self.total
        now = time.monotonic()
        seen = tuple((r.id, r.state) for r in rows)
        kinds = None
        if self.flt.text:
            total = None  # counting a text search means scanning every row: only when asked
        elif (
            self._count_for != self.flt
            or seen != self._counted_rows  # rows came, went or changed state: a write
            or now - self._counted_at > COUNT_EVERY_S
        ):
            total = await link.run(browse.count_jobs_capped, self.flt, cap=self.count_cap)
            kinds = await link.run(browse.kinds)
            self._counted_at, self._count_for = now, self.flt
        self._counted_rows = seen
        found = await self._oldest(link, rows) if seek else None
        oldest, pinned = found or (None, False)
        now_at = await link.run(server_now)
        return JobsData(rows, more, total, now_at, kinds, found is not None, oldest, pinned, flt)

    async def _oldest(self, link: Link, rows: list[JobRow]) -> tuple[int | None, bool] | None:
        """The oldest ready job of the kind in force (None: there is none), added to `rows`
        when no page loaded holds it (one index probe and, then, one read by id), and whether
        it was added; None when it was claimed in between (the next refresh looks again)."""
        oldest = await link.run(browse.oldest_ready_job, self.flt.kind)
        if oldest is None or any(r.id == oldest for r in rows):
            return oldest, False
        job = await link.run(browse.get_job, oldest)
        if job is None or job.state != "ready":
            return None
        rows.append(job)
        return oldest, True

    def show(self, data: JobsData) -> None:
        self.more = data.more
        self.total = data.total
        self._pinned = data.oldest if data.pinned else None
        if data.kinds is not None:
            self.kinds = data.kinds
        self.states = {}
        st = cell_styles(self.app)
        now = data.now
        rows = []
        # Each row's cells are made again only when what they show changed: a refresh of
        # several pages made every cell of every row (most of `end`'s time at 900 rows).
        row_cells: dict[int, tuple[tuple[object, ...], object, list[Text]]] = {}
        kinds = {*self.kinds, *(job.kind for job in data.rows)}
        for job in data.rows:
            kind = kind_label(job.kind, kinds, KIND_COLUMN_WIDTH)
            state_style = {
                "running": st.accent,
                "retrying": st.warning,
                "cancelled": st.muted,
                "succeeded": st.success,
                "exhausted": st.error,
            }.get(job.state, "")
            if job.state == "running" and job.locked_at is not None:
                when = coarse_age((now - job.locked_at).total_seconds())
            elif job.state in ("scheduled", "retrying") and job.run_at > now:
                when = "in " + coarse_age((job.run_at - now).total_seconds())
            elif job.finished_at is not None:
                when = coarse_age((now - job.finished_at).total_seconds()) + " ago"
            else:
                when = coarse_age((now - job.run_at).total_seconds())
            state = "cancelling" if job.cancel_requested and job.state == "running" else job.state
            self.states[str(job.id)] = state
            looks = (st, kind, state, when, job.last_error, job.attempts, job.max_attempts)
            kept = self._row_cells.get(job.id)
            if kept is not None and kept[0] == (*looks, job.locked_by) and kept[1] == job.payload:
                cells = kept[2]  # as last time: the table skips it (KeyedTable.sync)
            else:
                cells = [
                    Text(str(job.id)),
                    inert(kind, style="bold"),
                    Text(state, style=state_style),
                    Text(when),
                    Text(
                        one_line(job.last_error or "", 120),
                        style=st.danger if job.last_error else "",
                    ),
                    Text(payload_preview(job.payload), style=st.muted),
                    Text(f"{job.attempts}/{job.max_attempts}"),
                    inert(job.locked_by or "", style=st.muted),
                ]
            row_cells[job.id] = ((*looks, job.locked_by), job.payload, cells)
            rows.append((str(job.id), cells))
        self._row_cells = row_cells
        table = self.query_one("#jobs-table", KeyedTable)
        table.sync(rows)
        if self._jump and data.sought:
            self._jump = False
            if data.oldest is not None and str(data.oldest) in table.keys:
                table.move_cursor(row=table.get_row_index(str(data.oldest)))
            else:
                of = f" of kind {clean(self.flt.kind)}" if self.flt.kind else ""
                self.app.notify(f"No job{of} is ready.", timeout=4, markup=False)
        self._shown_for = data.flt
        # A text search whose newest rows hold fewer matches than a page goes on to older
        # rows by itself (a few pages' worth), so it never looks empty while matches exist.
        self._searching = (
            bool(self.flt.text)
            and data.flt == self.flt
            and data.more
            and len(data.rows) < self.console.config.page_size
            and self.pages < AUTO_SEARCH_PAGES
        )
        if self._searching:
            self.pages += 1
            table.more_of_the_same()  # older matches, not new rows: held, they read "new rows"
            self.console.refresh_now()
        self._info()
        self._offer()

    def _applies(self, fits: frozenset[str]) -> bool:
        keys = self.query_one("#jobs-table", KeyedTable).selection()
        return any(self.states.get(k) in fits for k in keys)

    def _offer(self) -> None:
        """Redraw the footer when what `c` and `r` can do changed (not on every refresh: a
        footer redraw is a full line sent to the terminal)."""
        offered = (self._applies(CANCELLABLE), self._applies(RUNNABLE_NOW))
        if offered != self._offered:
            self._offered = offered
            self.refresh_bindings()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        allowed = super().check_action(action, parameters)
        if not allowed or action not in FITS:
            return allowed
        # None: shown greyed in the footer, and the key does nothing.
        return True if self._applies(FITS[action]) else None

    def _info(self) -> None:
        table = self.query_one("#jobs-table", KeyedTable)
        shown = len(table.keys)
        total = self.total
        if self._exact is not None and self._exact[0] == self.flt:
            total = CappedCount(self._exact[1], capped=False)
        of = "" if total is None else f" of {total.text}"
        if table.waiting and self._of_for == self.flt:
            # While new rows wait (the table settles), the total waits with them: it changed on
            # nearly every refresh of the live demo, a redraw of this line every 2 s; "new rows"
            # below says at once that there is more.
            of = self._of
        self._of, self._of_for = of, self.flt
        parts: list[Text | str] = [Text("filter ", style="dim"), self._filter_text()]
        if self._shown_for != self.flt:
            # The rows below still answer the filter before: say so until the new ones come.
            parts.append(loading_rows())
            self.query_one("#jobs-info", InfoLine).set(*parts)
            return
        parts.append(Text(f"   {shown:,} shown{of}", style="dim"))
        if total is not None and total.capped:
            parts.append(Text(" (# exact)", style="dim"))
        elif total is None and self.flt.text:
            parts.append(Text(" (# counts)", style="dim"))
        if self._pinned is not None:
            parts.append(Text(f"  · oldest ready #{self._pinned}: beyond the pages", style="dim"))
        if self.flt.kind and self.kinds and self.flt.kind not in self.kinds and not shown:
            parts.append(Text("  (no such kind has unfinished jobs)", style="bold"))
        if self._searching:
            parts.append(Text("  · searching older rows…", style="bold"))
        elif self.more:
            more = "searching: ] searches older rows" if self.flt.text else "] more"
            parts.append(Text(f"  · {more}", style="bold" if self.flt.text else "dim"))
        gone = len(table.shown_keys) - shown
        if gone:
            parts.append(Text(f"  + {gone} gone (struck through)", style="dim"))
        if table.waiting:
            # Not a count: one that changed on every refresh redrew the line every 2 s.
            parts.append(Text("  · new rows (any key shows them)", style="dim"))
        if table.marked:
            parts.append(Text(f"   {len(table.marked)} marked", style="bold"))
        self.query_one("#jobs-info", InfoLine).set(*parts)

    def _filter_text(self) -> Text:
        if self.flt == UNFINISHED:
            return Text("unfinished jobs (a: all)", style="bold")
        if self.flt.states == UNFINISHED.states:
            rest = format_job_filter(
                JobFilter(kind=self.flt.kind, text=self.flt.text, unique_key=self.flt.unique_key)
            )
            return Text.assemble(("unfinished ", "bold"), inert(rest, style="bold"))
        return inert(format_job_filter(self.flt) or "none (all jobs)", style="bold")

    # --- actions -------------------------------------------------------------------------

    def set_filter(self, flt: JobFilter) -> None:
        self.flt = flt
        self.pages = 1
        self.seek_oldest = self._jump = False
        self._pinned = self._exact = None
        table = self.query_one("#jobs-table", KeyedTable)
        table.clear_marks()
        table.new_view()
        table.move_cursor(row=0)
        self._info()
        self.console.refresh_now()

    def action_filter(self) -> None:
        ask_filter(
            self, "filter jobs", format_job_filter(self.flt), HINT, parse_job_filter, self.kinds,
            self.set_filter,
        )  # fmt: skip

    def action_toggle_all(self) -> None:
        """Unfinished jobs ⇄ every job, keeping the kind, key and text of the filter."""
        states = () if self.flt.states == UNFINISHED.states else UNFINISHED.states
        self.set_filter(replace(self.flt, states=states))

    def action_oldest_ready(self) -> None:
        """The ready jobs of the kind in force, longest waiting first, the cursor on the oldest.

        The pages hold the ready jobs in claim order (priority first); the oldest ready job is
        read from the database (browse.oldest_ready_job) and shown on top even when it is pages
        away from them.
        Text and unique-key filters are dropped: the oldest ready job need not match them.
        """
        table = self.query_one("#jobs-table", KeyedTable)
        self.set_filter(JobFilter(states=("ready",), kind=self.flt.kind))
        self.seek_oldest = True
        self._jump = True
        table.sort_by("when", reverse=True)

    def action_count_exact(self) -> None:
        """Count the matching jobs exactly, once: shown until the filter changes."""
        self.run_worker(self._count_exact(self.flt), group="count", exclusive=True)

    async def _count_exact(self, flt: JobFilter) -> None:
        """Not a refresh: bounded by the statement timeout only, and never repeated by one."""
        try:
            n = await self.console.link.run(browse.count_jobs, flt)
        except LinkDown as exc:
            self.app.notify(clean(exc.message), severity="error", markup=False)
            return
        except RefreshDropped as exc:
            text = f"The exact count took longer than {exc.timeout_s:g} s and was stopped."
            self.app.notify(text, severity="warning", markup=False)
            return
        if flt == self.flt:
            self._exact = (flt, n)
            self._info()

    def action_copy(self, to_file: bool) -> None:
        """Copy (or save) the id, payload or traceback of the job under the cursor."""
        key = self.query_one("#jobs-table", KeyedTable).current_key
        if key is not None:
            CopyFlow(self.app).ask_row(self.console.link, "job", int(key), to_file=to_file)

    def why_not(self, action: str) -> str | None:
        fits = FITS.get(action)
        if fits is None:
            return None
        table = self.query_one("#jobs-table", KeyedTable)
        if table.on_ghost and not table.marked:
            return "That row is gone (it changed or left this view); move to another row."
        keys = table.selection()
        if not keys:
            return "No job under the cursor."
        what = {"cancel": "to cancel", "run_now": "to run now", "run_again": "to run again"}
        if len(keys) == 1:
            state = self.states.get(keys[0], "gone")
            return f"Job #{keys[0]} is {state}: nothing {what[action]}."
        return f"None of the {len(keys)} marked jobs has anything {what[action]}."

    def _selected_ids(self) -> list[int]:
        return [int(k) for k in self.query_one("#jobs-table", KeyedTable).selection()]

    def action_cancel(self) -> None:
        ids = self._selected_ids()
        if ids:
            self.post_message(WriteAsked(CANCEL, ids, self.flt))

    def action_run_now(self) -> None:
        ids = self._selected_ids()
        if ids:
            self.post_message(WriteAsked(RUN_NOW, ids, self.flt))

    def action_run_again(self) -> None:
        """Run the finished jobs selected again, as new jobs linked to them (asks first)."""
        ids = self._selected_ids()
        if ids:
            self.post_message(WriteAsked(RERUN, ids, self.flt))

    def action_clear_marks(self) -> None:
        self.query_one("#jobs-table", KeyedTable).clear_marks()

    def action_next_page(self) -> None:
        if self.more:
            self.pages += 1
            self.console.refresh_now()

    def on_keyed_table_marks_changed(self, event: KeyedTable.MarksChanged) -> None:
        self._info()
        self._offer()

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        self._offer()
        table = self.query_one("#jobs-table", KeyedTable)
        if self.more and event.cursor_row >= table.row_count - 1:
            self.action_next_page()

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        event.stop()
        if event.row_key.value is not None:
            self.post_message(DetailAsked("job", int(event.row_key.value)))

    def palette_commands(self) -> list[tuple[str, str, str]]:
        table = self.query_one("#jobs-table", KeyedTable)
        ids = table.selection()
        out = [("Filter jobs…", "state, kind, text", "filter")]
        if ids and not self.console.read_only:
            what = f"{len(ids)} marked jobs" if table.marked else f"job #{ids[0]}"
            if self._applies(CANCELLABLE):
                out.append((f"Cancel {what}", "asks first", "cancel"))
            if self._applies(RUNNABLE_NOW):
                out.append((f"Run now {what}", "asks first", "run_now"))
            if self._applies(RERUNNABLE):
                out.append((f"Run again {what}", "new linked jobs; asks first", "run_again"))
        if self.more:
            out.append(("Load next page", "keyset paging", "next_page"))
        return out
