"""Migration 0025 (issue 24, "a lean hot path"): the waiting phase carries only the indexes the
claim needs. tests/data/schema_v25.txt is `tools/schema_describe.py DSN --fresh --up-to 25`.
"""

from __future__ import annotations

from pathlib import Path

import psycopg

from jobtui.schema import migrate
from jobtui.schema.describe import describe

SNAPSHOT = Path(__file__).parent / "data" / "schema_v25.txt"
# Every index a plain waiting row (no unique key, not a rerun, not cancelled) enters at INSERT:
# the primary key, the claims' (all kinds; a kind at a time) and the article's claim and the
# per-kind oldest ready row (run_at order).
WAITING_INDEXES = {
    "jobs_pkey",
    "jobs_claim",
    "jobs_claim_kind",
    "jobs_pending",
    "jobs_pending_kind",
}


def entered_by(conn: psycopg.Connection, job_id: int) -> set[str]:
    """The indexes on `jobs` whose predicate row `job_id` meets (an index without one: all)."""
    names = set()
    rows = conn.execute(
        "SELECT c.relname, pg_get_expr(i.indpred, i.indrelid) FROM pg_index i"
        " JOIN pg_class c ON c.oid = i.indexrelid WHERE i.indrelid = 'jobs'::regclass"
    ).fetchall()
    for name, pred in rows:
        row = conn.execute(
            f"SELECT coalesce(({pred or 'true'}), false) FROM jobs WHERE id = %s", (job_id,)
        ).fetchone()
        assert row is not None
        if row[0]:
            names.add(name)
    return names


def test_a_waiting_row_enters_only_the_claims_indexes(empty_dsn: str) -> None:
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        migrate(conn, "public")
        row = conn.execute(
            "INSERT INTO jobs (kind, payload) VALUES ('k', '{}') RETURNING id"
        ).fetchone()
        assert row is not None
        assert entered_by(conn, row[0]) == WAITING_INDEXES


def test_the_schema_after_0025_is_its_description(empty_dsn: str) -> None:
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        assert [m.version for m in migrate(conn, "Queue_2", up_to=25)][-1] == 25
        assert describe(conn, "Queue_2") == SNAPSHOT.read_text("utf-8")


def test_a_restored_v24_schema_is_recognised_as_24_and_0025_applies(empty_dsn: str) -> None:
    # 0025 only drops indexes: a version-24 schema holds every object version 25 has, so
    # without looking at what 0025 dropped it was recognised as 25 and kept its two indexes.
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        migrate(conn, "public", up_to=24)
        conn.execute("DELETE FROM jobtui_migrations")  # a schema-only restore, say
        assert [m.version for m in migrate(conn, "public", up_to=25)] == [25]
        assert describe(conn, "public") == SNAPSHOT.read_text("utf-8")
