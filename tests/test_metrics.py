"""The metrics snapshot on a small dataset whose every figure is known."""

from __future__ import annotations

import itertools
from datetime import datetime, timedelta

import psycopg
import pytest
from psycopg.types.json import Jsonb

from jobtui import metrics, stats
from jobtui.models import StateCounts

S = "public"


def job(conn: psycopg.Connection, kind: str, *, age_min: float = 0, **cols: object) -> int:
    """A job whose run_at is `age_min` minutes ago (negative: in the future)."""
    names = ["kind", "payload", *cols]
    row = conn.execute(
        f"INSERT INTO jobs ({', '.join(names)}, run_at) "
        f"VALUES ({', '.join(['%s'] * len(names))}, now() - %s * interval '1 minute') "
        "RETURNING id",
        [kind, Jsonb({}), *cols.values(), age_min],
    ).fetchone()
    assert row is not None
    return int(row[0])


def dead(conn: psycopg.Connection, kind: str, n: int) -> None:
    conn.execute(
        """INSERT INTO dead_letters (id, kind, payload, attempts, max_attempts, created_at,
               run_at, last_error, reason)
           SELECT nextval(pg_get_serial_sequence('jobs', 'id')), %s, '{}', 3, 3, now(), now(),
                  'E: x', 'failed'
           FROM generate_series(1, %s)""",
        (kind, n),
    )


def minute_stats(
    conn: psycopg.Connection, ago: int, kind: str, done: int, failed: int, hist: list[int]
) -> datetime:
    row = conn.execute(
        """INSERT INTO kind_stats (minute, kind, done, failed, hist)
           VALUES (date_trunc('minute', now()) - %s * interval '1 minute', %s, %s, %s, %s)
           RETURNING minute""",
        (ago, kind, done, failed, hist),
    ).fetchone()
    assert row is not None
    minute: datetime = row[0]
    return minute


@pytest.fixture
def known(conn: psycopg.Connection) -> dict[str, datetime]:
    for age in (10, 5, 1):
        job(conn, "email", age_min=age)
    job(conn, "email", age_min=-30)
    job(conn, "email", age_min=-60)
    job(conn, "email", age_min=20, attempts=1, last_error="E: y")  # due retry: the oldest
    job(conn, "email", age_min=-5, attempts=2)  # retry not due yet
    job(conn, "email", age_min=3, attempts=1, locked_at=datetime.now().astimezone())
    job(conn, "report", age_min=2)
    for _ in range(10):  # finished rows count nowhere
        job(conn, "email", age_min=600, finished_at=datetime.now().astimezone())
    dead(conn, "email", 4)
    dead(conn, "sms", 2)
    hist = [0] * stats.N_BUCKETS
    hist[3], hist[6] = 5, 5  # five runs in (5, 10] ms, five in (50, 100] ms
    marks = {
        "email_recent": minute_stats(conn, 2, "email", 10, 5, hist),
        "report_recent": minute_stats(conn, 1, "report", 3, 0, []),
        "email_old": minute_stats(conn, 30, "email", 100, 1, hist),
    }
    row = conn.execute(
        """INSERT INTO queue_samples (minute, ready, scheduled, running, retrying, dead,
               oldest_ready_age_s)
           VALUES (date_trunc('minute', now()) - interval '3 minutes', 7, 0, 0, 0, 0, 100)
           RETURNING minute"""
    ).fetchone()
    assert row is not None
    marks["sample"] = row[0]
    conn.execute(
        """INSERT INTO workers (id, host, pid, kinds, concurrency, running, heartbeat_at)
           VALUES ('h:1:a', 'h', 1, '{email}', 4, 1, now() - interval '2 seconds'),
                  ('h:2:b', 'h', 2, '{report}', 4, 0, now() - interval '90 seconds')"""
    )
    conn.execute("INSERT INTO paused_kinds (kind, paused_by) VALUES ('sms', 'me')")
    return marks


