"""Migration 0031: the limited claim (jobtui_claim_limited) is planned with enable_sort and
jit off, and looks whether a kind with no room has a job ready through a LATERAL walk of one
index entry instead of an EXISTS, so that on a table never analysed it walks each kind's
line from its head instead of the whole backlog (tests/test_attack_0030.py reads the plans);
the function is all it changes, replaced with the same signature. The head schema is
tests/data/schema_v31.txt, `tools/schema_describe.py DSN --fresh --up-to 31`.
"""

from __future__ import annotations

from pathlib import Path

import psycopg
from test_schema_v30 import entries

from jobtui.schema import migrate
from jobtui.schema.describe import describe

DATA = Path(__file__).parent / "data"
SNAPSHOT = DATA / "schema_v31.txt"


def test_the_head_schema_is_its_description(empty_dsn: str) -> None:
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        assert [m.version for m in migrate(conn, "Queue_2", up_to=31)][-1] == 31
        assert describe(conn, "Queue_2") == SNAPSHOT.read_text("utf-8")


def test_0031_changes_only_the_limited_claim_function() -> None:
    """Against 0030's description: every changed line is in jobtui_claim_limited's entry (its
    grants too are the same: CREATE OR REPLACE keeps them)."""
    old = (DATA / "schema_v30.txt").read_text("utf-8")
    new = SNAPSHOT.read_text("utf-8")

    a, b = entries(old), entries(new)
    assert a.keys() == b.keys()
    assert [k for k in a if a[k] != b[k]] == ["function jobtui_claim_limited"]
    assert "set plan_cache_mode=force_generic_plan,enable_sort=off,jit=off body:" in new


def test_a_restored_schema_without_0031_is_recognised_and_0031_applies(empty_dsn: str) -> None:
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        migrate(conn, "public", up_to=30)
        conn.execute("DELETE FROM jobtui_migrations")  # a schema-only restore, say
        assert [m.version for m in migrate(conn, "public", up_to=31)] == [31]
        assert describe(conn, "public") == SNAPSHOT.read_text("utf-8")
        conn.execute("DELETE FROM jobtui_migrations")
        assert [m.version for m in migrate(conn, "public", up_to=31)] == []


def test_0031_applies_on_a_database_with_waiting_rows_and_a_kind_at_its_limit(
    empty_dsn: str,
) -> None:
    """A database at 0030 with `lim` (concurrency 1) running one job and holding two ready,
    and `free` (priority 9) ready: after 0031 the merged claim still says wait 0 for `lim`'s
    held-back pick, and at the limit it still reports p_full_poll_s while `lim` has a job
    ready (the check 0031 rewrote), nothing once none is."""
    claim = (
        "SELECT id, kind, wait_s FROM jobtui_claim_limited(ARRAY['lim'], 'w1', 1, 2.5,"
        " ARRAY['free'])"
    )
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        migrate(conn, "public", up_to=30)
        conn.execute(
            "INSERT INTO jobs (kind, payload, priority)"
            " SELECT k, '{}', p FROM (VALUES ('lim', 0), ('lim', 0), ('free', 9)) v(k, p)"
        )
        conn.execute("INSERT INTO kind_limits (kind, declared_concurrency) VALUES ('lim', 1)")
        assert [m.version for m in migrate(conn, "public", up_to=31)] == [31]
        assert conn.execute(claim).fetchall() == [(None, "lim", 0.0)]
        conn.execute("UPDATE jobs SET priority = 0 WHERE kind = 'free'")
        assert conn.execute(claim).fetchall() == [(1, "lim", None)]
        assert conn.execute(claim).fetchall() == [(None, "lim", 2.5)]  # at its limit, 2 ready
        conn.execute("UPDATE jobs SET run_at = now() + interval '1 hour' WHERE id = 2")
        assert conn.execute(claim).fetchall() == []  # at its limit, none ready
