"""The producer API against a real database: transactions, options, bulk COPY, NOTIFY."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import psycopg
import pytest

from jobtui import InvalidJob, JobSpec, enqueue, enqueue_many
from jobtui.sql import notify_channel


def test_enqueue_returns_id_and_applies_options(conn: psycopg.Connection) -> None:
    job_id = enqueue(
        conn, "email", {"to": "a@b.c"}, delay=timedelta(minutes=5), max_attempts=3, priority=7
    )
    row = conn.execute(
        "SELECT kind, payload, max_attempts, priority, run_at - now() FROM jobs WHERE id = %s",
        (job_id,),
    ).fetchone()
    assert row[:4] == ("email", {"to": "a@b.c"}, 3, 7)
    assert timedelta(minutes=4, seconds=55) < row[4] <= timedelta(minutes=5)


def test_enqueue_commits_and_rolls_back_with_the_callers_transaction(dsn: str) -> None:
    with psycopg.connect(dsn) as conn:
        enqueue(conn, "kept", {})
        conn.commit()
        enqueue(conn, "dropped", {})
        conn.rollback()
        kinds = [r[0] for r in conn.execute("SELECT kind FROM jobs")]
    assert kinds == ["kept"]


def test_enqueue_with_dsn_and_run_at(dsn: str, conn: psycopg.Connection) -> None:
    when = datetime(2030, 1, 2, 3, 4, 5, tzinfo=UTC)
    job_id = enqueue(dsn, "report", {"n": 1}, run_at=when)
    assert conn.execute("SELECT run_at FROM jobs WHERE id = %s", (job_id,)).fetchone()[0] == when


async def test_enqueue_on_async_connection(aconn: psycopg.AsyncConnection) -> None:
    job_id = await enqueue(aconn, "webhook", {"url": "https://example.com"})
    cur = await aconn.execute("SELECT kind FROM jobs WHERE id = %s", (job_id,))
    assert (await cur.fetchone())[0] == "webhook"


@pytest.mark.parametrize(
    ("kind", "payload", "options", "message"),
    [
        ("", {}, {}, "non-empty"),
        ("k", {}, {"max_attempts": 0}, "at least 1"),
        ("k", {}, {"max_attempts": -3}, "at least 1"),
        ("k", {"x": object()}, {}, "not JSON-serialisable"),
        ("k", {"x": "a\x00b"}, {}, "NUL"),
        ("k", {}, {"run_at": datetime(2030, 1, 1)}, "timezone-aware"),
        ("k", {}, {"bogus": 1}, "unknown job field"),
    ],
)
def test_invalid_jobs_are_refused_and_nothing_is_written(
    conn: psycopg.Connection, kind: str, payload: object, options: dict, message: str
) -> None:
    with pytest.raises(InvalidJob, match=message):
        enqueue(conn, kind, payload, **options)
    assert conn.execute("SELECT count(*) FROM jobs").fetchone()[0] == 0


def test_enqueue_many_copies_all_rows_and_notifies_once(dsn: str, conn: psycopg.Connection) -> None:
    listener = psycopg.connect(dsn, autocommit=True)
    listener.execute(f'LISTEN "{notify_channel("public")}"')
    seen: list[int] = []
    jobs = [{"kind": "email", "payload": {"i": i}} for i in range(2500)]
    jobs.append(JobSpec("report", {"big": True}, delay=timedelta(hours=1), priority=3))
    n = enqueue_many(conn, jobs, on_progress=seen.append)
    assert n == 2501
    assert seen[-1] == 2501 and 1000 in seen
    rows = conn.execute(
        "SELECT count(*), count(*) FILTER (WHERE run_at > now() + interval '59 minutes') FROM jobs"
    ).fetchone()
    assert rows == (2501, 1)
    notes = list(listener.notifies(timeout=1.0, stop_after=5))
    assert len(notes) == 1
    listener.close()


def test_enqueue_many_validates_everything_before_writing(conn: psycopg.Connection) -> None:
    with pytest.raises(InvalidJob):
        enqueue_many(conn, [{"kind": "ok"}, {"kind": "bad", "max_attempts": 0}])
    assert conn.execute("SELECT count(*) FROM jobs").fetchone()[0] == 0


async def test_enqueue_many_async(aconn: psycopg.AsyncConnection) -> None:
    n = await enqueue_many(aconn, [{"kind": "a"}, {"kind": "b", "payload": [1, 2]}])
    assert n == 2
    cur = await aconn.execute("SELECT kind, payload FROM jobs ORDER BY kind")
    assert await cur.fetchall() == [("a", {}), ("b", [1, 2])]


def test_enqueue_many_round_trips_text_that_copy_must_escape(conn: psycopg.Connection) -> None:
    payload = {
        "path": "C:\\temp\\new",
        "text": "tab\there\nnewline\r\\N",
        "quote": '"x"',
        "u": "é€",
    }
    kind = "odd\\kind\twith tab"
    enqueue_many(conn, [{"kind": kind, "payload": payload}, {"kind": "plain", "payload": [None]}])
    rows = conn.execute("SELECT kind, payload FROM jobs ORDER BY id").fetchall()
    assert rows == [(kind, payload), ("plain", [None])]


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        ({"kind": "k", "payload": {"x": "a\x00b"}}, "NUL"),
        ({"kind": "k", "payload": {"x": "\ud800"}}, "lone surrogate"),
        ({"kind": "k", "payload": {"x": object()}}, "not JSON-serialisable"),
        ({"kind": " ", "payload": {}}, "non-empty"),
        ({"kind": 7, "payload": {}}, "non-empty"),
    ],
)
def test_enqueue_many_plain_dicts_get_every_check(
    conn: psycopg.Connection, bad: dict, message: str
) -> None:
    """Plain {kind, payload} dicts take a cheaper path in a batch; it must refuse the same jobs."""
    jobs = [{"kind": "k", "payload": {"i": i}} for i in range(3)] + [bad]
    with pytest.raises(InvalidJob, match=message):
        enqueue_many(conn, jobs)
    assert conn.execute("SELECT count(*) FROM jobs").fetchone()[0] == 0


def test_enqueue_many_plain_dicts_keep_defaults_and_store_none_as_enqueue_does(
    conn: psycopg.Connection,
) -> None:
    enqueue_many(
        conn, [{"kind": "a"}, {"kind": "a", "payload": None}, {"kind": "b", "payload": "é"}]
    )
    rows = conn.execute(
        "SELECT kind, payload, max_attempts, priority FROM jobs ORDER BY id"
    ).fetchall()
    assert rows == [("a", {}, 5, 0), ("a", {}, 5, 0), ("b", "é", 5, 0)]