async def test_snapshot_figures_on_a_known_dataset(
    aconn: psycopg.AsyncConnection, known: dict[str, datetime]
) -> None:
    snap = await metrics.snapshot(aconn, S, window_minutes=15, history_minutes=60)
    t = snap.totals
    # Retries count as ready or scheduled too (DESIGN.md's states; the queue_samples agree).
    assert (t.ready, t.scheduled, t.retrying, t.running, t.dead) == (5, 3, 2, 1, 6)
    assert snap.oldest_ready_age_s == pytest.approx(20 * 60, abs=10)
    assert snap.done_per_min == pytest.approx(13 / 15)
    assert snap.failure_rate == pytest.approx(5 / 18)
    assert snap.paused == frozenset({"sms"})

    assert [k.kind for k in snap.kinds] == ["email", "sms", "report"]  # most dead first
    email, sms, report = snap.kinds
    assert (email.ready, email.scheduled, email.retrying, email.running, email.dead) == (
        4,
        3,
        2,
        1,
        4,
    )
    assert email.oldest_ready_age_s == pytest.approx(1200, abs=10)
    assert email.done_per_min == pytest.approx(10 / 15)
    assert email.failed_per_min == pytest.approx(5 / 15)
    assert email.failure_rate == pytest.approx(5 / 15)
    assert email.p50_ms == pytest.approx(10.0)  # rank 5 ends the (5, 10] bucket
    assert email.p95_ms == pytest.approx(95.0)  # 4.5 of 5 into (50, 100]
    assert email.handled and not email.paused
    assert sms.paused and not sms.handled and sms.dead == 2 and sms.ready == 0
    assert sms.p50_ms is None and sms.oldest_ready_age_s is None
    assert report.ready == 1 and report.oldest_ready_age_s == pytest.approx(120, abs=10)
    assert not report.handled  # its only worker stopped heartbeating
    assert report.failure_rate == 0.0 and report.p50_ms is None

    assert len(snap.history) == 60
    minutes = [p.minute for p in snap.history]
    assert all(b - a == timedelta(minutes=1) for a, b in itertools.pairwise(minutes))
    assert minutes[-1] <= snap.taken_at < minutes[-1] + timedelta(minutes=1)
    by_minute = {p.minute: p for p in snap.history}
    assert (by_minute[known["email_recent"]].done, by_minute[known["email_recent"]].failed) == (
        10,
        5,
    )
    assert by_minute[known["report_recent"]].done == 3
    assert by_minute[known["email_old"]].done == 100  # in the history, not in the window
    sample = by_minute[known["sample"]]
    assert (sample.ready, sample.oldest_ready_age_s) == (7, 100)
    empty = [p for p in snap.history if p.minute not in known.values()]
    assert len(empty) == 56
    assert all(p.done == 0 and p.failed == 0 and p.ready is None for p in empty)

    live, stale = snap.workers
    assert live.id == "h:1:a" and not live.stale and live.heartbeat_age_s == pytest.approx(2, abs=2)
    assert stale.stale and stale.heartbeat_age_s == pytest.approx(90, abs=5)
    assert live.kinds == ["email"] and live.running == 1


async def test_snapshot_of_an_empty_queue(aconn: psycopg.AsyncConnection) -> None:
    snap = await metrics.snapshot(aconn, S, history_minutes=5)
    assert snap.totals == StateCounts()
    assert snap.oldest_ready_age_s is None and snap.kinds == [] and snap.workers == []
    assert snap.done_per_min == 0.0 and snap.failure_rate == 0.0
    assert len(snap.history) == 5 and all(p.done == 0 for p in snap.history)


async def test_no_live_worker_means_no_kind_is_handled(
    aconn: psycopg.AsyncConnection, conn: psycopg.Connection
) -> None:
    job(conn, "email")
    snap = await metrics.snapshot(aconn, S)
    assert [(k.kind, k.handled) for k in snap.kinds] == [("email", False)]


async def test_bad_windows_are_refused(aconn: psycopg.AsyncConnection) -> None:
    with pytest.raises(metrics.InvalidWindow, match="window_minutes"):
        await metrics.snapshot(aconn, S, window_minutes=0)
    with pytest.raises(metrics.InvalidWindow, match="heartbeat_timeout"):
        await metrics.snapshot(aconn, S, heartbeat_timeout=0)


async def test_running_rows_are_neither_ready_nor_the_oldest_ready(
    aconn: psycopg.AsyncConnection, conn: psycopg.Connection
) -> None:
    locked = datetime.now().astimezone()
    # video: the oldest row is running; of the unlocked ones only a scheduled one is left.
    job(conn, "video", age_min=50, attempts=1, locked_at=locked)
    job(conn, "video", age_min=-10)
    # pdf: a running row older than the one ready row, and one locked before its run_at
    # (an article-style consumer may do that): running, not scheduled.
    job(conn, "pdf", age_min=40, attempts=2, locked_at=locked)
    job(conn, "pdf", age_min=-20, attempts=1, locked_at=locked)
    job(conn, "pdf", age_min=7, attempts=3)
    snap = await metrics.snapshot(aconn, S)
    by_kind = {k.kind: k for k in snap.kinds}
    video, pdf = by_kind["video"], by_kind["pdf"]
    assert (video.ready, video.scheduled, video.retrying, video.running) == (0, 1, 0, 1)
    assert video.oldest_ready_age_s is None
    assert (pdf.ready, pdf.scheduled, pdf.retrying, pdf.running) == (1, 0, 1, 2)
    assert pdf.oldest_ready_age_s == pytest.approx(7 * 60, abs=10)
    assert snap.oldest_ready_age_s == pytest.approx(7 * 60, abs=10)


