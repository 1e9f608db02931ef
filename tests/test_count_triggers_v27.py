"""Migration 0027: on an article `jobs` table created without NOT NULL on attempts and
max_attempts (which `jobtui migrate` extended as it was until it refused such a table), a row
with a NULL in either column keeps exact counts through its whole life, one-row statements as
several-row ones.

Such a row is `waiting` by jobtui_job_state (a NULL comparison falls to its ELSE), but it is
not due (`attempts < max_attempts` is NULL): every count trigger keys it under due NULL, which
the fold puts in the far row. 0026's one-row INSERT path keyed it by its run_at minute instead,
and the baseline's count of the rows already there did too; the UPDATE or DELETE that took it
away again subtracted it from due NULL, so after a fold the snapshot said one more ready and
one less scheduled job per such row than `jobs` holds.
"""

from __future__ import annotations

from unittest import mock

import psycopg
import pytest
from test_count_triggers_v26 import COUNTED, rows
from test_count_triggers_v26 import RECOUNT as RECOUNT_V26

from benchmarks.article import ARTICLE_DDL
from jobtui.schema import migrate, migrator
from jobtui.sql import queries

# The article's table as someone may have written it: no NOT NULL on the attempt columns.
NULLABLE_DDL = ARTICLE_DDL.replace("attempts     int not null", "attempts     int").replace(
    "max_attempts int not null", "max_attempts int"
)
assert NULLABLE_DDL.count("not null") == ARTICLE_DDL.count("not null") - 2
# job_counts' own form recounted from the rows (test_count_triggers_v26's), with the due the
# count triggers key a row by: there a waiting row's run_at minute, the same on NOT NULL columns.
RECOUNT = RECOUNT_V26.replace(
    "SELECT j.kind, j.run_at,", "SELECT j.kind, j.locked_at, j.max_attempts, j.run_at,"
).replace(
    "CASE WHEN j.state = 'waiting'",
    "CASE WHEN j.finished_at IS NULL AND j.locked_at IS NULL AND j.attempts < j.max_attempts",
)
assert RECOUNT.count("j.max_attempts") == 3, RECOUNT
NULLS = ("attempts", "both", "max_attempts")  # which attempt column is NULL
ENDS = {
    "delete": ("DELETE FROM jobs WHERE id = %s",),
    "claim, finish": (
        "UPDATE jobs SET locked_at = now(), attempts = attempts + 1 WHERE id = %s",
        "UPDATE jobs SET finished_at = now() WHERE id = %s",
    ),
}


def snapshot(conn: psycopg.Connection) -> dict[str, tuple[int, int]]:
    """What the console and `jobtui stats` show per kind: (ready, scheduled), zeros left out."""
    got = conn.execute(queries("public").metrics_state_counts).fetchall()
    return {r[0]: (r[1], r[2]) for r in got if (r[1], r[2]) != (0, 0)}


def article_db(
    empty_dsn: str, before: str | None = None, up_to: int | None = None
) -> psycopg.Connection:
    """The nullable article table (with `before` run on it first), migrated (to the head) as
    jobtui did before it refused such a table (tests/test_migrate_nullable_article.py): a
    database an earlier jobtui extended so is still upgraded, and its counts must hold."""
    conn = psycopg.connect(empty_dsn, autocommit=True)
    conn.execute(NULLABLE_DDL)
    if before:
        conn.execute(before)
    with mock.patch.object(migrator, "check_existing_jobs_table"):
        migrate(conn, "public", up_to=up_to)
    conn.execute("SET jobtui.fold_in_trigger = off")
    return conn


def one_row(nulls: str, future: bool) -> str:
    run_at = "now() + interval '3 hours'" if future else "now()"
    return (
        "INSERT INTO jobs (kind, payload, run_at, attempts, max_attempts)"
        f" VALUES ('a', '{{}}', {run_at},"
        f" {'NULL' if nulls in ('attempts', 'both') else '0'},"
        f" {'NULL' if nulls in ('max_attempts', 'both') else '5'})"
    )


