"""The topology fixtures themselves start the real components they promise (issue 15)."""

from __future__ import annotations

import psycopg
import pytest
from topology import Bouncer, Owner, ReplicaDB, classic_consume


def _setting(bouncer: Bouncer, key: str) -> str:
    return next(str(r["value"]) for r in bouncer.show("config") if r["key"] == key)


def test_pgbouncer_transaction_mode_pools_transactions(
    tx_pooled_dsn: str, pgbouncer_transaction: Bouncer
) -> None:
    assert _setting(pgbouncer_transaction, "pool_mode") == "transaction"
    with psycopg.connect(tx_pooled_dsn, autocommit=True, prepare_threshold=None) as conn:
        assert conn.execute("SELECT count(*) FROM jobs").fetchone() == (0,)
        # The client's port is PgBouncer's, not the server's.
        assert conn.info.port == pgbouncer_transaction.port
    databases = {str(r["database"]) for r in pgbouncer_transaction.show("pools")}
    assert psycopg.conninfo.conninfo_to_dict(tx_pooled_dsn)["dbname"] in databases


def test_pgbouncer_session_mode(session_pooled_dsn: str, pgbouncer_session: Bouncer) -> None:
    assert _setting(pgbouncer_session, "pool_mode") == "session"
    with psycopg.connect(session_pooled_dsn, autocommit=True) as conn:
        assert conn.execute("SELECT 1").fetchone() == (1,)


def test_pgbouncer_with_prepared_statements(
    tx_prepared_pooled_dsn: str, pgbouncer_transaction_prepared: Bouncer
) -> None:
    assert _setting(pgbouncer_transaction_prepared, "max_prepared_statements") == "100"
    with psycopg.connect(tx_prepared_pooled_dsn, autocommit=True, prepare_threshold=0) as conn:
        assert conn.execute("SELECT %s::int", (7,)).fetchone() == (7,)


def test_standby_is_a_streaming_hot_standby(replica_db: ReplicaDB) -> None:
    with psycopg.connect(replica_db.primary_dsn, autocommit=True) as primary:
        primary.execute("INSERT INTO jobs (kind, payload) VALUES ('k', '{}')")
    replica_db.wait_replayed()
    with psycopg.connect(replica_db.standby_dsn, autocommit=True) as standby:
        assert standby.execute("SELECT pg_is_in_recovery()").fetchone() == (True,)
        assert standby.execute("SELECT count(*) FROM jobs").fetchone() == (1,)
        with pytest.raises(psycopg.errors.ReadOnlySqlTransaction):
            standby.execute("INSERT INTO jobs (kind, payload) VALUES ('k', '{}')")
    with psycopg.connect(replica_db.replica.primary, autocommit=True) as primary:
        row = primary.execute(
            "SELECT state FROM pg_stat_replication WHERE state = 'streaming'"
        ).fetchone()
        assert row == ("streaming",)


def test_owner_is_no_superuser_and_owns_its_database(owner: Owner) -> None:
    with psycopg.connect(owner.dsn, autocommit=True) as conn:
        row = conn.execute(
            "SELECT current_user, r.rolsuper, pg_get_userbyid(d.datdba) "
            "FROM pg_roles r, pg_database d "
            "WHERE r.rolname = current_user AND d.datname = current_database()"
        ).fetchone()
        assert row == (owner.role, False, owner.role)


def test_classic_consumer_claims_completes_retries_and_gives_up(
    conn: psycopg.Connection, dsn: str
) -> None:
    conn.execute(
        "INSERT INTO jobs (kind, payload, max_attempts) VALUES "
        "('ok', '{}', 5), ('bad', '{}', 3), ('bad', '{}', 1)"
    )

    def bad(payload: object) -> None:
        raise RuntimeError("boom")

    # Three claims: the article claims a given-up row again (no attempts check), so bound it.
    tally = classic_consume(dsn, {"ok": lambda p: None, "bad": bad}, max_claims=3)
    assert len(tally.done) == 1 and len(tally.retried) == 1 and len(tally.given_up) == 1
    rows = conn.execute(
        "SELECT kind, attempts, max_attempts, locked_at IS NULL, finished_at IS NULL, "
        "run_at > now(), last_error FROM jobs ORDER BY id"
    ).fetchall()
    assert rows == [
        ("ok", 1, 5, False, False, False, None),
        ("bad", 1, 3, True, True, True, "boom"),
        ("bad", 1, 1, True, True, False, "boom"),
    ]
