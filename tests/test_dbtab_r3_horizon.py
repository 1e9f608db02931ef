"""Issue 26 items 14 and 15: what holds back VACUUM is named by what it really is, in the
engine (`dbhealth.collect`, `ops`) and on the console's Database tab at 80×24 (the holder's kind,
and the key that helps with that kind: never K on a vacuum process).

Each case makes one real holder of the xmin horizon (a session next to a running VACUUM or an
autovacuum worker, a prepared transaction, a logical and a physical replication slot, a
standby's hot_standby_feedback) and checks the name `dbhealth.collect` gives against PostgreSQL
itself: `VACUUM (VERBOSE)` of a probe table reports its dead tuples as "dead but not yet
removable" while the holder lives, and none once it has ended.

Prepared transactions, slots and standbys change the whole server, and the shared test server
has max_prepared_transactions = 0 and wal_level = replica: those cases run on a server of their
own (initdb of the same major version, tests/topology.py), started with the settings they need;
each case still checks its setting and skips, saying why, when it is off.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import shutil
import threading
import uuid
from collections.abc import Iterator
from dataclasses import dataclass

import psycopg
import pytest
from apps.helpers import wait_until
from psycopg import conninfo
from test_dbhealth import open_blocker, reading
from test_tui_actions import choices
from test_tui_console import config, notifications, rendered, table, until
from test_tui_database import SMALL, blocker_text, open_database_tab
from test_tui_layout import screen_lines
from topology import (
    Cluster,
    _dedicated_primary,
    _run_as,
    _server_params,
    _start_standby,
    bindir_for,
)

from jobtui import ops
from jobtui.dbhealth import (
    PREPARED,
    SESSION,
    SLOT,
    STANDBY,
    DbHealth,
    as_json,
    format_bytes,
    format_count,
    prometheus_lines,
)
from jobtui.schema import migrate
from jobtui.tui.app import JobtuiApp
from jobtui.tui.screens.confirm import ConfirmScreen

# The settings the server of its own starts with (after topology's defaults).
HORIZON_SETTINGS = (
    "wal_level=logical",
    "max_prepared_transactions=8",
    "max_replication_slots=8",
    "autovacuum_naptime=1",
)
DEAD = re.compile(r"(\d+) are dead but not yet removable")


# ------------------------------------------------------------------ servers and databases


@dataclass
class Horizon:
    """A server of its own: `admin` is its maintenance DSN; `standby()` a hot standby of it."""

    admin: str
    clusters: list[Cluster]
    account: str | None

    def standby(self) -> Cluster:
        if len(self.clusters) == 1:
            made = _start_standby(self.clusters[0].bindir, self.admin, self.account)
            if isinstance(made, str):
                pytest.skip(f"no standby of the dedicated server: {made}")
            self.clusters.append(made)
        return self.clusters[1]


@pytest.fixture(scope="session")
def horizon(pg_server_dsn: str) -> Iterator[Horizon]:
    major = int(_server_params(pg_server_dsn)["version"]) // 10000
    bindir = bindir_for(major)
    if bindir is None:
        pytest.skip(
            f"no PostgreSQL {major} binaries (initdb, pg_basebackup) for a server of its own"
        )
    account = _run_as()
    primary = _dedicated_primary(bindir, account, *HORIZON_SETTINGS)
    h = Horizon(primary.dsn(), [primary], account)
    # A standby must allow at least as many prepared transactions as its primary: written to
    # postgresql.auto.conf, which pg_basebackup copies to it.
    # Autovacuum stays off but for its own case (switched by reload), so that no autovacuum
    # ANALYZE holds a snapshot while another case counts the holders.
    with psycopg.connect(h.admin, autocommit=True) as admin:
        admin.execute("ALTER SYSTEM SET max_prepared_transactions = 8")
        autovacuum(admin, on=False)
    try:
        yield h
    finally:
        for cluster in reversed(h.clusters):
            cluster.stop()
            shutil.rmtree(cluster.socket_dir, ignore_errors=True)


@pytest.fixture
def hdsn(horizon: Horizon) -> Iterator[str]:
    """A fresh migrated database on the server of its own."""
    name = f"jobtui_h_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(horizon.admin, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    dsn = conninfo.make_conninfo(horizon.admin, dbname=name)
    with psycopg.connect(dsn, autocommit=True) as conn:
        migrate(conn, "public")
    try:
        yield dsn
    finally:
        # A prepared transaction outlives its session and would keep the database (and every
        # later logical slot's creation) waiting: a failed case must not leave one behind.
        with psycopg.connect(dsn, autocommit=True) as conn, psycopg.ClientCursor(conn) as cur:
            gids = cur.execute(
                "SELECT gid FROM pg_prepared_xacts WHERE database = current_database()"
            ).fetchall()
            for (gid,) in gids:
                cur.execute("ROLLBACK PREPARED %s", (gid,))
        with psycopg.connect(horizon.admin, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def needs(conn: psycopg.Connection, setting: str, ok: bool, why: str) -> None:
    """Skip, saying why, when the server's `setting` does not allow this case."""
    row = conn.execute(f"SHOW {setting}").fetchone()
    assert row is not None
    if not ok:
        pytest.skip(f"{setting} = {row[0]}: {why}")