async def test_per_kind_figures_match_a_plain_count(
    aconn: psycopg.AsyncConnection, conn: psycopg.Connection
) -> None:
    """Every state mixed over many kinds agrees with the definitions counted the plain way."""
    conn.execute(
        """INSERT INTO jobs (kind, payload, run_at, attempts, locked_at, finished_at)
           SELECT 'k' || (g % 13), '{}', now() + ((g % 7) - 4) * interval '1 minute', g % 3,
                  CASE WHEN g % 5 = 0 THEN now() END,
                  CASE WHEN g % 11 = 0 THEN now() END
           FROM generate_series(1, 3000) g"""
    )
    conn.execute(
        """INSERT INTO dead_letters (id, kind, payload, attempts, max_attempts, created_at,
               run_at, last_error, reason)
           SELECT nextval(pg_get_serial_sequence('jobs', 'id')), 'k' || (g % 17), '{}', 3, 3,
                  now(), now(), 'E: ' || (g % 4), 'failed'
           FROM generate_series(1, 500) g"""
    )
    expected = {
        r[0]: r[1:]
        for r in conn.execute(
            """SELECT kind,
                      count(*) FILTER (WHERE locked_at IS NULL AND run_at <= now()),
                      count(*) FILTER (WHERE locked_at IS NULL AND run_at > now()),
                      count(*) FILTER (WHERE locked_at IS NULL AND attempts > 0),
                      count(*) FILTER (WHERE locked_at IS NOT NULL)
               FROM jobs WHERE finished_at IS NULL GROUP BY kind"""
        ).fetchall()
    }
    dead_expected = dict(
        conn.execute("SELECT kind, count(*) FROM dead_letters GROUP BY kind").fetchall()
    )
    snap = await metrics.snapshot(aconn, S)
    got = {k.kind: (k.ready, k.scheduled, k.retrying, k.running) for k in snap.kinds}
    assert got == {kind: tuple(v) for kind, v in expected.items()} | {
        kind: (0, 0, 0, 0) for kind in dead_expected.keys() - expected.keys()
    }
    assert {k.kind: k.dead for k in snap.kinds if k.dead} == dead_expected
    assert snap.totals.dead == 500
    assert snap.totals.ready == sum(v[0] for v in expected.values())


async def test_rate_window_longer_than_the_history(
    aconn: psycopg.AsyncConnection, conn: psycopg.Connection
) -> None:
    minute_stats(conn, 30, "email", 60, 0, [])
    minute_stats(conn, 1, "email", 30, 30, [])
    snap = await metrics.snapshot(aconn, S, window_minutes=60, history_minutes=5)
    assert snap.done_per_min == pytest.approx(90 / 60)
    assert snap.failure_rate == pytest.approx(30 / 120)
    assert len(snap.history) == 5
    assert sum(p.done for p in snap.history) == 30


def test_pending_kind_index_covers_the_counted_columns(conn: psycopg.Connection) -> None:
    """Migrations 0003/0013/0020: the per-kind oldest ready row reads its columns from the
    index alone; since 0020 the index holds waiting rows only (locked_at is its predicate)."""
    row = conn.execute(
        """SELECT pg_get_indexdef(i.indexrelid)
           FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
           WHERE c.relname = 'jobs_pending_kind'"""
    ).fetchone()
    assert row is not None
    assert (
        "(kind, run_at) INCLUDE (attempts, max_attempts)"
        " WHERE ((finished_at IS NULL) AND (locked_at IS NULL))" in row[0]
    )


async def test_exhausted_rows_are_counted_apart_not_as_ready(
    aconn: psycopg.AsyncConnection, conn: psycopg.Connection
) -> None:
    """Issue 15 item 3: a row whose attempts reached max_attempts will never run."""
    for _ in range(3):
        job(conn, "legacy", age_min=1, attempts=1, max_attempts=1)
    job(conn, "legacy", age_min=1, attempts=1, max_attempts=3)
    job(conn, "legacy", age_min=-5, attempts=2, max_attempts=2)
    snap = await metrics.snapshot(aconn, S)
    t = snap.totals
    assert (t.ready, t.scheduled, t.retrying, t.exhausted) == (1, 0, 1, 4)
    (legacy,) = snap.kinds
    assert (legacy.ready, legacy.retrying, legacy.exhausted) == (1, 1, 4)
    assert snap.replica is None


