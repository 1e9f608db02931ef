"""Issue 15 item 8: one operator action is one audit row, holding the total and the filter.

Today `prune` writes one row per batch of 1,000 and a bulk requeue one per batch of 5,000.
"""

from __future__ import annotations

import psycopg
from test_cli_support import assert_ok, run_cli

PRUNED = 5_000
REQUEUED = 12_000


def _audit_rows(conn: psycopg.Connection, action_like: str) -> list[tuple[str, int]]:
    return conn.execute(
        "SELECT action, count FROM audit_log WHERE action LIKE %s ORDER BY id", (action_like,)
    ).fetchall()


def test_one_prune_is_one_audit_row(dsn: str, conn: psycopg.Connection) -> None:
    conn.execute(
        "INSERT INTO jobs (kind, payload, finished_at, attempts) "
        "SELECT 'old', '{}', now() - interval '30 days', 1 FROM generate_series(1, %s)",
        (PRUNED,),
    )
    out = assert_ok(run_cli("prune", "--older-than", "7d", dsn=dsn))
    assert f"pruned {PRUNED}" in out
    rows = _audit_rows(conn, "prune%")
    assert rows == [("prune_finished", PRUNED)], rows


def test_one_bulk_requeue_is_one_audit_row_with_its_filter(
    dsn: str, conn: psycopg.Connection
) -> None:
    conn.execute(
        "INSERT INTO dead_letters (id, kind, payload, attempts, max_attempts, created_at, "
        "run_at, last_error, errors, reason) "
        "SELECT nextval(pg_get_serial_sequence('jobs', 'id')), 'mail', '{}', 3, 3, now(), now(), "
        "'boom', '[]', 'failed' FROM generate_series(1, %s)",
        (REQUEUED,),
    )
    assert_ok(run_cli("dead", "requeue", "--kind", "mail", dsn=dsn))
    assert conn.execute("SELECT count(*) FROM jobs").fetchone() == (REQUEUED,)
    rows = conn.execute(
        "SELECT action, count, filter->>'kind' FROM audit_log WHERE action LIKE 'requeue%%'"
    ).fetchall()
    assert rows == [("requeue_dead_matching", REQUEUED, "mail")], rows
