"""One job or dead letter in full: payload as JSON, timestamps, attempts, every error.

Only the actions that can change the row in its state are offered (a finished job offers no
cancel, a job already due no "run now"), each asks first, and after one the screen says what
happened: a requeued dead letter is gone from dead letters and is now the job of the same id,
which `o` opens. The status line (DB DOWN, READ-ONLY) stays on top, as on the tabs.

BINDINGS:
    esc      back
    c        cancel the job (unfinished jobs)
    r        run now (jobs waiting for a future time) / requeue (dead letters)
    a        run again as a new job (succeeded or cancelled jobs)
    d        delete the dead letter
    o        open the linked job (requeued as, run again as, rerun of)
    y / Y    copy the id, payload or traceback to the clipboard / save it to a file
    j / k    scroll
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, ClassVar

from rich.console import Group, RenderableType
from rich.text import Text
from textual import events, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.content import Content
from textual.css.query import NoMatches
from textual.highlight import highlight
from textual.screen import Screen
from textual.widgets import Static

from jobtui import browse, ops, why
from jobtui.config import format_duration
from jobtui.inert import clean, inert, payload_json
from jobtui.models import DeadLetterRow, ErrorEntry, JobRow
from jobtui.tui.actions import (
    CANCEL,
    DELETE,
    REQUEUE,
    RERUN,
    RUN_NOW,
    ActionSpec,
    can_rerun,
    job_actions,
)
from jobtui.tui.clipboard import clips_of
from jobtui.tui.connection import LinkDown
from jobtui.tui.host import Host, PaletteEntry, WriteAsked, host, read_only_refusal
from jobtui.tui.screens.copy_prompt import CopyFlow
from jobtui.tui.server import server_now
from jobtui.tui.texts import exact_age, same
from jobtui.tui.widgets.footer import ConsoleFooter
from jobtui.tui.widgets.status import PARTS, StatusBar
from jobtui.tui.widgets.why import WhyView

WRITES = {"cancel_job", "run_now", "requeue", "delete", "run_again"}
PAUSED_RECHECK_S = 1.0  # while the refresh is paused, how often to look whether it resumed


def _when(ts: datetime | None, now: datetime) -> Text:
    """A timestamp and its age. The age is in parentheses, not only after spaces: a line
    wrapped at a narrow width (or a joined tmux capture) would otherwise read "UTC3h46m ago"."""
    if ts is None:
        return Text("–", style="dim")
    delta = (now - ts).total_seconds()
    # To the second while recent (the tabs' tables keep 15 s steps): one row's few lines.
    rel = f"{exact_age(abs(delta))} {'ago' if delta >= 0 else 'from now'}"
    return Text.assemble(ts.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC"), (f" ({rel})", "dim"))


def _iso(text: str) -> str:
    """An ISO timestamp from the errors JSON as `YYYY-MM-DD HH:MM:SS UTC`, else as given."""
    try:
        ts = datetime.fromisoformat(text)
    except ValueError:
        return clean(text)
    if ts.tzinfo is None:
        return clean(text)
    return ts.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _at(text: str) -> datetime | None:
    try:
        ts = datetime.fromisoformat(text)
    except ValueError:
        return None
    return ts if ts.tzinfo is not None else None


def last_run(row: JobRow | DeadLetterRow, now: datetime) -> tuple[int, float, bool] | None:
    """(attempt, seconds, still running) of the one attempt whose start the database keeps: a
    job's `locked_at` is the claim of its latest attempt, kept when it succeeds or is
    cancelled. Earlier attempts record only when they failed (see the errors)."""
    if not isinstance(row, JobRow) or row.locked_at is None:
        return None
    if row.finished_at is not None:
        return row.attempts, (row.finished_at - row.locked_at).total_seconds(), False
    return row.attempts, (now - row.locked_at).total_seconds(), True


def _ran(seconds: float) -> str:
    return f"{seconds:.1f}s" if seconds < 60 else format_duration(seconds)


def _entry_ran(entry: ErrorEntry) -> float | None:
    """An attempt's run time from its own entry: claimed (`started`) to failed (`at`)."""
    if not entry.started:
        return None
    try:
        seconds = datetime.fromisoformat(entry.at) - datetime.fromisoformat(entry.started)
    except (TypeError, ValueError):
        return None
    return max(0.0, seconds.total_seconds())


