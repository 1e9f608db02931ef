"""`jobtui migrate` over the article's `jobs` table written without NOT NULL on one of its own
columns (people drop it from the DDL). Migrate keeps a column it finds as it is, so the NULLs
stayed: a NULL run_at, attempts or max_attempts row was counted waiting (`stats`: scheduled)
but never claimed, and `jobtui jobs why` failed on it with a TypeError; a NULL kind failed
the baseline with a database error about job_counts; a NULL payload failed the worker's every
claim that picked it (`TypeError: object of type 'NoneType' has no len()`, each poll), so no
job of its kind ran. Such a table is now refused, as one with a nullable `priority` is: one
line naming the column and the ALTER to run, exit 1, nothing changed.
"""

from __future__ import annotations

import re

import psycopg
import pytest
from test_cli_support import assert_one_error, run_cli

from benchmarks.article import ARTICLE_DDL

COLUMNS = ["kind", "payload", "run_at", "attempts", "max_attempts"]


def nullable_ddl(column: str) -> str:
    """The article's DDL with NOT NULL dropped from `column`."""
    ddl, n = re.subn(rf"(\n  {column} +\w+) not null", r"\1", ARTICLE_DDL)
    assert n == 1, column
    return ddl


@pytest.mark.parametrize("column", COLUMNS)
def test_migrate_refuses_an_article_table_whose_own_column_allows_null(
    empty_dsn: str, column: str
) -> None:
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        conn.execute(nullable_ddl(column))
        conn.execute("INSERT INTO jobs (kind, payload) VALUES ('k', '{}'), ('k', '{}')")
        conn.execute(f"UPDATE jobs SET {column} = NULL WHERE id = 2")
        before = conn.execute("SELECT * FROM jobs ORDER BY id").fetchall()
    proc = run_cli("migrate", dsn=empty_dsn)
    assert_one_error(
        proc,
        1,
        f"column {column} allows NULL",
        f"ALTER TABLE public.jobs ALTER COLUMN {column} SET NOT NULL",
        "nothing was changed",
    )
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        tables = conn.execute(
            "SELECT table_schema, table_name FROM information_schema.tables"
            " WHERE table_schema NOT IN ('pg_catalog', 'information_schema')"
        ).fetchall()
        assert tables == [("public", "jobs")]
        assert conn.execute("SELECT * FROM jobs ORDER BY id").fetchall() == before
        # What the message says to do makes the table one migrate extends.
        conn.execute(f"DELETE FROM jobs WHERE {column} IS NULL")
        conn.execute(f"ALTER TABLE public.jobs ALTER COLUMN {column} SET NOT NULL")
    assert run_cli("migrate", dsn=empty_dsn).returncode == 0
