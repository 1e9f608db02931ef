"""Migration 0026's one-row INSERT path against every shape of insert a foreign writer can do,
beyond test_count_triggers_v26.py's: explicit finished/locked/cancelled columns, attempts at or
past max_attempts (and a kind whose handler declares its own), run_at at +-infinity and on
minute, hour and day edges, 0, 1 and 2 rows from INSERT ... SELECT, ON CONFLICT DO NOTHING,
two INSERTs in one statement, COPY of one row and of none, REPEATABLE READ and SERIALIZABLE,
a savepoint rolled back and a transaction rolled back, `jobtui.fold_in_trigger` on and off,
session time zones off UTC by 5:45 and -3:30, the enqueue API's single and bulk paths, and
one-row inserts between folds as of any time.

The checks hold whether or not the rows were folded: per (kind, state) job_counts sums to a
recount of `jobs`; per kind, at every boundary of the waiting rows (their due and until) the
rows wholly before it count exactly the waiting jobs with run_at before it; job_flow's
arrivals minus departures per kind is that kind's unfinished rows (every row here arrived by
an INSERT on an empty database); and the snapshot's ready and scheduled are the jobs'.
"""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta

import psycopg
import pytest
from test_count_triggers_v26 import RECOUNT, UNFINISHED, flow, rows, step

from jobtui import enqueue, enqueue_many
from jobtui.sql import queries

BY_STATE = "SELECT kind, state, sum(n) FROM job_counts GROUP BY 1, 2 HAVING sum(n) <> 0"
RECOUNT_BY_STATE = (
    "SELECT kind, state, sum(n) FROM ("
    + RECOUNT.replace("::text, count(*)", ", count(*)")
    + ") r(kind, state, due, n) GROUP BY 1, 2"
)
# Each waiting row as [lo, hi) in epoch seconds (psycopg loads no infinite timestamps); a delta
# row is its minute, one at +-infinity is that point.
WAITING_ROWS = """
SELECT kind, extract(epoch FROM due)::float8,
       extract(epoch FROM coalesce(until, CASE WHEN due IN ('infinity', '-infinity') THEN due
                                               ELSE due + interval '1 minute' END))::float8, n
FROM job_counts WHERE state = 'waiting'
"""
WAITING_BEFORE = """
SELECT count(*) FROM jobs
WHERE kind = %(kind)s AND finished_at IS NULL AND locked_at IS NULL AND attempts < max_attempts
  AND (run_at < to_timestamp(%(t)s::float8) OR %(t)s::float8 = 'Infinity')
"""
SNAPSHOT_DIRECT = """
SELECT kind, count(*) FILTER (WHERE run_at <= now()), count(*) FILTER (WHERE run_at > now())
FROM jobs WHERE finished_at IS NULL AND locked_at IS NULL AND attempts < max_attempts
GROUP BY 1
"""
INF = float("inf")


def check(conn: psycopg.Connection, what: object = "") -> None:
    """Counts, waiting rows by due time, flow and snapshot agree with `jobs` (see above)."""
    assert rows(conn, BY_STATE) == rows(conn, RECOUNT_BY_STATE), what
    waiting = conn.execute(WAITING_ROWS).fetchall()
    for kind in {r[0] for r in waiting}:
        mine = [(lo, hi, n) for k, lo, hi, n in waiting if k == kind]
        for t in sorted({lo for lo, _, _ in mine} | {hi for _, hi, _ in mine}):
            if any(lo < t < hi for lo, hi, _ in mine):
                continue  # t falls inside a coarse row: not a boundary of the counts
            want = sum(n for lo, hi, n in mine if t == INF or (hi <= t and not lo == hi == t))
            got = conn.execute(WAITING_BEFORE, {"kind": kind, "t": t}).fetchone()
            assert got is not None and got[0] == want, (what, kind, t)
    unfinished = rows(conn, UNFINISHED)
    kinds_flow = flow(conn)
    for kind in {k for (k,) in unfinished} | set(kinds_flow):
        arrived, departed = kinds_flow.get(kind, (0, 0))
        assert arrived - departed == unfinished[(kind,)], (what, kind)
    with conn.transaction():  # one now() for both
        snap = conn.execute(queries("public").metrics_state_counts).fetchall()
        direct = conn.execute(SNAPSHOT_DIRECT).fetchall()
    assert {r[0]: (r[1], r[2]) for r in snap if (r[1], r[2]) != (0, 0)} == {
        r[0]: (r[1], r[2]) for r in direct
    }, what


