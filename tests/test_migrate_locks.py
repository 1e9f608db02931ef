"""`jobtui migrate` behind a lock timeout: it never stops the queue waiting for a lock.

A database with the article's `jobs` table (and rows) needs the baseline, which extends that
table and so wants ACCESS EXCLUSIVE on it (any later migration that drops an index of `jobs`
wants the same). A second session holds ACCESS SHARE on `jobs` in an open transaction (what
any transaction that read `jobs` and idles holds). Queued for its lock, migrate would make
every INSERT and claim wait behind it; with a lock timeout it gives up in bounded time, lets
the queue flow, retries, and at the end names the blocker in one line with nothing applied.
"""

from __future__ import annotations

import subprocess
import threading
import time
from collections.abc import Iterator

import psycopg
import pytest
from test_cli_support import assert_one_error, run_cli

from benchmarks.article import ARTICLE_DDL
from jobtui.cli import main
from jobtui.schema import (
    LockWait,
    Migration,
    MigrationBlocked,
    Stall,
    load_migrations,
    migrate,
    migrator,
)

S = "public"
BLOCKER_APP = "nightly-report"
PENDING_INDEX = "SELECT pg_get_indexdef('jobs_pending'::regclass)"


def _versions(conn: psycopg.Connection) -> list[tuple[int, str]]:
    """The version rows; none while the version table does not exist (nothing applied)."""
    if conn.execute("SELECT to_regclass('jobtui_migrations')").fetchone() == (None,):
        return []
    return conn.execute("SELECT version, name FROM jobtui_migrations ORDER BY version").fetchall()


@pytest.fixture
def at_article(empty_dsn: str) -> str:
    """The article's `jobs` table with a few jobs, never migrated: the baseline is pending."""
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        conn.execute(ARTICLE_DDL)
        conn.execute("INSERT INTO jobs (kind, payload) SELECT 'k', '{}' FROM generate_series(1, 5)")
    return empty_dsn


@pytest.fixture
def blocker(at_article: str) -> Iterator[psycopg.Connection]:
    """A session holding ACCESS SHARE on `jobs` in an open transaction (rolled back after)."""
    with psycopg.connect(at_article, application_name=BLOCKER_APP) as conn:
        conn.execute("LOCK TABLE jobs IN ACCESS SHARE MODE")
        yield conn
        conn.rollback()


def _migrate_waits_on_a_lock(conn: psycopg.Connection) -> bool:
    row = conn.execute(
        "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
        "AND application_name = 'jobtui' AND wait_event_type = 'Lock'"
    ).fetchone()
    return bool(row and row[0])


def test_a_blocked_migrate_gives_up_naming_the_blocker_and_the_queue_keeps_flowing(
    at_article: str, blocker: psycopg.Connection
) -> None:
    blocker_pid = blocker.info.backend_pid
    with psycopg.connect(at_article, autocommit=True) as conn:
        before, index_before = _versions(conn), conn.execute(PENDING_INDEX).fetchone()
    result: list[subprocess.CompletedProcess[str]] = []
    cli = threading.Thread(
        target=lambda: result.append(
            run_cli("migrate", "--lock-timeout", "0.5s", "--lock-retries", "2", dsn=at_article)
        )
    )
    started = time.monotonic()
    cli.start()
    # A producer inserting all along: it may wait behind a queued try (at most its 0.5 s lock
    # timeout), never until the blocker ends. Without the timeout it would hang until its own
    # statement_timeout failed it.
    waits: list[float] = []
    saw_migrate_waiting = False
    with psycopg.connect(at_article, autocommit=True) as producer:
        producer.execute("SET statement_timeout = '5s'")
        while cli.is_alive():
            saw_migrate_waiting = saw_migrate_waiting or _migrate_waits_on_a_lock(producer)
            t0 = time.monotonic()
            producer.execute("INSERT INTO jobs (kind, payload) VALUES ('k', '{}')")
            waits.append(time.monotonic() - t0)
            time.sleep(0.05)
    cli.join()
    elapsed = time.monotonic() - started
    assert saw_migrate_waiting, "migrate was never seen waiting for its lock"
    assert len(waits) >= 10 and max(waits) < 1.5, (len(waits), max(waits))
    # 3 tries of 0.5 s with 1 s and 2 s between them: about 4.5 s, not forever.
    assert 4.0 < elapsed < 20, elapsed
    line = assert_one_error(
        result[0],
        75,
        f"pid {blocker_pid} ",
        f"application '{BLOCKER_APP}'",
        "idle in transaction",
        "holds ACCESS SHARE on jobs",
        "could not get ACCESS EXCLUSIVE on jobs in 3 tries of 0.5s",
        "nothing was applied",
        f"pg_terminate_backend({blocker_pid})",
        "Database tab",
    )
    assert result[0].stdout == "", line
    with psycopg.connect(at_article, autocommit=True) as conn:
        assert _versions(conn) == before == []
        assert conn.execute(PENDING_INDEX).fetchone() == index_before
    assert blocker.execute("SELECT count(*) FROM jobs").fetchone() is not None  # still open


