"""The targets overview: one row per database when the console watches several (issue 28).

Each row holds the seed's four signals of one target (depth = ready jobs, the oldest ready
job's age, dead letters, the slowest kind's p95 run time) and its firing alerts (how many,
the worst level), judged by the config file's rules as the one-database console and
`jobtui check` judge them.

Every target refreshes on its own `Link` (its own connection, statement timeout and
reconnect back-off) in a worker of its own, so one target that is down, slow or locked never
stalls or hides the others: its row says DB DOWN (with the error), SLOW, or ERROR (reachable
but unreadable: not migrated, no privilege) and comes back by
itself when the database does.

BINDINGS:
    enter    open that target's full console (the tabs); `0` there comes back here
    n / !    move to the next target in trouble (alerts firing, down or slow)
    q        quit

`run_targets` is the loop between this overview and each target's console (`JobtuiApp` with
`target=`): one Textual app at a time, so a target's console is exactly the one-database
console, writing only to the target on screen.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import ClassVar

from rich.text import Text
from textual.app import App, ComposeResult
from textual.binding import Binding, BindingType
from textual.driver import Driver
from textual.widgets import DataTable, Footer, Static

from jobtui import alerts
from jobtui.alerts import Level
from jobtui.console_config import ConsoleConfig
from jobtui.db import SchemaMissing, acheck_schema, describe_error
from jobtui.inert import inert
from jobtui.metrics import snapshot
from jobtui.models import Snapshot
from jobtui.targets import Target, badge_style, redact
from jobtui.tui.connection import Link, LinkDown, RefreshDropped
from jobtui.tui.terminal import quiet_driver
from jobtui.tui.texts import coarse_age, same
from jobtui.tui.widgets.keyed_table import Column, KeyedTable

OK, WARN, CRIT, DOWN, SLOW, WAIT = "OK", "WARN", "CRIT", "DB DOWN", "SLOW", "…"
ERROR = "ERROR"  # reachable, but its figures cannot be read: not migrated, no privilege…
TROUBLE = frozenset({WARN, CRIT, DOWN, SLOW, ERROR})
COLUMNS = (
    Column("target", "target", 12, priority=0, fit=True),
    Column("state", "state", 7, priority=0, fit=True),
    Column("depth", "depth", 7, priority=0, fit=True),
    Column("oldest", "oldest", 7, priority=0, fit=True),
    Column("dead", "dead", 6, priority=0, fit=True),
    Column("run", "run p95", 8, priority=1, fit=True),
    Column("alerts", "alerts", 8, priority=0, fit=True),
    Column("note", "note", 20, priority=2, flex=True, shrink=10),
)
FLUSH_S = 0.5  # rows that changed are drawn together, at most this often
# Where the console goes after a target's console closes (`JobtuiApp.leave`).
BACK, NEXT = "targets", "next"


@dataclass(frozen=True)
class Row:
    """What one target's row shows; `error` is the one-line reason while down or slow."""

    state: str = WAIT
    depth: int | None = None
    oldest_s: float | None = None
    dead: int | None = None
    run_p95_ms: float | None = None
    firing: int = 0
    worst: Level = Level.OK
    db_ms: float | None = None
    error: str | None = None

    @property
    def in_trouble(self) -> bool:
        return self.state in TROUBLE


def row_of(snap: Snapshot, config: ConsoleConfig, db_ms: float | None) -> Row:
    """A target's row from its snapshot, judged by the alert rules."""
    firing = alerts.evaluate(snap, config.alerts)
    worst = max((v.level for v in firing), default=Level.OK)
    p95s = [k.p95_ms for k in snap.kinds if k.p95_ms is not None]
    return Row(
        state={Level.OK: OK, Level.WARN: WARN, Level.CRIT: CRIT}[worst],
        depth=snap.totals.ready,
        oldest_s=snap.oldest_ready_age_s,
        dead=snap.totals.dead,
        run_p95_ms=max(p95s, default=None),
        firing=len(firing),
        worst=worst,
        db_ms=db_ms,
    )


def _ms(ms: float | None) -> str:
    if ms is None:
        return "–"
    return f"{ms:.0f}ms" if ms < 1000 else f"{ms / 1000:.1f}s"


STATE_STYLE = {
    OK: "green",
    WARN: "bold yellow",
    CRIT: "bold red",
    DOWN: "bold reverse red",
    ERROR: "bold reverse red",
}


