"""Migration 0029: jobs_pending_kind keys on (kind, run_at, id) and the limited claim picks in
that order, so jobs sharing a run_at are taken in id order. The head schema is
tests/data/schema_v29.txt, `tools/schema_describe.py DSN --fresh --up-to 29`; the claim's order
is tests/test_claim_tie_order.py's.
"""

from __future__ import annotations

from pathlib import Path

import psycopg

from jobtui.schema import migrate
from jobtui.schema.describe import describe

SNAPSHOT = Path(__file__).parent / "data" / "schema_v29.txt"


def test_the_head_schema_is_its_description(empty_dsn: str) -> None:
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        assert [m.version for m in migrate(conn, "Queue_2", up_to=29)][-1] == 29
        assert describe(conn, "Queue_2") == SNAPSHOT.read_text("utf-8")


def test_a_restored_schema_without_0029_is_recognised_and_0029_applies(empty_dsn: str) -> None:
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        migrate(conn, "public", up_to=28)
        conn.execute("DELETE FROM jobtui_migrations")  # a schema-only restore, say
        assert [m.version for m in migrate(conn, "public", up_to=29)] == [29]
        assert describe(conn, "public") == SNAPSHOT.read_text("utf-8")


def test_0029_applies_on_a_database_with_waiting_rows_and_claims_them_in_id_order(
    empty_dsn: str,
) -> None:
    """A database at 0028 with waiting rows of a limited kind that share a run_at, some of them
    updated since (their entries now after the others'), and running and finished rows: after
    0029 the index holds just the waiting rows and the claim takes them in id order."""
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        migrate(conn, "public", up_to=28)
        conn.execute(
            "INSERT INTO jobs (kind, payload, run_at)"
            " SELECT 'lim', '{}', now() - interval '1 minute' FROM generate_series(1, 20)"
        )
        conn.execute(
            "INSERT INTO jobs (kind, payload, locked_at, locked_by, finished_at) VALUES"
            " ('lim', '{}', now(), 'w0', NULL), ('lim', '{}', now(), 'w0', now())"
        )
        waiting = [r[0] for r in conn.execute("SELECT id FROM jobs ORDER BY id LIMIT 20")]
        for priority in (1, 0):  # not HOT: new versions at the end of the heap
            conn.execute(
                "UPDATE jobs SET priority = %s WHERE id = ANY(%s)", (priority, waiting[:10])
            )
        conn.execute("INSERT INTO kind_limits (kind, declared_concurrency) VALUES ('lim', 30)")
        assert [m.version for m in migrate(conn, "public", up_to=29)] == [29]
        conn.execute("SET enable_seqscan = off")
        conn.execute("SET enable_bitmapscan = off")
        sql = (
            "SELECT id FROM jobs WHERE kind = 'lim' AND finished_at IS NULL"
            " AND locked_at IS NULL ORDER BY kind, run_at, id"
        )
        plan = conn.execute("EXPLAIN (FORMAT JSON) " + sql).fetchone()
        assert plan is not None and "jobs_pending_kind" in str(plan[0]), plan
        assert "Sort" not in str(plan[0]), plan
        assert [r[0] for r in conn.execute(sql)] == waiting
        got = conn.execute(
            "SELECT id FROM jobtui_claim_limited(ARRAY['lim'], 'w1', 5, 1.0) WHERE id IS NOT NULL"
        ).fetchall()
        assert sorted(r[0] for r in got) == waiting[:5]