def test_a_blocker_released_during_the_retries_lets_migrate_succeed(
    at_article: str, blocker: psycopg.Connection
) -> None:
    result: list[subprocess.CompletedProcess[str]] = []
    cli = threading.Thread(
        target=lambda: result.append(
            run_cli("migrate", "--lock-timeout", "0.5s", "--lock-retries", "4", dsn=at_article)
        )
    )
    cli.start()
    # Wait for the first try to queue for its lock and then run out of time (it stops
    # waiting while the command goes on: the back-off), then end the blocker's transaction.
    seen: list[bool] = []
    with psycopg.connect(at_article, autocommit=True) as watcher:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and cli.is_alive():
            seen.append(_migrate_waits_on_a_lock(watcher))
            if True in seen and not seen[-1]:
                break
            time.sleep(0.02)
    assert True in seen and not seen[-1] and cli.is_alive(), "no failed try was seen"
    blocker.rollback()
    cli.join()
    proc = result[0]
    assert proc.returncode == 0 and proc.stderr == "", (proc.returncode, proc.stderr)
    latest = load_migrations()[-1]
    assert (
        f"migrated schema public to version {latest.version} (applied 0024_baseline" in proc.stdout
    )
    with psycopg.connect(at_article, autocommit=True) as conn:
        assert max(v for v, _ in _versions(conn)) == latest.version


def test_the_library_reports_each_retry_and_the_stall_it_saw(
    at_article: str, blocker: psycopg.Connection
) -> None:
    """`LockWait` in process: back-off doubling, one report per retry, the stall as data; and
    without a watching connection the failure says the blocker was not seen."""
    retries: list[tuple[int, float, Stall | None]] = []
    with psycopg.connect(at_article, autocommit=True) as conn:
        lock = LockWait(
            timeout_s=0.3,
            retries=2,
            backoff_s=0.05,
            watch=lambda: psycopg.connect(at_article, autocommit=True),
            on_retry=lambda *seen: retries.append(seen),
        )
        with pytest.raises(MigrationBlocked) as failed:
            migrate(conn, S, lock)
        assert [(n, pause) for n, pause, _ in retries] == [(1, 0.05), (2, 0.1)]
        stall = failed.value.stall
        assert stall is not None and failed.value.tries == 3
        assert (stall.target, stall.wanted) == ("jobs", "ACCESS EXCLUSIVE")
        holder = stall.holders[0]
        assert (holder.pid, holder.application, holder.held) == (
            blocker.info.backend_pid,
            BLOCKER_APP,
            "ACCESS SHARE",
        )
        assert holder.xact_age_s is not None and holder.xact_age_s > 0.3
        assert all(s is not None and s.holders[0].pid == holder.pid for _, _, s in retries)

        with pytest.raises(MigrationBlocked, match="Who held them was not seen"):
            migrate(conn, S, LockWait(timeout_s=0.2, retries=0))
        assert _versions(conn) == []


