"""The database's health beside the queue's (issue 12 item 1): what stalls a PostgreSQL queue
without showing in it.

`collect(conn, schema)` reads, from catalogue views and statistics only (no jobtui table is
scanned, so watching costs little): the oldest transaction holding back VACUUM and its effect
on `jobs`, each jobtui table and index, NOTIFY health and how each worker is woken, the
connections in use and by whom, and on a standby its replication lag. The console's Database
tab, `stats --json` (`as_json`) and Prometheus (`prometheus_lines`) all show this one reading.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import psycopg
from psycopg.rows import dict_row

from jobtui.config import format_duration
from jobtui.inert import cut, prometheus_label
from jobtui.models import ReplicaInfo
from jobtui.sql import queries

# Every table jobtui creates (jobtui/schema/*.sql); other tables in the schema are not ours.
JOBTUI_TABLES = (
    "jobs",
    "dead_letters",
    "dead_letter_counts",
    "workers",
    "paused_kinds",
    "audit_log",
    "kind_stats",
    "queue_samples",
    "kind_limits",
    "schedules",
    "schedule_ticks",
    "jobtui_migrations",
)
# `jobs` over its autovacuum trigger for longer than this many autovacuum naps (and at least
# a minute) without a vacuum is "not vacuumed while dead tuples grow": with autovacuum working,
# a table over its trigger is vacuumed within a nap or two.
OVERDUE_NAPS = 2
OVERDUE_MIN_S = 60.0


# The kinds of thing that hold back VACUUM (issue 26 item 15), as PostgreSQL computes its horizon.
SESSION = "session"  # a session's snapshot (backend_xmin) or its transaction id (backend_xid)
PREPARED = "prepared"  # a transaction prepared for two-phase commit, not yet committed/rolled back
SLOT = "slot"  # a replication slot's xmin (every table) or catalog_xmin (the catalogs)
STANDBY = "standby"  # a standby's hot_standby_feedback, held by its walsender (no slot)


@dataclass(frozen=True)
class Blocker:
    """One thing holding back VACUUM in this database; `kind` says which (SESSION, PREPARED,
    SLOT, STANDBY). A session fills the pg_stat_activity fields; a prepared transaction its
    `name` (gid), `xid`, `user` (owner) and `since`; a slot its `name`, `slot_type`,
    `database` and `pid` (the consumer, while active); a standby its `name` (application),
    `pid` (walsender), `client` and `since`. `catalog_only`: it holds back the system catalogs
    only (a logical slot's catalog_xmin), not `jobs`. `refusal` is why the current role may
    not act on it (signal the session, end the prepared transaction, drop the slot); None: it
    may. A standby offers no action: the cure is on the standby."""

    pid: int | None
    user: str | None
    application: str
    client: str
    state: str | None
    backend_type: str | None
    xact_age_s: float | None
    xid_age: int | None
    query: str | None
    backend_start: datetime | None  # None: this role may not see it (pg_read_all_stats)
    refusal: str | None
    kind: str = SESSION
    name: str | None = None
    xid: str | None = None
    database: str | None = None
    slot_type: str | None = None
    catalog_only: bool = False
    since: datetime | None = None
    vacuum: bool = False  # a session that is a VACUUM or an autovacuum worker: never terminated

    def label(self, width: int | None = None) -> str:
        """Its kind and name in its own words: `pid 123`, `prepared transaction 'g'`, …; the
        name quoted with its control characters escaped, cut to `width` with an ellipsis."""
        name = repr(self.name if width is None else cut(self.name or "", width))
        if self.kind == PREPARED:
            return f"prepared transaction {name}"
        if self.kind == SLOT:
            return f"{self.slot_type or 'replication'} replication slot {name}"
        if self.kind == STANDBY:
            return f"standby {name} (hot_standby_feedback)"
        return f"pid {self.pid}"

    @property
    def actionable(self) -> bool:
        """Whether an operator action could end it (a standby's feedback has none here)."""
        return self.kind != STANDBY


@dataclass(frozen=True)
class TableHealth:
    """One jobtui table: size (with TOAST), tuples, maintenance, and autovacuum's trigger."""

    name: str
    size_bytes: int
    live: int
    dead: int
    last_vacuum: datetime | None
    last_autovacuum: datetime | None
    last_analyze: datetime | None
    last_autoanalyze: datetime | None
    autovacuum: bool
    vacuum_trigger: float

    @property
    def dead_share(self) -> float:
        """Dead tuples as a share of all tuples (0 for an empty table)."""
        total = self.live + self.dead
        return self.dead / total if total else 0.0

    @property
    def vacuumed_at(self) -> datetime | None:
        """The last vacuum, manual or automatic."""
        times = [t for t in (self.last_vacuum, self.last_autovacuum) if t is not None]
        return max(times) if times else None

    @property
    def analyzed_at(self) -> datetime | None:
        """The last analyze, manual or automatic."""
        times = [t for t in (self.last_analyze, self.last_autoanalyze) if t is not None]
        return max(times) if times else None


@dataclass(frozen=True)
class IndexHealth:
    table: str
    name: str
    size_bytes: int
    scans: int


@dataclass(frozen=True)
class WorkerWakeup:
    """How a worker is woken, as its last heartbeat wrote it (jobtui/worker/listener.py)."""

    id: str
    host: str
    pid: int
    stale: bool
    heartbeat_age_s: float
    mode: str
    note: str | None
    listen_connected: bool
    last_wakeup_age_s: float | None
    poll_interval_s: float

    @property
    def polling(self) -> bool:
        """Falling back to polling: LISTEN lost, or connected but hearing nothing."""
        return self.mode != "listen" or not self.listen_connected


@dataclass(frozen=True)
class Connections:
    """Client connections of the whole server, against max_connections, by who they are."""

    in_use: int
    max_connections: int
    reserved: int
    workers: int
    consoles: int

    @property
    def others(self) -> int:
        return max(0, self.in_use - self.workers - self.consoles)

    @property
    def share(self) -> float:
        """In use as a share of what ordinary roles may open (max minus the reserved)."""
        usable = max(1, self.max_connections - self.reserved)
        return self.in_use / usable


@dataclass(frozen=True)
class DbHealth:
    now: datetime
    role: str
    holders: list[Blocker]  # everything holding back vacuum here, the real culprit first
    hidden_sessions: int  # sessions here whose details this role may not see
    tables: list[TableHealth]
    indexes: list[IndexHealth]
    workers: list[WorkerWakeup]
    connections: Connections
    notify_usage: float  # pg_notification_queue_usage(): 0..1
    autovacuum: bool  # the server's switch
    naptime_s: float
    replica: ReplicaInfo | None
    warnings: list[str] = field(default_factory=list)

    @property
    def blocker(self) -> Blocker | None:
        """What holds back vacuum of `jobs` the longest (or, if nothing does, the catalogs)."""
        return self.holders[0] if self.holders else None

    @property
    def jobs(self) -> TableHealth | None:
        return next((t for t in self.tables if t.name == "jobs"), None)


async def _rows(
    conn: psycopg.AsyncConnection, sql: str, params: Any = None
) -> list[dict[str, Any]]:
    async with conn.cursor(row_factory=dict_row) as cur:
        await cur.execute(sql, params)
        return await cur.fetchall()


async def collect(conn: psycopg.AsyncConnection, schema: str) -> DbHealth:
    """One reading of the database's health (seven catalogue queries, no table scans)."""
    q = queries(schema)
    tables_param = {"tables": list(JOBTUI_TABLES)}
    holders = [_blocker(r) for r in await _rows(conn, q.dbhealth_blocker)]
    holders += [_horizon(r) for r in await _rows(conn, q.dbhealth_horizons)]
    # The oldest horizon is the one VACUUM obeys; the catalogs-only ones come after (they do
    # not hold back `jobs`). A session whose age is hidden from this role counts as oldest.
    holders.sort(key=lambda b: (b.catalog_only, -(b.xid_age if b.xid_age is not None else 2**62)))
    server = (await _rows(conn, q.dbhealth_server))[0]
    tables = [_table(r) for r in await _rows(conn, q.dbhealth_tables, tables_param)]
    indexes = [
        IndexHealth(r["table_name"], r["index_name"], int(r["size_bytes"]), int(r["scans"]))
        for r in await _rows(conn, q.dbhealth_indexes, tables_param)
    ]
    workers = [_worker(r) for r in await _rows(conn, q.dbhealth_workers)]
    replica_row = (await _rows(conn, q.metrics_replica))[0]
    replica = None
    if replica_row["replica"]:
        lag = replica_row["lag_s"]
        replica = ReplicaInfo(None if lag is None else float(lag), replica_row["replay_lsn"])
    health = DbHealth(
        now=server["now"],
        role=server["role"],
        holders=holders,
        hidden_sessions=int(server["hidden"]),
        tables=tables,
        indexes=indexes,
        workers=workers,
        connections=Connections(
            in_use=int(server["in_use"]),
            max_connections=int(server["max_connections"]),
            reserved=int(server["reserved"]),
            workers=int(server["workers"]),
            consoles=int(server["consoles"]),
        ),
        notify_usage=float(server["notify_usage"]),
        autovacuum=bool(server["autovacuum"]),
        naptime_s=float(server["naptime_s"]),
        replica=replica,
    )
    health.warnings.extend(warnings(health))
    return health


def _blocker(r: dict[str, Any]) -> Blocker:
    return Blocker(
        pid=int(r["pid"]),
        user=r["usename"],
        application=r["application_name"] or "",
        client=r["client"],
        state=r["state"],
        backend_type=r["backend_type"],
        xact_age_s=r["xact_age_s"],
        xid_age=None if r["xid_age"] is None else int(r["xid_age"]),
        query=r["query"],
        backend_start=r["backend_start"],
        refusal=r["signal_refusal"],
        vacuum=bool(r["vacuum"]),
    )


def _horizon(r: dict[str, Any]) -> Blocker:
    """A prepared transaction, slot or standby feedback (dbhealth_horizons) as a Blocker."""
    since = r["since"]
    return Blocker(
        kind=r["kind"],
        pid=r["pid"],
        user=r["usename"],
        application=r["application"] or "",
        client=r["client"] or "",
        state=None,
        backend_type=None,
        xact_age_s=r["age_s"],
        xid_age=None if r["xid_age"] is None else int(r["xid_age"]),
        query=None,
        backend_start=since if r["kind"] == STANDBY else None,
        refusal=None if r["kind"] == STANDBY else r["refusal"],
        name=r["name"],
        xid=r["xid"],
        database=r["database"],
        slot_type=r["slot_type"],
        catalog_only=bool(r["catalog_only"]),
        since=since,
    )


def _table(r: dict[str, Any]) -> TableHealth:
    return TableHealth(
        name=r["relname"],
        size_bytes=int(r["size_bytes"]),
        live=int(r["live"]),
        dead=int(r["dead"]),
        last_vacuum=r["last_vacuum"],
        last_autovacuum=r["last_autovacuum"],
        last_analyze=r["last_analyze"],
        last_autoanalyze=r["last_autoanalyze"],
        autovacuum=bool(r["autovacuum"]),
        vacuum_trigger=float(r["vacuum_trigger"]),
    )


def _worker(r: dict[str, Any]) -> WorkerWakeup:
    return WorkerWakeup(
        id=r["id"],
        host=r["host"],
        pid=int(r["pid"]),
        stale=bool(r["stale"]),
        heartbeat_age_s=float(r["heartbeat_age_s"]),
        mode=r["wakeup_mode"],
        note=r["wakeup_note"],
        listen_connected=bool(r["listen_connected"]),
        last_wakeup_age_s=r["last_wakeup_age_s"],
        poll_interval_s=float(r["poll_interval_s"]),
    )


def format_bytes(n: int) -> str:
    """`8.0 kB`, `12.3 MB`, `1023 MB`: a size in at most 7 characters, never cut (powers of
    1024, as pg_size_pretty; one decimal below 100 of a unit)."""
    size = float(n)
    for unit in ("B", "kB", "MB", "GB", "TB"):
        if size < 1024 or unit == "TB":
            if unit == "B" or size >= 99.95:
                return f"{size:.0f} {unit}"
            return f"{size:.1f} {unit}"
        size /= 1024
    raise AssertionError("unreachable")


def format_count(n: int) -> str:
    """A count in at most 6 characters, never cut: exact below a million, else with its unit
    (`2.45M` for 2,450,251, `1.20G` for 1,204,000,000)."""
    if n < 1_000_000:
        return str(n)
    for unit, scale in (("M", 1e6), ("G", 1e9), ("T", 1e12)):
        value = n / scale
        if value < 999.5 or unit == "T":
            digits = 2 if value < 9.995 else 1 if value < 99.95 else 0
            return f"{value:.{digits}f}{unit}"
    raise AssertionError("unreachable")


def vacuum_overdue(health: DbHealth) -> str | None:
    """Why `jobs` counts as not vacuumed while its dead tuples grow, or None.

    Its dead tuples are over the count at which autovacuum would vacuum it (its own trigger,
    threshold + scale factor × tuples) and no vacuum has run for OVERDUE_NAPS naps (or ever).
    """
    jobs = health.jobs
    if jobs is None or jobs.dead <= jobs.vacuum_trigger:
        return None
    last = jobs.vacuumed_at
    since = None if last is None else (health.now - last).total_seconds()
    if since is not None and since < max(OVERDUE_MIN_S, OVERDUE_NAPS * health.naptime_s):
        return None
    when = "never vacuumed" if since is None else f"not vacuumed for {format_duration(since)}"
    text = (
        f"jobs: {jobs.dead} dead tuples ({jobs.dead_share:.0%}), over the "
        f"{jobs.vacuum_trigger:.0f} at which autovacuum vacuums it, and {when}"
    )
    if not health.autovacuum:
        text += "; autovacuum is off on this server"
    elif not jobs.autovacuum:
        text += "; autovacuum is disabled for this table"
    if health.blocker is not None:
        text += f"; {health.blocker.label()} holds back what a vacuum could remove"
    return text


def warnings(health: DbHealth) -> list[str]:
    """Plain-words warnings, most important first."""
    out: list[str] = []
    overdue = vacuum_overdue(health)
    if overdue:
        out.append(overdue)
    polling = [w for w in health.workers if not w.stale and w.polling]
    if polling:
        out.append(
            f"{len(polling)} live worker(s) polling instead of LISTEN: "
            + ", ".join(w.id for w in polling)
        )
    if health.notify_usage >= 0.5:
        out.append(f"NOTIFY queue {health.notify_usage:.0%} full: a listener is not reading")
    if health.connections.share >= 0.8:
        c = health.connections
        out.append(f"connections: {c.in_use} of {c.max_connections - c.reserved} usable in use")
    if health.hidden_sessions:
        out.append(
            f"{health.hidden_sessions} session(s) hidden from role {health.role}: grant it "
            "pg_read_all_stats to see every session, the blocker included"
        )
    return out


# --- for `stats --json` and Prometheus --------------------------------------------------------


def _iso(t: datetime | None) -> str | None:
    return None if t is None else t.isoformat()


def _holder_json(b: Blocker) -> dict[str, Any]:
    """One holder of the horizon; `may_signal`/`signal_refusal` keep their issue-12 names."""
    return {
        "kind": b.kind,
        "label": b.label(),
        "pid": b.pid,
        "name": b.name,
        "user": b.user,
        "application": b.application,
        "client": b.client,
        "state": b.state,
        "xact_age_s": b.xact_age_s,
        "xid_age": b.xid_age,
        "query": b.query,
        "slot_type": b.slot_type,
        "database": b.database,
        "catalog_only": b.catalog_only,
        "vacuum": b.vacuum,
        "may_signal": b.actionable and b.refusal is None,  # C; K never on a vacuum
        "signal_refusal": b.refusal,
    }


def as_json(health: DbHealth) -> dict[str, Any]:
    """The reading as plain JSON types (the `database` object of `stats --json`)."""
    b = health.blocker
    jobs = health.jobs
    c = health.connections
    return {
        "role": health.role,
        "blocker": None if b is None else _holder_json(b),
        "holders": [_holder_json(h) for h in health.holders],
        "hidden_sessions": health.hidden_sessions,
        "jobs_dead_tuples": None if jobs is None else jobs.dead,
        "jobs_dead_share": None if jobs is None else jobs.dead_share,
        "vacuum_overdue": vacuum_overdue(health),
        "tables": [
            {
                "name": t.name,
                "size_bytes": t.size_bytes,
                "live": t.live,
                "dead": t.dead,
                "last_vacuum": _iso(t.last_vacuum),
                "last_autovacuum": _iso(t.last_autovacuum),
                "last_analyze": _iso(t.last_analyze),
                "last_autoanalyze": _iso(t.last_autoanalyze),
                "autovacuum": t.autovacuum,
                "vacuum_trigger": t.vacuum_trigger,
            }
            for t in health.tables
        ],
        "indexes": [
            {"table": i.table, "name": i.name, "size_bytes": i.size_bytes, "scans": i.scans}
            for i in health.indexes
        ],
        "notify_queue_usage": health.notify_usage,
        "workers": [
            {
                "id": w.id,
                "stale": w.stale,
                "wakeup": "polling" if w.polling else "listen",
                "listen_connected": w.listen_connected,
                "note": w.note,
                "last_wakeup_age_s": w.last_wakeup_age_s,
                "poll_interval_s": w.poll_interval_s,
            }
            for w in health.workers
        ],
        "connections": {
            "in_use": c.in_use,
            "max": c.max_connections,
            "reserved": c.reserved,
            "workers": c.workers,
            "consoles": c.consoles,
            "others": c.others,
        },
        "autovacuum": health.autovacuum,
        "replica": None
        if health.replica is None
        else {"read_only": True, "lag_s": health.replica.lag_s},
        "warnings": list(health.warnings),
    }


def _family(name: str, help_: str, samples: Sequence[tuple[dict[str, str], float]]) -> list[str]:
    lines = [f"# HELP {name} {help_}", f"# TYPE {name} gauge"]
    for labels, value in samples:
        lbl = ",".join(f'{k}="{prometheus_label(v)}"' for k, v in labels.items())
        num = _num(value)
        lines.append(f"{name}{{{lbl}}} {num}" if lbl else f"{name} {num}")
    return lines


def _num(value: float) -> str:
    """Exact: an integral value as an integer (sizes in bytes stay whole), else repr."""
    v = float(value)
    return str(int(v)) if v.is_integer() else repr(v)


def prometheus_lines(health: DbHealth) -> list[str]:
    """The reading as Prometheus text-format lines (gauges), for `stats --prometheus`.

    The replica gauges are the snapshot's (`jobtui_is_replica`), so they are not repeated.
    """
    b = health.blocker
    c = health.connections
    out: list[str] = []
    out += _family(
        "jobtui_db_blocker_xact_age_seconds",
        "Age of the transaction holding back vacuum in this database (0: none).",
        [({}, (b.xact_age_s or 0.0) if b else 0.0)],
    )
    out += _family(
        "jobtui_db_blocker_xid_age",
        "Transaction ids since the snapshot holding back vacuum was taken (0: none).",
        [({}, float(b.xid_age or 0) if b else 0.0)],
    )
    out += _family(
        "jobtui_db_horizon_xid_age",
        "Transaction ids since the oldest horizon held back by each kind of holder: session, "
        "prepared (transaction), slot (replication) and standby (feedback); 0: none.",
        [
            (
                {"kind": kind},
                float(max((h.xid_age or 0 for h in health.holders if h.kind == kind), default=0)),
            )
            for kind in (SESSION, PREPARED, SLOT, STANDBY)
        ],
    )
    out += _family(
        "jobtui_db_table_dead_tuples",
        "Dead tuples per jobtui table.",
        [({"table": t.name}, float(t.dead)) for t in health.tables],
    )
    out += _family(
        "jobtui_db_table_live_tuples",
        "Live tuples per jobtui table.",
        [({"table": t.name}, float(t.live)) for t in health.tables],
    )
    out += _family(
        "jobtui_db_table_size_bytes",
        "Size per jobtui table, TOAST included, indexes not.",
        [({"table": t.name}, float(t.size_bytes)) for t in health.tables],
    )
    out += _family(
        "jobtui_db_index_size_bytes",
        "Size per index of the jobtui tables.",
        [({"table": i.table, "index": i.name}, float(i.size_bytes)) for i in health.indexes],
    )
    out += _family(
        "jobtui_db_jobs_vacuum_overdue",
        "1 when jobs is over its autovacuum trigger and has not been vacuumed for a while.",
        [({}, 1.0 if vacuum_overdue(health) else 0.0)],
    )
    out += _family(
        "jobtui_db_notify_queue_usage",
        "pg_notification_queue_usage(): the share of the NOTIFY queue in use (0..1).",
        [({}, health.notify_usage)],
    )
    live = [w for w in health.workers if not w.stale]
    out += _family(
        "jobtui_worker_listen_connected",
        "1 when the live worker's LISTEN connection is up.",
        [({"worker": w.id}, 1.0 if w.listen_connected else 0.0) for w in live],
    )
    # jobtui_worker_polling comes with the snapshot's worker families (cli/output.py).
    out += _family(
        "jobtui_worker_last_wakeup_age_seconds",
        "Seconds since the live worker last received a NOTIFY.",
        [({"worker": w.id}, w.last_wakeup_age_s) for w in live if w.last_wakeup_age_s is not None],
    )
    out += _family(
        "jobtui_db_connections",
        "Client connections of the server by who holds them.",
        [
            ({"who": "workers"}, float(c.workers)),
            ({"who": "consoles"}, float(c.consoles)),
            ({"who": "others"}, float(c.others)),
        ],
    )
    out += _family(
        "jobtui_db_max_connections", "The server's max_connections.", [({}, c.max_connections)]
    )
    return out
