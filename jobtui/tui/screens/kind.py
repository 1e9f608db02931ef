"""The kind screen (Enter on a kind in the Overview or Workers tab): one kind in depth.

Charts over the last hour or day (`t` toggles) with a time axis: its unfinished depth,
done and failed per minute, p50 and p95 run time; its top error signatures (dead letters, and
jobs waiting to retry); its settings (the handler's max attempts, timeout and back-off, pause,
limits, the workers handling it). Severity reads without colour: ✗ failures, ⏸ paused,
! nobody handles it, in bold or reverse. Data comes from `jobtui.kindinfo.load`, re-read every
refresh interval (at least every 5 s: the day's figures read more rows), and a region is
repainted only when its text changed.

Opened on a kind (or span), the screen shows its figures as soon as they are read, except the
two that read the kind's unfinished rows (its jobs waiting to retry, by error, and the rows' own
max attempts: their cost grows with the kind's backlog), which say "loading…" until their own
read, right after, replaces them (sent before the first figures are drawn, so the server reads
the rows meanwhile: kindinfo.load_then_rows). A refresh of the kind and span shown reads both
and repaints once, so figures of an earlier read are never shown beside a newer one's. Opened
on another kind (the app keeps one screen), each region is blanked at its height, so the figures
fill the room they will take and the screen is laid out once to draw them, not twice (emptied,
every region grew back; the scrollbar is always there for the same reason: kind.tcss).

A refresh starts only when the last one has landed: a tick during a read is skipped, so reads
slower than the interval still land (each tick used to cancel the read in flight) and never pile
up. A read that fails (the link lost, the statement timeout, a privilege the role lacks) is
said under the title in one line; the last figures stay, and the next refresh tries again.

BINDINGS:
    t        last hour / last day
    j        the kind's jobs (Jobs tab, filtered)
    d        the kind's dead letters (Dead letters tab, filtered)
    P        pause or resume the kind
    L        the kind's limits
    esc      back
"""

from __future__ import annotations

from datetime import datetime
from typing import ClassVar

import psycopg
from rich.text import Text
from textual import events, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.message import Message
from textual.screen import Screen
from textual.timer import Timer
from textual.widgets import Static
from textual.worker import Worker

from jobtui import kindinfo
from jobtui.config import format_duration
from jobtui.db import describe_error
from jobtui.inert import clean, inert, one_line
from jobtui.kindinfo import ErrorGroup, KindInfo
from jobtui.metrics import rate_text
from jobtui.tui.connection import LinkDown, RefreshDropped
from jobtui.tui.host import Host, LimitsAsked, PauseAsked, host, read_only_refusal
from jobtui.tui.screens.kind_chart import SCALE_W, bars, ms_text, time_axis
from jobtui.tui.texts import drain_text
from jobtui.tui.widgets.footer import ConsoleFooter

MIN_RELOAD_S = 5.0
# What a read of the kind may raise and the screen says (as the Jobs tab's reads): anything else
# is a bug, and shows as one.
READ_FAILURES = (LinkDown, RefreshDropped, psycopg.Error)
SPAN_TITLES = {"hour": "last hour, per minute", "day": "last day, per 20 minutes"}


# The screen's regions, top to bottom.
REGIONS = ("#kind-head", "#kind-charts", "#kind-errors", "#kind-settings")