def needs_prepared(conn: psycopg.Connection) -> None:
    needs(
        conn,
        "max_prepared_transactions",
        int(setting(conn, "max_prepared_transactions")) > 0,
        "PREPARE TRANSACTION is disabled, so no prepared transaction can hold back vacuum",
    )


def setting(conn: psycopg.Connection, name: str) -> str:
    row = conn.execute(f"SHOW {name}").fetchone()
    assert row is not None
    return str(row[0])


# ------------------------------------------------------------------ PostgreSQL's own account


def probe_churn(conn: psycopg.Connection, n: int, table: str = "horizon_probe") -> None:
    """n dead tuples in a probe table, deleted now (after the holder took its horizon)."""
    conn.execute(f"CREATE TABLE IF NOT EXISTS {table} (i int)")
    conn.execute(f"INSERT INTO {table} SELECT generate_series(1, %s)", (n,))
    conn.execute(f"DELETE FROM {table}")


def not_removable(conn: psycopg.Connection, table: str = "horizon_probe") -> int:
    """VACUUM (VERBOSE)'s count of dead tuples it may not remove yet, from its INFO notice."""
    notices: list[str] = []

    def keep(diag: psycopg.errors.Diagnostic) -> None:
        notices.append(diag.message_primary or "")

    conn.add_notice_handler(keep)
    try:
        conn.execute(f"VACUUM (VERBOSE) {table}")
    finally:
        conn.remove_notice_handler(keep)
    counts = [int(m.group(1)) for text in notices for m in DEAD.finditer(text)]
    assert counts, notices
    return counts[0]


async def closed(session: psycopg.Connection, watch: psycopg.Connection) -> None:
    """Close `session` and wait until its backend has gone (closing does not wait for it)."""
    pid = session.info.backend_pid
    session.close()

    def gone() -> bool:
        row = watch.execute("SELECT count(*) FROM pg_stat_activity WHERE pid = %s", (pid,))
        return row.fetchone() == (0,)

    await wait_until(gone, what=f"backend {pid} to end")


def holder_kinds(h: DbHealth) -> list[tuple[str, object]]:
    return [(b.kind, b.pid if b.kind == SESSION else b.name) for b in h.holders]


# ------------------------------------------------------------------ item 14: vacuum processes


@contextlib.contextmanager
def slow_vacuum(dsn: str, table: str = "slow_vac", *, analyze: bool = False) -> Iterator[int]:
    """A manual VACUUM kept at work (cost delay) in a thread; yields its pid. `analyze`: a
    VACUUM (ANALYZE) of a table already vacuumed, kept in its ANALYZE phase (which holds a
    snapshot like any statement)."""
    with psycopg.connect(dsn, autocommit=True) as setup:
        setup.execute(f"CREATE TABLE {table} AS SELECT g FROM generate_series(1, 100000) g")
        setup.execute(f"DELETE FROM {table} WHERE g % 2 = 0")
        if analyze:
            setup.execute(f"VACUUM {table}")
    command, progress = (
        (f"VACUUM (ANALYZE) {table}", "pg_stat_progress_analyze")
        if analyze
        else (f"VACUUM {table}", "pg_stat_progress_vacuum")
    )
    vac = psycopg.connect(dsn, autocommit=True, application_name="test-vacuum")
    vac.execute("SET vacuum_cost_delay = '50ms'")
    vac.execute("SET vacuum_cost_limit = 1")
    pid = vac.info.backend_pid
    errors: list[BaseException] = []

    def run() -> None:
        try:
            vac.execute(command)
        except psycopg.errors.QueryCanceled:
            pass
        except psycopg.Error as exc:  # pragma: no cover - shown by the assert below
            errors.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    try:
        with psycopg.connect(dsn, autocommit=True) as watch:
            for _ in range(500):
                row = watch.execute(
                    f"SELECT count(*) FROM {progress} WHERE pid = %s", (pid,)
                ).fetchone()
                if row and row[0]:
                    break
                threading.Event().wait(0.02)
            else:
                raise AssertionError(f"the VACUUM never showed in {progress}")
        yield pid
    finally:
        with psycopg.connect(dsn, autocommit=True) as stop:
            stop.execute("SELECT pg_cancel_backend(%s)", (pid,))
        thread.join(10)
        vac.close()
    assert not errors, errors


async def session_named_not(dsn: str, conn: psycopg.Connection, vacuum_pid: int) -> None:
    """An idle-in-transaction session opened after the vacuum process `vacuum_pid`: it, not
    the vacuum, is named, as VACUUM VERBOSE agrees; then it ends."""
    blocker = open_blocker(dsn, app="idle-after-vacuum")
    try:
        probe_churn(conn, 200)
        assert not_removable(conn) >= 200
        h = await reading(dsn)
        assert h.blocker is not None
        assert (h.blocker.kind, h.blocker.pid) == (SESSION, blocker.info.backend_pid)
        assert h.blocker.application == "idle-after-vacuum"
        assert all(b.pid != vacuum_pid for b in h.holders), holder_kinds(h)
    finally:
        await closed(blocker, conn)


