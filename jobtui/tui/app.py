"""The operations console: five tabs over one database connection, refreshed without stacking.

BINDINGS (app-wide):
    1 2 3 4 5 6 Overview, Jobs, Dead letters, Workers, Schedules, Database
    p           pause / resume live refresh
    + / -       refresh faster / slower
    ?           help (every binding, with the keys in effect)
    ctrl+p      command palette (actions valid for the current selection)
    esc         back
    q           quit

The refresh loop is poll → render → schedule the next poll; it never starts while one runs
and skips the database while a modal or the detail screen is open. Python's cycle collector
walks the whole heap only while no key is waited for (`Collector`, told of every key here).
Panes and screens ask for writes, exports and navigation with the messages of
`jobtui.tui.host`; every write goes through `jobtui.ops` in the one `WriteController`, after a
confirmation that names the count, and its outcome comes back as a message handled below
(`on_write_controller_*`).

Enter on a kind opens its screen (jobtui.tui.screens.kind), whose keys lead to the kind's jobs
or dead letters; the Workers tab's quiet/resume/stop (`WorkerControlAsked`) is confirmed here
and run through jobtui.worker_control. `DeepLink` (from `--tab`, `--filter`, `--job`, checked by
`deep_link` before the console starts) says which tab, filter and detail view it opens on.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any, ClassVar

from psycopg import errors as pgerrors
from rich.text import Text
from textual import events, work
from textual.app import App, ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.css.query import NoMatches
from textual.driver import Driver
from textual.timer import Timer
from textual.widgets import TabbedContent, TabPane, Tabs

from jobtui import browse, ops
from jobtui.config import format_duration
from jobtui.console_config import ConsoleConfig
from jobtui.db import describe_error
from jobtui.inert import clean, inert
from jobtui.models import PENDING_STATES, DeadFilter, JobFilter, ReplicaInfo
from jobtui.targets import Target, badge_style, redact  # issue 28: a target's console
from jobtui.tui.collector import Collector
from jobtui.tui.commands import ConsoleCommands
from jobtui.tui.connection import Link, LinkDown, RefreshDropped
from jobtui.tui.filters import FilterError, parse_dead_filter, parse_job_filter
from jobtui.tui.host import (
    DetailAsked,
    ExportAsked,
    Host,
    KindChosen,
    LimitsAsked,
    PaletteEntry,
    PauseAsked,
    ScheduleAsked,
    WriteAsked,
)
from jobtui.tui.keys import HELP_NOTES, HELP_TEXT, key_display
from jobtui.tui.panes.database import DatabasePane
from jobtui.tui.panes.dead import DeadPane
from jobtui.tui.panes.jobs import JobsPane
from jobtui.tui.panes.kinds import KindsPane
from jobtui.tui.panes.overview import OverviewPane
from jobtui.tui.panes.pane import Pane
from jobtui.tui.panes.schedules import SchedulesPane
from jobtui.tui.panes.workers import WorkersPane
from jobtui.tui.screens.confirm import Choice, ConfirmScreen
from jobtui.tui.screens.detail import DetailScreen
from jobtui.tui.screens.filter_prompt import FilterScreen
from jobtui.tui.screens.help import HelpScreen, Section
from jobtui.tui.screens.kind import KindScreen
from jobtui.tui.server import replica_info
from jobtui.tui.terminal import quiet_driver
from jobtui.tui.widgets.banners import DEFAULT_DANGER_PATTERN, Banners, env_is_dangerous, lag_text
from jobtui.tui.widgets.footer import ConsoleFooter
from jobtui.tui.widgets.keyed_table import KeyedTable
from jobtui.tui.widgets.status import StatusBar
from jobtui.tui.worker_actions import WORKER_ACTIONS, WorkerControlAsked
from jobtui.tui.write_controller import FAILURES, WriteController
from jobtui.worker_control import control_worker

TABS = ("overview", "jobs", "dead", "workers", "schedules", "database")
TAB_TITLES = {
    "overview": "Overview",
    "jobs": "Jobs",
    "dead": "Dead letters",
    "workers": "Workers",
    "schedules": "Schedules",
    "database": "Database",
}
REFRESH_STEPS = (0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0)
# A tab key draws the tab once its refresh has shown the new rows, so the tab is not drawn
# first with what it showed last time and then again (each a full layout and drawing): the
# screen is held until then, at most this long (a slower read shows the tab first, as before).
HOLD_DRAWING_S = 0.15
BLOCKED_RECHECK_S = 0.5
SCREEN_CSS = (
    "screens/confirm.tcss",
    "screens/detail.tcss",
    "screens/export_prompt.tcss",
    "screens/kind.tcss",
)
# The tabs with a `/` filter, and how their filter text is read.
FILTERED_TABS: dict[str, Callable[[str], JobFilter | DeadFilter]] = {
    "jobs": parse_job_filter,
    "dead": parse_dead_filter,
}


@dataclass(frozen=True)
class DeepLink:
    """Where the console opens (`jobtui --tab dead --filter 'kind:x'`, `jobtui --job 123`):
    a tab, that tab's filter, and a detail view (`what` "job" or "dead", and the id) on top."""

    tab: str = "overview"
    flt: JobFilter | DeadFilter | None = None
    detail: tuple[str, int] | None = None


