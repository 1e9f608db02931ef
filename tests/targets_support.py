"""Several databases for issue 28's tests: targets on the test server, one reached by a
read-only role, one that is down (a closed port) and one whose jobs table is locked.
"""

from __future__ import annotations

import contextlib
import socket
import uuid
from collections.abc import Iterator
from pathlib import Path

import psycopg
from psycopg import conninfo


def closed_port_dsn() -> str:
    """A DSN to a local port nothing listens on (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"postgresql://nobody@127.0.0.1:{port}/nothing"


@contextlib.contextmanager
def read_only_role(server_dsn: str, dsn: str) -> Iterator[tuple[str, str]]:
    """A LOGIN role with CONNECT, USAGE and SELECT only on `dsn`'s database; (role, its DSN)."""
    role = f"jobtui_ro_{uuid.uuid4().hex[:8]}"
    dbname = conninfo.conninfo_to_dict(dsn)["dbname"]
    with psycopg.connect(dsn, autocommit=True) as c:
        c.execute(f"CREATE ROLE {role} LOGIN")
        c.execute(f'GRANT CONNECT ON DATABASE "{dbname}" TO {role}')
        c.execute(f"GRANT USAGE ON SCHEMA public TO {role}")
        c.execute(f"GRANT SELECT ON ALL TABLES IN SCHEMA public TO {role}")
    try:
        yield role, conninfo.make_conninfo(dsn, user=role)
    finally:
        with psycopg.connect(server_dsn, autocommit=True) as c:
            with psycopg.connect(dsn, autocommit=True) as d:
                d.execute(f"DROP OWNED BY {role}")
            c.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = %s",
                (role,),
            )
            c.execute(f"DROP ROLE IF EXISTS {role}")


@contextlib.contextmanager
def locked(dsn: str) -> Iterator[None]:
    """The jobs table locked ACCESS EXCLUSIVE by an open transaction: every read of it waits."""
    with psycopg.connect(dsn) as c:
        c.execute("LOCK TABLE jobs IN ACCESS EXCLUSIVE MODE")
        try:
            yield
        finally:
            c.rollback()


def write_config(path: Path, targets: dict[str, dict[str, object]]) -> Path:
    """A config file declaring `targets` ({name: {key: value}})."""
    lines = []
    for name, keys in targets.items():
        lines.append(f"[targets.{name}]")
        for key, value in keys.items():
            if isinstance(value, bool):
                lines.append(f"{key} = {'true' if value else 'false'}")
            else:
                lines.append(f'{key} = "{value}"')
    path.write_text("\n".join(lines) + "\n")
    return path
