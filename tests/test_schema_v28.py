"""Migration 0028: the housekeeping sweeps' own partial indexes (jobs_waiting_tried,
jobs_waiting_cancel) and a handler limit of at least 1. The head schema is
tests/data/schema_v28.txt, `tools/schema_describe.py DSN --fresh --up-to 28`; the sweeps' reads
are tests/test_housekeeping_scale.py's.
"""

from __future__ import annotations

from pathlib import Path

import psycopg

from jobtui.schema import migrate
from jobtui.schema.describe import describe

SNAPSHOT = Path(__file__).parent / "data" / "schema_v28.txt"


def test_the_head_schema_is_its_description(empty_dsn: str) -> None:
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        assert [m.version for m in migrate(conn, "Queue_2", up_to=28)][-1] == 28
        assert describe(conn, "Queue_2") == SNAPSHOT.read_text("utf-8")


def test_a_restored_schema_without_0028_is_recognised_and_0028_applies(empty_dsn: str) -> None:
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        before = [m.version for m in migrate(conn, "public", up_to=27)][-1]
        conn.execute("DELETE FROM jobtui_migrations")  # a schema-only restore, say
        assert [m.version for m in migrate(conn, "public", up_to=28)] == [28]
        assert before < 28
        assert describe(conn, "public") == SNAPSHOT.read_text("utf-8")


def test_0028_applies_on_a_database_with_jobs_and_indexes_just_the_swept_rows(
    empty_dsn: str,
) -> None:
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        migrate(conn, "public", up_to=27)
        conn.execute(
            "INSERT INTO jobs (kind, payload) SELECT 'k', '{}' FROM generate_series(1, 50)"
        )
        tried = conn.execute(
            "INSERT INTO jobs (kind, payload, attempts, max_attempts) VALUES"
            " ('k', '{}', 1, 5), ('k', '{}', 0, 0) RETURNING id"
        ).fetchall()
        cancel = conn.execute(
            "INSERT INTO jobs (kind, payload, cancel_requested) VALUES ('k', '{}', true)"
            " RETURNING id"
        ).fetchall()
        assert [m.version for m in migrate(conn, "public", up_to=28)] == [28]
        conn.execute("SET enable_seqscan = off")
        conn.execute("SET enable_bitmapscan = off")
        for index, where, want in (
            ("jobs_waiting_tried", "(attempts > 0 OR attempts >= max_attempts)", tried),
            ("jobs_waiting_cancel", "cancel_requested", cancel),
        ):
            sql = (
                "SELECT id FROM jobs WHERE finished_at IS NULL AND locked_at IS NULL AND "
                + where
                + " ORDER BY id"
            )
            plan = conn.execute("EXPLAIN (FORMAT JSON) " + sql).fetchone()
            assert plan is not None and index in str(plan[0]), plan
            assert conn.execute(sql).fetchall() == want