def deep_link(tab: str | None, filter_text: str | None) -> DeepLink:
    """Check `--tab` and `--filter` before the console starts; ValueError says what is wrong
    in one line. A filter without a tab applies to the Jobs tab."""
    name = (tab or ("jobs" if filter_text is not None else "overview")).strip().lower()
    if name not in TABS:
        raise ValueError(f"unknown tab {tab!r}: use one of {', '.join(TABS)}")
    if filter_text is None:
        return DeepLink(name)
    parse = FILTERED_TABS.get(name)
    if parse is None:
        raise ValueError(
            f"the {TAB_TITLES[name]} tab has no filter; --filter works with "
            f"--tab {' or --tab '.join(FILTERED_TABS)}"
        )
    try:
        return DeepLink(name, parse(filter_text))
    except FilterError as exc:
        raise ValueError(f"--filter: {exc}") from None


def db_time_text(ms: float) -> str:
    """A refresh's database time in steps coarse enough not to change on every refresh: the
    header showed `<10`, `10`, `20`, `30 ms` by turns under `jobtui demo`, a redraw of its line
    every refresh for a difference nobody acts on. A slow database (100 ms on) still shows."""
    if ms < 50:
        return "<50 ms"
    if ms < 1000:
        return f"{round(ms, -2):.0f} ms"
    return f"{ms / 1000:.1f} s"


SIXTEEN_COLOURS = ("standard", "windows")  # rich's names for 16- and 8-colour terminals
ANSI_THEME = "ansi-dark"