async def test_snapshot_carries_worker_liveness_wakeups_and_kind_limits(
    aconn: psycopg.AsyncConnection, conn: psycopg.Connection
) -> None:
    conn.execute(
        """INSERT INTO workers (id, host, pid, kinds, concurrency, heartbeat_interval_s,
               heartbeat_timeout_s, abandoned, outcome_errors, last_outcome_error,
               wakeup_mode, wakeup_note, listen_connected, poll_interval_s)
           VALUES ('w1', 'h', 1, '{mail}', 4, 2, 120, 2, 5, 'permission denied', 'polling',
                   'behind a transaction pooler', false, 0.25)"""
    )
    conn.execute("UPDATE workers SET heartbeat_at = now() - interval '60 seconds' WHERE id = 'w1'")
    conn.execute(
        "INSERT INTO kind_limits (kind, declared_concurrency, declared_rate, declared_period_s) "
        "VALUES ('mail', 3, 100, 60)"
    )
    job(conn, "mail", age_min=1)
    snap = await metrics.snapshot(aconn, S)
    (w,) = snap.workers
    # Judged by its own 120 s timeout, not the caller's 30 s default.
    assert not w.stale
    assert (w.abandoned, w.outcome_errors, w.last_outcome_error) == (2, 5, "permission denied")
    assert (w.heartbeat_interval_s, w.heartbeat_timeout_s) == (2.0, 120.0)
    assert (w.wakeup_mode, w.wakeup_note, w.listen_connected, w.poll_interval_s) == (
        "polling",
        "behind a transaction pooler",
        False,
        0.25,
    )
    (mail,) = snap.kinds
    assert (mail.concurrency_limit, mail.per_worker_limit, mail.rate_limit) == (3, None, "100/m")


async def test_dead_counts_follow_every_change_without_reading_dead_letters(
    aconn: psycopg.AsyncConnection, conn: psycopg.Connection
) -> None:
    """Migration 0015: per-kind dead counts kept by triggers, exact through inserts, deletes,
    a kind changed by hand, folds of the delta rows and TRUNCATE."""

    async def counts() -> dict[str, int]:
        return {k.kind: k.dead for k in (await metrics.snapshot(aconn, S)).kinds if k.dead}

    def truth() -> dict[str, int]:
        rows = conn.execute("SELECT kind, count(*) FROM dead_letters GROUP BY kind").fetchall()
        return {k: int(n) for k, n in rows}

    for i in range(60):  # enough statements for several folds (1 in 20)
        dead(conn, "email" if i % 3 else "sms", 1 + i % 4)
        if i % 7 == 0:
            conn.execute(
                "DELETE FROM dead_letters WHERE id = (SELECT min(id) FROM dead_letters"
                " WHERE kind = 'email')"
            )
    conn.execute(
        "UPDATE dead_letters SET kind = 'pdf' WHERE id IN "
        "(SELECT id FROM dead_letters WHERE kind = 'sms' LIMIT 3)"
    )
    conn.execute("UPDATE dead_letters SET reason = 'timeout'")
    assert await counts() == truth() and truth()["pdf"] == 3
    conn.execute("TRUNCATE dead_letters")
    assert await counts() == {}
    dead(conn, "email", 2)
    assert await counts() == {"email": 2}


async def test_dead_counts_stay_exact_when_sessions_bury_and_fold_at_once(
    aconn: psycopg.AsyncConnection, conn: psycopg.Connection, dsn: str
) -> None:
    """Several sessions adding and removing dead letters at once (folds included: 1 firing in
    20 folds every kind) still leave the counts equal to the rows."""
    import threading

    def churn(seed: int) -> None:
        with psycopg.connect(dsn, autocommit=True) as c:
            for i in range(80):
                dead(c, ("email", "sms", "pdf")[(seed + i) % 3], 1 + (i % 3))
                if i % 4 == 0:
                    c.execute(
                        "DELETE FROM dead_letters WHERE id IN (SELECT id FROM dead_letters"
                        " ORDER BY random() LIMIT 2 FOR UPDATE SKIP LOCKED)"
                    )

    threads = [threading.Thread(target=churn, args=(s,)) for s in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    truth = dict(conn.execute("SELECT kind, count(*) FROM dead_letters GROUP BY kind").fetchall())
    snap = await metrics.snapshot(aconn, S)
    assert {k.kind: k.dead for k in snap.kinds if k.dead} == truth
