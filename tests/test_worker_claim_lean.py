"""Issue 24: the worker's claim re-checks nothing in its UPDATE, and still never claims a row whose
cancel committed after the claim's snapshot (its sub-select's FOR UPDATE re-checks the newest
version); jobtui_attempt_limits() keeps its plan for the session (plpgsql)."""

from __future__ import annotations

import threading
from typing import Any

import psycopg
import pytest

from jobtui.sql import queries

Q = queries("public")
ME = {"worker": "w1", "kinds": ["k1"], "limit": 2}


def _update_scan_filters(plan: dict[str, Any]) -> list[str]:
    """The Filter of every scan under the claim's UPDATE (ModifyTable), its sub-plans aside."""
    found: list[str] = []

    def scans(node: dict[str, Any]) -> None:
        if node.get("Parent Relationship") in ("InitPlan", "SubPlan"):
            return
        if "Relation Name" in node:
            found.append(node.get("Filter", ""))
        for child in node.get("Plans", []):
            scans(child)

    def walk(node: dict[str, Any]) -> None:
        if node.get("Node Type") == "ModifyTable":
            for child in node.get("Plans", []):
                scans(child)
        for child in node.get("Plans", []):
            walk(child)

    walk(plan)
    return found


@pytest.mark.parametrize("statement", ["worker_claim", "worker_claim_per_kind"])
def test_the_claims_update_filters_rows_by_id_alone(
    conn: psycopg.Connection, statement: str
) -> None:
    # Planned to read jobs sequentially (as a plan made while the table was small does), the
    # UPDATE's per-row condition is the id list: no attempt-limit lookup, no cancel check.
    conn.execute("INSERT INTO jobs (kind, payload) SELECT 'k1', '{}' FROM generate_series(1, 50)")
    conn.execute("SET enable_indexscan = off")
    conn.execute("SET enable_bitmapscan = off")
    row = conn.execute("EXPLAIN (FORMAT JSON) " + getattr(Q, statement), ME).fetchone()
    assert row is not None
    filters = _update_scan_filters(row[0][0]["Plan"])
    assert filters, row[0]
    for text in filters:
        assert "id = ANY" in text
        assert "cancel_requested" not in text and "max_attempts" not in text, text


def test_attempt_limits_is_planned_once_per_session(conn: psycopg.Connection) -> None:
    # A SQL function that cannot be inlined (it aggregates) is planned again at every call.
    row = conn.execute(
        "SELECT l.lanname FROM pg_proc p JOIN pg_language l ON l.oid = p.prolang"
        " WHERE p.oid = 'jobtui_attempt_limits()'::regprocedure"
    ).fetchone()
    assert row == ("plpgsql",)


def test_a_cancel_committed_after_the_claims_snapshot_wins(dsn: str) -> None:
    # The claim takes its snapshot, then waits (inside jobtui_attempt_limits, made to wait on an
    # advisory lock here) while another session requests a cancel of the first job in claim
    # order and commits; the claim then goes on, finds that job changed, and must skip it.
    with psycopg.connect(dsn, autocommit=True) as op:
        first = op.execute(
            "INSERT INTO jobs (kind, payload, priority) VALUES ('k1', '{}', 9) RETURNING id"
        ).fetchone()
        other = op.execute(
            "INSERT INTO jobs (kind, payload) VALUES ('k1', '{}') RETURNING id"
        ).fetchone()
        assert first is not None and other is not None
        op.execute(
            "CREATE OR REPLACE FUNCTION jobtui_attempt_limits() RETURNS jsonb"
            " LANGUAGE plpgsql STABLE AS $fn$ BEGIN"
            " PERFORM pg_advisory_lock(424242); PERFORM pg_advisory_unlock(424242);"
            " RETURN '{}'::jsonb; END $fn$"
        )
        op.execute("SELECT pg_advisory_lock(424242)")
        got: list[Any] = []
        failed: list[BaseException] = []

        def claim() -> None:
            try:
                with psycopg.connect(dsn, autocommit=True) as w:
                    got.extend(w.execute(Q.worker_claim, ME).fetchall())
            except BaseException as exc:  # noqa: BLE001 - reported by the test below
                failed.append(exc)

        t = threading.Thread(target=claim)
        t.start()
        try:
            waiting = False
            for _ in range(6000):  # until the claim waits on the advisory lock
                row = op.execute(
                    "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted"
                ).fetchone()
                if row is not None and row[0] == 1:
                    waiting = True
                    break
                op.execute("SELECT pg_sleep(0.005)")
            assert waiting, "the claim never reached jobtui_attempt_limits"
            op.execute("UPDATE jobs SET cancel_requested = true WHERE id = %s", first)
        finally:
            op.execute("SELECT pg_advisory_unlock(424242)")
            t.join()
        assert not failed, failed
        assert [r[0] for r in got] == [other[0]]
        row = op.execute("SELECT locked_at, attempts FROM jobs WHERE id = %s", first).fetchone()
        assert row == (None, 0)
