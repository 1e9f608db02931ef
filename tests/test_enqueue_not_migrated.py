"""The producer API on a database that was never migrated says so, as the CLI does.

It raised psycopg's bare UndefinedTable (`relation "public.jobs" does not exist`), which names
neither the database nor what to run. Now every entry point raises jobtui's SchemaMissing,
naming the schema, database and host, chained to the server's error; it is told from the
statement's own failure, so a call on a migrated database sends nothing more.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

import psycopg
import pytest
from psycopg import errors as pgerrors

from jobtui import enqueue, enqueue_many
from jobtui.db import SchemaMissing

CALLS: dict[str, Callable[[Any], Any]] = {
    "enqueue": lambda target: enqueue(target, "k", {"n": 1}),
    "enqueue with options": lambda target: enqueue(target, "k", {}, priority=3),
    "enqueue unique": lambda target: enqueue(target, "k", {}, unique_key="u"),
    "enqueue unique window": lambda target: enqueue(
        target, "k", {}, unique_key="u", unique_window=timedelta(minutes=1)
    ),
    "enqueue_many": lambda target: enqueue_many(target, [{"kind": "k"}]),
    "enqueue_many unique": lambda target: enqueue_many(target, [{"kind": "k", "unique_key": "u"}]),
}


def _expected(dsn: str, schema: str = "public") -> str:
    info = psycopg.conninfo.conninfo_to_dict(dsn)
    return (
        f"jobtui's tables are not in schema '{schema}' of database '{info['dbname']}' on "
        f"{info.get('host', '')}: run `jobtui migrate` first, or connect to the database that "
        "has them"
    )


@pytest.mark.parametrize("call", list(CALLS))
def test_a_connection_to_an_unmigrated_database_says_not_migrated(
    empty_dsn: str, call: str
) -> None:
    with (
        psycopg.connect(empty_dsn, autocommit=True) as conn,
        pytest.raises(SchemaMissing) as raised,
    ):
        CALLS[call](conn)
    assert str(raised.value) == _expected(empty_dsn)
    assert isinstance(raised.value.__cause__, pgerrors.UndefinedTable)


@pytest.mark.parametrize("call", ["enqueue", "enqueue_many"])
def test_a_dsn_of_an_unmigrated_database_says_not_migrated(empty_dsn: str, call: str) -> None:
    with pytest.raises(SchemaMissing) as raised:
        CALLS[call](empty_dsn)
    assert str(raised.value) == _expected(empty_dsn)


@pytest.mark.parametrize("call", list(CALLS))
async def test_an_async_connection_to_an_unmigrated_database_says_not_migrated(
    empty_dsn: str, call: str
) -> None:
    async with await psycopg.AsyncConnection.connect(empty_dsn, autocommit=True) as aconn:
        with pytest.raises(SchemaMissing) as raised:
            await CALLS[call](aconn)
    assert str(raised.value) == _expected(empty_dsn)


@pytest.mark.parametrize(
    "call",
    [
        lambda conn: enqueue(conn, "k", {}, schema="nowhere"),
        lambda conn: enqueue_many(conn, [{"kind": "k"}], schema="nowhere"),
    ],
    ids=["enqueue", "enqueue_many"],
)
def test_a_schema_that_does_not_exist_says_not_migrated(
    dsn: str, call: Callable[[psycopg.Connection], Any]
) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn, pytest.raises(SchemaMissing) as raised:
        call(conn)
    assert str(raised.value) == _expected(dsn, "nowhere")
    cause = raised.value.__cause__
    assert isinstance(cause, pgerrors.UndefinedTable | pgerrors.InvalidSchemaName)


def test_other_database_errors_pass_unchanged(conn: psycopg.Connection) -> None:
    """Only a missing table or schema is reworded: a refused row stays psycopg's error."""
    conn.execute("ALTER TABLE jobs ADD CONSTRAINT no_k CHECK (kind <> 'k')")
    with pytest.raises(pgerrors.CheckViolation):
        enqueue(conn, "k", {})


def test_the_callers_transaction_is_left_to_the_caller(empty_dsn: str) -> None:
    """In the caller's transaction the failed statement aborts it, as before; the caller rolls
    back and the connection goes on."""
    with psycopg.connect(empty_dsn) as conn:
        with pytest.raises(SchemaMissing):
            enqueue(conn, "k", {})
        assert conn.info.transaction_status == psycopg.pq.TransactionStatus.INERROR
        conn.rollback()
        assert conn.execute("SELECT 1").fetchone() == (1,)
