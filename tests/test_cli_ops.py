"""`jobtui dead …`, `jobtui jobs …` and `jobtui prune` against a real database."""

from __future__ import annotations

import json
import re

import psycopg
from psycopg.types.json import Jsonb
from test_cli_support import assert_ok, assert_one_error, run_cli

HOSTILE = "\x1b]52;c;cGF3bmVk\x07\x1b[2J[bold red]boom[/] \u202eevil"


def _dead(conn: psycopg.Connection, kind: str, error: str, payload: object = None) -> int:
    tb = 'Traceback (most recent call last):\n  File "app.py", line 3, in run\n' + error + "\n"
    errors = [
        {
            "attempt": 1,
            "at": "2026-01-01T00:00:00+00:00",
            "error": error,
            "traceback": tb,
            "worker": "host:1:abc",
        }
    ]
    row = conn.execute(
        """INSERT INTO dead_letters (id, kind, payload, attempts, max_attempts, created_at, run_at,
                                     last_error, errors, reason)
           VALUES (nextval('jobs_id_seq'), %s, %s, 1, 1, now(), now(), %s, %s, 'failed')
           RETURNING id""",
        (kind, Jsonb(payload if payload is not None else {"k": kind}), error, Jsonb(errors)),
    ).fetchone()
    assert row is not None
    return int(row[0])


def _job(conn: psycopg.Connection, kind: str, payload: object = None, delay: str = "0") -> int:
    row = conn.execute(
        "INSERT INTO jobs (kind, payload, run_at) VALUES (%s, %s, now() + %s::interval)"
        " RETURNING id",
        (kind, Jsonb(payload if payload is not None else {}), delay),
    ).fetchone()
    assert row is not None
    return int(row[0])


def test_dead_list_show_json_and_limit(dsn: str, conn: psycopg.Connection) -> None:
    a = _dead(conn, "export_crm", "TimeoutError: read timed out after 5.0s")
    b = _dead(conn, "webhook", "HTTPError: 503 Service Unavailable")
    out = assert_ok(run_cli("dead", "list", dsn=dsn))
    assert out.splitlines()[0].split() == ["ID", "KIND", "REASON", "ATTEMPTS", "DIED", "ERROR"]
    assert re.search(rf"^{b} +webhook ", out, re.M) and "TimeoutError: read timed out" in out
    rows = json.loads(assert_ok(run_cli("dead", "list", "--json", "--kind", "export_crm", dsn=dsn)))
    assert [r["id"] for r in rows] == [a]
    assert rows[0]["errors"][0]["traceback"].startswith("Traceback")
    out = assert_ok(run_cli("dead", "list", "--limit", "1", dsn=dsn))
    assert str(b) in out and "more with --limit" in out
    out = assert_ok(run_cli("dead", "show", str(a), dsn=dsn))
    assert "reason:" in out and 'File "app.py", line 3' in out
    assert_one_error(run_cli("dead", "show", "999999", dsn=dsn), 1, "no dead letter with id 999999")
    assert "no dead letters match" in assert_ok(run_cli("dead", "list", "--kind", "x", dsn=dsn))


def test_dead_requeue_and_delete(dsn: str, conn: psycopg.Connection) -> None:
    ids = [_dead(conn, "export_crm", f"TimeoutError: call {i}") for i in range(3)]
    other = _dead(conn, "webhook", "HTTPError: 503")
    out = assert_ok(run_cli("dead", "requeue", str(ids[0]), dsn=dsn))
    assert out.strip() == "requeued 1 dead letter"
    assert conn.execute("SELECT kind FROM jobs WHERE id = %s", (ids[0],)).fetchone() == (
        "export_crm",
    )
    out = assert_ok(
        run_cli("dead", "requeue", "--kind", "export_crm", "--error", "timeout", dsn=dsn)
    )
    assert out.strip() == "requeued 2 dead letters"
    assert_one_error(run_cli("dead", "delete", dsn=dsn), 1, "--all")
    assert_one_error(run_cli("dead", "delete", "--all", "--kind", "x", dsn=dsn), 1, "--all")
    assert assert_ok(run_cli("dead", "delete", "--all", dsn=dsn)).strip() == "deleted 1 dead letter"
    assert conn.execute("SELECT count(*) FROM dead_letters").fetchone() == (0,)
    assert conn.execute("SELECT count(*) FROM jobs WHERE id = %s", (other,)).fetchone() == (0,)
    actions = conn.execute("SELECT action, count, os_user FROM audit_log ORDER BY id").fetchall()
    assert [(a, n) for a, n, _ in actions] == [
        ("requeue_dead", 1),
        ("requeue_dead_matching", 2),
        ("delete_dead_matching", 1),
    ]
    assert all(user for _, _, user in actions)


