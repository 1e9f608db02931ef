"""One job or dead letter in full: payload as JSON, timestamps, attempts, every error.

BINDINGS:
    esc      back
    c        cancel the job (jobs)
    r        retry: run the job now (jobs) / requeue the dead letter (dead letters)
    d        delete the dead letter (asks first)
    j / k    scroll
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, ClassVar

from rich.console import Group, RenderableType
from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.content import Content
from textual.highlight import highlight
from textual.screen import Screen
from textual.widgets import Static

from jobtui import browse
from jobtui.config import format_duration
from jobtui.inert import clean, inert, payload_json
from jobtui.models import DeadLetterRow, ErrorEntry, JobRow
from jobtui.tui.actions import CANCEL, DELETE, REQUEUE, RUN_NOW
from jobtui.tui.connection import LinkDown
from jobtui.tui.host import Host, WriteAsked, host
from jobtui.tui.server import server_now
from jobtui.tui.widgets.footer import ConsoleFooter


def _when(ts: datetime | None, now: datetime) -> Text:
    if ts is None:
        return Text("–", style="dim")
    delta = (now - ts).total_seconds()
    rel = f"{format_duration(abs(delta))} {'ago' if delta >= 0 else 'from now'}"
    return Text.assemble(ts.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC"), ("  " + rel, "dim"))


def _iso(text: str) -> str:
    """An ISO timestamp from the errors JSON as `YYYY-MM-DD HH:MM:SS UTC`, else as given."""
    try:
        ts = datetime.fromisoformat(text)
    except ValueError:
        return clean(text)
    if ts.tzinfo is None:
        return clean(text)
    return ts.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _errors(errors: list[ErrorEntry], last_error: str | None) -> RenderableType:
    if not errors and not last_error:
        return Text("no errors recorded", style="dim")
    if not errors:
        return inert(last_error, multiline=True)
    parts: list[RenderableType] = []
    for entry in sorted(errors, key=lambda e: e.attempt, reverse=True):  # latest first
        head = Text.assemble(
            (f"attempt {entry.attempt}", "bold"),
            "  ",
            _iso(entry.at),
            "  ",
            ("worker " + clean(entry.worker) if entry.worker else "no worker", "dim"),
        )
        parts.append(head)
        parts.append(inert(entry.error, style="bold", multiline=True))
        if entry.traceback:
            parts.append(inert(entry.traceback.rstrip(), style="dim", multiline=True))
        parts.append(Text(""))
    return Group(*parts)


def _payload(payload: Any) -> Content:
    # Textual's highlighter follows the app theme; it builds from the text, never markup.
    return highlight(payload_json(payload), language="json")


class DetailScreen(Screen[None]):
    """Loads the row through the app's connection; acts through the app's confirmed actions."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "back", "Back", id="detail.back"),
        Binding("c", "cancel_job", "Cancel job", id="detail.cancel"),
        Binding("r", "retry", "Retry", id="detail.retry"),
        Binding("d", "delete", "Delete", id="detail.delete"),
        Binding("j", "scroll(1)", "Down", show=False, id="detail.down"),
        Binding("k", "scroll(-1)", "Up", show=False, id="detail.up"),
    ]

    def __init__(self, what: str, row_id: int) -> None:
        super().__init__()
        self.what = what  # "job" or "dead"
        self.row_id = row_id
        self.row: JobRow | DeadLetterRow | None = None
        self.now: datetime | None = None  # the server's clock when the row was read

    @property
    def console(self) -> Host:
        return host(self.app)

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="detail-scroll") as scroll:
            scroll.border_title = f"{'job' if self.what == 'job' else 'dead letter'} #{self.row_id}"
            yield Static(Text("loading…", style="dim"), id="detail-head")
            yield Static("", id="detail-payload", classes="detail-section")
            yield Static("", id="detail-errors", classes="detail-section")
        yield ConsoleFooter()

    def on_mount(self) -> None:
        self.query_one("#detail-payload").border_title = "payload"
        self.query_one("#detail-errors").border_title = "errors"
        self.query_one("#detail-scroll").focus()
        self.reload()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        writes = {"cancel_job", "retry", "delete"}
        if action in writes and self.console.read_only:
            return False
        if action == "cancel_job":
            return self.what == "job"
        if action == "delete":
            return self.what == "dead"
        return True

    @work(exclusive=True, group="detail")
    async def reload(self) -> None:
        fn = browse.get_job if self.what == "job" else browse.get_dead
        try:
            row = await self.console.link.run(fn, self.row_id)
            now = await self.console.link.run(server_now)
        except LinkDown as exc:
            self.query_one("#detail-head", Static).update(
                Text(f"database unreachable: {exc.message}", style="bold")
            )
            return
        self.row, self.now = row, now
        self._render_row()
        self.refresh_bindings()

    def _render_row(self) -> None:
        head = self.query_one("#detail-head", Static)
        row, now = self.row, self.now
        if row is None or now is None:
            place = "jobs" if self.what == "job" else "dead letters"
            head.update(Text(f"#{self.row_id} is no longer in {place}.", style="bold"))
            self.query_one("#detail-payload", Static).update("")
            self.query_one("#detail-errors", Static).update("")
            return
        if isinstance(row, JobRow):
            state = row.state + (" (cancel requested)" if row.cancel_requested else "")
            times = [
                ("created  ", row.created_at),
                ("run at   ", row.run_at),
                ("locked   ", row.locked_at),
                ("finished ", row.finished_at),
                ("cancelled", row.cancelled_at),
            ]
            last = ("worker    ", row.locked_by or "–")
        else:
            state = "dead: " + row.reason
            times = [("created  ", row.created_at), ("run at   ", row.run_at)]
            times.append(("died     ", row.died_at))
            last = ("signature ", row.error_signature)
        lines = [
            Text.assemble(
                (f"#{row.id}  ", "bold"), inert(row.kind, style="bold"), "  ", (state, "reverse")
            ),
            Text(f"attempts {row.attempts} of {row.max_attempts}   priority {row.priority}"),
            Text.assemble(
                ("unique key ", "dim"),
                inert(row.unique_key) if row.unique_key is not None else ("–", "dim"),
            ),
            *(Text.assemble((label + " ", "dim"), _when(ts, now)) for label, ts in times),
            Text.assemble((last[0], "dim"), inert(last[1])),
        ]
        head.update(Text("\n").join(lines))
        self.query_one("#detail-payload", Static).update(_payload(row.payload))
        errors = self.query_one("#detail-errors", Static)
        errors.border_title = f"errors ({len(row.errors)})"
        errors.update(_errors(row.errors, row.last_error))

    def action_back(self) -> None:
        self.dismiss(None)

    def action_scroll(self, lines: int) -> None:
        scroll = self.query_one("#detail-scroll", VerticalScroll)
        scroll.scroll_relative(y=lines, animate=False)

    def action_cancel_job(self) -> None:
        if self.what == "job":
            self.post_message(WriteAsked(CANCEL, [self.row_id], None, after=self.reload))

    def action_retry(self) -> None:
        if self.what == "job":
            self.post_message(WriteAsked(RUN_NOW, [self.row_id], None, after=self.reload))
        else:
            self.post_message(WriteAsked(REQUEUE, [self.row_id], None, after=self.reload))

    def action_delete(self) -> None:
        if self.what == "dead":
            self.post_message(WriteAsked(DELETE, [self.row_id], None, after=self.reload))
