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


def _audit(conn: psycopg.Connection) -> list[tuple[str, int, object]]:
    return conn.execute("SELECT action, count, filter FROM audit_log ORDER BY id").fetchall()


def test_schedules_list_pause_resume_and_run_now(dsn: str, conn: psycopg.Connection) -> None:
    """Issue 13 from the CLI: every change through jobtui.ops, audited; one-line errors."""
    conn.execute(
        "INSERT INTO schedules (name, cron, timezone, kind, payload, next_tick) "
        "VALUES ('nightly', '0 3 * * *', 'Europe/Berlin', 'report', '{\"n\": 1}', "
        "now() + interval '2 hours')"
    )
    listed = assert_ok(run_cli("schedules", "list", dsn=dsn))
    header, row = listed.splitlines()
    assert header.split() == [
        "NAME",
        "CRON",
        "TZ",
        "KIND",
        "NEXT",
        "RUN",
        "LAST",
        "RUN",
        "OUTCOME",
        "PAUSED",
    ]
    assert row.startswith("nightly") and "0 3 * * *" in row and "Europe/Berlin" in row
    assert "in 1h59m" in row or "in 2h00m" in row, row
    assert row.rstrip().endswith("no")

    assert (
        assert_ok(run_cli("schedules", "pause", "nightly", dsn=dsn)) == "paused schedule nightly\n"
    )
    # Nothing changed: said on stderr, exit 1 (issue 27: never success for nothing).
    assert_one_error(
        run_cli("schedules", "pause", "nightly", dsn=dsn), 1, "schedule nightly was already paused"
    )
    row = assert_ok(run_cli("schedules", "list", dsn=dsn)).splitlines()[1]
    assert "paused by " in row
    out = assert_ok(run_cli("schedules", "run-now", "nightly", dsn=dsn))
    job_id = int(re.match(r"enqueued job (\d+) for schedule nightly", out).group(1))  # type: ignore[union-attr]
    assert conn.execute("SELECT kind, payload FROM jobs WHERE id = %s", (job_id,)).fetchone() == (
        "report",
        {"n": 1},
    )
    data = json.loads(assert_ok(run_cli("schedules", "list", "--json", dsn=dsn)))
    assert data[0]["last_job_id"] == job_id and data[0]["last_state"] == "ready"
    assert f"ready (job {job_id})" in assert_ok(run_cli("schedules", "list", dsn=dsn))
    assert assert_ok(run_cli("schedules", "resume", "nightly", dsn=dsn)) == (
        "resumed schedule nightly\n"
    )
    assert [(a, n) for a, n, _ in _audit(conn)] == [
        ("pause_schedule", 1),
        ("pause_schedule", 0),
        ("run_schedule_now", 1),
        ("resume_schedule", 1),
    ]
    for action in ("pause", "resume", "run-now"):
        assert_one_error(
            run_cli("schedules", action, "no such'; DROP TABLE jobs; --", dsn=dsn),
            1,
            "no schedule named",
        )
    assert conn.execute("SELECT count(*) FROM jobs").fetchone() == (1,)


def test_kinds_limit_list_and_clear(dsn: str, conn: psycopg.Connection) -> None:
    conn.execute(
        "INSERT INTO kind_limits (kind, declared_concurrency, declared_at)"
        " VALUES ('mail', 3, now())"
    )
    _job(conn, "sms")
    listed = assert_ok(run_cli("kinds", "list", dsn=dsn))
    assert re.search(r"^mail\s+3 running\s+declared on the handler\s+no$", listed, re.M), listed
    assert re.search(r"^sms\s+no limits\s+–\s+no$", listed, re.M), listed

    out = assert_ok(
        run_cli(
            "kinds",
            "limit",
            "mail",
            "--concurrency",
            "5",
            "--per-worker",
            "2",
            "--rate",
            "100/m",
            dsn=dsn,
        )
    )
    assert out.startswith("mail: 5 running, 2/worker, 100/m (override by ")
    row = conn.execute(
        "SELECT concurrency, per_worker, rate, period_s, overridden FROM kind_limits"
        " WHERE kind = 'mail'"
    ).fetchone()
    assert row == (5, 2, 100, 60, True)
    # The override replaces the declared set as a whole: --rate alone lifts the concurrency.
    assert_ok(run_cli("kinds", "limit", "mail", "--rate", "5/s", dsn=dsn))
    assert conn.execute(
        "SELECT concurrency, rate, period_s FROM kind_limits WHERE kind = 'mail'"
    ).fetchone() == (None, 5, 1)
    out = assert_ok(run_cli("kinds", "limit", "mail", "--clear", dsn=dsn))
    assert out == "mail: 3 running (declared on the handler)\n"
    assert_one_error(
        run_cli("kinds", "limit", "mail", "--clear", dsn=dsn),
        1,
        "nothing cleared: mail has no override",
    )
    assert [a for a, _, _ in _audit(conn)] == [
        "set_kind_limits",
        "set_kind_limits",
        "clear_kind_limits",
        "clear_kind_limits",
    ]
    data = json.loads(assert_ok(run_cli("kinds", "list", "--json", dsn=dsn)))
    assert {d["kind"] for d in data} == {"mail", "sms"}

    before = conn.execute("SELECT count(*) FROM audit_log").fetchone()
    assert_one_error(run_cli("kinds", "limit", "mail", "--rate", "100/x", dsn=dsn), 1, "rate")
    assert_one_error(run_cli("kinds", "limit", "mail", dsn=dsn), 1, "--clear")
    assert_one_error(
        run_cli("kinds", "limit", "mail", "--clear", "--rate", "1/s", dsn=dsn), 1, "--clear"
    )
    assert_one_error(run_cli("kinds", "limit", "mail", "--concurrency", "0", dsn=dsn), 2)
    assert_one_error(run_cli("kinds", "limit", " ", "--concurrency", "2", dsn=dsn), 2, "kind")
    assert_one_error(run_cli("kinds", "limit", "mail", "--rate", "0/s", dsn=dsn), 1, "rate")
    assert conn.execute("SELECT count(*) FROM audit_log").fetchone() == before