class KindScreen(Screen[None]):
    """One kind: charts, errors, settings; jumps to its jobs and dead letters."""

    CSS_PATH = "kind.tcss"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("t", "toggle_span", "Hour/day", id="kind.span"),
        Binding("j", "jobs", "Jobs", id="kind.jobs"),
        Binding("d", "dead", "Dead letters", id="kind.dead"),
        Binding("P", "toggle_pause", "Pause/resume kind", id="kind.pause"),
        Binding("L", "limits", "Limits", id="kind.limits"),
        Binding("escape", "back", "Back", id="kind.back"),
    ]

    class JobsAsked(Message):
        """Show the Jobs tab filtered by `kind`."""

        def __init__(self, kind: str) -> None:
            super().__init__()
            self.kind = kind

    class DeadAsked(Message):
        """Show the Dead letters tab filtered by `kind`."""

        def __init__(self, kind: str) -> None:
            super().__init__()
            self.kind = kind

    def __init__(self, kind: str, span: str = "hour") -> None:
        super().__init__()
        self.kind = kind
        self.span = span
        self.info: KindInfo | None = None  # complete: the row figures read too
        self._drawn: KindInfo | None = None  # what the screen shows (its row figures maybe not)
        self._timer: Timer | None = None
        self._reading: Worker[None] | None = None  # the read in flight (or the last one)
        self._problem: str | None = None  # why the last read failed, said under the title

    @property
    def console(self) -> Host:
        return host(self.app)

    def compose(self) -> ComposeResult:
        yield Static(Text("loading…", style="dim"), id="kind-head")
        with VerticalScroll(id="kind-scroll"):
            yield Static("", id="kind-charts")
            yield Static("", id="kind-errors", classes="kind-section")
            yield Static("", id="kind-settings", classes="kind-section")
        yield ConsoleFooter()

    def on_mount(self) -> None:
        self.query_one("#kind-errors").border_title = "errors"
        self.query_one("#kind-settings").border_title = "settings"
        every = max(MIN_RELOAD_S, self.console.config.refresh_s)
        self._timer = self.set_interval(every, self._tick, pause=True)

    def _tick(self) -> None:
        """A refresh, unless a read is still running: that one lands first (starting another
        would cancel it, and reads slower than the interval would then never land)."""
        if self._reading is None or self._reading.is_finished:
            self.reload()

    def on_screen_resume(self) -> None:
        """Shown (the first time, or again for another kind): read the kind now, and every
        few seconds while the screen is on top."""
        self.query_one("#kind-scroll").focus()
        if self._timer is not None:
            self._timer.resume()
        self.reload()

    def on_screen_suspend(self) -> None:
        if self._timer is not None:
            self._timer.pause()

    def show_kind(self, kind: str) -> None:
        """Show `kind` over the last hour from now on, as a new screen would (the app keeps one
        kind screen): figures of another kind or span are cleared, so they are never shown
        under this kind's name."""
        if (kind, "hour") == (self.kind, self.span):
            return  # what it shows is of this kind and span: kept until the read replaces it
        self.kind, self.span, self.info, self._drawn = kind, "hour", None, None
        self._problem = None
        # Each region keeps the rows it takes on screen, blank: the figures read next take the
        # same room (a chart's height is fixed), so drawing them moves nothing. Emptied, every
        # region grew back when they came, and Textual laid the screen out twice over to draw
        # them. The height is pinned (rows drawn, wrapped lines too) until figures are shown:
        # a failed read or `t` meanwhile says so in the same room.
        for selector in REGIONS:
            widget = self.query_one(selector, Static)
            widget.styles.min_height = widget.outer_size.height or None
        self._set("#kind-head", title_line(kind, self.span, loading=True))
        for selector in REGIONS[1:]:
            self._set(selector, Text(""))
        self.query_one("#kind-scroll").scroll_home(animate=False)

    def on_key(self, event: events.Key) -> None:
        refusal = read_only_refusal(self, event.key, ("toggle_pause", "limits"))
        if refusal is not None:
            self.app.notify(refusal, severity="warning", timeout=6, markup=False)

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        return not (action in ("toggle_pause", "limits") and self.console.read_only)

    def reload(self) -> None:
        """Read the kind and span shown now, instead of any read in flight."""
        self._reading = self._read()

    @work(exclusive=True, group="kind")
    async def _read(self) -> None:
        kind, span = self.kind, self.span

        def first(info: KindInfo) -> None:
            """The first read's figures, shown once the row read is on its way (the server
            reads the rows while they are drawn), unless the screen shows them already."""
            if (kind, span) != (self.kind, self.span):
                return  # read for the kind or span shown before (the screen is kept)
            if self.info is None or (self.info.kind, self.info.span) != (kind, span):
                self._show(info)  # opened, or another span: at once, row figures loading

        try:
            # A refresh, bounded as the tabs' are: behind a transaction pooler the session has
            # no statement_timeout, and an unbounded read (a lock on `jobs`) held the link.
            async with self.console.link.refresh():
                info = await self.console.link.run(kindinfo.load_then_rows, kind, span, first)
        except READ_FAILURES as exc:
            if (kind, span) == (self.kind, self.span):
                self._failed(exc)
            return
        if (kind, span) != (self.kind, self.span):
            return
        self._problem = None
        self.info = info
        self._show(self.info)
        self.refresh_bindings()

    def _failed(self, exc: Exception) -> None:
        """Say why the read failed under the title, the last figures kept below it."""
        if isinstance(exc, LinkDown):
            text = f"database unreachable: {exc.message}"
        else:
            text = describe_error(exc)  # the poll's and the write flow's words for it
        self._problem = clean(text)
        if self._drawn is not None:
            self._show(self._drawn)
        else:
            title = title_line(self.kind, self.span, loading=True)
            self._set("#kind-head", self._with_problem(title))

    def _with_problem(self, text: Text) -> Text:
        if self._problem is None:
            return text
        return Text("\n").join([text, Text(f"✗ {self._problem}", style="bold reverse")])

    def _show(self, info: KindInfo) -> None:
        self._drawn = info
        for selector in REGIONS:  # figures now: each region as tall as they are
            self.query_one(selector, Static).styles.min_height = None
        self._set("#kind-head", self._with_problem(head(info)))
        width = self.query_one("#kind-scroll").size.width - 1  # less the scrollbar
        self._set("#kind-charts", charts(info, width))
        self._set("#kind-errors", errors(info))
        self._set("#kind-settings", settings(info))

    def on_resize(self) -> None:
        if self._drawn is not None:
            self._show(self._drawn)

    def _set(self, selector: str, text: Text) -> None:
        """Repaint only what changed: an idle kind screen sends nothing to the terminal."""
        widget = self.query_one(selector, Static)
        if widget.content != text:
            widget.update(text)

    # --- keys -----------------------------------------------------------------------------

    def action_toggle_span(self) -> None:
        """The other span. Said at once (its read takes a moment on a large history): the
        title names the new span with "loading…" and the charts make way, until it comes."""
        self.span = "day" if self.span == "hour" else "hour"
        title = title_line(self.kind, self.span, loading=True)
        if self.info is not None:
            lines = head(self.info).split("\n")
            title = Text("\n").join([title, *lines[1:]])
        self._set("#kind-head", title)
        self._set("#kind-charts", Text(f"loading the {SPAN_TITLES[self.span]}…", style="dim"))
        self.reload()

    def action_jobs(self) -> None:
        self.post_message(self.JobsAsked(self.kind))

    def action_dead(self) -> None:
        self.post_message(self.DeadAsked(self.kind))

    def action_toggle_pause(self) -> None:
        paused = self._drawn is not None and self._drawn.paused_by is not None
        self.post_message(PauseAsked(self.kind, paused))

    def action_limits(self) -> None:
        self.post_message(LimitsAsked(self.kind))

    def action_back(self) -> None:
        self.dismiss(None)