async def test_a_running_vacuum_is_never_the_blocker_the_session_after_it_is(
    dsn: str, conn: psycopg.Connection
) -> None:
    with slow_vacuum(dsn) as vacuum_pid:
        # The VACUUM took its snapshot first: by age alone it would be the oldest.
        await session_named_not(dsn, conn, vacuum_pid)
        # The VACUUM still runs, and PostgreSQL may now remove everything: it held nothing.
        assert not_removable(conn) == 0
        h = await reading(dsn)
        assert h.blocker is None, holder_kinds(h)


def autovacuum(conn: psycopg.Connection, *, on: bool) -> None:
    conn.execute(f"ALTER SYSTEM SET autovacuum = {'on' if on else 'off'}")
    conn.execute("SELECT pg_reload_conf()")


@pytest.fixture
def autovacuum_on(horizon: Horizon) -> Iterator[None]:
    with psycopg.connect(horizon.admin, autocommit=True) as admin:
        autovacuum(admin, on=True)
        try:
            yield
        finally:
            autovacuum(admin, on=False)


@pytest.mark.usefixtures("autovacuum_on")
async def test_an_autovacuum_worker_is_never_the_blocker(hdsn: str) -> None:
    with psycopg.connect(hdsn, autocommit=True) as conn:
        for _ in range(100):  # the reload reaches every backend soon, not at once
            if setting(conn, "autovacuum") == "on":
                break
            await asyncio.sleep(0.05)
        needs(conn, "autovacuum", setting(conn, "autovacuum") == "on", "no autovacuum worker")
        conn.execute("CREATE TABLE av AS SELECT g FROM generate_series(1, 100000) g")
        conn.execute(
            "ALTER TABLE av SET (autovacuum_vacuum_cost_delay = 50, "
            "autovacuum_vacuum_cost_limit = 1, autovacuum_vacuum_threshold = 0, "
            "autovacuum_vacuum_scale_factor = 0, autovacuum_analyze_threshold = 2000000000)"
        )
        conn.execute("DELETE FROM av WHERE g % 2 = 0")
        conn.execute("SELECT pg_stat_force_next_flush()")

        def worker() -> int | None:
            row = conn.execute(
                "SELECT pid FROM pg_stat_activity WHERE backend_type = 'autovacuum worker' "
                "AND datname = current_database() AND query LIKE 'autovacuum: VACUUM%%av%%' "
                "AND backend_xmin IS NOT NULL"
            ).fetchone()
            return None if row is None else int(row[0])

        av_pid = await wait_until(worker, timeout=30, what="an autovacuum worker on av")
        await session_named_not(hdsn, conn, av_pid)
        assert worker() == av_pid  # still at work, and holding nothing back
        assert not_removable(conn) == 0


# ------------------------------------------------------------------ item 15: every other source


async def test_a_prepared_transaction_is_named_and_ended_by_rollback_prepared(hdsn: str) -> None:
    with psycopg.connect(hdsn, autocommit=True) as conn:
        needs_prepared(conn)
        gid = "pay-42 'quoted'; DROP TABLE jobs; --"
        with psycopg.connect(hdsn, autocommit=True) as tx:
            tx.execute("BEGIN")
            tx.execute("SELECT txid_current()")
            with psycopg.ClientCursor(tx) as cur:
                cur.execute("PREPARE TRANSACTION %s", (gid,))
        # Its session is gone: nothing in pg_stat_activity holds anything.
        probe_churn(conn, 150)
        assert not_removable(conn) >= 150
        h = await reading(hdsn)
        b = h.blocker
        assert b is not None and b.kind == PREPARED and b.name == gid, holder_kinds(h)
        assert b.label() == f"prepared transaction {gid!r}"
        assert b.refusal is None and b.xid is not None and b.xact_age_s is not None
        assert h.holders == [b]
        prom = "\n".join(prometheus_lines(h))
        assert f'jobtui_db_horizon_xid_age{{kind="prepared"}} {b.xid_age}' in prom
        assert 'jobtui_db_horizon_xid_age{kind="slot"} 0' in prom
        assert as_json(h)["blocker"]["kind"] == "prepared"
        actor = ops.Actor("carol@ops")
        async with await psycopg.AsyncConnection.connect(hdsn, autocommit=True) as aconn:
            # a stale reading (another xid under the same gid) ends nothing
            assert not await ops.end_prepared(aconn, "public", gid, "3", commit=False, actor=actor)
            assert await ops.end_prepared(aconn, "public", gid, b.xid, commit=False, actor=actor)
        rows = conn.execute(
            "SELECT action, count, filter ->> 'gid', os_user FROM audit_log ORDER BY id"
        ).fetchall()
        assert rows == [
            ("rollback_prepared", 0, gid, "carol@ops"),
            ("rollback_prepared", 1, gid, "carol@ops"),
        ]
        assert conn.execute("SELECT count(*) FROM pg_prepared_xacts").fetchone() == (0,)
        assert conn.execute("SELECT count(*) FROM jobs").fetchone() is not None  # still there
        assert not_removable(conn) == 0
        assert (await reading(hdsn)).blocker is None


