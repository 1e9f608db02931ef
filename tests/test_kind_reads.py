"""Issue 24, the console at scale: the kind screen's reads that visit every unfinished row of
the kind are skipped when what they would find is known to be nothing, and give the same
answers otherwise.

- `kind_retry_errors` reads the kind's unlocked rows only when the exact counts (0016) hold
  some with attempts > 0 (`retrying` or `exhausted`); at 22,500 waiting rows of a kind, with no
  retries, it read 12,000 heap pages to return no row (30-140 ms on benchmarks/scale.py's data).
- `kind_row_max_attempts` is not read when the handler declares max_attempts: the screen then
  shows the handler's, which overrides the rows'.

The plans are checked with EXPLAIN ANALYZE: the scans of `jobs` visit no row (the waiting rows'
scan "never executed").
"""

from __future__ import annotations

from typing import Any

import psycopg

from jobtui import kindinfo
from jobtui.sql import queries

Q = queries("public")
PARAMS = {"kind": "mail", "since": None, "limit": 5}


def jobs_rows_visited(conn: psycopg.Connection, sql: str) -> int:
    """How many rows of `jobs` the scans of `sql` visited (returned or filtered out), planned
    as at scale: through the partial indexes (a table this small would be read whole, and the
    running rows' branch would then visit the waiting rows too)."""
    conn.execute("SET enable_seqscan = off")
    row = conn.execute("EXPLAIN (ANALYZE, FORMAT JSON) " + sql, PARAMS).fetchone()
    assert row is not None
    seen = ("Actual Rows", "Rows Removed by Filter", "Rows Removed by Index Recheck")

    def walk(node: dict[str, Any]) -> int:
        own = sum(int(node.get(k, 0)) for k in seen) if node.get("Relation Name") == "jobs" else 0
        return own + sum(walk(n) for n in node.get("Plans", []))

    return walk(row[0][0]["Plan"])


def waiting(conn: psycopg.Connection, n: int, **cols: object) -> None:
    names = ", ".join(["kind", "payload", *cols])
    marks = ", ".join(["'mail'", "'{}'", *(["%s"] * len(cols))])
    for _ in range(n):
        conn.execute(f"INSERT INTO jobs ({names}) VALUES ({marks})", list(cols.values()))


def test_retry_errors_read_no_row_when_the_counts_hold_no_retry(conn: psycopg.Connection) -> None:
    waiting(conn, 30)
    assert conn.execute(Q.kind_retry_errors, PARAMS).fetchall() == []
    assert jobs_rows_visited(conn, Q.kind_retry_errors) == 0


def test_retry_errors_still_list_retrying_and_exhausted_rows(conn: psycopg.Connection) -> None:
    waiting(conn, 30)
    waiting(conn, 2, attempts=1, last_error="OSError: disk full\nat line 3")
    # Gave up on by a classic consumer (attempts = max_attempts): listed, as before.
    waiting(conn, 1, attempts=5, max_attempts=5, last_error="KeyError: 'x'")
    rows = conn.execute(Q.kind_retry_errors, PARAMS).fetchall()
    assert sorted((r[0], r[1]) for r in rows) == [("KeyError: 'x'", 1), ("OSError: disk full", 2)]
    assert jobs_rows_visited(conn, Q.kind_retry_errors) >= 3


def test_retry_errors_of_exhausted_rows_alone(conn: psycopg.Connection) -> None:
    waiting(conn, 3)
    waiting(conn, 1, attempts=3, max_attempts=3, last_error="ValueError: bad")
    rows = conn.execute(Q.kind_retry_errors, PARAMS).fetchall()
    assert [(r[0], r[1]) for r in rows] == [("ValueError: bad", 1)]


async def test_row_max_attempts_unread_when_the_handler_declares_it(
    conn: psycopg.Connection, aconn: psycopg.AsyncConnection
) -> None:
    waiting(conn, 5, max_attempts=3)
    waiting(conn, 2, max_attempts=9)
    assert (await kindinfo.load(aconn, "public", "mail", "hour")).row_max_attempts == (3, 9)
    assert jobs_rows_visited(conn, Q.kind_row_max_attempts) == 7
    # A handler that leaves max_attempts to the rows: they are still read.
    conn.execute(
        "INSERT INTO kind_handlers (kind, max_attempts, timeout_s, backoff_base_s, "
        "backoff_cap_s, declared_by) VALUES ('mail', NULL, 30, 60, 3600, 'w:1:a')"
    )
    assert (await kindinfo.load(aconn, "public", "mail", "hour")).row_max_attempts == (3, 9)
    conn.execute("UPDATE kind_handlers SET max_attempts = 7 WHERE kind = 'mail'")
    info = await kindinfo.load(aconn, "public", "mail", "hour")
    assert info.handler is not None and info.handler.max_attempts == 7
    assert info.row_max_attempts is None  # the screen shows the handler's 7
    assert jobs_rows_visited(conn, Q.kind_row_max_attempts) == 0


def test_retry_errors_of_a_kind_with_many_jobs_ahead_read_the_tried_rows(
    conn: psycopg.Connection,
) -> None:
    """Jobs scheduled far ahead (reminders) are never tried: when the kind's waiting rows
    outnumber every kind's tried ones, the tried rows are read (jobs_waiting_tried), not every
    waiting row of the kind. Same groups, same total, either way."""
    conn.execute(
        "INSERT INTO jobs (kind, payload, run_at) SELECT 'mail', '{}',"
        " now() + make_interval(days => 1 + g % 30) FROM generate_series(1, 5000) g"
    )
    waiting(conn, 2, attempts=1, last_error="OSError: disk full\nat line 3")
    waiting(conn, 1, attempts=5, max_attempts=5, last_error="KeyError: 'x'")
    conn.execute(
        "INSERT INTO jobs (kind, payload, attempts, last_error)"
        " SELECT 'sms', '{}', 1, 'TimeoutError: upstream' FROM generate_series(1, 1000)"
    )
    conn.execute("ANALYZE jobs")
    rows = conn.execute(Q.kind_retry_errors, PARAMS).fetchall()
    assert sorted((r[0], r[1], r[3]) for r in rows) == [
        ("KeyError: 'x'", 1, 3),
        ("OSError: disk full", 2, 3),
    ]
    assert jobs_rows_visited(conn, Q.kind_retry_errors) == 1003  # 3 of mail, 1,000 of sms
    # A kind with fewer waiting rows than every kind's tried ones: read by the kind.
    sms = conn.execute(Q.kind_retry_errors, {**PARAMS, "kind": "sms"}).fetchall()
    assert [(r[0], r[1], r[3]) for r in sms] == [("TimeoutError: upstream", 1000, 1000)]
