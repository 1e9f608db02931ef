"""Migration 0028 on a database whose kind_handlers declares a max_attempts below 1 (attack,
round 7): `jobtui migrate` refuses in one line that names the kinds and the way out, nothing
applied (before: PostgreSQL's "check constraint ... is violated by some row")."""

from __future__ import annotations

import subprocess
import sys

import psycopg

from jobtui.schema.migrator import migrate


def test_a_handler_limit_below_1_is_named_and_nothing_is_applied(empty_dsn: str) -> None:
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        migrate(conn, "public", None, up_to=27)
        conn.execute(
            "INSERT INTO kind_handlers (kind, max_attempts, backoff_base_s, backoff_cap_s,"
            " declared_by) VALUES ('k0', 0, 1, 1, 'w'), ('ok', 3, 1, 1, 'w')"
        )
    cmd = [sys.executable, "-m", "jobtui", "migrate", "--dsn", empty_dsn]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    assert done.returncode != 0
    err = done.stderr.strip()
    assert "Traceback" not in err and len(err.splitlines()) == 1, err
    assert "k0 (0)" in err and "ok (3)" not in err and "migrate again" in err, err
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        assert conn.execute("SELECT to_regclass('jobs_waiting_tried')").fetchone() == (None,)
        conn.execute("UPDATE kind_handlers SET max_attempts = NULL WHERE kind = 'k0'")
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
