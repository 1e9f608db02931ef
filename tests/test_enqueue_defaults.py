"""enqueue_many's short COPY: a batch of jobs with the default options sends only kind and payload.

The table's column defaults then fill run_at, max_attempts and priority. These tests hold that
the rows are the ones the full COPY writes (every column but the id), that a batch with any
option, and a table whose defaults are not jobtui's, still get every column sent, that the
counts the console reads stay exact, and that a None payload is stored as `enqueue` stores it.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import psycopg
import pytest

from jobtui import JobSpec, enqueue, enqueue_many
from jobtui.sql import notify_channel

enqueue_module = importlib.import_module("jobtui.enqueue")  # `jobtui.enqueue` is the function

# Every column of a row but its id, in a form that compares across batches.
ROWS = "SELECT to_jsonb(j) - 'id' FROM jobs j WHERE kind LIKE %s ORDER BY id"


@pytest.fixture
def paths(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[bool]]:
    """Which COPY each enqueue_many call sent: True for the short one (kind and payload)."""
    seen: list[bool] = []
    real = enqueue_module._copy_chunks

    def spy(specs: Any, now: Any, defaults: bool = False) -> Any:
        seen.append(defaults)
        return real(specs, now, defaults)

    monkeypatch.setattr(enqueue_module, "_copy_chunks", spy)
    yield seen


def _rows(conn: psycopg.Connection, prefix: str) -> list[dict[str, Any]]:
    rows = [r[0] for r in conn.execute(ROWS, (f"{prefix}%",))]
    for row in rows:
        row["kind"] = row["kind"].removeprefix(prefix)
    return rows


def test_default_only_rows_equal_rows_with_every_column_sent(dsn: str, paths: list[bool]) -> None:
    """One transaction, so now() is the same for all three batches: the rows must be equal."""
    payloads: list[Any] = [{"i": 1}, [1, "é\\n"], "text\twith tab", 7, None, {}]

    def batch(prefix: str, **options: Any) -> list[Any]:
        jobs: list[Any] = [
            {"kind": f"{prefix}{i % 2}", "payload": p, **options} for i, p in enumerate(payloads)
        ]
        return [*jobs, JobSpec(f"{prefix}spec", {"s": 1}, **options)]

    with psycopg.connect(dsn) as conn, conn.transaction():
        enqueue_many(conn, batch("a:"))
        enqueue_many(conn, batch("b:", max_attempts=5, priority=0, run_at=None, delay=None))
        # One job with an option sends every column for the whole batch.
        enqueue_many(conn, [*batch("c:"), {"kind": "other", "priority": 1}])
        assert paths == [True, True, False]
        short, spelt, full = _rows(conn, "a:"), _rows(conn, "b:"), _rows(conn, "c:")
        now = conn.execute("SELECT to_jsonb(now())").fetchone()
        assert now is not None
    assert short == spelt == full and len(short) == len(payloads) + 1
    assert {r["run_at"] for r in short} == {r["created_at"] for r in short} == {now[0]}
    assert {(r["max_attempts"], r["priority"], r["attempts"]) for r in short} == {(5, 0, 0)}


def test_mixed_batches_keep_each_jobs_options(conn: psycopg.Connection, paths: list[bool]) -> None:
    jobs: list[Any] = [{"kind": "plain", "payload": {"i": i}} for i in range(1500)]
    jobs[700] = {"kind": "later", "delay": timedelta(hours=1), "max_attempts": 2}
    jobs[900] = {"kind": "keyed", "unique_key": "k1", "priority": 4}
    jobs[901] = {"kind": "keyed", "unique_key": "k1"}
    n = enqueue_many(conn, jobs)
    assert n == 1499 and paths == [False]
    rows = conn.execute(
        "SELECT kind, count(*), min(max_attempts), max(max_attempts), min(priority),"
        " max(priority), bool_and(run_at > now() + interval '59 minutes'),"
        " bool_and(run_at = created_at) FROM jobs GROUP BY kind ORDER BY kind"
    ).fetchall()
    assert rows == [
        ("keyed", 1, 5, 5, 4, 4, False, True),
        ("later", 1, 2, 2, 0, 0, True, False),
        ("plain", 1497, 5, 5, 0, 0, False, True),
    ]
    # A keyless default-only batch after it takes the short COPY.
    assert enqueue_many(conn, [{"kind": "plain"}, {"kind": "keyed", "unique_key": "k2"}]) == 2
    assert paths == [False, True]


@pytest.mark.parametrize(
    "change",
    [
        "ALTER COLUMN max_attempts SET DEFAULT 3",
        "ALTER COLUMN priority SET DEFAULT 9",
        "ALTER COLUMN run_at SET DEFAULT now() + interval '1 day'",
        "ALTER COLUMN run_at DROP DEFAULT",
    ],
)
def test_a_table_with_other_defaults_gets_every_column(
    conn: psycopg.Connection, paths: list[bool], change: str
) -> None:
    """An article table extended in place keeps its owner's defaults; a job without options
    still gets jobtui's (run_at now, 5 attempts, priority 0), as before the short COPY."""
    conn.execute(f"ALTER TABLE jobs {change}")
    assert enqueue_many(conn, [{"kind": "k", "payload": {"i": i}} for i in range(3)]) == 3
    assert paths == [False]
    rows = conn.execute(
        "SELECT DISTINCT max_attempts, priority, run_at = created_at FROM jobs"
    ).fetchall()
    assert rows == [(5, 0, True)]


