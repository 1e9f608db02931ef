"""jobtui_claim_limited against a job changed by another session while the claim runs (real
locks, two sessions): the row is changed and committed after the claim's statement took its
snapshot and before it locks the row. Migration 0026 dropped the re-check in the claim's UPDATE
because `pick` locks with FOR UPDATE SKIP LOCKED, which under READ COMMITTED re-checks its
conditions on the newest version of the row; these pin that the claim still takes none of
those rows (a cancel request, another worker's claim, a finish, no attempt left, not due,
another kind, deleted) and the rest of its jobs as usual.

The claim is held mid-statement by a jobtui_attempt_limits() that first waits for an advisory
lock the test holds: `am` is evaluated by `pick`'s scan, after the snapshot.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import psycopg
import pytest

HELD = 4242
WAITING_AT_LIMITS = f"""
CREATE OR REPLACE FUNCTION jobtui_attempt_limits() RETURNS jsonb
LANGUAGE plpgsql STABLE AS $fn$
BEGIN
  PERFORM pg_advisory_lock({HELD});
  PERFORM pg_advisory_unlock({HELD});
  RETURN (SELECT coalesce(jsonb_object_agg(h.kind, h.max_attempts), '{{}}'::jsonb)
          FROM kind_handlers h WHERE h.max_attempts IS NOT NULL);
END
$fn$
"""
CLAIM = "SELECT id FROM jobtui_claim_limited(ARRAY['lim'], 'w1', 3, 1.0) WHERE id IS NOT NULL"


@pytest.mark.parametrize(
    "change",
    [
        "UPDATE jobs SET cancel_requested = true WHERE id = %s",
        "UPDATE jobs SET locked_at = now(), locked_by = 'other', attempts = attempts + 1"
        " WHERE id = %s",
        "UPDATE jobs SET finished_at = now() WHERE id = %s",
        "UPDATE jobs SET attempts = max_attempts WHERE id = %s",
        "UPDATE jobs SET run_at = now() + interval '1 hour' WHERE id = %s",
        "UPDATE jobs SET kind = 'elsewhere' WHERE id = %s",
        "DELETE FROM jobs WHERE id = %s",
    ],
)
def test_a_job_changed_during_a_limited_claim_is_not_claimed(
    dsn: str, conn: psycopg.Connection, change: str
) -> None:
    conn.execute(WAITING_AT_LIMITS)
    conn.execute("INSERT INTO kind_limits (kind, declared_concurrency) VALUES ('lim', 5)")
    ids = [
        r[0]
        for r in conn.execute(
            "INSERT INTO jobs (kind, payload) SELECT 'lim', '{}' FROM generate_series(1, 3)"
            " RETURNING id"
        ).fetchall()
    ]
    conn.execute("SELECT pg_advisory_lock(%s)", (HELD,))
    out: dict[str, Any] = {}

    def claim() -> None:
        try:
            with psycopg.connect(dsn, autocommit=True) as claimer:
                out["ids"] = sorted(r[0] for r in claimer.execute(CLAIM).fetchall())
        except Exception as exc:  # noqa: BLE001 (reported by the assertion below)
            out["error"] = exc

    thread = threading.Thread(target=claim)
    thread.start()
    try:
        deadline = time.monotonic() + 10
        while not conn.execute(
            "SELECT count(*) > 0 FROM pg_locks WHERE locktype = 'advisory' AND NOT granted"
            " AND database = (SELECT oid FROM pg_database WHERE datname = current_database())"
        ).fetchone()[0]:  # type: ignore[index]
            assert time.monotonic() < deadline, "the claim never reached the advisory lock"
            time.sleep(0.02)
        with psycopg.connect(dsn, autocommit=True) as other:
            other.execute(change, (ids[0],))
    finally:
        conn.execute("SELECT pg_advisory_unlock(%s)", (HELD,))
        thread.join(20)
    assert "error" not in out, out
    assert out["ids"] == ids[1:]