async def test_commit_prepared_and_a_role_that_may_not(hdsn: str) -> None:
    with psycopg.connect(hdsn, autocommit=True) as conn:
        needs_prepared(conn)
        role = f"jobtui_op_{uuid.uuid4().hex[:8]}"
        conn.execute(f'CREATE ROLE "{role}" LOGIN')
        conn.execute(f'GRANT SELECT ON ALL TABLES IN SCHEMA public TO "{role}"')
        conn.execute(f'GRANT INSERT, UPDATE (count) ON audit_log TO "{role}"')
        conn.execute(f'GRANT USAGE ON SEQUENCE audit_log_id_seq TO "{role}"')
        try:
            with psycopg.connect(hdsn, autocommit=True) as tx:
                tx.execute("BEGIN")
                tx.execute("INSERT INTO paused_kinds (kind, paused_by) VALUES ('k2', 'x')")
                tx.execute("PREPARE TRANSACTION 'g-commit'")
            h = await reading(conninfo.make_conninfo(hdsn, user=role))
            b = h.blocker
            assert b is not None and b.kind == PREPARED
            assert b.refusal is not None and f"role {role} is neither" in b.refusal
            async with await psycopg.AsyncConnection.connect(
                conninfo.make_conninfo(hdsn, user=role), autocommit=True
            ) as weak:
                assert b.xid is not None
                with pytest.raises(ops.Refused) as refused:
                    await ops.end_prepared(
                        weak, "public", "g-commit", b.xid, commit=True, actor=ops.Actor("eve@x")
                    )
                assert "\n" not in str(refused.value)
                assert str(refused.value).startswith("not allowed to end prepared transaction")
            async with await psycopg.AsyncConnection.connect(hdsn, autocommit=True) as aconn:
                assert await ops.end_prepared(
                    aconn, "public", "g-commit", b.xid, commit=True, actor=ops.Actor("carol@ops")
                )
            assert conn.execute("SELECT kind FROM paused_kinds").fetchall() == [("k2",)]
            rows = conn.execute("SELECT action, count FROM audit_log ORDER BY id").fetchall()
            assert rows == [("commit_prepared", 0), ("commit_prepared", 1)]
        finally:
            conn.execute(f'DROP OWNED BY "{role}"')
            conn.execute(f'DROP ROLE "{role}"')


async def test_a_logical_slot_holds_back_the_catalogs_and_is_dropped(hdsn: str) -> None:
    slot = f"cdc_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(hdsn, autocommit=True) as conn:
        needs(conn, "wal_level", setting(conn, "wal_level") == "logical", "no logical slot")
        create_logical_slot(conn, slot)
        try:
            # catalog rows made and deleted after the slot's catalog_xmin
            for i in range(20):
                conn.execute(f"CREATE TABLE scratch_{i} (a int, b text)")
                conn.execute(f"DROP TABLE scratch_{i}")
            assert not_removable(conn, "pg_class") >= 20
            probe_churn(conn, 100)
            assert not_removable(conn) == 0  # user tables: a logical slot does not hold them
            h = await reading(hdsn)
            b = h.blocker
            assert b is not None and (b.kind, b.name) == (SLOT, slot), holder_kinds(h)
            assert b.slot_type == "logical" and b.catalog_only and b.refusal is None
            assert b.label() == f"logical replication slot {slot!r}"
            await _a_role_without_replication_may_not_drop(conn, hdsn, slot)
            async with await psycopg.AsyncConnection.connect(hdsn, autocommit=True) as aconn:
                actor = ops.Actor("carol@ops")
                assert await ops.drop_slot(aconn, "public", slot, "logical", actor=actor)
                assert not await ops.drop_slot(aconn, "public", slot, "logical", actor=actor)
            rows = conn.execute(
                "SELECT action, count, filter ->> 'slot' FROM audit_log ORDER BY id"
            ).fetchall()
            assert rows == [("drop_replication_slot", 1, slot), ("drop_replication_slot", 0, slot)]
            assert not_removable(conn, "pg_class") == 0
            assert (await reading(hdsn)).blocker is None
        finally:
            conn.execute(
                "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots "
                "WHERE slot_name = %s",
                (slot,),
            )


def create_logical_slot(conn: psycopg.Connection, slot: str) -> None:
    """A logical slot; its creation waits for every open transaction of the server (a
    prepared one left by a failed case included): fail after 20 s rather than hang."""
    conn.execute("SET statement_timeout = '20s'")
    try:
        conn.execute("SELECT pg_create_logical_replication_slot(%s, 'pgoutput')", (slot,))
    finally:
        conn.execute("RESET statement_timeout")