class JobtuiApp(App[int]):
    """The console. `config` carries refresh, thresholds, read-only and the keymap."""

    # The screens' own files too: Textual reads a screen's CSS_PATH when it is first pushed,
    # then parses the whole stylesheet again and restyles every widget of the app (~50 ms
    # of the first Enter on a job at 120x40). Read here, a first push finds them read.
    CSS_PATH = [  # noqa: RUF012
        "app.tcss",
        "panes/database.tcss",
        "widgets/alarms.tcss",
        *SCREEN_CSS,
    ]
    TITLE = "jobtui"
    COMMANDS = App.COMMANDS | {ConsoleCommands}
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("q", "quit", "Quit", id="quit"),
        Binding("question_mark", "help", "Help", id="help"),
        Binding("1", "tab('overview')", "Overview", show=False, id="tab.overview"),
        Binding("2", "tab('jobs')", "Jobs", show=False, id="tab.jobs"),
        Binding("3", "tab('dead')", "Dead", show=False, id="tab.dead"),
        Binding("4", "tab('workers')", "Workers", show=False, id="tab.workers"),
        Binding("5", "tab('schedules')", "Schedules", show=False, id="tab.schedules"),
        Binding("6", "tab('database')", "Database", show=False, id="tab.database"),
        Binding("p", "toggle_refresh", "Refresh ⏸", id="refresh.pause"),
        Binding("plus,equals_sign", "refresh_step(-1)", "Faster", show=False, id="refresh.faster"),
        Binding("minus", "refresh_step(1)", "Slower", show=False, id="refresh.slower"),
        Binding("escape", "go_back", "Back", show=False, id="back"),
        # --- targets (issue 28): only in a target's console (see check_action) ---
        Binding("0", "leave('targets')", "Targets", id="targets.back"),
        Binding(
            "exclamation_mark", "leave('next')", "Next in trouble", show=False, id="targets.next"
        ),
        # --- end targets ---
    ]

    def __init__(
        self,
        dsn: str,
        schema: str,
        *,
        config: ConsoleConfig,
        env: str | None = None,
        env_danger_pattern: str = DEFAULT_DANGER_PATTERN,
        opening: DeepLink | None = None,
        actor: ops.Actor | None = None,
        read_only_note: str = "--read-only or config",
        target: Target | None = None,
    ) -> None:
        super().__init__()
        # --- targets (issue 28): the target on screen names itself in the header, the
        # environment banner and every confirmation; `leave` says where to go on exit ---
        self.target = target
        self.leave: str | None = None
        if target is not None:  # the banner names the target, red when either says danger
            given = env.strip() if env and env.strip() else None
            danger = target.danger or (
                given is not None and env_is_dangerous(given, env_danger_pattern)
            )
            env = target.title if given is None else f"{target.title} · {given}"
            env_danger_pattern = "*" if danger else ""
        # --- end targets ---
        if self.console.color_system in SIXTEEN_COLOURS and not self.no_color:
            # The theme's hex colours fold onto the 16 ANSI ones badly: orange (warning,
            # accent) and crimson (error) both become bright red, so WARN, CRIT, the
            # footer's keys and the cursor row's alarms read alike. The terminal's own
            # colours keep red, yellow and the cursor apart.
            self.theme = ANSI_THEME
        self.opening = opening or DeepLink()
        self.env = env.strip() if env and env.strip() else None
        self.env_danger = self.env is not None and env_is_dangerous(self.env, env_danger_pattern)
        self.dsn = dsn
        self.schema = schema
        self.config = config
        self.link = Link(dsn, schema)
        self.actor = actor or ops.Actor.current()
        self.read_only_note = read_only_note  # the banner's reason when config.read_only
        self.refresh_s = config.refresh_s
        self.refresh_paused = False
        self.read_only_why: str | None = None  # why the server refuses writes, when it does
        self.replica: ReplicaInfo | None = None  # set on every poll while on a hot standby
        self.updated_at: float | None = None
        self.last_poll_ms: float | None = None
        self.polls = 0
        self.db_error: str | None = None
        self.dropped: str | None = None  # why the last refresh was dropped, while it is so
        self._polling = False
        self._again = False
        self._timer: Timer | None = None
        self._checked_connects = 0
        self._poll_error: str | None = None
        self._held: contextlib.ExitStack | None = None  # see hold_drawing
        self._held_timer: Timer | None = None
        self.writes = WriteController(self, self.link, self.actor, lambda: self.read_only)
        self.collector = Collector()  # full collections while nobody waits (see collector.py)
        self._kind_screen: KindScreen | None = None  # built once, shown for any kind

    # --- layout --------------------------------------------------------------------------

    def compose(self) -> ComposeResult:
        # The status line and every banner stack in one block: none can hide another.
        with Vertical(id="top"):
            yield StatusBar(id="status")
            yield Banners(id="banners")
        with TabbedContent(id="tabs", initial=self.opening.tab):
            with TabPane("1 Overview", id="overview"):
                yield OverviewPane(id="overview-pane")
            with TabPane("2 Jobs", id="jobs"):
                yield JobsPane(id="jobs-pane")
            with TabPane("3 Dead letters", id="dead"):
                yield DeadPane(id="dead-pane")
            with TabPane("4 Workers", id="workers"):
                yield WorkersPane(id="workers-pane")
            with TabPane("5 Schedules", id="schedules"):
                yield SchedulesPane(id="schedules-pane")
            with TabPane("6 Database", id="database"):
                yield DatabasePane(id="database-pane")
        yield ConsoleFooter()

    def get_driver_class(self) -> type[Driver]:
        """The platform's driver, its colour codes sent as changes (jobtui.tui.terminal)."""
        return quiet_driver(super().get_driver_class())

    def on_mount(self) -> None:
        # The tab bar takes no focus: Tab moves between a tab's tables only, and the keys of
        # the tab (r, d, c …) stay in force (digits and the mouse switch tabs).
        for bar in self.query(Tabs):
            bar.can_focus = False
        if self.config.keymap:
            self.set_keymap(self.config.keymap)
        self.query_one(Banners).show_env(self.env, self.env_danger)
        self.set_interval(1.0, self._render_status)
        self.set_interval(self.collector.quiet_s, self.collector.tick)
        self._render_status()
        self._open(self.opening)
        self.active_pane.focus_main()
        self.refresh_now()

    def _open(self, link: DeepLink) -> None:
        """Apply a deep link's filter and open its detail view (the tab is already chosen)."""
        if isinstance(link.flt, JobFilter):
            self.query_one(JobsPane).set_filter(link.flt)
        elif isinstance(link.flt, DeadFilter):
            self.query_one(DeadPane).set_filter(link.flt)
        if link.detail is not None:
            self.open_detail(*link.detail)

    async def on_unmount(self) -> None:
        self._release_drawing()
        self.collector.release()
        await self.link.close()

    @property
    def read_only(self) -> bool:
        return self.config.read_only or self.read_only_why is not None

    @property
    def read_only_reason(self) -> str | None:
        return self.read_only_why or (self.read_only_note if self.config.read_only else None)

    @property
    def active_tab(self) -> str:
        return self.query_one("#tabs", TabbedContent).active or "overview"

    @property
    def active_pane(self) -> Pane:
        return self.query_one(f"#{self.active_tab}-pane", Pane)

    def _db_label(self) -> str:
        """The live connection's user@host:port/database; never guessed from the DSN."""
        return self.link.target or "not connected yet"

    def _render_status(self) -> None:
        if not self.is_running or not self.screen_stack:
            return
        try:
            status = self.query_one("#status", StatusBar)
        except NoMatches:
            return  # called while the app is shutting down
        head: list[Any] = [
            (" jobtui ", "bold reverse"),
            " ",
            *target_badge(self.target),
            inert(self._db_label()),
            (f" schema {clean(self.schema)}", "dim"),
            "  │ ",
        ]
        if self.refresh_paused:
            head.append(("⏸ paused", "bold"))
        else:
            head.append(f"⟳ {format_duration(self.refresh_s) if self.refresh_s >= 1 else '0.5s'}")
        head.append("  │ ")
        age: list[Any] = []
        if self.updated_at is None:
            age.append(("connecting…" if self.db_error is None else "no data yet", "dim"))
        else:
            # A fresh screen says "live" and stays still (a ticking "updated 1s ago" was most
            # of an idle console's output over SSH); the age shows once the data is late.
            seconds = time.time() - self.updated_at
            if self.refresh_paused or seconds > 2 * self.refresh_s + 1:
                age.append((f"updated {format_duration(seconds)} ago", "bold"))
            else:
                age.append("live")
            if self.link.last_db_ms is not None:  # the database's share of the last refresh
                age.append((f" · db {db_time_text(self.link.last_db_ms)}", "dim"))
        tail: list[Any] = []
        if self.dropped is not None:
            tail += ["  │ ", (self.dropped, "bold")]
        if self.db_error is not None:
            tail += ["  │ ", ("DB DOWN", "bold reverse")]
        if self.replica is not None:
            tail += ["  │ ", (f"REPLICA {lag_text(self.replica)}", "bold reverse")]
        if self.read_only:
            tail += ["  │ ", ("READ-ONLY", "bold reverse")]
        status.show(Text.assemble(*head), Text.assemble(*age), Text.assemble(*tail))
        banners = self.query_one(Banners)
        data_age = None if self.updated_at is None else time.time() - self.updated_at
        banners.show_down(self.db_error, self.link.retry_in(), data_age)
        banners.show_mode(self.replica, self.read_only_reason)

    # --- refresh loop --------------------------------------------------------------------

    def refresh_now(self) -> None:
        """Poll as soon as possible; merges with a poll in progress instead of stacking."""
        if self._timer is not None:
            self._timer.stop()
            self._timer = None
        self._start_poll()

    def _start_poll(self) -> None:
        if self._polling:
            self._again = True
            return
        self._polling = True  # set before the worker runs, so nothing can start a second one
        self._poll()

    def hold_drawing(self) -> None:
        """Draw nothing until the next refresh has shown its data, at most HOLD_DRAWING_S."""
        if self._held is not None:
            return
        held = contextlib.ExitStack()
        held.enter_context(self.batch_update())
        self._held = held
        self._held_timer = self.set_timer(HOLD_DRAWING_S, self._release_drawing)

    def _release_drawing(self) -> None:
        held, self._held = self._held, None
        if self._held_timer is not None:
            self._held_timer.stop()
            self._held_timer = None
        if held is not None:
            held.close()

    def _blocked(self) -> bool:
        return self.refresh_paused or len(self.screen_stack) > 1

    def _schedule(self, delay: float) -> None:
        if self._timer is not None:
            self._timer.stop()
        self._timer = self.set_timer(max(0.01, delay), self._start_poll)

    @work(exclusive=True, group="refresh")
    async def _poll(self) -> None:
        if self._blocked():
            self._polling = False
            self._release_drawing()
            if not self.refresh_paused:
                self._schedule(BLOCKED_RECHECK_S)
            return
        try:
            pane = self.active_pane
        except NoMatches:  # the app is closing and its widgets are gone
            self._polling = False
            self._release_drawing()
            return
        started = time.monotonic()
        data: Any = None
        failure: BaseException | None = None
        try:
            # Bounded: a refresh slower than the link's limit is dropped (and said so), never
            # left running under the next one.
            async with self.link.refresh():
                await self._check_server()
                data = await pane.load(self.link)
        except Exception as exc:  # noqa: BLE001 - any failure is one notice; the poll goes on
            failure = exc
        finally:
            self._polling = False
        if not pane.is_attached or not self.is_running:
            self._release_drawing()
            return  # shutting down: the widgets are gone
        self.dropped = str(failure) if isinstance(failure, RefreshDropped) else None
        if isinstance(failure, LinkDown):
            self._set_down(failure.message)
        elif failure is not None:
            message = clean(describe_error(failure))
            if message != self._poll_error:  # once per distinct error, not every refresh
                self.notify(message, severity="error", markup=False, timeout=8)
            self._poll_error = message
        else:
            self._poll_error = None
            self._set_up()
            pane.show(data)
            self.updated_at = time.time()
            self.last_poll_ms = (time.monotonic() - started) * 1000
            self.polls += 1
        self._render_status()
        if pane is self.active_pane:  # not a refresh of the tab left behind
            self._release_drawing()
        if not self.collector.settled:  # start-up is over once this refresh is drawn
            self.call_after_refresh(self.collector.settle)
        if self._again:
            self._again = False
            self._schedule(0)
        elif self.refresh_paused:
            self._timer = None
        elif self.db_error is not None:
            self._schedule(max(0.2, self.link.retry_in()))
        else:
            self._schedule(self.refresh_s)

    async def _check_server(self) -> None:
        """After each (re)connect, ask why writes would fail; on a standby, the lag every poll."""
        if self.link.connects != self._checked_connects or self.link.conn is None:
            why = await self.link.run(browse.read_only_reason)
            self._checked_connects = self.link.connects
            if why is not None and why != self.read_only_why:
                self._go_read_only(why)
            elif why is None and self.read_only_why is not None:
                self.read_only_why = None
                self.refresh_bindings()
        if self.read_only_why == browse.READ_ONLY_REPLICA:
            self.replica = await self.link.run(replica_info)
        else:
            self.replica = None

    def _go_read_only(self, why: str) -> None:
        self.read_only_why = why
        self.refresh_bindings()
        self._render_status()
        if not self.config.read_only:
            self.notify(
                f"Read-only: {why}; write actions are hidden.",
                severity="warning",
                markup=False,
                timeout=8,
            )

    def note_read(self, error: str | None) -> None:
        """See `Host.note_read`: the detail's own reads keep the status line current (the
        tabs do not poll under it)."""
        if error is not None:
            self._set_down(error)
        else:
            self._set_up()
            self.updated_at = time.time()
        self._render_status()

    def _set_down(self, message: str) -> None:
        self.db_error = redact(message, self.link.dsn)  # libpq may quote a bad DSN whole
        self.query_one("#tabs").add_class("-stale")

    def _set_up(self) -> None:
        if self.db_error is not None:
            self.db_error = None
            self.query_one("#tabs").remove_class("-stale")
            self.notify("Database reachable again.", markup=False, timeout=4)

    # --- targets (issue 28) ---------------------------------------------------------------

    def action_leave(self, where: str) -> None:
        """Close this target's console for the targets overview (`0`) or the next target in
        trouble (`!`)."""
        if self.target is not None and len(self.screen_stack) == 1:
            self.leave = where
            self.exit(0)

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        return _target_check_action(self, action)

    # --- app actions ---------------------------------------------------------------------

    async def on_event(self, event: events.Event) -> None:
        # A key, a click or the wheel: the operator waits for the screen, so no full
        # collection for a while (a mouse merely moving over the console is not counted).
        if isinstance(event, events.InputEvent) and not isinstance(event, events.MouseMove):
            self.collector.input_seen()
        # Keys that follow `/` in one burst arrive while the prompt is opening: handed to it in
        # order (Textual would send them to no widget, or race them against its focus).
        if (
            isinstance(event, events.Key | events.Paste)
            and not event.is_forwarded
            and isinstance(self.screen, FilterScreen)
            and self.screen.take_early(event)
        ):
            return
        await super().on_event(event)

    def action_tab(self, name: str) -> None:
        if len(self.screen_stack) > 1:
            return
        tabs = self.query_one("#tabs", TabbedContent)
        if tabs.active != name:
            self.hold_drawing()
        tabs.active = name
        self._focus_active()

    def on_tabbed_content_tab_activated(self, event: TabbedContent.TabActivated) -> None:
        self._focus_active()
        self.refresh_now()

    def _focus_active(self) -> None:
        """Focus the shown tab's table at once, before the hidden tab is told it is hidden.

        A focused table that is hidden hands the focus to a sibling in its own (hidden) tab,
        and TabbedContent then switches back to that tab and forward again when the new tab
        is focused: two extra layouts, footer rebuilds and refreshes on every tab key.
        """
        if self.is_running and len(self.screen_stack) == 1:
            with contextlib.suppress(NoMatches):
                self.active_pane.focus_main()

    def action_toggle_refresh(self) -> None:
        self.refresh_paused = not self.refresh_paused
        self.query_one(Banners).show_paused(self.refresh_paused)
        if not self.refresh_paused:
            self.refresh_now()
        elif self._timer is not None:
            self._timer.stop()
            self._timer = None
        self._render_status()

    def action_refresh_step(self, direction: int) -> None:
        steps = REFRESH_STEPS
        index = min(range(len(steps)), key=lambda i: abs(steps[i] - self.refresh_s))
        self.refresh_s = steps[max(0, min(len(steps) - 1, index + direction))]
        self.notify(f"Refresh every {self.refresh_s:g}s", markup=False, timeout=2)
        self._render_status()
        if not self.refresh_paused:
            self.refresh_now()

    def action_go_back(self) -> None:
        focused = self.focused
        if focused is not None and focused.id == "dead-rows":
            self.query_one("#dead-groups").focus()
        else:
            self.active_pane.focus_main()

    def action_help(self) -> None:
        self.push_screen(HelpScreen(self.help_sections(), HELP_NOTES))

    def help_sections(self) -> list[Section]:
        keymap = self.config.keymap

        def rows(bindings: list[Any]) -> list[tuple[str, str, str]]:
            out = []
            for b in bindings:
                if not isinstance(b, Binding) or not b.id:
                    continue
                if not self.check_action(b.action.split("(")[0], ()):
                    continue  # a key that does nothing here (the targets' keys, one database)
                text = HELP_TEXT.get(b.id, b.description or b.action)
                out.append((key_display(keymap.get(b.id, b.key)), text, b.id))
            return out

        return [
            (
                "Everywhere",
                [
                    *rows(JobtuiApp.BINDINGS),
                    (
                        "ctrl+p",
                        "command palette (actions for the current selection)",
                        "command_palette",
                    ),
                ],
            ),
            (
                "Tables",
                [
                    ("↑ ↓ pgup pgdn", "move", ""),
                    *rows(KeyedTable.BINDINGS),
                    ("enter", "detail / open", ""),
                    ("tab shift+tab", "next / previous table", ""),
                ],
            ),
            ("Overview", rows([*KindsPane.BINDINGS, *OverviewPane.BINDINGS])),
            ("Jobs", rows(JobsPane.BINDINGS)),
            ("Dead letters", rows(DeadPane.BINDINGS)),
            ("Workers", rows(WorkersPane.BINDINGS)),
            ("Schedules", rows(SchedulesPane.BINDINGS)),
            ("Database", rows(DatabasePane.BINDINGS)),
            ("Detail", rows(DetailScreen.BINDINGS)),
            ("Kind (enter on a kind)", rows(KindScreen.BINDINGS)),
            (
                "Confirmation",
                [
                    ("1 2 …", "pick that choice", ""),
                    ("‼ ALL", "a bulk scope: type the count it shows, then enter", ""),
                    ("esc n", "back, change nothing", ""),
                ],
            ),
        ]

    # --- what panes and screens ask for (jobtui.tui.host) --------------------------------

    def open_detail(self, what: str, row_id: int) -> None:
        self.push_screen(DetailScreen(what, row_id))

    def on_detail_asked(self, message: DetailAsked) -> None:
        self.open_detail(message.what, message.row_id)

    def on_kind_chosen(self, message: KindChosen) -> None:
        """The kind screen, built on first use and kept: building its widgets and styles again
        for each kind was most of the console's time from Enter to the kind's figures."""
        screen = self._kind_screen
        if screen is None:
            screen = self._kind_screen = KindScreen(message.kind)
            self.install_screen(screen, name="kind")
        elif screen.is_current:
            return
        else:
            screen.show_kind(message.kind)
        self.push_screen(screen)

    def on_kind_screen_jobs_asked(self, message: KindScreen.JobsAsked) -> None:
        self._leave_for("jobs")
        self.query_one(JobsPane).set_filter(JobFilter(states=PENDING_STATES, kind=message.kind))

    def on_kind_screen_dead_asked(self, message: KindScreen.DeadAsked) -> None:
        self._leave_for("dead")
        self.query_one(DeadPane).set_filter(DeadFilter(kind=message.kind))

    def _leave_for(self, tab: str) -> None:
        """Close the screens over the tabs and show `tab`."""
        while len(self.screen_stack) > 1:
            self.pop_screen()
        self.query_one("#tabs", TabbedContent).active = tab
        self._focus_active()
        self.call_after_refresh(self._focus_active)  # once the tabs' screen is back on top

    def on_write_asked(self, message: WriteAsked) -> None:
        self.writes.ask(message)

    def on_pause_asked(self, message: PauseAsked) -> None:
        self.writes.toggle_pause(message.kind, message.paused)

    def on_export_asked(self, message: ExportAsked) -> None:
        self.writes.export(message.ids, message.flt, message.group)

    def on_schedule_asked(self, message: ScheduleAsked) -> None:
        self.writes.schedule(message.name, message.action)

    def on_limits_asked(self, message: LimitsAsked) -> None:
        self.writes.kind_limits(message.kind)

    def on_worker_control_asked(self, message: WorkerControlAsked) -> None:
        self.run_worker(self._control_worker(message.worker_id, message.action), group="ask")

    async def _control_worker(self, worker_id: str, action: str) -> None:
        """Confirm, then quiet, resume or stop one worker (jobtui.worker_control, audited)."""
        verb, note = WORKER_ACTIONS[action]
        if self.read_only:
            self.post_message(
                WriteController.Done(
                    f"Read-only: {verb.lower()} a worker is not allowed.", severity="warning"
                )
            )
            return
        body = Text.assemble(
            (f"{verb} worker ", "bold"), inert(worker_id, style="bold"), "\n", (note, "dim")
        )
        choice = await self.push_screen_wait(
            ConfirmScreen(
                f"{verb} worker?",
                body,
                [Choice("yes", f"{verb} {clean(worker_id)}")],
                danger=action == "stop",
            )
        )
        if choice != "yes":
            return
        try:
            outcome = await self.link.run(control_worker, worker_id, action, actor=self.actor)
        except FAILURES as exc:
            self.post_message(WriteController.Failed(exc))
            return
        text = outcome.text()
        self.post_message(WriteController.Done(text[0].upper() + text[1:] + ".", refresh=True))

    # --- what the write controller reports: the one place its outcomes are handled --------

    def on_write_controller_done(self, message: WriteController.Done) -> None:
        self.notify(message.text, severity=message.severity, markup=False, timeout=message.timeout)
        if message.wrote:
            for table in self.query(KeyedTable):
                table.clear_marks()
        if message.after is not None:
            message.after()
        if message.refresh:
            self.refresh_now()

    def on_write_controller_failed(self, message: WriteController.Failed) -> None:
        exc = message.error
        if isinstance(exc, LinkDown):
            self._set_down(exc.message)
        if isinstance(exc, pgerrors.InsufficientPrivilege):
            self._go_read_only("the database refused a write (insufficient privilege)")
        text = exc.message if isinstance(exc, LinkDown) else describe_error(exc)
        self.notify(clean(redact(text, self.link.dsn)), severity="error", markup=False, timeout=8)

    # --- command palette -----------------------------------------------------------------

    def palette_entries(self) -> list[PaletteEntry]:
        pane = self.active_pane
        out: list[PaletteEntry] = []
        for title, help_, action in pane.palette_commands():
            out.append((title, help_, partial(self.run_action, action, pane)))
        for name in TABS:
            if name != self.active_tab:
                out.append(
                    (
                        f"Go to {TAB_TITLES[name]}",
                        "switch tab",
                        partial(self.action_tab, name),
                    )
                )
        verb = "Resume" if self.refresh_paused else "Pause"
        out.append((f"{verb} live refresh", "p", self.action_toggle_refresh))
        out.append(("Refresh faster", "+", lambda: self.action_refresh_step(-1)))
        out.append(("Refresh slower", "-", lambda: self.action_refresh_step(1)))
        out.append(("Help: key bindings", "?", self.action_help))
        return out