def test_key_filter_and_requeue_that_keeps_unique_keys(dsn: str, conn: psycopg.Connection) -> None:
    held = _dead(conn, "invoice", "E: x")
    free = _dead(conn, "invoice", "E: x")
    conn.execute("UPDATE dead_letters SET unique_key = 'inv:1' WHERE id = %s", (held,))
    conn.execute("UPDATE dead_letters SET unique_key = 'inv:2' WHERE id = %s", (free,))
    holder = conn.execute(
        "INSERT INTO jobs (kind, payload, unique_key) VALUES ('invoice', '{}', 'inv:1')"
        " RETURNING id"
    ).fetchone()[0]  # type: ignore[index]
    listed = assert_ok(run_cli("dead", "list", "--key", "inv:2", dsn=dsn))
    assert [line.split()[0] for line in listed.splitlines()[1:]] == [str(free)]
    jobs = assert_ok(run_cli("jobs", "list", "--key", "inv:1", dsn=dsn))
    assert [line.split()[0] for line in jobs.splitlines()[1:]] == [str(holder)]

    proc = run_cli("dead", "requeue", "--kind", "invoice", dsn=dsn)
    assert proc.returncode == 0 and proc.stdout == "requeued 1 dead letter\n", proc
    assert proc.stderr == (
        f"skipped 1 dead letter: an unfinished job holds its unique key (ids {held})\n"
    )
    assert conn.execute("SELECT id FROM dead_letters").fetchall() == [(held,)]
    assert conn.execute("SELECT unique_key FROM jobs WHERE id = %s", (free,)).fetchone() == (
        "inv:2",
    )
    proc = run_cli("dead", "requeue", str(held), dsn=dsn)
    assert proc.stdout == "" and f"ids {held}" in proc.stderr, proc
    assert_one_error(proc, 1, "not requeued: an unfinished job holds its unique key")
    hostile = "x'; DROP TABLE jobs; --%_\\" + HOSTILE
    assert assert_ok(run_cli("jobs", "list", "--key", hostile, dsn=dsn)) == "no jobs match\n"
    assert assert_ok(run_cli("dead", "list", "--key", hostile, dsn=dsn)) == (
        "no dead letters match\n"
    )


def test_exhausted_is_a_state_in_jobs_list(dsn: str, conn: psycopg.Connection) -> None:
    gave_up = conn.execute(
        "INSERT INTO jobs (kind, payload, attempts, max_attempts) VALUES ('legacy', '{}', 2, 2)"
        " RETURNING id"
    ).fetchone()[0]  # type: ignore[index]
    _job(conn, "legacy")
    out = assert_ok(run_cli("jobs", "list", "--state", "exhausted", dsn=dsn))
    assert [line.split()[0] for line in out.splitlines()[1:]] == [str(gave_up)]
    assert "exhausted" in out


def test_jobs_rerun_makes_linked_jobs_and_refuses_unfinished(
    dsn: str, conn: psycopg.Connection
) -> None:
    done = conn.execute(
        "INSERT INTO jobs (kind, payload, finished_at) VALUES ('report', '{\"n\": 1}', now()) "
        "RETURNING id"
    ).fetchone()[0]
    waiting = conn.execute(
        "INSERT INTO jobs (kind, payload) VALUES ('report', '{}') RETURNING id"
    ).fetchone()[0]
    text = assert_ok(run_cli("jobs", "rerun", str(done), dsn=dsn))
    new = conn.execute("SELECT id FROM jobs WHERE rerun_of = %s", (done,)).fetchone()[0]
    assert text.strip() == f"job #{done} run again as job #{new}"
    assert conn.execute("SELECT payload FROM jobs WHERE id = %s", (new,)).fetchone()[0] == {"n": 1}
    proc = run_cli("jobs", "rerun", str(waiting), dsn=dsn)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
    assert (
        conn.execute("SELECT count(*) FROM jobs WHERE rerun_of = %s", (waiting,)).fetchone()[0] == 0
    )
    audit = conn.execute("SELECT count(*) FROM audit_log WHERE action = 'rerun_job'").fetchone()[0]
    assert audit == 1