def test_jobs_list_show_cancel_run_now(dsn: str, conn: psycopg.Connection) -> None:
    ready = _job(conn, "send_email", {"to": "ann@example.com"})
    later = _job(conn, "report", {"id": 7}, "1 hour")
    out = assert_ok(run_cli("jobs", "list", dsn=dsn))
    assert "ready" in out and "scheduled" in out and "in 59m" in out
    rows = json.loads(assert_ok(run_cli("jobs", "list", "--state", "scheduled", "--json", dsn=dsn)))
    assert [r["id"] for r in rows] == [later]
    out = assert_ok(run_cli("jobs", "show", str(ready), dsn=dsn))
    assert '"to": "ann@example.com"' in out and "state:            ready" in out
    assert_one_error(run_cli("jobs", "show", "424242", dsn=dsn), 1, "no job with id 424242")
    assert_one_error(run_cli("jobs", "list", "--state", "sleeping", dsn=dsn), 1, "unknown state")
    assert (
        assert_ok(run_cli("jobs", "run-now", str(later), dsn=dsn)).strip() == "made 1 job ready now"
    )
    assert conn.execute("SELECT run_at <= now() FROM jobs WHERE id = %s", (later,)).fetchone() == (
        True,
    )
    out = assert_ok(run_cli("jobs", "cancel", "--kind", "send_email", dsn=dsn))
    assert out.strip() == "cancelled 1 job"
    out = assert_ok(run_cli("jobs", "cancel", str(later), dsn=dsn))
    assert out.strip() == "cancelled 1 job"
    assert conn.execute("SELECT count(*) FROM jobs WHERE cancelled_at IS NOT NULL").fetchone() == (
        2,
    )
    later2 = _job(conn, "report", {}, "2 hours")
    out = assert_ok(run_cli("jobs", "run-now", "--kind", "report", dsn=dsn))
    assert out.strip() == "made 1 job ready now"
    assert conn.execute("SELECT run_at <= now() FROM jobs WHERE id = %s", (later2,)).fetchone() == (
        True,
    )


def test_prune_finished_jobs(dsn: str, conn: psycopg.Connection) -> None:
    old = _job(conn, "k")
    new = _job(conn, "k")
    conn.execute("UPDATE jobs SET finished_at = now() - interval '8 days' WHERE id = %s", (old,))
    conn.execute("UPDATE jobs SET finished_at = now() - interval '1 day' WHERE id = %s", (new,))
    assert assert_ok(run_cli("prune", dsn=dsn)).startswith("pruned 1 finished job older than 7d")
    out = assert_ok(run_cli("prune", "--older-than", "12h", dsn=dsn))
    assert out.startswith("pruned 1 finished job")
    assert conn.execute("SELECT count(*) FROM jobs").fetchone() == (0,)


def test_database_text_is_printed_inert(dsn: str, conn: psycopg.Connection) -> None:
    """Escapes and Rich markup from payloads and errors reach the terminal as visible text."""
    dead = _dead(conn, "k" + HOSTILE, "RuntimeError: " + HOSTILE, {"note": HOSTILE})
    _job(conn, "kind", {"note": HOSTILE})
    conn.execute("UPDATE jobs SET last_error = %s", ("ValueError: " + HOSTILE,))
    outputs = [
        assert_ok(run_cli("dead", "list", dsn=dsn)),
        assert_ok(run_cli("dead", "show", str(dead), dsn=dsn)),
        assert_ok(run_cli("dead", "list", "--json", dsn=dsn)),
        assert_ok(run_cli("jobs", "list", dsn=dsn)),
        assert_ok(run_cli("jobs", "show", str(dead + 1), dsn=dsn)),
        assert_ok(run_cli("stats", dsn=dsn)),
        assert_ok(run_cli("stats", "--prometheus", dsn=dsn)),
    ]
    for out in outputs:
        assert "\x1b" not in out and "\x07" not in out and "\u202e" not in out
    assert "\\x1b]52;c;cGF3bmVk\\x07\\x1b[2J[bold red]boom[/]" in outputs[1]
    assert "\\u202e" in outputs[0]