@pytest.mark.parametrize("end", sorted(ENDS))
@pytest.mark.parametrize("future", [False, True])
@pytest.mark.parametrize("nulls", sorted(NULLS))
def test_a_one_row_insert_with_null_attempt_columns_is_counted_as_its_update_and_delete_take_it(
    empty_dsn: str, nulls: str, future: bool, end: str
) -> None:
    with article_db(empty_dsn) as conn:
        row = conn.execute(one_row(nulls, future) + " RETURNING id").fetchone()
        assert row is not None
        assert rows(conn, COUNTED) == rows(conn, RECOUNT)
        for sql in ENDS[end]:
            conn.execute(sql, row)
            assert rows(conn, COUNTED) == rows(conn, RECOUNT), sql
        conn.execute("SELECT jobtui_fold_job_counts()")
        # No unfinished job is left: nothing is ready or scheduled.
        assert snapshot(conn) == {}


@pytest.mark.parametrize("nulls", sorted(NULLS))
def test_one_and_several_row_inserts_with_null_attempt_columns_write_the_same_counts(
    empty_dsn: str, nulls: str
) -> None:
    with article_db(empty_dsn) as conn:
        for sql in (one_row(nulls, False), one_row(nulls, True)):
            conn.execute(sql)
            several = sql.replace("VALUES (", "SELECT ").removesuffix(")")
            conn.execute(several + " FROM generate_series(1, 2)")
        assert rows(conn, COUNTED) == rows(conn, RECOUNT)


@pytest.mark.parametrize("end", sorted(ENDS))
def test_article_rows_with_null_attempt_columns_counted_at_migrate_leave_with_their_counts(
    empty_dsn: str, end: str
) -> None:
    before = (
        "INSERT INTO jobs (kind, payload, run_at, attempts, max_attempts) VALUES"
        " ('a', '{}', now(), 0, NULL), ('a', '{}', now() + interval '3 hours', NULL, 5),"
        " ('a', '{}', now() - interval '1 day', NULL, NULL)"
    )
    with article_db(empty_dsn, before) as conn:
        for (job,) in conn.execute("SELECT id FROM jobs ORDER BY id").fetchall():
            for sql in ENDS[end]:
                conn.execute(sql, (job,))
        conn.execute("SELECT jobtui_fold_job_counts()")
        assert snapshot(conn) == {}


def test_0027_recounts_what_0026_counted_by_run_at_minute(empty_dsn: str) -> None:
    with article_db(empty_dsn, up_to=26) as conn:
        for nulls in sorted(NULLS):
            conn.execute(one_row(nulls, False))
            conn.execute(one_row(nulls, True))
        conn.execute("SELECT jobtui_fold_job_counts()")
        assert [m.version for m in migrate(conn, "public", up_to=27)] == [27]
        conn.execute("DELETE FROM jobs")
        conn.execute("SELECT jobtui_fold_job_counts()")
        assert snapshot(conn) == {}


def test_a_one_row_insert_tells_the_fold_rule_how_many_count_rows_it_wrote(
    conn: psycopg.Connection,
) -> None:
    # The fold rule's argument, recorded: a stand-in that never folds.
    conn.execute("CREATE TABLE seen (added bigint)")
    conn.execute(
        "CREATE OR REPLACE FUNCTION jobtui_trigger_folds_now(added bigint) RETURNS boolean"
        " LANGUAGE sql AS $$ INSERT INTO public.seen VALUES (added); SELECT false $$"
    )
    for values in (
        "('a', '{}', 0, NULL)",
        "('a', '{}', 1, NULL)",
        "('a', '{}', 0, now())",
        "('a', '{}', 1, now())",
        "('a', '{}', 7, now())",
    ):
        before = conn.execute("SELECT count(*) FROM job_counts").fetchone()
        conn.execute(f"INSERT INTO jobs (kind, payload, attempts, cancelled_at) VALUES {values}")
        after = conn.execute("SELECT count(*) FROM job_counts").fetchone()
        told = conn.execute("DELETE FROM seen RETURNING added").fetchall()
        assert before is not None and after is not None
        assert told == [(after[0] - before[0],)], values