# --- targets (issue 28) -------------------------------------------------------------------


BADGE_TITLE = 24  # a target's label in the header, at most (labels may have 40)


def target_badge(target: Target | None) -> list[Any]:
    """The header's name of the target on screen, in its colour, marked when dangerous."""
    if target is None:
        return []
    style = badge_style(target.colour)  # readable whatever the colour (a dark one too)
    mark = " ⚠ DANGER" if target.danger else ""
    title = clean(target.title)
    if len(title) > BADGE_TITLE:  # the mark must fit at 60 columns; the banner has it whole
        title = title[: BADGE_TITLE - 1] + "…"
    return [(f" {title}{mark} ", style), " "]


def _target_check_action(app: JobtuiApp, action: str) -> bool | None:
    """The targets' keys exist only in a target's console."""
    if action == "leave":
        return app.target is not None
    return True


# --- end targets ---


def _offers_host(app: JobtuiApp) -> Host:
    """Never called: mypy checks here that the app offers what panes and screens expect."""
    return app


def run_console(
    dsn: str,
    schema: str,
    *,
    config: ConsoleConfig,
    env: str | None = None,
    env_danger_pattern: str = DEFAULT_DANGER_PATTERN,
    opening: DeepLink | None = None,
    actor: ops.Actor | None = None,
    read_only_note: str = "--read-only or config",
    target: Target | None = None,
) -> int:
    """Run the console until the operator quits; returns the process exit code.

    `env` names the environment in a banner, red when it matches `env_danger_pattern`
    (comma-separated globs, any case); `opening` says where it opens (see `deep_link`);
    `actor` is who the audit log names (default: this OS user at this host), and
    `read_only_note` why the banner says read-only when the config made it so.
    """
    app = JobtuiApp(
        dsn,
        schema,
        config=config,
        env=env,
        env_danger_pattern=env_danger_pattern,
        opening=opening,
        actor=actor,
        read_only_note=read_only_note,
        target=target,
    )
    app.run()
    return app.return_code or 0