# --- what the screen shows, as text ------------------------------------------------------


def _clock(at: datetime | None) -> str:
    return at.strftime("%Y-%m-%d %H:%M") if at is not None else "–"


def title_line(kind: str, span: str, *, loading: bool = False) -> Text:
    """`kind X   last hour, per minute (t: day)`, and `loading…` while its figures are read."""
    line = Text.assemble(("kind ", "dim"), inert(kind, style="bold"))
    line.append(f"   {SPAN_TITLES[span]} (t: {'day' if span == 'hour' else 'hour'})", style="dim")
    if loading:
        line.append("  loading…", style="bold")
    return line


def head(info: KindInfo) -> Text:
    """The kind, its state now, and what is wrong, first and in words."""
    line = title_line(info.kind, info.span)
    now = Text.assemble(
        ("now ", "dim"),
        f"{info.unfinished:,} unfinished: {info.ready:,} ready · {info.running:,} running · "
        f"{info.retrying:,} retrying",
    )
    if info.exhausted:
        now.append(f" · {info.exhausted:,} exhausted", style="bold")
    drain = drain_text(info.drain_s, info.not_draining)
    if drain:
        now.append(" · drain ")
        now.append(drain, style="bold" if info.not_draining else "")
    alarms: list[Text] = []
    if info.paused_by is not None:
        alarms.append(
            Text.assemble(
                ("⏸ PAUSED", "bold reverse"),
                " by ",
                inert(info.paused_by),
                f" since {_clock(info.paused_at)}",
            )
        )
    if not info.live_workers:
        alarms.append(Text("! no live worker handles this kind", style="bold reverse"))
    if info.dead:
        alarms.append(Text(f"✗ {info.dead:,} dead letters", style="bold"))
    if info.failed:
        alarms.append(Text(f"✗ {info.failed:,} failed attempts in the {info.span}", style="bold"))
    lines = [line, now]
    if alarms:
        lines.append(Text("  ").join(alarms))
    else:
        lines.append(Text("✓ no failures, not paused, handled", style="dim"))
    return Text("\n").join(lines)


def charts(info: KindInfo, width: int = 80) -> Text:
    """Depth, done, failed, p50, p95 over the span, each with its scale; a time axis under
    each group so the times stay near the bars they label. Narrower than the span (below 80
    columns), the charts show its most recent part, and the title says so."""
    room = max(12, width - SCALE_W - 2)
    b = info.buckets[-room:]
    failing = any(x.failed_per_min for x in b)
    parts: list[Text] = []

    def chart(title: Text, rows: list[Text]) -> None:
        parts.append(title)
        parts.extend(rows)

    axis = time_axis([x.start for x in b])
    if len(b) < len(info.buckets):
        minutes = len(b) * b[0].minutes
        parts.append(
            Text(f"(the last {format_duration(minutes * 60)} fit this width)", style="dim")
        )
    chart(
        Text("unfinished jobs (ready, scheduled, running) at each point", style="bold"),
        bars([x.depth for x in b]),
    )
    chart(Text("done per minute", style="bold"), bars([x.done_per_min for x in b]))
    parts.append(axis)
    title = Text.assemble(
        ("✗ " if failing else "", "bold"),
        ("failed attempts per minute", "bold reverse" if failing else "bold"),
    )
    chart(title, bars([x.failed_per_min for x in b], style="bold" if failing else ""))
    chart(Text("p50 run time", style="bold"), bars([x.p50_ms for x in b], label=ms_text))
    chart(Text("p95 run time", style="bold"), bars([x.p95_ms for x in b], label=ms_text))
    parts.append(axis)
    return Text("\n").join(parts)