def cells(target: Target, row: Row) -> list[Text]:
    """The row's cells, inert (a label or an error may hold anything)."""
    if target.colour:  # a badge: readable whatever the colour, a dark one too
        name = inert(target.title, style=badge_style(target.colour))
    else:
        name = inert(target.title, style="bold")
    if target.danger:
        name.append(" ⚠", style="bold red")
    alerts_text = "–" if row.state in (DOWN, SLOW, ERROR, WAIT) else str(row.firing)
    if row.firing:
        alerts_text += f" {row.worst.name}"

    def n(v: int | None) -> str:
        return "–" if v is None else str(v)

    return [
        name,
        Text(row.state, style=STATE_STYLE.get(row.state, "bold")),
        Text(n(row.depth), justify="right"),
        Text("–" if row.oldest_s is None else coarse_age(row.oldest_s), justify="right"),
        Text(n(row.dead), justify="right"),
        Text(_ms(row.run_p95_ms), justify="right"),
        Text(alerts_text),
        inert(row.error or "", style="dim"),
    ]


class Watch:
    """One target's link and last row; `poll` refreshes it once, bounded by its timeouts."""

    def __init__(self, target: Target, schema: str) -> None:
        self.target = target
        self.link = Link(target.dsn, schema, statement_timeout_s=target.timeout_s)
        self.row = Row()
        self.polls = 0

    async def poll(self, config: ConsoleConfig) -> Row:
        t = self.target
        try:
            # The connect is bounded too (the link's own bound covers its reads only).
            async with asyncio.timeout(t.connect_timeout_s + t.timeout_s):
                async with self.link.refresh():
                    snap = await self.link.run(snapshot, history_minutes=1)
            row = row_of(snap, config, self.link.last_db_ms)
        except LinkDown as exc:
            row = Row(state=DOWN, error=exc.message)
        except RefreshDropped as exc:
            row = Row(state=SLOW, error=exc.message)
        except TimeoutError:
            await self.link.close()
            row = Row(state=SLOW, error=f"no answer in {t.connect_timeout_s + t.timeout_s:g} s")
        except Exception as exc:  # noqa: BLE001 - any failure is this target's row, never a crash
            row = Row(state=DOWN if not self.link.up else ERROR, error=describe_error(exc))
            if self.link.up:
                row = replace(row, error=await self._why(row.error))
        if row.error is not None:  # libpq may quote a malformed DSN whole, password and all
            row = replace(row, error=redact(row.error, t.dsn))
        self.polls += 1
        self.row = row
        return row

    async def _why(self, error: str | None) -> str | None:
        """A read failed on a live connection: "not migrated" when jobtui's tables are not in
        the schema (the one line `stats` and `check` give), else the read's own error."""
        try:
            async with self.link.refresh():  # bounded by the target's timeout, as every read
                await self.link.run(acheck_schema)
        except SchemaMissing as exc:
            return str(exc)
        except Exception:  # noqa: BLE001 - the read's own error is the better line then
            return error
        return error

    def next_delay(self, refresh_s: float) -> float:
        if self.row.state == DOWN:
            return max(0.2, self.link.retry_in())
        return refresh_s


