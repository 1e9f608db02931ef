"""The Database tab (issue 12): the database conditions that stall the queue, at 80×24.

Top to bottom, most important first: what holds back VACUUM (issue 26: a session, a prepared
transaction, a replication slot or a standby's feedback, named in its own words, never a vacuum
process) and its effect on `jobs`; warnings in plain words; NOTIFY, the
connections in use and, on a standby, "replica: read-only" with the lag; how each worker is
woken; then every jobtui table and index. One reading of `jobtui.dbhealth.collect` per refresh.

BINDINGS (each shown only when the blocker is of its kind):
    C        cancel the blocking session's current query (asks first; audited)
    K        terminate the blocking session: its transaction rolls back (asks first; audited)
    E        end the blocking prepared transaction: ROLLBACK or COMMIT PREPARED (asks; audited)
    D        drop the blocking replication slot (asks first; audited)
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from datetime import datetime
from typing import Any, ClassVar

import psycopg
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType

from jobtui import backends, ops
from jobtui.config import format_duration
from jobtui.db import describe_error
from jobtui.dbhealth import (
    PREPARED,
    SESSION,
    SLOT,
    STANDBY,
    Blocker,
    DbHealth,
    TableHealth,
    collect,
    format_bytes,
    format_count,
)
from jobtui.inert import clean, inert, one_line
from jobtui.tui.connection import Link, LinkDown
from jobtui.tui.palette import CellStyles, cell_styles
from jobtui.tui.panes.pane import InfoLine, Pane, WrappingInfo
from jobtui.tui.screens.confirm import Choice, ConfirmScreen
from jobtui.tui.texts import coarse_age
from jobtui.tui.widgets.banners import lag_text
from jobtui.tui.widgets.keyed_table import KeyedTable

# Each action acts on one kind of blocker only; its key is offered only for that kind.
ACTION_KIND = {
    "cancel_backend": SESSION,
    "terminate_backend": SESSION,
    "end_prepared": PREPARED,
    "drop_slot": SLOT,
}
QUERY_WIDTH = 150
NAME_WIDTH = 40  # a gid may be 200 characters: the tab cuts it (…), the confirmation does not
FIRST_TABLES = ("jobs", "dead_letters")  # the queue itself first, then the rest by name
FIGURES_EVERY_S = 10.0  # seconds: the live figures' redraw while nothing to act on changed
FIGURE = re.compile(r"\d[\d.,%]*")  # the figures in a warning: they alone do not redraw it


class DatabasePane(Pane):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("C", "cancel_backend", "Cancel query", id="database.cancel_backend"),
        Binding("K", "terminate_backend", "Terminate", id="database.terminate_backend"),
        Binding("E", "end_prepared", "End prepared", id="database.end_prepared"),
        Binding("D", "drop_slot", "Drop slot", id="database.drop_slot"),
    ]
    main_table = "#database-tables"
    health: DbHealth | None = None
    _shape: tuple[object, ...] | None = None

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
            ("last", "last wake", 10),  # "23h59m ago"
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
        offered = _offered(self.health)
        self.health = data
        if _offered(data) != offered:
            self.refresh_bindings()  # the footer offers the keys of the new blocker's kind
        st = cell_styles(self.app)
        # Live, connection counts, tuple counts, wake-up ages and the NOTIFY queue change on
        # every refresh (most of what this tab sent): while nothing an operator acts on
        # changed (`_shape`), they are redrawn at most every FIGURES_EVERY_S; a key, coming
        # back to the tab or a change of shape draws at once. A blocker, the one thing here
        # to act on, is always shown as it is (its age included). Actions use `self.health`.
        now = time.monotonic()
        shape = _shape(data)
        if shape == self._shape and now - self._drawn_at < FIGURES_EVERY_S:
            if data.blocker is not None:
                self._blocker(data, st)
            return
        self._shape, self._drawn_at = shape, now
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
        head = "Holds back vacuum of the catalogs: " if b.catalog_only else "Holds back vacuum: "
        parts: list[Text | str] = [Text(head, style="bold"), *_what(b, st), f"\neffect: {effect}"]
        parts.append(self._offer(b, st))
        parts += ["\n", *_detail(b, st)]
        others = h.holders[1:]
        if others:
            also = ", ".join(
                o.label(NAME_WIDTH // 2) + (" (catalogs)" if o.catalog_only else "")
                for o in others[:3]
            )
            more = f" and {len(others) - 3} more" if len(others) > 3 else ""
            parts += ["\n", inert(f"also holding back: {also}{more}", style=st.muted)]
        info.set(*parts)

    def _offer(self, b: Blocker, st: CellStyles) -> Text:
        """What the operator may do about it, or in one line why not."""
        if b.kind == STANDBY:
            return Text(
                " · no action here: end the long query on the standby, or turn off its "
                "hot_standby_feedback",
                style=st.muted,
            )
        if self.console.read_only:
            return Text(" · read-only: no signals or drops", style=st.muted)
        keys = OFFERS["vacuum" if b.vacuum else b.kind]
        if b.refusal:
            return Text(f" · {keys[0]} not allowed: " + clean(b.refusal), style=st.warning)
        return Text(f" · {keys[1]}", style=st.accent)

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
                            else coarse_age(w.last_wakeup_age_s) + " ago"
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
                        Text(format_count(t.live)),
                        Text(format_count(t.dead), style=st.warning if overdue else ""),
                        Text(f"{t.dead_share:.0%}", style=st.warning if overdue else ""),
                        Text(
                            "never" if vac is None else coarse_age(_age(h, vac)),
                            style=st.warning if overdue else "",
                        ),
                        Text("never" if ana is None else coarse_age(_age(h, ana))),
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

    # --- act on the blocker: cancel / terminate a session, end a prepared xact, drop a slot -----

    def _acting_on(self, action: str) -> Blocker | None:
        """The blocker, when `action` applies to its kind (never terminate a vacuum)."""
        b = self.health.blocker if self.health else None
        if b is None or ACTION_KIND.get(action) != b.kind:
            return None
        return None if action == "terminate_backend" and b.vacuum else b

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action in ACTION_KIND and (self.console.read_only or not self._acting_on(action)):
            return False
        return super().check_action(action, parameters)

    def action_cancel_backend(self) -> None:
        self._signal(terminate=False)

    def action_terminate_backend(self) -> None:
        self._signal(terminate=True)

    def action_end_prepared(self) -> None:
        b = self._acting_on("end_prepared")
        if b is not None and self._allowed(b, "end"):
            self.run_worker(self._ask_and_end(b), group="database-signal")

    def action_drop_slot(self) -> None:
        b = self._acting_on("drop_slot")
        if b is not None and self._allowed(b, "drop"):
            self.run_worker(self._ask_and_drop(b), group="database-signal")

    def palette_commands(self) -> list[tuple[str, str, str]]:
        b = self.health.blocker if self.health else None
        if b is None or self.console.read_only:
            return []
        if b.kind == PREPARED:
            return [(f"End {b.label()}", "ROLLBACK or COMMIT PREPARED; asks", "end_prepared")]
        if b.kind == SLOT:
            return [(f"Drop {b.label()}", "frees the horizon it holds; asks", "drop_slot")]
        if b.kind != SESSION:
            return []
        cancel = (
            f"Cancel the query of pid {b.pid}",
            "the blocker of vacuum; asks",
            "cancel_backend",
        )
        if b.vacuum:
            return [cancel]
        return [
            cancel,
            (f"Terminate pid {b.pid}", "its transaction rolls back; asks", "terminate_backend"),
        ]

    def _allowed(self, b: Blocker, verb: str) -> bool:
        """Refuse up front, in one line, what the role may not do."""
        if b.refusal:
            self.notify(
                clean(f"This role may not {verb} {b.label()}: {b.refusal}."),
                severity="error",
                markup=False,
                timeout=10,
            )
            return False
        return True

    def _signal(self, *, terminate: bool) -> None:
        b = self._acting_on("terminate_backend" if terminate else "cancel_backend")
        if b is None:
            self.notify("No session is holding back vacuum.", markup=False, timeout=4)
            return
        if self._allowed(b, "terminate" if terminate else "cancel"):
            self.run_worker(self._ask_and_signal(b, terminate), group="database-signal")

    async def _ask_and_signal(self, b: Blocker, terminate: bool) -> None:
        assert b.pid is not None
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
        if choice == "go":
            await self._act(
                backends.signal_backend,
                b.pid,
                b.backend_start,
                terminate=terminate,
                os_user=self.console.actor.os_user,
                why="holding back vacuum",
                done=lambda outcome: outcome.describe(),
            )

    async def _ask_and_end(self, b: Blocker) -> None:
        assert b.name is not None and b.xid is not None
        choice = await self._ask(
            f"End {b.label()}?",
            f" · prepared by {b.user or '?'} · transaction {b.xid}",
            "ROLLBACK PREPARED discards its changes; COMMIT PREPARED makes them permanent. "
            "Either ends it and frees what it holds back; a transaction manager that still "
            "expects it will find it gone.",
            [
                Choice("rollback", f"ROLLBACK PREPARED {b.name!r}: discard its changes"),
                Choice("commit", f"COMMIT PREPARED {b.name!r}: keep its changes"),
            ],
        )
        if choice not in ("rollback", "commit"):
            return
        verb = "committed" if choice == "commit" else "rolled back"
        await self._act(
            ops.end_prepared,
            b.name,
            b.xid,
            commit=choice == "commit",
            actor=self.console.actor,
            done=lambda ended: (
                f"{verb} {b.label()}"
                if ended
                else f"{b.label()} had already ended; nothing was done"
            ),
        )

    async def _ask_and_drop(self, b: Blocker) -> None:
        assert b.name is not None and b.slot_type is not None
        choice = await self._ask(
            f"Drop {b.label()}?",
            f" · {b.database or 'no database'} · inactive",
            "Its consumer loses its place: a standby must be re-seeded or a subscription "
            "recreated. What it held back becomes removable.",
            [Choice("drop", f"drop replication slot {b.name!r}")],
        )
        if choice == "drop":
            await self._act(
                ops.drop_slot,
                b.name,
                b.slot_type,
                actor=self.console.actor,
                done=lambda dropped: (
                    f"dropped {b.label()}"
                    if dropped
                    else f"{b.label()} was already gone; nothing was done"
                ),
            )

    async def _ask(self, title: str, facts: str, warning: str, choices: list[Choice]) -> str | None:
        """The confirmation naming exactly what (the blocker, from its title) and what follows."""
        body = Text.assemble(inert(title.rstrip("?"), style="bold"), inert(facts), "\n\n", warning)
        return await self.app.push_screen_wait(ConfirmScreen(title, body, choices, danger=True))

    async def _act(self, fn: Any, *args: Any, done: Callable[[Any], str], **kwargs: Any) -> None:
        """Run one audited action; its outcome or the refusal in one line, never a traceback."""
        reason = self.console.read_only_reason
        if reason is not None:  # the keys and palette entries are gone then; never act anyway
            self.notify(
                clean(f"Read-only: nothing was done ({reason})."), severity="warning", markup=False
            )
            return
        try:
            outcome = await self.console.link.run(fn, *args, **kwargs)
        except (backends.SignalRefused, ops.Refused) as exc:
            self.notify(clean(str(exc)), severity="error", markup=False, timeout=10)
            return
        except LinkDown as exc:
            self.notify(clean(exc.message), severity="error", markup=False, timeout=8)
            return
        except psycopg.Error as exc:
            self.notify(clean(describe_error(exc)), severity="error", markup=False, timeout=8)
            return
        self.notify(clean(done(outcome)), markup=False, timeout=6)
        self.console.refresh_now()


# What each kind offers: (the keys, when refused; the keys and what they do).
OFFERS = {
    SESSION: ("C/K", "C cancel · K terminate"),
    "vacuum": ("C", "C cancel (a vacuum process: it is never terminated here)"),
    PREPARED: ("E", "E end it (ROLLBACK or COMMIT PREPARED)"),
    SLOT: ("D", "D drop the slot"),
}


def _offered(h: DbHealth | None) -> tuple[str, bool] | None:
    """What the footer's keys depend on: the blocker's kind, and whether it is a vacuum."""
    return None if h is None or h.blocker is None else (h.blocker.kind, h.blocker.vacuum)


def _shape(h: DbHealth) -> tuple[object, ...]:
    """What, changed, is drawn at once: the blocker (who, not how old), the warnings (not
    their figures), each worker's way of waking, the replica, the tables and their
    autovacuum; not counts, sizes or ages."""
    b = h.blocker
    return (
        None if b is None else (b.kind, b.pid, b.name, b.vacuum, b.refusal, b.catalog_only),
        tuple(b.label() for b in h.holders[1:]),
        tuple(FIGURE.sub("#", w) for w in h.warnings),
        h.notify_usage >= 0.5,
        h.replica is not None,
        tuple((w.id, w.stale, w.polling, w.listen_connected, w.note) for w in h.workers),
        tuple((t.name, t.autovacuum, t.vacuumed_at is None) for t in h.tables),
        tuple(i.name for i in h.indexes),
    )


def _what(b: Blocker, st: CellStyles) -> list[Text | str]:
    """The first line: the blocker in its own words, and how long it has held."""
    xids = "" if b.xid_age is None else f"{b.xid_age} transactions old"
    if b.kind == SESSION:
        age = format_duration(b.xact_age_s) if b.xact_age_s is not None else "age hidden"
        return [
            Text(f"pid {b.pid}", style=st.error),
            " · ",
            Text(f"transaction {age}", style=st.error),
            " · ",
            inert(b.state or b.backend_type or "?", style=st.warning),
        ]
    parts: list[Text | str] = [inert(b.label(NAME_WIDTH), style=st.error)]
    if b.kind == PREPARED and b.xact_age_s is not None:
        parts += [" · ", Text(f"prepared {format_duration(b.xact_age_s)} ago", style=st.error)]
    elif b.kind == SLOT:
        horizon = "catalog_xmin" if b.catalog_only else "xmin"
        parts += [" · ", Text(f"{horizon} {xids}", style=st.error)]
        state = "inactive" if b.pid is None else f"in use by pid {b.pid}"
        parts += [" · ", Text(state, style=st.warning)]
    elif b.kind == STANDBY:
        parts += [" · ", Text(f"xmin {xids}", style=st.error)]
    return parts


def _detail(b: Blocker, st: CellStyles) -> list[Text | str]:
    """The last line: who it is (a session, its query), or what the kind means."""
    if b.kind == SESSION:
        return [*_who(b), " · query: ", inert(one_line(b.query or "", QUERY_WIDTH), style=st.muted)]
    if b.kind == PREPARED:
        text = (
            f"a two-phase commit transaction of role {b.user or '?'}, left prepared: it keeps "
            "its transaction id until COMMIT or ROLLBACK PREPARED"
        )
    elif b.kind == SLOT and b.catalog_only:
        text = (
            f"logical decoding of database {b.database or '?'} has not confirmed past it: "
            "the catalogs keep their dead rows until its consumer catches up or it is dropped"
        )
    elif b.kind == SLOT:
        text = (
            "a standby that used this slot asked the primary to keep rows it may still read; "
            "the slot keeps them while that standby is away"
        )
    else:
        text = f"walsender pid {b.pid} · {b.client}: a query on the standby still reads them"
    return [inert(text, style=st.muted)]


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