ONE_ROW = (
    "INSERT INTO jobs (kind, payload, finished_at) VALUES ('a', '{}', now())",
    "INSERT INTO jobs (kind, payload, locked_at) VALUES ('a', '{}', now())",
    "INSERT INTO jobs (kind, payload, cancelled_at) VALUES ('a', '{}', now())",
    "INSERT INTO jobs (kind, payload, cancelled_at, finished_at) VALUES ('a', '{}', now(), now())",
    "INSERT INTO jobs (kind, payload, cancelled_at, locked_at, attempts)"
    " VALUES ('a', '{}', now(), now(), 3)",
    "INSERT INTO jobs (kind, payload, attempts, max_attempts) VALUES ('a', '{}', 7, 5)",
    "INSERT INTO jobs (kind, payload, attempts, max_attempts, cancelled_at)"
    " VALUES ('a', '{}', 7, 5, now())",
    "INSERT INTO jobs (kind, payload, attempts, max_attempts) VALUES ('a', '{}', 4, 5)",
    "INSERT INTO jobs (kind, payload, attempts, max_attempts) VALUES ('a', '{}', 0, 0)",
    "INSERT INTO jobs (kind, payload, attempts, max_attempts) VALUES ('a', '{}', -1, 0)",
    "INSERT INTO jobs (kind, payload, run_at) VALUES ('a', '{}', 'infinity')",
    "INSERT INTO jobs (kind, payload, run_at) VALUES ('a', '{}', '-infinity')",
    "INSERT INTO jobs (kind, payload, run_at, attempts) VALUES ('a', '{}', '-infinity', 2)",
    "INSERT INTO jobs (kind, payload, run_at)"
    " VALUES ('a', '{}', date_trunc('minute', now()) - interval '1 microsecond')",
    "INSERT INTO jobs (kind, payload, run_at)"
    " VALUES ('a', '{}', date_trunc('day', now(), 'UTC') + interval '2 days'"
    " - interval '1 microsecond')",
    "INSERT INTO jobs (kind, payload, run_at)"
    " VALUES ('a', '{}', '2026-12-31 23:59:59.999999-05:30')",
    # a kind whose handler declares max_attempts 1: counted by the row's own, as 0025 does
    "INSERT INTO jobs (kind, payload) VALUES ('declared', '{}')",
    "INSERT INTO jobs (kind, payload, attempts) VALUES ('declared', '{}', 2)",
    "INSERT INTO jobs (kind, payload) SELECT 'a', '{}' WHERE false",
    "INSERT INTO jobs (kind, payload) SELECT 'a', '{}'",
    "INSERT INTO jobs (kind, payload) SELECT k, '{}' FROM (VALUES ('a'), ('b')) v(k)",
    "INSERT INTO jobs (kind, payload, unique_key) VALUES ('u', '{}', 'k1')",
    "INSERT INTO jobs (kind, payload, unique_key) VALUES ('u', '{}', 'k1') ON CONFLICT DO NOTHING",
    "WITH x AS (INSERT INTO jobs (kind, payload) VALUES ('w', '{}') RETURNING 1)"
    " INSERT INTO jobs (kind, payload, locked_at) VALUES ('w', '{}', now())",
)


@pytest.mark.parametrize("tz", ["UTC", "Asia/Kathmandu", "America/St_Johns"])
def test_every_one_row_insert_shape_keeps_counts_flow_and_snapshot_exact(
    conn: psycopg.Connection, tz: str
) -> None:
    conn.execute("SET jobtui.fold_in_trigger = off")
    conn.execute(psycopg.sql.SQL("SET TimeZone = {}").format(psycopg.sql.Literal(tz)))
    conn.execute(
        "INSERT INTO kind_handlers (kind, max_attempts, backoff_base_s, backoff_cap_s,"
        " declared_by) VALUES ('declared', 1, 1, 1, 'test')"
    )
    for sql in ONE_ROW:
        step(conn, sql)
        check(conn, sql)
    # A statement that inserts one row and finishes another: two triggers, one statement.
    conn.execute(
        "WITH x AS (INSERT INTO jobs (kind, payload) VALUES ('w', '{}') RETURNING id)"
        " UPDATE jobs SET finished_at = now() WHERE kind = 'w' AND locked_at IS NOT NULL"
    )
    check(conn, "insert and finish")
    with conn.cursor().copy("COPY jobs (kind, payload, attempts, cancelled_at) FROM STDIN") as cp:
        cp.write_row(("c", "{}", 1, datetime.now(UTC)))
    check(conn, "COPY of one row")
    with conn.cursor().copy("COPY jobs (kind, payload) FROM STDIN"):
        pass
    check(conn, "COPY of none")


