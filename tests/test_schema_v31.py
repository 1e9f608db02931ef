"""Migration 0031: the limited claim (jobtui_claim_limited) is planned with enable_sort and
enable_incremental_sort off while `jobs` has no statistics, or has them from an ANALYZE that
saw no waiting row (jobs_claim_kind's reltuples 0) (jit off always), and looks whether
a kind with no room has a job ready through a LATERAL walk of one index entry instead of an
EXISTS, so that on a table never analysed it walks each kind's line from its head instead of
the whole backlog (tests/test_attack_0030.py reads the plans);
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
    assert (
        "set plan_cache_mode=force_generic_plan,enable_sort=on,enable_incremental_sort=on,jit=off"
        " body:" in new
    )


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


def test_the_claim_restores_the_settings_and_remembers_an_analysed_table(empty_dsn: str) -> None:
    """The planner settings 0031 changes stay the function's (its SET clauses restore them); the
    session remembers the table's statistics once seen (jobtui.analysed_jobs, its oid), not
    before, and not when the claim's transaction is rolled back."""
    claim = "SELECT id FROM jobtui_claim_limited(ARRAY['lim'], 'w1', 1, 2.5, ARRAY['free'])"
    seen = "SELECT current_setting('jobtui.analysed_jobs', true)"
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        migrate(conn, "public")
        conn.execute("INSERT INTO jobs (kind, payload) VALUES ('lim', '{}'), ('lim', '{}')")
        conn.execute("INSERT INTO kind_limits (kind, declared_concurrency) VALUES ('lim', 2)")
        conn.execute("SET enable_sort = off")  # the caller's, kept after the claim
        assert conn.execute(claim).fetchall() == [(1,)]
        assert conn.execute(seen).fetchone() in {(None,), ("",)}  # pg_stats has no row of jobs
        conn.execute("ANALYZE jobs")
        with conn.transaction(force_rollback=True):
            assert conn.execute(claim).fetchall() == [(2,)]
        assert conn.execute(seen).fetchone() in {(None,), ("",)}
        assert conn.execute(claim).fetchall() == [(2,)]
        oid = conn.execute("SELECT 'jobs'::regclass::oid::text").fetchone()
        assert conn.execute(seen).fetchone() == oid
        settings = (
            "SELECT current_setting('enable_sort'), current_setting('enable_incremental_sort')"
        )
        assert conn.execute(settings).fetchone() == ("off", "on")


def test_the_two_copies_of_the_claim_query_are_the_same() -> None:
    """The query is written twice (a plan is cached per statement): with statistics and
    without, the same text, so the two branches claim alike."""
    text = (Path(__file__).parent.parent / "jobtui" / "schema").glob("0031_*.sql")
    body = next(iter(text)).read_text("utf-8")
    with_stats = body.split("  IF analysed THEN\n    RETURN QUERY\n")[1].split("\n  ELSE\n")[0]
    without = body.split("      set_config('enable_incremental_sort', 'off', true);\n")[1]
    without = without.split("    RETURN QUERY\n")[1].split("\n  END IF;")[0]
    assert with_stats.count("\n") > 100 and with_stats == without
