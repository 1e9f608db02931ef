"""Issue 15 item 2: console, `stats` and `check` on a streaming hot standby.

Reading works today; what is missing is saying so: a replica badge with the replication lag
(console, `stats --json`, Prometheus), `check --max-replica-lag`, and write actions hidden
with the reason.
"""

from __future__ import annotations

import json
import time
from typing import Any

import psycopg
from test_cli_monitoring import parse_prometheus
from test_cli_support import assert_ok, run_cli
from topology import ReplicaDB, console_polled


def _fill(db: ReplicaDB) -> None:
    with psycopg.connect(db.primary_dsn, autocommit=True) as conn:
        conn.execute(
            "INSERT INTO jobs (kind, payload, run_at) "
            "SELECT 'mail', '{}', now() - interval '1 min' FROM generate_series(1, 5)"
        )
        conn.execute(
            "INSERT INTO jobs (kind, payload, run_at) VALUES ('mail', '{}', now() + interval '1 h')"
        )
    db.wait_replayed()


def _numbers(value: Any, path: str = "") -> dict[str, float]:
    """Every number in a JSON document by its dotted path."""
    if isinstance(value, dict):
        out: dict[str, float] = {}
        for k, v in value.items():
            out.update(_numbers(v, f"{path}.{k}" if path else str(k)))
        return out
    if isinstance(value, int | float) and not isinstance(value, bool):
        return {path: float(value)}
    return {}


def test_stats_and_check_read_the_standby(replica_db: ReplicaDB) -> None:
    _fill(replica_db)
    data = json.loads(assert_ok(run_cli("stats", "--json", dsn=replica_db.standby_dsn)))
    assert data["totals"]["ready"] == 5
    assert data["totals"]["scheduled"] == 1
    out = assert_ok(run_cli("check", "--max-ready", "100", dsn=replica_db.standby_dsn))
    assert out.startswith("JOBTUI OK")


def test_stats_json_on_the_standby_has_a_replica_badge_with_its_lag(replica_db: ReplicaDB) -> None:
    _fill(replica_db)
    standby = json.loads(assert_ok(run_cli("stats", "--json", dsn=replica_db.standby_dsn)))
    lags = {k: v for k, v in _numbers(standby).items() if "replica" in k and "lag" in k}
    assert lags and all(0 <= v < 60 for v in lags.values()), standby
    primary = json.loads(assert_ok(run_cli("stats", "--json", dsn=replica_db.primary_dsn)))
    assert not {k for k in _numbers(primary) if "replica" in k and "lag" in k}


def test_prometheus_on_the_standby_has_the_replication_lag(replica_db: ReplicaDB) -> None:
    _fill(replica_db)
    samples = parse_prometheus(
        assert_ok(run_cli("stats", "--prometheus", dsn=replica_db.standby_dsn))
    )
    lags = {name: v for (name, _labels), v in samples.items() if "replica" in name or "lag" in name}
    assert lags and all(0 <= v < 60 for v in lags.values()), sorted({n for n, _ in samples})


def test_check_max_replica_lag(replica_db: ReplicaDB) -> None:
    _fill(replica_db)
    proc = run_cli("check", "--max-replica-lag", "60s", dsn=replica_db.standby_dsn)
    assert proc.returncode == 0, (proc.returncode, proc.stdout, proc.stderr)
    assert proc.stdout.startswith("JOBTUI OK") and "lag" in proc.stdout.lower()


async def test_console_on_the_standby_is_read_only_and_says_why(replica_db: ReplicaDB) -> None:
    from jobtui.console_config import ConsoleConfig
    from jobtui.tui.app import JobtuiApp
    from jobtui.tui.widgets.status import StatusBar

    _fill(replica_db)
    app = JobtuiApp(replica_db.standby_dsn, "public", config=ConsoleConfig(refresh_s=0.2))
    async with app.run_test(size=(120, 40)) as pilot:
        await console_polled(app, pilot)
        assert app.polls >= 2 and app.db_error is None
        status = app.query_one(StatusBar).plain.lower()
        said = status + " ".join(n.message.lower() for n in app._notifications)
        assert app.read_only, status
        assert "replica" in said or "standby" in said, said


def test_a_standby_whose_replay_is_paused_reports_real_lag_and_check_goes_critical(
    replica_db: ReplicaDB,
) -> None:
    """A standby lagging for real: WAL received but not replayed."""
    _fill(replica_db)
    with psycopg.connect(replica_db.standby_dsn, autocommit=True) as standby:
        standby.execute("SELECT pg_wal_replay_pause()")
        try:
            time.sleep(2.5)
            with psycopg.connect(replica_db.primary_dsn, autocommit=True) as primary:
                primary.execute("INSERT INTO jobs (kind, payload) VALUES ('mail', '{}')")
            deadline = time.monotonic() + 20
            while True:
                row = standby.execute(
                    "SELECT pg_last_wal_receive_lsn() > pg_last_wal_replay_lsn()"
                ).fetchone()
                if row and row[0]:
                    break
                assert time.monotonic() < deadline, "the standby never received the new WAL"
                time.sleep(0.1)
            data = json.loads(assert_ok(run_cli("stats", "--json", dsn=replica_db.standby_dsn)))
            assert data["replica"]["lag_s"] >= 2.0, data["replica"]
            proc = run_cli(
                "check",
                "--max-replica-lag",
                "1s",
                "--crit-replica-lag",
                "2s",
                dsn=replica_db.standby_dsn,
            )
            assert proc.returncode == 2, (proc.returncode, proc.stdout, proc.stderr)
            assert proc.stdout.startswith("JOBTUI CRITICAL - 1 critical: replica lag"), proc.stdout
            warn = run_cli("check", "--max-replica-lag", "1s", dsn=replica_db.standby_dsn)
            assert warn.returncode in (1, 2), warn.stdout
        finally:
            standby.execute("SELECT pg_wal_replay_resume()")
    replica_db.wait_replayed()
    data = json.loads(assert_ok(run_cli("stats", "--json", dsn=replica_db.standby_dsn)))
    assert data["replica"]["lag_s"] < 2.0, data["replica"]


def test_check_with_a_replica_lag_threshold_on_the_primary_is_ok(replica_db: ReplicaDB) -> None:
    proc = run_cli("check", "--max-replica-lag", "1s", dsn=replica_db.primary_dsn)
    assert proc.returncode == 0, (proc.stdout, proc.stderr)
    assert "primary" in proc.stdout
    samples = parse_prometheus(
        assert_ok(run_cli("stats", "--prometheus", dsn=replica_db.primary_dsn))
    )
    assert samples[("jobtui_is_replica", ())] == 0
    assert not [n for n, _ in samples if n == "jobtui_replica_lag_seconds"]