@pytest.mark.parametrize("isolation", ["READ COMMITTED", "REPEATABLE READ", "SERIALIZABLE"])
@pytest.mark.parametrize("fold", ["on", "off"])
def test_one_row_inserts_in_transactions_savepoints_and_rollbacks(
    conn: psycopg.Connection, isolation: str, fold: str
) -> None:
    conn.execute(psycopg.sql.SQL("SET jobtui.fold_in_trigger = {}").format(psycopg.sql.SQL(fold)))
    level = psycopg.sql.SQL(isolation)
    conn.execute(psycopg.sql.SQL("BEGIN ISOLATION LEVEL {}").format(level))
    conn.execute("INSERT INTO jobs (kind, payload, attempts) VALUES ('t', '{}', 1)")
    conn.execute("SAVEPOINT s")
    conn.execute("INSERT INTO jobs (kind, payload, cancelled_at) VALUES ('t', '{}', now())")
    conn.execute("ROLLBACK TO SAVEPOINT s")
    # more than 1,000 count rows at once: folded here in READ COMMITTED with the fold on only
    conn.execute(
        "INSERT INTO jobs (kind, payload, run_at)"
        " SELECT 't', '{}', now() + g * interval '1 minute' FROM generate_series(1, 1500) g"
    )
    conn.execute(
        "INSERT INTO jobs (kind, payload, run_at) VALUES ('t', '{}', now() + interval '3 days')"
    )
    conn.execute("COMMIT")
    folded = conn.execute(
        "SELECT count(*) FILTER (WHERE until IS NOT NULL) > 0 FROM job_counts"
    ).fetchone()
    assert folded == ((isolation, fold) == ("READ COMMITTED", "on"),)
    check(conn, "committed")
    conn.execute(psycopg.sql.SQL("BEGIN ISOLATION LEVEL {}").format(level))
    conn.execute("INSERT INTO jobs (kind, payload, attempts) VALUES ('t', '{}', 1)")
    conn.execute("ROLLBACK")
    check(conn, "rolled back")


def test_the_enqueue_apis_single_and_bulk_keep_counts_exact(conn: psycopg.Connection) -> None:
    enqueue(conn, "e", {})
    enqueue(conn, "e", {}, delay=timedelta(days=3))
    enqueue(conn, "e", {}, run_at=datetime(2026, 12, 31, 23, 59, 59, tzinfo=UTC))
    assert enqueue(conn, "e", {}, unique_key="x") == enqueue(conn, "e", {}, unique_key="x")
    check(conn, "enqueue")
    enqueue_many(conn, [{"kind": "m", "payload": {}}])
    enqueue_many(
        conn,
        [
            {"kind": "m", "payload": {}, "max_attempts": 1},
            {"kind": "n", "payload": {}, "delay": timedelta(hours=5)},
        ],
    )
    enqueue_many(
        conn,
        [
            {"kind": "m", "payload": {}, "unique_key": "q"},
            {"kind": "m", "payload": {}, "unique_key": "q"},
        ],
    )
    enqueue_many(conn, [])
    check(conn, "enqueue_many")


# run_at for a one-row insert: +-infinity, and offsets from now and from the minute, hour and
# day on the edges of the fold's widths (per minute to the end of the next hour, per hour to
# the end of tomorrow UTC, one row after).
EDGES = (
    "0",
    "-1 microsecond",
    "59.999999 seconds",
    "60 seconds",
    "-90 seconds",
    "1 hour",
    "2 hours",
    "2 hours -1 microsecond",
    "1 day",
    "-1 day",
    "2 days",
    "3 days",
    "47 hours 59 minutes 59.999999 seconds",
)
BASES = (
    "now()",
    "date_trunc('minute', now())",
    "date_trunc('hour', now(), 'UTC')",
    "date_trunc('day', now(), 'UTC')",
)
EXTRAS: tuple[tuple[str, str], ...] = (
    ("", ""),
    (", attempts", ", 1"),
    (", cancelled_at", ", now()"),
)


@pytest.mark.parametrize("seed", range(4))
def test_one_row_inserts_between_folds_at_any_time_keep_counts_exact(
    conn: psycopg.Connection, seed: int
) -> None:
    rnd = random.Random(seed)
    conn.execute("SET TimeZone = 'Asia/Kathmandu'")
    for i in range(150):
        edge = rnd.choice((*EDGES, "infinity", "-infinity"))
        run_at = (
            f"'{edge}'::timestamptz"
            if "infinity" in edge
            else f"{rnd.choice(BASES)} + interval '{edge}'"
        )
        cols, vals = rnd.choice(EXTRAS)
        conn.execute(
            f"INSERT INTO jobs (kind, payload, run_at{cols}) VALUES (%s, '{{}}', {run_at}{vals})",
            (rnd.choice("xy"),),
        )
        r = rnd.random()
        if r < 0.15:
            conn.execute("SELECT jobtui_fold_job_counts()")
        elif r < 0.25:  # a fold as of an earlier time (never before the last one)
            conn.execute(
                "SELECT jobtui_fold_job_counts_at(now() - %s * interval '1 minute')",
                (rnd.randint(0, 3000),),
            )
        elif r < 0.35:
            conn.execute(
                "UPDATE jobs SET locked_at = now(), attempts = attempts + 1 WHERE id = ("
                "SELECT id FROM jobs WHERE locked_at IS NULL AND finished_at IS NULL"
                " ORDER BY random() LIMIT 1)"
            )
        check(conn, (i, run_at, cols))