async def test_the_async_path_takes_the_short_copy_too(
    aconn: psycopg.AsyncConnection, paths: list[bool]
) -> None:
    assert await enqueue_many(aconn, [{"kind": "a"}, {"kind": "b", "payload": [1]}]) == 2
    assert paths == [True]
    cur = await aconn.execute("SELECT kind, payload, max_attempts, priority FROM jobs ORDER BY id")
    assert await cur.fetchall() == [("a", {}, 5, 0), ("b", [1], 5, 0)]


def test_counts_and_notify_after_short_and_full_copies(
    dsn: str, conn: psycopg.Connection, paths: list[bool]
) -> None:
    """job_counts summed per kind equal the rows counted; job_flow counts each arrival once."""
    with psycopg.connect(dsn, autocommit=True) as listener:
        listener.execute(f'LISTEN "{notify_channel("public")}"')
        enqueue_many(conn, [{"kind": f"k{i % 3}", "payload": {"i": i}} for i in range(2500)])
        enqueue_many(
            conn,
            [{"kind": f"k{i % 3}", "payload": {"i": i}} for i in range(500)]
            + [{"kind": "k0", "delay": timedelta(minutes=5)}],
        )
        heard = [n.payload for n in listener.notifies(timeout=1.0, stop_after=3)]
    assert paths == [True, False] and heard == ["bulk", "bulk"]
    real = dict(conn.execute("SELECT kind, count(*) FROM jobs GROUP BY kind").fetchall())
    assert real == {"k0": 1002, "k1": 1000, "k2": 999}
    for fold in (False, True):
        if fold:
            conn.execute("SELECT jobtui_fold_job_counts()")
        counted = dict(
            conn.execute("SELECT kind, sum(n)::int FROM job_counts GROUP BY kind").fetchall()
        )
        assert counted == real
    arrived = dict(
        conn.execute("SELECT kind, sum(arrived)::int FROM job_flow GROUP BY kind").fetchall()
    )
    assert arrived == real


def test_a_none_payload_is_stored_as_enqueue_stores_it(conn: psycopg.Connection) -> None:
    """enqueue(conn, k, None) stores {}; so does every way of saying it to enqueue_many."""
    enqueue(conn, "single", None)
    enqueue(conn, "single", None, priority=1)
    enqueue_many(
        conn,
        [
            {"kind": "plain", "payload": None},
            {"kind": "plain"},
            {"kind": "options", "payload": None, "priority": 1},
            JobSpec("spec", None),
            {"kind": "keyed", "payload": None, "unique_key": "u"},
        ],
    )
    rows = conn.execute("SELECT kind, payload FROM jobs ORDER BY id").fetchall()
    assert [r[1] for r in rows] == [{}] * 7, rows
