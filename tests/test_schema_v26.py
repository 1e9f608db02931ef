"""Migration 0026 (issue 24, "a lean hot path"): the INSERT count trigger's short path for
one-row statements and jobtui_claim_limited without its redundant re-check. The head schema is
tests/data/schema_v26.txt, `tools/schema_describe.py DSN --fresh --up-to 26`; the counts'
exactness is tests/test_count_triggers_v26.py's.
"""

from __future__ import annotations

from pathlib import Path

import psycopg

from jobtui.schema import migrate
from jobtui.schema.describe import describe

SNAPSHOT = Path(__file__).parent / "data" / "schema_v26.txt"
COUNTS = (
    "SELECT kind, state, sum(n) FROM jobtui_job_counts() GROUP BY 1, 2 HAVING sum(n) <> 0"
    " ORDER BY 1, 2"
)


def test_the_head_schema_is_its_description(empty_dsn: str) -> None:
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        assert [m.version for m in migrate(conn, "Queue_2", up_to=26)][-1] == 26
        assert describe(conn, "Queue_2") == SNAPSHOT.read_text("utf-8")


def test_a_restored_v25_schema_is_recognised_as_25_and_0026_applies(empty_dsn: str) -> None:
    # 0026 only replaces functions: without looking at what it replaced, a version-25 schema
    # (every table and index of 26) could pass for 26 and keep 0025's trigger functions.
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        migrate(conn, "public", up_to=25)
        conn.execute("DELETE FROM jobtui_migrations")  # a schema-only restore, say
        assert [m.version for m in migrate(conn, "public", up_to=26)] == [26]
        assert describe(conn, "public") == SNAPSHOT.read_text("utf-8")


def test_0026_applies_on_a_database_with_jobs_and_the_counts_stay_exact(empty_dsn: str) -> None:
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        migrate(conn, "public", up_to=25)
        conn.execute(
            "INSERT INTO jobs (kind, payload, run_at)"
            " SELECT 'k' || (i % 3), '{}', now() + (i % 5) * interval '1 hour'"
            " FROM generate_series(1, 300) i"
        )
        conn.execute("INSERT INTO jobs (kind, payload, locked_at) VALUES ('k1', '{}', now())")
        before = conn.execute(COUNTS).fetchall()
        assert [m.version for m in migrate(conn, "public", up_to=26)] == [26]
        assert conn.execute(COUNTS).fetchall() == before
        conn.execute("INSERT INTO jobs (kind, payload) VALUES ('k1', '{}')")
        conn.execute("UPDATE jobs SET finished_at = now() WHERE locked_at IS NOT NULL")
        want = conn.execute(
            "SELECT kind, jobtui_job_state(attempts, max_attempts, locked_at, finished_at,"
            " cancelled_at), count(*) FROM jobs GROUP BY 1, 2 ORDER BY 1, 2"
        ).fetchall()
        assert conn.execute(COUNTS).fetchall() == want