async def _a_role_without_replication_may_not_drop(
    conn: psycopg.Connection, hdsn: str, slot: str
) -> None:
    """An operator that may write the audit log but has no REPLICATION: told so, one line."""
    role = f"jobtui_op_{uuid.uuid4().hex[:8]}"
    conn.execute(f'CREATE ROLE "{role}" LOGIN NOREPLICATION')
    conn.execute(f'GRANT ALL ON ALL TABLES IN SCHEMA public TO "{role}"')
    conn.execute(f'GRANT ALL ON ALL SEQUENCES IN SCHEMA public TO "{role}"')
    weak_dsn = conninfo.make_conninfo(hdsn, user=role)
    try:
        b = (await reading(weak_dsn)).blocker
        assert b is not None and b.name == slot
        assert b.refusal == (
            f"dropping a slot takes superuser or the REPLICATION attribute; role {role} has neither"
        )
        async with await psycopg.AsyncConnection.connect(weak_dsn, autocommit=True) as weak:
            with pytest.raises(ops.Refused) as refused:
                await ops.drop_slot(weak, "public", slot, "logical", actor=ops.Actor("eve@x"))
        assert "\n" not in str(refused.value)
        assert str(refused.value).startswith(f"not allowed to drop replication slot {slot!r}: ")
        assert _slot_exists(conn, slot)
        assert conn.execute("SELECT count(*) FROM audit_log").fetchone() == (0,)
    finally:
        conn.execute(f'DROP OWNED BY "{role}"')
        conn.execute(f'DROP ROLE "{role}"')


def _slot_exists(conn: psycopg.Connection, slot: str) -> bool:
    row = conn.execute("SELECT count(*) FROM pg_replication_slots WHERE slot_name = %s", (slot,))
    return row.fetchone() == (1,)


def _standby_feedback(standby: Cluster, on: bool, slot: str = "") -> None:
    with psycopg.connect(standby.dsn(), autocommit=True) as sb:
        sb.execute(f"ALTER SYSTEM SET hot_standby_feedback = {'on' if on else 'off'}")
        if slot:
            sb.execute(f"ALTER SYSTEM SET primary_slot_name = '{slot}'")
        else:
            sb.execute("ALTER SYSTEM RESET primary_slot_name")
        sb.execute("SELECT pg_reload_conf()")


@contextlib.contextmanager
def standby_reader(standby: Cluster, dbname: str) -> Iterator[psycopg.Connection]:
    """A reader on the standby holding a snapshot open (REPEATABLE READ)."""
    reader = psycopg.connect(standby.dsn(dbname), application_name="standby-reader")
    reader.isolation_level = psycopg.IsolationLevel.REPEATABLE_READ
    reader.execute("SELECT count(*) FROM jobs")
    try:
        yield reader
    finally:
        reader.close()


async def test_standby_feedback_is_named_and_offers_nothing(horizon: Horizon, hdsn: str) -> None:
    standby = horizon.standby()
    dbname = conninfo.conninfo_to_dict(hdsn)["dbname"]
    assert isinstance(dbname, str)
    with psycopg.connect(hdsn, autocommit=True) as conn:
        _standby_feedback(standby, True)
        try:
            await _replayed(conn, standby, dbname)
            with standby_reader(standby, dbname):
                await _held_back(conn, "SELECT max(age(backend_xmin)) FROM pg_stat_replication")
                probe_churn(conn, 120)
                assert not_removable(conn) >= 120
                h = await reading(hdsn)
                b = h.blocker
                assert b is not None and b.kind == STANDBY, holder_kinds(h)
                assert not b.actionable and b.pid is not None
                assert b.label().startswith("standby ") and "hot_standby_feedback" in b.label()
            # the reader ended: the standby's next feedback releases the horizon
            await wait_until(lambda: not_removable(conn) == 0, timeout=20, what="release")
        finally:
            _standby_feedback(standby, False)


async def test_a_physical_slot_holds_back_every_table_and_is_dropped(
    horizon: Horizon, hdsn: str
) -> None:
    standby = horizon.standby()
    dbname = conninfo.conninfo_to_dict(hdsn)["dbname"]
    assert isinstance(dbname, str)
    slot = f"standby_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(hdsn, autocommit=True) as conn:
        conn.execute("SELECT pg_create_physical_replication_slot(%s, true)", (slot,))
        try:
            _standby_feedback(standby, True, slot)
            await _replayed(conn, standby, dbname)
            with standby_reader(standby, dbname):
                await _held_back(
                    conn, "SELECT age(xmin) FROM pg_replication_slots WHERE slot_name = %s", slot
                )
                # In use by the standby: named with its consumer, and not dropped (one line).
                h = await reading(hdsn)
                b = next(b for b in h.holders if b.name == slot)
                assert b.pid is not None and b.refusal is not None and "in use by pid" in b.refusal
                async with await psycopg.AsyncConnection.connect(hdsn, autocommit=True) as aconn:
                    with pytest.raises(ops.Refused, match="in use") as refused:
                        await ops.drop_slot(aconn, "public", slot, "physical", actor=ops.Actor("c"))
                assert "\n" not in str(refused.value)
                assert _slot_active(conn, slot)
            # The standby lets go of the slot (its feedback goes on, fresh, through its
            # walsender); the slot's xmin stays behind, holding back every table.
            _standby_feedback(standby, True)
            await wait_until(lambda: not _slot_active(conn, slot), timeout=20, what="slot idle")
            probe_churn(conn, 130)
            assert not_removable(conn) >= 130
            h = await reading(hdsn)
            b = h.blocker
            assert b is not None and (b.kind, b.name) == (SLOT, slot), holder_kinds(h)
            assert b.slot_type == "physical" and not b.catalog_only and b.refusal is None
            async with await psycopg.AsyncConnection.connect(hdsn, autocommit=True) as aconn:
                assert await ops.drop_slot(
                    aconn, "public", slot, "physical", actor=ops.Actor("c@o")
                )
            await wait_until(lambda: not_removable(conn) == 0, timeout=20, what="release")
            h = await reading(hdsn)
            assert [b.kind for b in h.holders] == [STANDBY], holder_kinds(h)  # fresh feedback
        finally:
            _standby_feedback(standby, False)
            conn.execute(
                "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots "
                "WHERE slot_name = %s AND NOT active",
                (slot,),
            )