def test_an_analyze_that_cannot_get_its_lock_is_skipped_with_a_note(
    dsn: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """After the commit, ANALYZE of `jobs` wants SHARE UPDATE EXCLUSIVE, which a VACUUM (here
    a session's LOCK in that mode) holds: it waits at most the lock timeout and migrate, its
    migrations committed, says so on stderr and exits 0. A test-only migration that locks no
    table stands for the pending one, so only the ANALYZE meets the lock."""
    extra = Migration(
        9999,
        "test_only_function",
        "CREATE FUNCTION __schema__.jobtui_test_noop() RETURNS int LANGUAGE sql AS 'SELECT 1'",
    )
    shipped = load_migrations()
    monkeypatch.setattr(migrator, "load_migrations", lambda: [*shipped, extra])
    with psycopg.connect(dsn, application_name=BLOCKER_APP) as vacuum_like:
        vacuum_like.execute("LOCK TABLE jobs IN SHARE UPDATE EXCLUSIVE MODE")
        # Were the ANALYZE unbounded, this would end the wait (and fail the test) after 10 s.
        release = threading.Timer(10, vacuum_like.rollback)
        release.start()
        try:
            code = main(["--dsn", dsn, "migrate", "--lock-timeout", "0.3s"])
        finally:
            release.cancel()
        out, err = capsys.readouterr()
        assert code == 0, err
        assert "applied 9999_test_only_function" in out
        assert err.splitlines() == [
            "note: ANALYZE of public.jobs could not get its lock within --lock-timeout (a "
            "VACUUM?); autovacuum will analyse it, or run ANALYZE yourself"
        ]
        vacuum_like.rollback()
    with psycopg.connect(dsn, autocommit=True) as conn:
        assert max(v for v, _ in _versions(conn)) == 9999


def test_a_migrate_that_loses_a_deadlock_tries_again(
    dsn: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A test-only migration locks `jobs`, then `workers`, which a session holds; that session
    then reads `jobs`: a deadlock, which PostgreSQL resolves by failing migrate (it waited
    first, so its deadlock check runs first). Nothing was applied, so migrate tries again and,
    once the session has ended, succeeds."""
    extra = Migration(
        9999,
        "test_only_two_locks",
        "LOCK TABLE __schema__.jobs IN ACCESS EXCLUSIVE MODE; "
        "LOCK TABLE __schema__.workers IN ACCESS EXCLUSIVE MODE",
    )
    shipped = load_migrations()
    monkeypatch.setattr(migrator, "load_migrations", lambda: [*shipped, extra])
    with psycopg.connect(dsn, application_name=BLOCKER_APP) as other:
        other.execute("LOCK TABLE workers IN ACCESS SHARE MODE")
        read_jobs = threading.Thread(
            target=lambda: (other.execute("SELECT count(*) FROM jobs"), other.rollback())
        )
        with psycopg.connect(dsn, autocommit=True) as watcher:

            def start_the_deadlock_once_migrate_waits() -> None:
                deadline = time.monotonic() + 10
                while time.monotonic() < deadline and not _migrate_waits_on_a_lock(watcher):
                    time.sleep(0.02)
                time.sleep(0.2)  # migrate's deadlock check (deadlock_timeout) runs first
                read_jobs.start()

            starter = threading.Thread(target=start_the_deadlock_once_migrate_waits)
            starter.start()
            code = main(["--dsn", dsn, "migrate", "--lock-timeout", "10s", "--lock-retries", "2"])
            starter.join()
            read_jobs.join()
    out, err = capsys.readouterr()
    assert code == 0 and err == "", err
    assert "applied 9999_test_only_two_locks" in out
