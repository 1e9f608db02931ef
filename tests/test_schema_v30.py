"""Migration 0030: a claim of several limited kinds keeps `want` of the kinds' picks in
(run_at, id) order, so each kind gives the head of its line (tests/test_attack_0029.py has the
claim). The head schema is tests/data/schema_v30.txt, `tools/schema_describe.py DSN --fresh
--up-to 30`.
"""

from __future__ import annotations

from pathlib import Path

import psycopg

from jobtui.schema import migrate
from jobtui.schema.describe import describe

SNAPSHOT = Path(__file__).parent / "data" / "schema_v30.txt"


def test_the_head_schema_is_its_description(empty_dsn: str) -> None:
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        assert [m.version for m in migrate(conn, "Queue_2", up_to=30)][-1] == 30
        assert describe(conn, "Queue_2") == SNAPSHOT.read_text("utf-8")


def test_a_restored_schema_without_0030_is_recognised_and_0030_applies(empty_dsn: str) -> None:
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        migrate(conn, "public", up_to=29)
        conn.execute("DELETE FROM jobtui_migrations")  # a schema-only restore, say
        assert [m.version for m in migrate(conn, "public", up_to=30)] == [30]
        assert describe(conn, "public") == SNAPSHOT.read_text("utf-8")