async def _replayed(conn: psycopg.Connection, standby: Cluster, dbname: str) -> None:
    row = conn.execute("SELECT pg_current_wal_lsn()::text").fetchone()
    assert row is not None
    lsn = row[0]

    def done() -> bool:
        try:
            with psycopg.connect(standby.dsn(dbname), autocommit=True) as sb:
                got = sb.execute("SELECT pg_last_wal_replay_lsn() >= %s::pg_lsn", (lsn,)).fetchone()
                return bool(got and got[0])
        except psycopg.OperationalError:
            return False

    await wait_until(done, timeout=20, what="the standby to replay")


async def _held_back(conn: psycopg.Connection, age_sql: str, *params: object) -> None:
    """Spend 5 transaction ids, then wait until the standby's feedback (read by `age_sql`)
    is at least that old: it carries the reader's snapshot, not a fresh one."""
    for _ in range(5):
        conn.execute("SELECT txid_current()")

    def old() -> bool:
        row = conn.execute(age_sql, params or None).fetchone()
        return bool(row and row[0] is not None and int(row[0]) >= 5)

    await wait_until(old, timeout=20, what="the standby's feedback to hold the reader's snapshot")


def _slot_active(conn: psycopg.Connection, slot: str) -> bool:
    row = conn.execute(
        "SELECT active FROM pg_replication_slots WHERE slot_name = %s", (slot,)
    ).fetchone()
    return bool(row and row[0])


# ------------------------------------------------------------------ the Database tab


def footer(app: JobtuiApp) -> str:
    return rendered(app.query_one("Footer"))


def audit(dsn: str) -> list[tuple[object, ...]]:
    with psycopg.connect(dsn) as conn:
        return conn.execute(
            "SELECT action, count, filter ->> 'gid', filter ->> 'slot' FROM audit_log ORDER BY id"
        ).fetchall()


async def test_a_vacuum_is_never_offered_k_the_session_after_it_is(
    dsn: str, conn: psycopg.Connection
) -> None:
    with slow_vacuum(dsn) as vacuum_pid:
        app = JobtuiApp(dsn, "public", config=config())
        async with app.run_test(size=SMALL) as pilot:
            await open_database_tab(app, pilot)
            # Only the VACUUM has a snapshot: nothing holds back vacuum, and no K.
            await until(pilot, lambda: "Nothing holds back vacuum" in blocker_text(app))
            assert f"pid {vacuum_pid}" not in blocker_text(app)
            assert "Terminate" not in footer(app)
            await pilot.press("K")
            await pilot.pause(0.3)
            assert not isinstance(app.screen, ConfirmScreen)
            blocker = open_blocker(dsn, app="idle-after-vacuum")
            pid = blocker.info.backend_pid
            try:
                await until(pilot, lambda: f"pid {pid}" in blocker_text(app))
                text = blocker_text(app)
                assert text.startswith(f"Holds back vacuum: pid {pid} · transaction ")
                assert f"pid {vacuum_pid}" not in text and "C cancel · K terminate" in text
                # the footer takes its keys after the next refresh, not with the text
                await until(pilot, lambda: "Terminate" in footer(app))
                await pilot.press("K")
                await until(pilot, lambda: isinstance(app.screen, ConfirmScreen))
                assert app.screen.query_one("#confirm-box").border_title == (
                    f"Terminate backend {pid}?"
                )
                await pilot.press("escape")
                await until(pilot, lambda: not isinstance(app.screen, ConfirmScreen))
            finally:
                await closed(blocker, conn)
            await until(pilot, lambda: "Nothing holds back vacuum" in blocker_text(app))


async def test_a_vacuum_that_holds_back_is_named_but_never_offered_k(
    dsn: str, conn: psycopg.Connection
) -> None:
    # In its ANALYZE phase a VACUUM (ANALYZE) holds a snapshot, as PostgreSQL counts it.
    with slow_vacuum(dsn, "slow_an", analyze=True) as vacuum_pid:
        probe_churn(conn, 100)
        assert not_removable(conn) >= 100
        h = await reading(dsn)
        assert h.blocker is not None and h.blocker.pid == vacuum_pid and h.blocker.vacuum
        app = JobtuiApp(dsn, "public", config=config())
        async with app.run_test(size=SMALL) as pilot:
            await open_database_tab(app, pilot)
            await until(pilot, lambda: f"pid {vacuum_pid}" in blocker_text(app))
            assert "C cancel (a vacuum process: it is never terminated here)" in blocker_text(app)
            await until(pilot, lambda: "Cancel query" in footer(app))
            assert "Terminate" not in footer(app)
            await pilot.press("K")
            await pilot.pause(0.3)
            assert not isinstance(app.screen, ConfirmScreen)
            await pilot.press("C")
            await until(pilot, lambda: isinstance(app.screen, ConfirmScreen))
            await pilot.press("escape")
            await until(pilot, lambda: not isinstance(app.screen, ConfirmScreen))


