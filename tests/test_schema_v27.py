"""Migration 0027: the INSERT count trigger's one-row path keys a row by the grouped path's due
expression (rows with NULL attempt columns on a nullable article table), and such a table's
counts are recounted once. The head schema is tests/data/schema_v27.txt,
`tools/schema_describe.py DSN --fresh --up-to 27`; the counts' exactness on such a table is
tests/test_count_triggers_v27.py's.
"""

from __future__ import annotations

from pathlib import Path

import psycopg

from jobtui.schema import migrate
from jobtui.schema.describe import describe

SNAPSHOT = Path(__file__).parent / "data" / "schema_v27.txt"


def test_the_head_schema_is_its_description(empty_dsn: str) -> None:
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        assert [m.version for m in migrate(conn, "Queue_2", up_to=27)][-1] == 27
        assert describe(conn, "Queue_2") == SNAPSHOT.read_text("utf-8")


def test_a_restored_v26_schema_is_recognised_as_26_and_0027_applies(empty_dsn: str) -> None:
    # 0027 only replaces a function: a version-26 schema must not pass for 27.
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        migrate(conn, "public", up_to=26)
        conn.execute("DELETE FROM jobtui_migrations")  # a schema-only restore, say
        assert [m.version for m in migrate(conn, "public", up_to=27)] == [27]
        assert describe(conn, "public") == SNAPSHOT.read_text("utf-8")


def test_0027_on_jobtuis_own_table_leaves_the_counts_as_they_are(empty_dsn: str) -> None:
    # NOT NULL attempt columns: no recount, the folded rows stay exactly as they were.
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        migrate(conn, "public", up_to=26)
        conn.execute(
            "INSERT INTO jobs (kind, payload, run_at)"
            " SELECT 'k' || (i % 3), '{}', now() + (i % 5) * interval '1 hour'"
            " FROM generate_series(1, 300) i"
        )
        conn.execute("INSERT INTO jobs (kind, payload) VALUES ('k1', '{}')")
        before = conn.execute("SELECT * FROM job_counts ORDER BY 1, 2, 3, 4, 5").fetchall()
        assert [m.version for m in migrate(conn, "public", up_to=27)] == [27]
        assert conn.execute("SELECT * FROM job_counts ORDER BY 1, 2, 3, 4, 5").fetchall() == before
