"""Migration 0029: the limited claim (jobtui_claim_limited) takes a kind's jobs in the claim
order of every kind, (priority DESC, run_at, id), through jobs_claim_kind; the function is all
it changes (tests/data/schema_v28.txt and schema_v29.txt differ in the pick's ORDER BY alone).
The head schema is tests/data/schema_v29.txt, `tools/schema_describe.py DSN --fresh --up-to
29`; the claim's order is tests/test_claim_tie_order.py's.
"""

from __future__ import annotations

from pathlib import Path

import psycopg

from jobtui.schema import migrate
from jobtui.schema.describe import describe

DATA = Path(__file__).parent / "data"
SNAPSHOT = DATA / "schema_v29.txt"


def test_the_head_schema_is_its_description(empty_dsn: str) -> None:
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        assert [m.version for m in migrate(conn, "Queue_2", up_to=29)][-1] == 29
        assert describe(conn, "Queue_2") == SNAPSHOT.read_text("utf-8")


def test_0029_changes_only_the_limited_claims_order() -> None:
    """Against 0028's description: one line, the pick's ORDER BY; no index or table change."""
    old = (DATA / "schema_v28.txt").read_text("utf-8").splitlines()
    new = SNAPSHOT.read_text("utf-8").splitlines()
    changed = [(a, b) for a, b in zip(old, new, strict=True) if a != b]
    assert [(a.strip(), b.strip()) for a, b in changed] == [
        ("ORDER BY x.kind, x.run_at", "ORDER BY x.kind, x.priority DESC, x.run_at, x.id")
    ]


def test_a_restored_schema_without_0029_is_recognised_and_0029_applies(empty_dsn: str) -> None:
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        migrate(conn, "public", up_to=28)
        conn.execute("DELETE FROM jobtui_migrations")  # a schema-only restore, say
        assert [m.version for m in migrate(conn, "public", up_to=29)] == [29]
        assert describe(conn, "public") == SNAPSHOT.read_text("utf-8")


def test_0029_applies_on_a_database_with_waiting_rows_and_claims_them_in_claim_order(
    empty_dsn: str,
) -> None:
    """A database at 0028 with waiting rows of a limited kind that share a run_at, some of a
    higher priority, some updated since (their entries now after the others'), and running and
    finished rows: after 0029 the claim takes the higher priorities first, then id order."""
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        migrate(conn, "public", up_to=28)
        conn.execute(
            "INSERT INTO jobs (kind, payload, run_at, priority)"
            " SELECT 'lim', '{}', now() - interval '1 minute', (g % 7 = 0)::int"
            " FROM generate_series(1, 20) g"
        )
        conn.execute(
            "INSERT INTO jobs (kind, payload, locked_at, locked_by, finished_at, priority) VALUES"
            " ('lim', '{}', now(), 'w0', NULL, 5), ('lim', '{}', now(), 'w0', now(), 5)"
        )
        waiting = conn.execute("SELECT id, priority FROM jobs ORDER BY id LIMIT 20").fetchall()
        lower = [i for i, _ in waiting[:10]]
        for bump in (1, 0):  # not HOT: new versions at the end of the heap
            conn.execute(
                "UPDATE jobs SET priority = priority + %s WHERE id = ANY(%s)", (bump, lower)
            )
            conn.execute(
                "UPDATE jobs SET priority = priority - %s WHERE id = ANY(%s)", (bump, lower)
            )
        conn.execute("INSERT INTO kind_limits (kind, declared_concurrency) VALUES ('lim', 30)")
        assert [m.version for m in migrate(conn, "public", up_to=29)] == [29]
        line = [i for i, _ in sorted(waiting, key=lambda r: (-r[1], r[0]))]
        assert line[:2] == [waiting[6][0], waiting[13][0]]  # the two of priority 1
        got = conn.execute(
            "SELECT id FROM jobtui_claim_limited(ARRAY['lim'], 'w1', 5, 1.0) WHERE id IS NOT NULL"
        ).fetchall()
        assert sorted(r[0] for r in got) == sorted(line[:5])