async def test_a_prepared_transaction_is_shown_and_rolled_back_with_e(hdsn: str) -> None:
    # a gid may be 200 bytes, and hostile: the tab cuts it (…) and escapes it; the
    # confirmation names it whole
    gid = f"order-{uuid.uuid4().hex[:6]}\x1b[31m" + "x" * 150
    short = repr(gid[:39] + "…")
    with psycopg.connect(hdsn, autocommit=True) as conn:
        needs_prepared(conn)
        with psycopg.connect(hdsn, autocommit=True) as tx, psycopg.ClientCursor(tx) as cur:
            cur.execute("BEGIN")
            cur.execute("SELECT txid_current()")
            cur.execute("PREPARE TRANSACTION %s", (gid,))
        probe_churn(conn, 100)
        assert not_removable(conn) >= 100
        app = JobtuiApp(hdsn, "public", config=config())
        async with app.run_test(size=SMALL) as pilot:
            await open_database_tab(app, pilot)
            await until(pilot, lambda: f"prepared transaction {short}" in blocker_text(app))
            lines = blocker_text(app).splitlines()
            assert lines[0].startswith(f"Holds back vacuum: prepared transaction {short} · ")
            assert "\x1b" not in blocker_text(app)
            assert "E end it (ROLLBACK or COMMIT PREPARED)" in blocker_text(app)
            assert "two-phase commit" in blocker_text(app)
            # a younger session holds back too: named below, the older prepared one first
            session = open_blocker(hdsn)
            also = f"also holding back: pid {session.info.backend_pid}"
            await until(pilot, lambda: also in blocker_text(app))
            assert blocker_text(app).startswith("Holds back vacuum: prepared transaction ")
            await closed(session, conn)
            await until(pilot, lambda: "also holding back" not in blocker_text(app))
            await until(pilot, lambda: "End prepared" in footer(app))
            assert "Terminate" not in footer(app) and "Drop slot" not in footer(app)
            await pilot.press("K")  # not a session: K does nothing
            await pilot.pause(0.3)
            assert not isinstance(app.screen, ConfirmScreen)
            await pilot.press("E")
            await until(pilot, lambda: isinstance(app.screen, ConfirmScreen))
            assert isinstance(app.screen, ConfirmScreen)
            assert choices(app.screen) == [
                f"1  ROLLBACK PREPARED {gid!r}: discard its changes",
                f"2  COMMIT PREPARED {gid!r}: keep its changes",
                "esc  back, change nothing",
            ]
            await pilot.press("1")
            await until(
                pilot, lambda: f"rolled back prepared transaction {gid!r}" in notifications(app)
            )
            await until(pilot, lambda: "Nothing holds back vacuum" in blocker_text(app))
            await until(pilot, lambda: "End prepared" not in footer(app))
        assert audit(hdsn) == [("rollback_prepared", 1, gid, None)]
        assert not_removable(conn) == 0


async def test_another_role_s_prepared_transaction_is_refused_in_one_line(hdsn: str) -> None:
    role = f"jobtui_ro_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(hdsn, autocommit=True) as conn:
        needs_prepared(conn)
        conn.execute(f'CREATE ROLE "{role}" LOGIN')
        # an operator that may write (the console is not read-only), but is not the owner
        conn.execute(f'GRANT ALL ON ALL TABLES IN SCHEMA public TO "{role}"')
        conn.execute(f'GRANT ALL ON ALL SEQUENCES IN SCHEMA public TO "{role}"')
        with psycopg.connect(hdsn, autocommit=True) as tx:
            tx.execute("BEGIN")
            tx.execute("SELECT txid_current()")
            tx.execute("PREPARE TRANSACTION 'theirs'")
        try:
            app = JobtuiApp(conninfo.make_conninfo(hdsn, user=role), "public", config=config())
            async with app.run_test(size=SMALL) as pilot:
                await open_database_tab(app, pilot)
                await until(pilot, lambda: "prepared transaction 'theirs'" in blocker_text(app))
                assert "E not allowed: only a superuser or role" in blocker_text(app)
                await pilot.press("E")
                await until(pilot, lambda: any("may not end" in n for n in notifications(app)))
                note = next(n for n in notifications(app) if "may not end" in n)
                assert "\n" not in note and "Traceback" not in note
                assert note.startswith("This role may not end prepared transaction 'theirs': ")
                assert not isinstance(app.screen, ConfirmScreen)
            assert conn.execute("SELECT gid FROM pg_prepared_xacts").fetchall() == [("theirs",)]
            assert audit(hdsn) == []
        finally:
            conn.execute("ROLLBACK PREPARED 'theirs'")
            conn.execute(f'DROP OWNED BY "{role}"')
            conn.execute(f'DROP ROLE "{role}"')


