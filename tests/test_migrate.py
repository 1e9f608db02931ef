"""Migrations: idempotent, concurrent-safe, and compatible with the article's `jobs` table."""

from __future__ import annotations

import threading

import psycopg
import pytest

from benchmarks.article import ARTICLE_CLAIM, ARTICLE_DDL
from jobtui.schema import MigrationRefused, current_version, load_migrations, migrate


def test_fresh_database_migrates_and_second_run_is_a_no_op(empty_dsn: str) -> None:
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        applied = migrate(conn, "public")
        assert [m.version for m in applied] == [m.version for m in load_migrations()]
        assert migrate(conn, "public") == []
        assert current_version(conn, "public") == load_migrations()[-1].version


def test_article_table_keeps_rows_and_article_queries_still_work(empty_dsn: str) -> None:
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        conn.execute(ARTICLE_DDL)
        conn.execute(
            "INSERT INTO jobs (kind, payload) VALUES ('email', '{\"to\": \"a@b.c\"}'), "
            "('report', '{\"id\": 7}')"
        )
        conn.execute("UPDATE jobs SET attempts = 2, last_error = 'boom' WHERE kind = 'report'")
        before = conn.execute(
            "SELECT id, kind, payload, attempts, last_error FROM jobs ORDER BY id"
        ).fetchall()

        migrate(conn, "public")

        after = conn.execute(
            "SELECT id, kind, payload, attempts, last_error FROM jobs ORDER BY id"
        ).fetchall()
        assert after == before
        # (a) the article's producer insert still works and gets defaults for new columns
        new_id = conn.execute(
            "INSERT INTO jobs (kind, payload) VALUES ('export', '{\"n\": 1}') RETURNING id"
        ).fetchone()[0]
        row = conn.execute(
            "SELECT priority, errors, cancel_requested, created_at IS NOT NULL"
            " FROM jobs WHERE id = %s",
            (new_id,),
        ).fetchone()
        assert row == (0, [], False, True)
        # (b) the article's claim query, verbatim, still claims a job
        cur = conn.execute(ARTICLE_CLAIM)
        claimed = cur.fetchone()
        names = [d.name for d in cur.description]
        assert claimed is not None
        assert claimed[names.index("attempts")] >= 1
        assert claimed[names.index("locked_at")] is not None


def test_incompatible_jobs_table_is_refused_and_nothing_changes(empty_dsn: str) -> None:
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        conn.execute("CREATE TABLE jobs (id uuid primary key, kind text, payload json)")
        conn.execute("INSERT INTO jobs VALUES (gen_random_uuid(), 'x', '{}')")
        with pytest.raises(MigrationRefused, match="cannot be extended safely"):
            migrate(conn, "public")
        tables = {
            r[0]
            for r in conn.execute(
                "SELECT table_name FROM information_schema.tables WHERE table_schema = 'public'"
            )
        }
        assert tables == {"jobs"}
        assert conn.execute("SELECT count(*) FROM jobs").fetchone()[0] == 1


def test_concurrent_migrations_serialise(empty_dsn: str) -> None:
    results: list[int] = []
    errors: list[BaseException] = []

    def run() -> None:
        try:
            with psycopg.connect(empty_dsn, autocommit=True) as conn:
                results.append(len(migrate(conn, "public")))
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    threads = [threading.Thread(target=run) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert sorted(results) == [0, 0, 0, len(load_migrations())]


def test_custom_schema(empty_dsn: str) -> None:
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        migrate(conn, "queue")
        row = conn.execute(
            "SELECT to_regclass('queue.jobs'), to_regclass('public.jobs')"
        ).fetchone()
        assert row[0] is not None and row[1] is None


def test_dead_letter_signature_normalises_numbers_and_quotes(conn: psycopg.Connection) -> None:
    conn.execute(
        """INSERT INTO dead_letters (id, kind, payload, attempts, max_attempts, created_at, run_at,
                                     last_error, reason)
           VALUES (1, 'k', '{}', 5, 5, now(), now(), %s, 'failed')""",
        ("HTTPError: 503 from 'api.example.com' after 12.5s\nTraceback ...",),
    )
    sig = conn.execute("SELECT error_signature FROM dead_letters").fetchone()[0]
    assert sig == "HTTPError: N from ? after Ns"