def _errors(
    errors: list[ErrorEntry], last_error: str | None, run: tuple[int, float, bool] | None
) -> RenderableType:
    """Every attempt, latest first. A traceback identical to one shown above it is not
    repeated: "traceback same as attempt 4" (retries of one bug fill the screen otherwise)."""
    if not errors and not last_error:
        return Text("no errors recorded", style="dim")
    if not errors:
        return inert(last_error, multiline=True)
    parts: list[RenderableType] = []
    shown: dict[str, int] = {}  # traceback text -> the attempt it is shown under
    ordered = sorted(errors, key=lambda e: e.attempt, reverse=True)
    for entry in ordered:
        head = Text.assemble(
            (f"attempt {entry.attempt}", "bold"),
            " · ",
            _iso(entry.at),
            " · ",
            ("worker " + clean(entry.worker) if entry.worker else "no worker", "dim"),
        )
        ran = _entry_ran(entry)
        if ran is not None:
            head.append(f" · ran {_ran(ran)}", style="dim")
        elif run is not None and run[0] == entry.attempt and not run[2]:
            head.append(f" · ran {_ran(run[1])}", style="dim")
        parts.append(head)
        parts.append(inert(entry.error, style="bold", multiline=True))
        if entry.traceback:
            trace = entry.traceback.rstrip()
            if trace in shown:
                parts.append(Text(f"traceback same as attempt {shown[trace]}", style="dim italic"))
            else:
                shown[trace] = entry.attempt
                parts.append(inert(trace, style="dim", multiline=True))
        parts.append(Text(""))
    return Group(*parts)


def _payload(payload: Any) -> Content:
    # Textual's highlighter follows the app theme; it builds from the text, never markup.
    return highlight(payload_json(payload), language="json")