def _group_lines(groups: list[ErrorGroup], style: str, when: str) -> list[Text]:
    return [
        Text.assemble(
            (f"{g.count:>6,} ", style),
            (f"{when} {g.last_at.strftime('%H:%M') if g.last_at else '–'}  ", "dim"),
            inert(one_line(g.text, 300)),
        )
        for g in groups
    ]


def errors(info: KindInfo) -> Text:
    """Top dead-letter signatures, then the errors of jobs waiting to retry."""
    lines: list[Text] = []
    if info.dead_errors:
        lines.append(
            Text(f"✗ dead letters by signature ({info.dead:,} in all; d shows them)", style="bold")
        )
        lines += _group_lines(info.dead_errors, "bold", "last died")
    else:
        lines.append(Text("no dead letters", style="dim"))
    if not info.rows_read:
        lines.append(Text("jobs waiting to retry, by error: loading…", style="dim"))
    elif info.retry_errors:
        n = info.retry_jobs  # of the groups' own read (info.retrying is of the first one)
        jobs = f"{n:,} job{'' if n == 1 else 's'}"
        lines.append(Text(f"! waiting to retry, by error ({jobs})", style="bold"))
        lines += _group_lines(info.retry_errors, "", "next run")
    else:
        lines.append(Text("no job waiting to retry", style="dim"))
    return Text("\n").join(lines)


def _limits(info: KindInfo) -> str:
    lim = info.limits
    if lim is None:
        return "none"
    parts = []
    if lim.concurrency:
        parts.append(f"≤{lim.concurrency} running")
    if lim.per_worker:
        parts.append(f"≤{lim.per_worker} per worker")
    rate = rate_text(lim.rate, lim.period_s)
    if rate:
        parts.append(rate)
    source = f"override by {lim.overridden_by}" if lim.overridden_by else "declared on the handler"
    return f"{', '.join(parts)} ({source})"


def settings(info: KindInfo) -> Text:
    """Max attempts, timeout, back-off, pause, limits and the workers handling the kind."""
    h = info.handler
    rows_max = info.row_max_attempts
    rows_text = (
        "unfinished rows: loading…"
        if not info.rows_read
        else ""
        if rows_max is None
        else f"unfinished rows say {rows_max[0]}"
        + (f"–{rows_max[1]}" if rows_max[1] != rows_max[0] else "")
    )
    if h is None:
        attempts = "no worker has recorded this kind's handler" + (
            f"; {rows_text}" if rows_text else ""
        )
        timeout = backoff = declared = "–"
    else:
        if h.max_attempts is not None:
            attempts = f"{h.max_attempts} (the handler's; it overrides the rows')"
        else:
            attempts = "each job row's own" + (f" ({rows_text})" if rows_text else "")
        timeout = format_duration(h.timeout_s) if h.timeout_s is not None else "none"
        backoff = (
            f"{format_duration(h.backoff_base_s)} doubling, at most "
            f"{format_duration(h.backoff_cap_s)}"
        )
        declared = f"{h.declared_by} at {_clock(h.declared_at)}"
    live = info.live_workers
    stale = len(info.workers) - len(live)
    if live:
        names = ", ".join(f"{w.id} ({w.control or f'{w.running}/{w.concurrency}'})" for w in live)
        workers = Text(f"{len(live)} live: ") + inert(names)
    else:
        workers = Text("! none live", style="bold reverse")
    if stale:
        workers.append(f"; {stale} stale", style="bold")
    paused = (
        Text.assemble(
            ("⏸ yes", "bold reverse"),
            " by ",
            inert(info.paused_by or ""),
            f" since {_clock(info.paused_at)}",
        )
        if info.paused_by is not None
        else Text("no")
    )
    rows = [
        ("max attempts", Text(attempts)),
        ("timeout", Text(timeout)),
        ("retry back-off", Text(backoff)),
        ("recorded by", inert(declared)),
        ("paused", paused),
        ("limits", inert(_limits(info))),
        ("handled by", workers),
    ]
    return Text("\n").join(Text.assemble((f"{label:<15}", "dim"), value) for label, value in rows)