async def test_a_slot_is_shown_and_dropped_with_d(hdsn: str) -> None:
    slot = f"cdc_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(hdsn, autocommit=True) as conn:
        create_logical_slot(conn, slot)
        try:
            app = JobtuiApp(hdsn, "public", config=config())
            async with app.run_test(size=SMALL) as pilot:
                await open_database_tab(app, pilot)
                await until(pilot, lambda: f"replication slot '{slot}'" in blocker_text(app))
                lines = blocker_text(app).splitlines()
                assert lines[0].startswith(
                    f"Holds back vacuum of the catalogs: logical replication slot '{slot}' · "
                    "catalog_xmin "
                ), lines[0]
                assert lines[0].endswith(" · inactive")
                assert "D drop the slot" in blocker_text(app)
                await until(pilot, lambda: "Drop slot" in footer(app))
                assert "Terminate" not in footer(app)
                await pilot.press("D")
                await until(pilot, lambda: isinstance(app.screen, ConfirmScreen))
                await pilot.press("1")
                await until(
                    pilot,
                    lambda: f"dropped logical replication slot '{slot}'" in notifications(app),
                )
                await until(pilot, lambda: "Nothing holds back vacuum" in blocker_text(app))
            assert audit(hdsn) == [("drop_replication_slot", 1, None, slot)]
        finally:
            conn.execute(
                "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots "
                "WHERE slot_name = %s",
                (slot,),
            )


async def test_standby_feedback_is_named_and_offers_no_key(horizon: Horizon, hdsn: str) -> None:
    standby = horizon.standby()
    dbname = conninfo.conninfo_to_dict(hdsn)["dbname"]
    assert isinstance(dbname, str)
    _standby_feedback(standby, True)
    try:
        with psycopg.connect(hdsn, autocommit=True) as conn:
            conn.execute("SELECT txid_current()")
        app = JobtuiApp(hdsn, "public", config=config())
        async with app.run_test(size=SMALL) as pilot:
            await open_database_tab(app, pilot)
            with standby_reader(standby, dbname):
                await until(pilot, lambda: "(hot_standby_feedback)" in blocker_text(app), 20)
                text = blocker_text(app)
                assert text.startswith("Holds back vacuum: standby ")
                assert "no action here: end the long query on the standby" in text
                for key in ("Terminate", "Cancel query", "End prepared", "Drop slot"):
                    assert key not in footer(app)
                await pilot.press("K")
                await pilot.pause(0.3)
                assert not isinstance(app.screen, ConfirmScreen)
    finally:
        _standby_feedback(standby, False)


@pytest.mark.slow
async def test_counts_past_a_million_are_never_cut(dsn: str, conn: psycopg.Connection) -> None:
    have = conn.execute("SELECT count(*) FROM jobtui_migrations").fetchone()
    assert have is not None
    conn.execute(
        "INSERT INTO jobtui_migrations (version, name) "
        "SELECT g, 'x' FROM generate_series(100000, 100000 + %s - 1) g",
        (2_450_251 - int(have[0]),),
    )
    conn.execute("SELECT pg_stat_force_next_flush()")
    app = JobtuiApp(dsn, "public", config=config())
    async with app.run_test(size=(80, 60)) as pilot:
        await open_database_tab(app, pilot)
        await until(pilot, lambda: "jobtui_migrations" in rendered(table(app, "#database-tables")))

        def row() -> str:  # as the terminal shows it
            return next((line for line in screen_lines(app) if "jobtui_migrations" in line), "")

        await until(pilot, lambda: "2.45M" in row(), 10)
        assert "245025" not in "\n".join(screen_lines(app))


def test_sizes_and_counts_fit_their_columns_and_keep_their_unit() -> None:
    """The tables' size column is 8 wide and live/dead 6: every value fits, with its unit."""
    for n in (0, 999, 1023, 1000 * 1024, 1023 * 1024 + 1000, 99 * 1024**3, 5 * 1024**5):
        assert len(format_bytes(n)) <= 7, format_bytes(n)
    assert format_bytes(1000 * 1024) == "1000 kB"
    for n in (999_999, 1_000_000, 2_450_251, 99_950_000, 999_500_000, 10**12, 10**16):
        assert len(format_count(n)) <= 6, format_count(n)
    assert format_count(999_999) == "999999"
    assert format_count(2_450_251) == "2.45M"
    assert format_count(999_500_000) == "1.00G"


async def test_a_day_old_wake_up_is_shown_whole(dsn: str, conn: psycopg.Connection) -> None:
    """The workers table's "last wake" column holds the longest age it shows (`23h59m ago`)."""
    conn.execute(
        "INSERT INTO workers (id, host, pid, kinds, concurrency, running, started_at, "
        "heartbeat_at, last_wakeup_at, listen_connected) VALUES ('w-quiet', 'h', 1, "
        "ARRAY['k'], 1, 0, now(), now(), now() - interval '23 hours 59 minutes 30 seconds', true)"
    )
    app = JobtuiApp(dsn, "public", config=config())
    async with app.run_test(size=SMALL) as pilot:
        await open_database_tab(app, pilot)
        workers = table(app, "#database-workers")
        await until(pilot, lambda: "w-quiet" in rendered(workers))
        await pilot.pause(0.2)
        row = next(line for line in screen_lines(app) if "w-quiet" in line)
        assert "23h59m ago" in row, row