class TargetsApp(App[str | None]):
    """One row per target; returns the key of the target to open, or None to quit.

    `cursor`: the target whose row has the cursor at start. `after`: open the next target in
    trouble after this one as soon as every target has been read once (`!` in a target's
    console).
    """

    CSS_PATH = "targets.tcss"
    TITLE = "jobtui"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("q", "quit", "Quit", id="quit"),
        Binding("enter", "open", "Open", id="targets.open"),
        Binding("n,exclamation_mark", "next_trouble", "Next in trouble", id="targets.next"),
    ]

    def __init__(
        self,
        targets: Sequence[Target],
        schema: str,
        *,
        config: ConsoleConfig,
        cursor: str | None = None,
        after: str | None = None,
    ) -> None:
        super().__init__()
        self.config = config
        self.watches = {t.key: Watch(t, t.schema or schema) for t in targets}
        self.start_at = cursor
        self.after = after
        self.started = time.monotonic()
        self._dirty: set[str] = set()  # targets whose row changed since the last flush

    def get_driver_class(self) -> type[Driver]:
        """The platform's driver, its colour codes sent as changes (jobtui.tui.terminal)."""
        return quiet_driver(super().get_driver_class())

    def compose(self) -> ComposeResult:
        yield Static(id="targets-head")
        yield KeyedTable(id="targets-table")
        yield Static(id="targets-note")
        yield Footer()

    def on_mount(self) -> None:
        table = self.table
        table.setup_columns(*COLUMNS)
        table.sync([(key, cells(w.target, w.row)) for key, w in self.watches.items()])
        if self.start_at in self.watches:
            table.move_cursor(row=list(self.watches).index(self.start_at))
        table.focus()
        self._render_note()
        self._render_head()
        self.set_interval(FLUSH_S, self._draw_rows)
        for w in self.watches.values():
            self.run_worker(self._watch(w), group=f"target-{w.target.key}", exit_on_error=False)

    @property
    def table(self) -> KeyedTable:
        return self.query_one("#targets-table", KeyedTable)

    async def _watch(self, w: Watch) -> None:
        """This target's refresh loop: poll, show, wait; independent of every other one."""
        while True:
            row = await w.poll(self.config)
            if not self.is_running:
                return
            self._show(w, row)
            await asyncio.sleep(w.next_delay(self.config.refresh_s))

    def _show(self, w: Watch, row: Row) -> None:
        """Note the target's new row; `_draw_rows` draws the rows that changed, together."""
        self._dirty.add(w.target.key)
        if self.after is not None and all(x.polls for x in self.watches.values()):
            after, self.after = self.after, None
            if self.cursor_key != after:
                return  # the operator moved the cursor meanwhile: their choice, not a jump
            found = self._trouble_after(after)
            if found is not None:
                self.exit(found)
            else:
                self.notify("No other target in trouble.", markup=False, timeout=4)

    def _draw_rows(self) -> None:
        """Draw every row that changed since the last flush in one screen update: targets
        refresh at their own pace, and one redraw per target would multiply the bytes sent."""
        if not self._dirty:
            return
        self._dirty = set()
        with self.batch_update():  # the table redraws only the cells that look different
            self.table.sync([(key, cells(w.target, w.row)) for key, w in self.watches.items()])
            self._render_head()
            self._render_note()

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        self._render_note()

    def _render_note(self) -> None:
        """The keys, or the error of the target under the cursor: the note column is the
        first to go on a narrow screen, and a DB DOWN row would not say why."""
        w = self.watches.get(self.cursor_key)
        if w is not None and w.row.error:
            note = inert(f"{w.target.title}: {w.row.error}", style="dim")
        else:
            note = Text("enter open a target's console · n next in trouble · q quit", style="dim")
        widget = self.query_one("#targets-note", Static)
        if not same(widget.content, note):
            widget.update(note)

    def _render_head(self) -> None:
        troubled = [w for w in self.watches.values() if w.row.in_trouble]
        head = Text.assemble(
            (" jobtui ", "bold reverse"),
            f" {len(self.watches)} targets  │ ",
            (f"{len(troubled)} in trouble", "bold red") if troubled else ("all OK", "green"),
            f"  │ ⟳ {self.config.refresh_s:g}s",
        )
        widget = self.query_one("#targets-head", Static)
        if not same(widget.content, head):
            widget.update(head)

    def _keys(self) -> list[str]:
        return list(self.watches)

    def _trouble_after(self, key: str | None) -> str | None:
        keys = self._keys()
        start = keys.index(key) + 1 if key in keys else 0
        for i in range(len(keys)):
            candidate = keys[(start + i) % len(keys)]
            if candidate != key and self.watches[candidate].row.in_trouble:
                return candidate
        return None

    @property
    def cursor_key(self) -> str:
        return self.table.current_key or self._keys()[0]

    def action_next_trouble(self) -> None:
        found = self._trouble_after(self.cursor_key)
        if found is None:
            self.notify("No other target in trouble.", markup=False, timeout=4)
            return
        self.table.move_cursor(row=self._keys().index(found))

    def action_open(self) -> None:
        self.exit(self.cursor_key)

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        event.stop()
        self.action_open()

    async def on_unmount(self) -> None:
        await asyncio.gather(*(w.link.close() for w in self.watches.values()))


def run_targets(targets: Sequence[Target], schema: str, config: ConsoleConfig) -> int:
    """The overview, then the console of the target chosen, then back, until the operator
    quits; returns the exit code."""
    from jobtui.tui.app import JobtuiApp

    by_key = {t.key: t for t in targets}
    cursor: str | None = None
    after: str | None = None
    while True:
        overview = TargetsApp(targets, schema, config=config, cursor=cursor, after=after)
        chosen = overview.run()
        if chosen is None or chosen not in by_key:
            return overview.return_code or 0
        target = by_key[chosen]
        console = JobtuiApp(
            target.dsn,
            target.schema or schema,
            config=config,
            env=config.env,
            env_danger_pattern=config.env_danger_pattern,
            target=target,
        )
        console.run()
        if console.leave == BACK:
            cursor, after = chosen, None
        elif console.leave == NEXT:
            cursor, after = chosen, chosen
        else:
            return console.return_code or 0
