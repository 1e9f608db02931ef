"""The Database tab (issue 12): the database conditions that stall the queue, at 80×24.

Top to bottom, most important first: the oldest transaction holding back VACUUM (who, how
old, the start of its query) and its effect on `jobs`; warnings in plain words; NOTIFY, the
connections in use and, on a standby, "replica: read-only" with the lag; how each worker is
woken; then every jobtui table and index. One reading of `jobtui.dbhealth.collect` per refresh.

BINDINGS:
    C        cancel the blocker's current query (asks first; audited)
    K        terminate the blocker's backend: its transaction rolls back (asks first; audited)
"""

from __future__ import annotations

from datetime import datetime
from typing import ClassVar

import psycopg
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType

from jobtui import backends, ops
from jobtui.config import format_duration
from jobtui.db import describe_error
from jobtui.dbhealth import Blocker, DbHealth, TableHealth, collect, format_bytes
from jobtui.inert import clean, inert, one_line
from jobtui.tui.connection import Link, LinkDown
from jobtui.tui.palette import CellStyles, cell_styles
from jobtui.tui.panes.pane import InfoLine, Pane, WrappingInfo
from jobtui.tui.screens.confirm import Choice, ConfirmScreen
from jobtui.tui.widgets.banners import lag_text
from jobtui.tui.widgets.keyed_table import KeyedTable

SIGNAL_ACTIONS = frozenset({"cancel_backend", "terminate_backend"})
QUERY_WIDTH = 150
FIRST_TABLES = ("jobs", "dead_letters")  # the queue itself first, then the rest by name