class DetailScreen(Screen[None]):
    """Loads the row through the app's connection; acts through the app's confirmed actions."""

    CSS_PATH = "detail.tcss"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "back", "Back", id="detail.back"),
        Binding("c", "cancel_job", "Cancel job", id="detail.cancel"),
        Binding("r", "run_now", "Run now", id="detail.run_now"),
        Binding("r", "requeue", "Requeue", id="detail.requeue"),
        Binding("a", "run_again", "Run again", id="detail.run_again"),
        Binding("d", "delete", "Delete", id="detail.delete"),
        Binding("o", "open_link", "Open linked", id="detail.open"),
        Binding("y", "copy(False)", "Copy", id="detail.copy"),
        Binding("Y", "copy(True)", "Save to file", show=False, id="detail.save"),
        Binding("j", "scroll(1)", "Down", show=False, id="detail.down"),
        Binding("k", "scroll(-1)", "Up", show=False, id="detail.up"),
    ]

    def __init__(self, what: str, row_id: int) -> None:
        super().__init__()
        self.what = what  # "job" or "dead"
        self.row_id = row_id
        self.row: JobRow | DeadLetterRow | None = None
        self.now: datetime | None = None  # the server's clock when the row was read
        self.moved_to: int | None = None  # a dead letter gone from dead letters: its job's id
        self.moved_state: str | None = None
        self.rerun_of: int | None = None
        self.reruns: list[int] = []
        self.down: str | None = None  # why the last load failed (the database is unreachable)
        self.loads = 0  # reads completed (the screen reloads every refresh interval)
        self._shown: dict[str, object] = {}  # what each section shows, to skip redraws

    @property
    def console(self) -> Host:
        return host(self.app)

    def compose(self) -> ComposeResult:
        yield StatusBar(id="detail-status")
        with VerticalScroll(id="detail-scroll") as scroll:
            scroll.border_title = f"{'job' if self.what == 'job' else 'dead letter'} #{self.row_id}"
            yield Static(Text("loading…", style="dim"), id="detail-head")
            if self.what == "job":
                yield WhyView(id="detail-why", classes="detail-section")
            yield Static("", id="detail-payload", classes="detail-section")
            yield Static("", id="detail-errors", classes="detail-section")
        yield ConsoleFooter()

    def on_mount(self) -> None:
        self.query_one("#detail-payload").border_title = "payload"
        self.query_one("#detail-errors").border_title = "errors"
        if self.what == "job":
            self.query_one("#detail-why").border_title = "why isn't it running?"
        self.query_one("#detail-scroll").focus()
        self.mirror_status()
        self.set_interval(1.0, self.mirror_status)
        # The app does not poll while this screen is open: the screen reads its row again
        # every refresh interval (poll, render, then schedule the next), so what it says
        # stays current and DB DOWN stays true.
        self.reload()

    # --- the status line -----------------------------------------------------------------

    def mirror_status(self) -> None:
        """Show the tabs' status line here too (the app draws it on its main screen only);
        DB DOWN is added when this screen's own read found the database unreachable."""
        try:
            source = self.app.query_one("#status", StatusBar)  # the app's default screen
            parts = [source.query_one(f"#status-{part}", Static).content for part in PARTS]
            mine = self.query_one("#detail-status", StatusBar)
        except NoMatches:
            return  # the app is starting or closing
        texts = [p if isinstance(p, Text) else Text(str(p)) for p in parts]
        if self.down is not None and "DB DOWN" not in texts[2].plain:
            texts[2] = Text.assemble(texts[2], "  │ ", ("DB DOWN", "bold reverse"))
        mine.show(*texts)

    def _next_read(self) -> None:
        """Schedule the next read: one refresh interval after this one was drawn."""
        console = self.console
        if console.refresh_paused:
            self.set_timer(PAUSED_RECHECK_S, self._next_read)
        else:
            self.set_timer(max(0.2, console.refresh_s), self.reload)

    # --- what is offered -----------------------------------------------------------------

    def on_key(self, event: events.Key) -> None:
        refusal = read_only_refusal(self, event.key, WRITES)
        if refusal is not None:
            self.app.notify(refusal, severity="warning", timeout=6, markup=False)

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action in WRITES and self.console.read_only:
            return False
        row = self.row
        if action == "cancel_job" or action == "run_now":
            if not isinstance(row, JobRow) or self.now is None:
                return False
            return (CANCEL if action == "cancel_job" else RUN_NOW) in job_actions(row, self.now)
        if action == "run_again":
            return isinstance(row, JobRow) and can_rerun(row.state)
        if action in ("requeue", "delete"):
            return isinstance(row, DeadLetterRow)
        if action == "open_link":
            return self.link_target() is not None
        if action == "copy":
            return row is not None
        return True

    def link_target(self) -> int | None:
        """The job `o` opens: the one a dead letter became, the newest rerun, or the original."""
        if self.moved_to is not None:
            return self.moved_to
        if self.reruns:
            return self.reruns[0]
        return self.rerun_of

    def palette_entries(self) -> list[PaletteEntry]:
        """The palette while this screen is open: the actions offered here, by name."""
        names = [
            ("cancel_job", "Cancel this job", "asks first"),
            ("run_now", "Run this job now", "make it due; asks first"),
            ("run_again", "Run this job again", "a new job linked to this one; asks first"),
            ("requeue", "Requeue this dead letter", "asks first"),
            ("delete", "Delete this dead letter", "asks first; cannot be undone"),
            ("copy", "Copy id, payload or traceback", "to the clipboard (OSC 52)"),
        ]
        out: list[PaletteEntry] = []
        for action, title, help_ in names:
            if self.check_action(action, ()):
                out.append((title, help_, self._runner(action)))
        if self.check_action("copy", ()):
            out.append(("Save id, payload or traceback to a file", "Y", self._runner("save")))
        target = self.link_target()
        if target is not None:
            out.append((f"Open job #{target}", "o", self.action_open_link))
        return out

    def _runner(self, action: str) -> Any:
        if action in ("copy", "save"):
            return lambda: self.action_copy(action == "save")
        return getattr(self, f"action_{action}")

    # --- loading and drawing -------------------------------------------------------------

    @work(exclusive=True, group="detail")
    async def reload(self) -> None:
        link = self.console.link
        answer: why.WhyAnswer | None = None
        try:
            if self.what == "job":
                row: JobRow | DeadLetterRow | None = await link.run(browse.get_job, self.row_id)
                if row is not None:
                    self.rerun_of, self.reruns = await link.run(ops.rerun_links, self.row_id)
                    answer = await link.run(why.explain, self.row_id)
            else:
                row = await link.run(browse.get_dead, self.row_id)
                if row is None:  # requeued (a job of the same id now) or deleted
                    job = await link.run(browse.get_job, self.row_id)
                    self.moved_to = None if job is None else job.id
                    self.moved_state = None if job is None else job.state
            now = await link.run(server_now)
        except LinkDown as exc:
            self.down = exc.message
            self.console.note_read(exc.message)
            self.mirror_status()
            if self.row is None:
                self._put(
                    "#detail-head", Text(f"database unreachable: {exc.message}", style="bold")
                )
            self._next_read()
            return
        self.down = None
        changed = row != self.row
        self.row, self.now = row, now
        self.console.note_read(None)
        self.mirror_status()
        self._render_row()
        if answer is not None:
            self.query_one(WhyView).show(answer)
        if changed:
            self.refresh_bindings()
        self.loads += 1
        self._next_read()

    def _put(self, selector: str, content: RenderableType, key: object = None) -> None:
        """Update a section only when what it shows changed (`key`, or the Text itself)."""
        widget = self.query_one(selector, Static)
        if isinstance(content, Text) and key is None:
            if same(widget.content, content):
                return
        elif key is not None:
            if self._shown.get(selector) == key:
                return
            self._shown[selector] = key
        widget.update(content)

    def _render_row(self) -> None:
        row, now = self.row, self.now
        sections = self.query(".detail-section")
        if row is None or now is None:
            self._put("#detail-head", self._gone())
            sections.set(display=False)
            return
        sections.set(display=True)
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
        run = last_run(row, now)
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
        if run is not None:
            took = exact_age(run[1]) if run[2] else _ran(run[1])
            verb = "running for" if run[2] else "ran"
            lines.append(Text.assemble(("this run ", "dim"), f"attempt {run[0]} {verb} {took}"))
        lines += self._links()
        self._put("#detail-head", Text("\n").join(lines))
        self._put("#detail-payload", _payload(row.payload), payload_json(row.payload))
        errors = self.query_one("#detail-errors", Static)
        title = f"errors ({len(row.errors)})"
        if errors.border_title != title:
            errors.border_title = title
        finished_run = run if run is not None and not run[2] else None
        self._put(
            "#detail-errors",
            _errors(row.errors, row.last_error, run),
            (repr(row.errors), row.last_error, finished_run),
        )

    def _gone(self) -> Text:
        """What the screen says once its row is gone, and where it went if we can tell."""
        if self.what == "job":
            return Text(f"Job #{self.row_id} is no longer in jobs (pruned?).", style="bold")
        if self.moved_to is None:
            return Text(f"Dead letter #{self.row_id} is gone (deleted).", style="bold")
        return Text.assemble(
            (f"Dead letter #{self.row_id} was requeued", "bold"),
            f": it is now job #{self.moved_to} ({clean(self.moved_state or '')}).\n",
            ("o", "bold reverse"),
            f" open job #{self.moved_to}",
        )

    def _links(self) -> list[Text]:
        out = []
        if self.rerun_of is not None:
            out.append(Text.assemble(("rerun of ", "dim"), f"job #{self.rerun_of}"))
        if self.reruns:
            shown = ", ".join(f"#{i}" for i in self.reruns[:5])
            more = " …" if len(self.reruns) > 5 else ""
            out.append(Text.assemble(("run again as ", "dim"), f"job {shown}{more}"))
        target = self.link_target()
        if target is not None:
            out.append(Text.assemble(("o", "bold reverse"), f" open job #{target}"))
        return out

    # --- actions -------------------------------------------------------------------------

    def action_back(self) -> None:
        self.dismiss(None)

    def action_scroll(self, lines: int) -> None:
        scroll = self.query_one("#detail-scroll", VerticalScroll)
        scroll.scroll_relative(y=lines, animate=False)

    def _ask(self, spec: ActionSpec) -> None:
        self.post_message(WriteAsked(spec, [self.row_id], None, after=self.reload))

    def action_cancel_job(self) -> None:
        self._ask(CANCEL)

    def action_run_now(self) -> None:
        self._ask(RUN_NOW)

    def action_requeue(self) -> None:
        self._ask(REQUEUE)

    def action_delete(self) -> None:
        self._ask(DELETE)

    def action_run_again(self) -> None:
        self._ask(RERUN)

    def action_open_link(self) -> None:
        target = self.link_target()
        if target is not None:
            self.app.switch_screen(DetailScreen("job", target))

    def action_copy(self, to_file: bool) -> None:
        if self.row is not None:
            CopyFlow(self.app).ask(clips_of(self.row), to_file=to_file)
