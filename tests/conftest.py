"""Test harness: a real PostgreSQL and a fresh, migrated database for every test.

The server is `JOBTUI_TEST_DSN` when set, otherwise an embedded one from PyPI. One template
database is migrated per session; each test gets `CREATE DATABASE … TEMPLATE` of it and it is
dropped `WITH (FORCE)` afterwards, so tests never see each other's rows.
"""

from __future__ import annotations

import os
import tempfile
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import psycopg
import pytest
from psycopg import conninfo

# Issue 15's production topologies (real PgBouncer, streaming standby, non-superuser owner):
# the fixtures live in tests/topology.py and are registered here by importing them.
from topology import (  # noqa: F401
    owner,
    pgbouncer_session,
    pgbouncer_transaction,
    pgbouncer_transaction_prepared,
    replica,
    replica_db,
    session_pooled_dsn,
    tx_pooled_dsn,
    tx_prepared_pooled_dsn,
)

from jobtui.schema import migrate

SCHEMA = "public"


def with_db(dsn: str, dbname: str) -> str:
    """The same server DSN pointed at another database."""
    return conninfo.make_conninfo(dsn, dbname=dbname)


@pytest.fixture(scope="session")
def pg_server_dsn() -> Iterator[str]:
    """A DSN to a maintenance database on the test server."""
    external = os.environ.get("JOBTUI_TEST_DSN")
    if external:
        yield external
        return
    from jobtui.embedded import start_embedded

    root = Path(tempfile.mkdtemp(prefix="jobtui-test-pg-"))
    server = start_embedded(root / "data")
    try:
        yield server.dsn
    finally:
        server.stop()


def _admin(dsn: str) -> psycopg.Connection:
    return psycopg.connect(dsn, autocommit=True)


@pytest.fixture(scope="session")
def template_db(pg_server_dsn: str) -> Iterator[str]:
    """Name of a migrated template database for this session."""
    name = f"jobtui_tpl_{os.getpid()}_{uuid.uuid4().hex[:6]}"
    with _admin(pg_server_dsn) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    with psycopg.connect(with_db(pg_server_dsn, name), autocommit=True) as conn:
        migrate(conn, SCHEMA)
    try:
        yield name
    finally:
        with _admin(pg_server_dsn) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def _fresh_db(pg_server_dsn: str, template: str) -> str:
    name = f"jobtui_t_{uuid.uuid4().hex[:12]}"
    with _admin(pg_server_dsn) as admin:
        admin.execute(f'CREATE DATABASE "{name}" TEMPLATE "{template}"')
    return name


@pytest.fixture
def empty_dsn(pg_server_dsn: str) -> Iterator[str]:
    """A fresh database with nothing in it (for migration tests)."""
    name = f"jobtui_e_{uuid.uuid4().hex[:12]}"
    with _admin(pg_server_dsn) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    try:
        yield with_db(pg_server_dsn, name)
    finally:
        with _admin(pg_server_dsn) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def _own_database(pg_server_dsn: str, template_db: str) -> Iterator[str]:
    """A fresh, migrated database, dropped after the test."""
    name = _fresh_db(pg_server_dsn, template_db)
    try:
        yield with_db(pg_server_dsn, name)
    finally:
        with _admin(pg_server_dsn) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture
def dsn(pg_server_dsn: str, template_db: str) -> Iterator[str]:
    """A fresh, migrated database of this test's own."""
    yield from _own_database(pg_server_dsn, template_db)


@pytest.fixture
def second_dsn(pg_server_dsn: str, template_db: str) -> Iterator[str]:
    """Another database of this test's own (tests over several targets)."""
    yield from _own_database(pg_server_dsn, template_db)


@pytest.fixture
def third_dsn(pg_server_dsn: str, template_db: str) -> Iterator[str]:
    """A third database of this test's own."""
    yield from _own_database(pg_server_dsn, template_db)


@pytest.fixture
def conn(dsn: str) -> Iterator[psycopg.Connection]:
    """An autocommit sync connection to the test's database."""
    with psycopg.connect(dsn, autocommit=True) as c:
        yield c


@pytest.fixture
async def aconn(dsn: str) -> AsyncIterator[psycopg.AsyncConnection]:
    """An autocommit async connection to the test's database."""
    c = await psycopg.AsyncConnection.connect(dsn, autocommit=True)
    try:
        yield c
    finally:
        await c.close()
