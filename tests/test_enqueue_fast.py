"""The producer API's cheap paths give exactly what the general path gives.

`enqueue` with no options skips building a JobSpec and keeps its statement and default
parameters per schema; `enqueue_many` formats COPY rows once per job description. These tests
hold what those shortcuts must not change: the schema each call goes to, the stored values, the
checks and their messages, and every character of the text COPY has to escape.
"""

from __future__ import annotations

import copy
import pickle
from datetime import UTC, datetime, timedelta

import psycopg
import pytest

from jobtui import InvalidJob, JobSpec, enqueue, enqueue_many
from jobtui.enqueue import Enqueued
from jobtui.schema import migrate
from jobtui.sql import InvalidSchemaName, notify_channel


def test_plain_enqueue_goes_to_each_calls_schema(
    conn: psycopg.Connection, aconn: psycopg.AsyncConnection, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The per-schema statement is cached; two schemas in one process stay apart, both ways."""
    migrate(conn, "alt")
    a = enqueue(conn, "k", {"to": "public"})
    b = enqueue(conn, "k", {"to": "alt"}, schema="alt")
    monkeypatch.setenv("JOBTUI_SCHEMA", "alt")  # read on every call, not once
    c = enqueue(conn, "k", {"to": "alt by env"})
    monkeypatch.delenv("JOBTUI_SCHEMA")
    d = enqueue(conn, "k", {"to": "public again"})
    enqueue_many(conn, [{"kind": "k", "payload": {"to": "alt, bulk"}}], schema="alt")
    enqueue_many(conn, [{"kind": "k", "payload": {"to": "public, bulk"}}])
    assert a and b and c and d
    public = [r[0]["to"] for r in conn.execute("SELECT payload FROM public.jobs ORDER BY id")]
    alt = [r[0]["to"] for r in conn.execute("SELECT payload FROM alt.jobs ORDER BY id")]
    assert public == ["public", "public again", "public, bulk"]
    assert alt == ["alt", "alt by env", "alt, bulk"]


async def test_plain_enqueue_notifies_each_schemas_channel(
    dsn: str, conn: psycopg.Connection, aconn: psycopg.AsyncConnection
) -> None:
    migrate(conn, "alt")
    with psycopg.connect(dsn, autocommit=True) as listener:
        for schema in ("public", "alt"):
            listener.execute(f'LISTEN "{notify_channel(schema)}"')
        enqueue(conn, "sync-public", {})
        await enqueue(aconn, "async-alt", {}, schema="alt")
        heard = {(n.channel, n.payload) for n in listener.notifies(timeout=1.0, stop_after=2)}
    assert heard == {("jobtui_public", "sync-public"), ("jobtui_alt", "async-alt")}


async def test_plain_enqueue_stores_what_the_general_path_stores(
    conn: psycopg.Connection, aconn: psycopg.AsyncConnection
) -> None:
    """No options and the options spelt out as their defaults give the same row."""
    when = conn.execute("SELECT now()").fetchone()[0]
    plain = enqueue(conn, "k", {"x": [1, "é"]})
    spelt = enqueue(conn, "k", {"x": [1, "é"]}, max_attempts=5, priority=0, run_at=None)
    none = enqueue(conn, "k", None)
    from_async = await enqueue(aconn, "k", {"x": [1, "é"]})
    assert type(plain) is type(spelt) is type(from_async) and plain.created and from_async.created
    rows = conn.execute(
        "SELECT id, kind, payload, max_attempts, priority, run_at >= %s, run_at <= now(),"
        " unique_key FROM jobs ORDER BY id",
        (when,),
    ).fetchall()
    assert [r[0] for r in rows] == [plain, spelt, none, from_async]
    same = ("k", {"x": [1, "é"]}, 5, 0, True, True, None)
    assert [r[1:] for r in rows if r[0] != none] == [same, same, same]
    assert [r[2] for r in rows if r[0] == none] == [{}]


def test_plain_enqueue_runs_at_the_transactions_now(dsn: str) -> None:
    with psycopg.connect(dsn) as conn:  # one transaction: now() is its start
        started = conn.execute("SELECT now()").fetchone()[0]
        job = enqueue(conn, "k", {})
        run_at = conn.execute("SELECT run_at FROM jobs WHERE id = %s", (job,)).fetchone()[0]
        conn.rollback()
    assert run_at == started


@pytest.mark.parametrize(
    ("kind", "payload", "message"),
    [
        ("", {}, "job kind must be a non-empty string"),
        ("   ", {}, "job kind must be a non-empty string"),
        (7, {}, "job kind must be a non-empty string"),
        (None, {}, "job kind must be a non-empty string"),
        ("k" * 201, {}, "job kind is longer than 200 characters"),
        ("k", {"x": object()}, "payload is not JSON-serialisable"),
        ("k", {"x": float("nan")}, "payload is not JSON-serialisable"),
        ("k", {"x": "a\x00b"}, "payload contains a NUL character"),
        ("k", {"x": "\ud800"}, "payload contains a lone surrogate"),
    ],
)
async def test_plain_enqueue_refuses_what_the_general_path_refuses(
    conn: psycopg.Connection,
    aconn: psycopg.AsyncConnection,
    kind: object,
    payload: object,
    message: str,
) -> None:
    for options in ({}, {"priority": 0}):  # the cheap path, then the general one
        with pytest.raises(InvalidJob, match=message):
            enqueue(conn, kind, payload, **options)  # type: ignore[arg-type]
        with pytest.raises(InvalidJob, match=message):
            enqueue(aconn, kind, payload, **options)  # type: ignore[arg-type]
        with pytest.raises(InvalidJob, match=message):
            enqueue_many(conn, [{"kind": "ok"}, {"kind": kind, "payload": payload, **options}])
    assert conn.execute("SELECT count(*) FROM jobs").fetchone()[0] == 0


async def test_plain_enqueue_checks_the_payload_before_the_kind(
    conn: psycopg.Connection, aconn: psycopg.AsyncConnection
) -> None:
    """Both wrong: the payload's message, on the cheap path as on the general one."""
    for options in ({}, {"priority": 0}):
        with pytest.raises(InvalidJob, match="payload is not JSON-serialisable"):
            enqueue(conn, "", {"x": object()}, **options)
        with pytest.raises(InvalidJob, match="payload is not JSON-serialisable"):
            await enqueue(aconn, "", {"x": object()}, **options)


def test_plain_enqueue_checks_the_job_before_the_schema_name(conn: psycopg.Connection) -> None:
    with pytest.raises(InvalidJob, match="non-empty"):
        enqueue(conn, "", {}, schema="no such")
    for _ in range(2):  # a refused name is not remembered as good
        with pytest.raises(InvalidSchemaName):
            enqueue(conn, "k", {}, schema="no such")
    with pytest.raises(InvalidSchemaName):
        enqueue("postgresql://nowhere.invalid/x", "k", {}, schema="no such")


def test_enqueued_keeps_created_through_copies_and_pickles() -> None:
    """`created` True is the class's default (no instance attribute): it must still travel."""
    made = [Enqueued(5), Enqueued(6, False), Enqueued(Enqueued(7), created=False)]
    made.append(Enqueued(8, True))
    for job in made:
        for again in (pickle.loads(pickle.dumps(job)), copy.copy(job), copy.deepcopy(job)):
            assert type(again) is Enqueued and again == job and again.created is job.created
    assert [job.created for job in made] == [True, False, False, True]
    assert f"{made[1]:>3}|{made[1]}|{made[1]!r}" == "  6|6|6" and hash(made[1]) == hash(6)


def test_plain_enqueue_with_a_dsn(dsn: str, conn: psycopg.Connection) -> None:
    job = enqueue(dsn, "k", {"n": 1})
    assert job.created
    row = conn.execute("SELECT kind, payload FROM jobs WHERE id = %s", (job,)).fetchone()
    assert row == ("k", {"n": 1})


# Every character COPY's text format treats specially (backslash, tab, newline, carriage
# return, the `\N` null marker and the `\.` end marker), others a hand-rolled escaper might
# mishandle, and JSON's own escapes, as they would appear in kinds and payloads.
ODD = [
    "\\",
    "\\\\",
    "\t",
    "\n",
    "\r",
    "\r\n",
    "\\N",
    "\\.",
    ".",
    "\\t",
    "\\n",
    "\x01\x08\x0b\x0c\x1b\x1f\x7f",
    '"',
    "'",
    "\u2028\u2029",
    "é€😀",
    "\\u0041",
    "a\\",
    "end\\",
    "",
    " ",
]


def test_enqueue_many_round_trips_every_copy_special_character(conn: psycopg.Connection) -> None:
    """Across chunks, mixed with jobs that carry options: each row comes back exactly."""
    jobs: list[JobSpec | dict[str, object]] = []
    expected = []
    for i in range(2600):  # more than two COPY chunks
        text = ODD[i % len(ODD)]
        kind = f"k{text}{i % 3}" if text.strip() else f"k{i % 3}"
        payload = {"s": text, text: [text, i], "nested": {"n": text * 2}} if text else [i]
        if i % 7 == 0:
            jobs.append(JobSpec(kind, payload, priority=i % 5, max_attempts=1 + i % 4))
            expected.append((kind, payload, 1 + i % 4, i % 5))
        else:
            jobs.append({"kind": kind, "payload": payload})
            expected.append((kind, payload, 5, 0))
    jobs.append({"kind": "\\N", "payload": "\\N"})
    expected.append(("\\N", "\\N", 5, 0))
    assert enqueue_many(conn, jobs) == len(jobs)
    rows = conn.execute("SELECT kind, payload, max_attempts, priority FROM jobs ORDER BY id")
    assert rows.fetchall() == expected


def test_enqueue_many_times_and_defaults(dsn: str) -> None:
    """run_at: the transaction's now(), plus each job's delay, or its own run_at."""
    at = datetime(2031, 5, 6, 7, 8, 9, 123456, tzinfo=UTC)
    jobs = [
        {"kind": "now"},
        {"kind": "later", "delay": timedelta(seconds=90)},
        {"kind": "at", "run_at": at},
        {"kind": "at+", "run_at": at, "delay": timedelta(days=1)},
        {"kind": "now"},
    ]
    with psycopg.connect(dsn, autocommit=True) as conn:
        enqueue_many(conn, jobs)
        rows = conn.execute(
            "SELECT kind, run_at - created_at, run_at FROM jobs ORDER BY id"
        ).fetchall()
    assert [r[0] for r in rows] == ["now", "later", "at", "at+", "now"]
    assert rows[0][1] == rows[4][1] == timedelta(0)
    assert rows[1][1] == timedelta(seconds=90)
    assert rows[2][2] == at and rows[3][2] == at + timedelta(days=1)