class DatabasePane(Pane):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("C", "cancel_backend", "Cancel query", id="database.cancel_backend"),
        Binding("K", "terminate_backend", "Terminate", id="database.terminate_backend"),
    ]
    main_table = "#database-tables"
    health: DbHealth | None = None

    def compose(self) -> ComposeResult:
        yield WrappingInfo(id="database-blocker", classes="info")
        yield WrappingInfo(id="database-warnings")
        yield InfoLine(id="database-status", classes="info")
        yield KeyedTable(id="database-workers")
        yield KeyedTable(id="database-tables")

    def on_mount(self) -> None:
        self.query_one("#database-workers", KeyedTable).setup_columns(
            ("id", "worker", 20),
            ("wake", "woken by", 13),
            ("listen", "LISTEN", 6),
            ("last", "last wake", 9),
            ("note", "why polling", 19),
        )
        self.query_one("#database-tables", KeyedTable).setup_columns(
            ("name", "table / index", 20),
            ("size", "size", 8),
            ("live", "live", 6),
            ("dead", "dead", 6),
            ("share", "%", 4),
            ("vacuum", "vacuumed", 8),
            ("analyze", "analyzed", 8),
            ("auto", "auto", 4),
        )
        self.query_one("#database-workers").border_title = "NOTIFY wake-ups per worker"
        self.query_one("#database-tables").border_title = "tables and indexes"

    async def load(self, link: Link) -> DbHealth:
        return await link.run(collect)

    # --- rendering --------------------------------------------------------------------------

    def show(self, data: DbHealth) -> None:
        self.health = data
        st = cell_styles(self.app)
        self._blocker(data, st)
        warnings = self.query_one("#database-warnings", WrappingInfo)
        warnings.display = bool(data.warnings)
        lines: list[Text | str] = []
        for w in data.warnings:
            lines += ["\n" if lines else "", inert("⚠ " + w, style=st.warning)]
        warnings.set(*lines)
        self._status(data, st)
        self._workers(data, st)
        self._tables(data, st)

    def _blocker(self, h: DbHealth, st: CellStyles) -> None:
        jobs = h.jobs
        effect = (
            "jobs: no statistics yet"
            if jobs is None
            else f"jobs: {jobs.dead} dead tuples ({jobs.dead_share:.0%} of the table)"
        )
        info = self.query_one("#database-blocker", WrappingInfo)
        b = h.blocker
        if b is None:
            info.set(Text("Nothing holds back vacuum", style=st.success), f" · {effect}")
            return
        # A role without pg_read_all_stats sees another role's session without its details.
        age = format_duration(b.xact_age_s) if b.xact_age_s is not None else "age hidden"
        parts: list[Text | str] = [
            Text("Holds back vacuum: ", style="bold"),
            Text(f"pid {b.pid}", style=st.error),
            " · ",
            Text(f"transaction {age}", style=st.error),
            " · ",
            inert(b.state or b.backend_type or "?", style=st.warning),
            f"\neffect: {effect}",
        ]
        if self.console.read_only:
            parts.append(Text(" · read-only: no signals", style=st.muted))
        elif b.signal_refusal:
            parts.append(Text(" · C/K not allowed: " + clean(b.signal_refusal), style=st.warning))
        else:
            parts.append(Text(" · C cancel · K terminate", style=st.accent))
        # Who, then the start of the query: the last line, cut by the widget's height.
        parts += ["\n", *_who(b), " · query: "]
        parts.append(inert(one_line(b.query or "", QUERY_WIDTH), style=st.muted))
        info.set(*parts)

    def _status(self, h: DbHealth, st: CellStyles) -> None:
        c = h.connections
        parts: list[Text | str] = [
            Text(
                f"NOTIFY queue {h.notify_usage:.1%}",
                style=st.warning if h.notify_usage >= 0.5 else "",
            ),
            f" · connections {c.in_use}/{c.max_connections}: ",
            f"{c.workers} workers, {c.consoles} consoles, {c.others} others",
        ]
        if h.replica is not None:
            parts.append(Text(f" · replica: read-only, {lag_text(h.replica)}", style="bold"))
        self.query_one("#database-status", InfoLine).set(*parts)

    def _workers(self, h: DbHealth, st: CellStyles) -> None:
        rows = []
        for w in sorted(h.workers, key=lambda w: (w.stale, w.id)):
            if w.stale:
                wake = Text("stale", style=st.error)
            elif w.polling:
                wake = Text(f"POLLING {w.poll_interval_s:g}s", style=f"bold {st.warning}")
            else:
                wake = Text("LISTEN", style=st.success)
            rows.append(
                (
                    w.id,
                    [
                        inert(w.id, style="bold"),
                        wake,
                        Text(
                            "up" if w.listen_connected else "LOST",
                            style="" if w.listen_connected else st.error,
                        ),
                        Text(
                            "never"
                            if w.last_wakeup_age_s is None
                            else format_duration(w.last_wakeup_age_s) + " ago"
                        ),
                        inert(one_line(w.note or "", 120), style=st.muted),
                    ],
                )
            )
        self.query_one("#database-workers", KeyedTable).sync(rows)

    def _tables(self, h: DbHealth, st: CellStyles) -> None:
        rows = []
        by_table: dict[str, list[list[Text]]] = {}
        for i in h.indexes:
            by_table.setdefault(i.table, []).append(
                [
                    inert("  " + i.name, style=st.muted),
                    Text(format_bytes(i.size_bytes), style=st.muted),
                    *[Text("") for _ in range(6)],
                ]
            )
        for t in sorted(h.tables, key=_table_order):
            overdue = t.name == "jobs" and any(w.startswith("jobs:") for w in h.warnings)
            vac = t.vacuumed_at
            ana = t.analyzed_at
            rows.append(
                (
                    "t:" + t.name,
                    [
                        inert(t.name, style="bold"),
                        Text(format_bytes(t.size_bytes)),
                        Text(str(t.live)),
                        Text(str(t.dead), style=st.warning if overdue else ""),
                        Text(f"{t.dead_share:.0%}", style=st.warning if overdue else ""),
                        Text(
                            "never" if vac is None else format_duration(_age(h, vac)),
                            style=st.warning if overdue else "",
                        ),
                        Text("never" if ana is None else format_duration(_age(h, ana))),
                        Text(
                            "on" if t.autovacuum else "OFF",
                            style="" if t.autovacuum else st.warning,
                        ),
                    ],
                )
            )
            for n, cells in enumerate(by_table.get(t.name, [])):
                rows.append((f"i:{t.name}:{n}", cells))
        self.query_one("#database-tables", KeyedTable).sync(rows)

    # --- cancel / terminate the blocker -------------------------------------------------------

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action in SIGNAL_ACTIONS and self.console.read_only:
            return False
        return super().check_action(action, parameters)

    def action_cancel_backend(self) -> None:
        self._signal(terminate=False)

    def action_terminate_backend(self) -> None:
        self._signal(terminate=True)

    def palette_commands(self) -> list[tuple[str, str, str]]:
        b = self.health.blocker if self.health else None
        if b is None or self.console.read_only:
            return []
        return [
            (f"Cancel the query of pid {b.pid}", "the blocker of vacuum; asks", "cancel_backend"),
            (f"Terminate pid {b.pid}", "its transaction rolls back; asks", "terminate_backend"),
        ]

    def _signal(self, *, terminate: bool) -> None:
        b = self.health.blocker if self.health else None
        if b is None:
            self.notify("No transaction is holding back vacuum.", markup=False, timeout=4)
            return
        if b.signal_refusal:
            verb = "terminate" if terminate else "cancel"
            self.notify(
                clean(f"This role may not {verb} pid {b.pid}: {b.signal_refusal}."),
                severity="error",
                markup=False,
                timeout=10,
            )
            return
        self.run_worker(self._ask_and_signal(b, terminate), group="database-signal")

    async def _ask_and_signal(self, b: Blocker, terminate: bool) -> None:
        verb = "Terminate" if terminate else "Cancel query of"
        body = Text.assemble(
            Text(f"pid {b.pid}", style="bold"),
            " · ",
            *_who(b),
            "\n",
            inert(one_line(b.query or "", 200)),
            "\n\n",
            "Its open transaction rolls back and the connection is closed."
            if terminate
            else "Its running statement is cancelled; an idle transaction stays open.",
        )
        label = (
            f"terminate backend {b.pid}" if terminate else f"cancel the query of backend {b.pid}"
        )
        choice = await self.app.push_screen_wait(
            ConfirmScreen(f"{verb} backend {b.pid}?", body, [Choice("go", label)], danger=terminate)
        )
        if choice != "go":
            return
        link = self.console.link
        try:
            outcome = await link.run(
                backends.signal_backend,
                b.pid,
                b.backend_start,
                terminate=terminate,
                os_user=ops.Actor.current().os_user,
                why="holding back vacuum",
            )
        except backends.SignalRefused as exc:
            self.notify(clean(str(exc)), severity="error", markup=False, timeout=10)
            return
        except LinkDown as exc:
            self.notify(clean(exc.message), severity="error", markup=False, timeout=8)
            return
        except psycopg.Error as exc:
            self.notify(clean(describe_error(exc)), severity="error", markup=False, timeout=8)
            return
        self.notify(clean(outcome.describe()), markup=False, timeout=6)
        self.console.refresh_now()


def _who(b: Blocker) -> list[Text | str]:
    """`user · application · client` of the blocker, inert."""
    app = b.application or "no application name"
    return [inert(b.user or "?"), " · ", inert(app), " · ", inert(b.client)]


def _table_order(t: TableHealth) -> tuple[int, str]:
    first = FIRST_TABLES.index(t.name) if t.name in FIRST_TABLES else len(FIRST_TABLES)
    return first, t.name


def _age(h: DbHealth, then: datetime) -> float:
    """Seconds from `then` to the server's clock at the reading."""
    return (h.now - then).total_seconds()
