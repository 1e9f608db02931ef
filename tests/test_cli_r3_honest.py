"""Issue 27 items 2, 4 and 5, and issue 25 item 8's CLI half: the command line never reports
success for nothing. Each case checks the exit code and the one line it prints."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
from pathlib import Path

import psycopg
import pytest
from psycopg.types.json import Jsonb
from test_cli_support import JOBTUI, assert_ok, assert_one_error, clean_env, run_cli

MISSING = "99999999"


def _job(conn: psycopg.Connection, kind: str = "mail", *, finished: bool = False) -> int:
    row = conn.execute(
        "INSERT INTO jobs (kind, payload, finished_at) VALUES (%s, '{}',"
        " CASE WHEN %s THEN now() END) RETURNING id",
        (kind, finished),
    ).fetchone()
    assert row is not None
    return int(row[0])


def _dead(conn: psycopg.Connection, kind: str = "mail") -> int:
    row = conn.execute(
        """INSERT INTO dead_letters (id, kind, payload, attempts, max_attempts, created_at,
               run_at, last_error, errors, reason)
           VALUES (nextval(pg_get_serial_sequence('jobs', 'id')), %s, '{}', 1, 1, now(), now(),
                   'E: x', %s, 'failed') RETURNING id""",
        (kind, Jsonb([])),
    ).fetchone()
    assert row is not None
    return int(row[0])


def _counts(conn: psycopg.Connection) -> tuple[int, int, int]:
    row = conn.execute(
        "SELECT (SELECT count(*) FROM jobs), (SELECT count(*) FROM dead_letters),"
        " (SELECT count(*) FROM jobs WHERE cancelled_at IS NOT NULL OR cancel_requested)"
    ).fetchone()
    assert row is not None
    return (int(row[0]), int(row[1]), int(row[2]))


def test_an_id_that_does_not_exist_is_an_error_and_nothing_is_done(
    dsn: str, conn: psycopg.Connection
) -> None:
    live = _job(conn)
    _dead(conn)
    before = _counts(conn)
    for args, line in (
        (("jobs", "cancel", MISSING), f"no job with id {MISSING} (nothing done)"),
        (("jobs", "run-now", MISSING), f"no job with id {MISSING} (nothing done)"),
        (("dead", "requeue", MISSING), f"no dead letter with id {MISSING} (nothing done)"),
        (("dead", "delete", MISSING), f"no dead letter with id {MISSING} (nothing done)"),
    ):
        proc = run_cli(*args, dsn=dsn)
        assert assert_one_error(proc, 1) == f"jobtui: error: {line}"
        assert proc.stdout == ""
    # Both an unknown id and a good one: the command stops before doing anything.
    proc = run_cli("jobs", "cancel", str(live), MISSING, dsn=dsn)
    assert_one_error(proc, 1, f"no job with id {MISSING} (nothing done)")
    assert _counts(conn) == before


def test_a_live_jobs_id_given_to_dead_requeue_names_where_it_is(
    dsn: str, conn: psycopg.Connection
) -> None:
    """Issue 25 item 8: `dead requeue 7`, 7 a live job, printed "requeued 0" with exit 0."""
    live = _job(conn)
    line = assert_one_error(run_cli("dead", "requeue", str(live), dsn=dsn), 1)
    assert line == (
        f"jobtui: error: id {live} in the queue: see `jobtui jobs show ID` (nothing done)"
    )
    dead = _dead(conn)
    line = assert_one_error(run_cli("jobs", "cancel", str(dead), dsn=dsn), 1)
    assert line == (
        f"jobtui: error: id {dead} a dead letter: see `jobtui dead show ID` (nothing done)"
    )


def test_an_id_that_cannot_be_acted_on_is_an_error_after_the_others_are_done(
    dsn: str, conn: psycopg.Connection
) -> None:
    done = _job(conn, finished=True)
    pending = _job(conn)
    proc = run_cli("jobs", "cancel", str(done), dsn=dsn)
    assert_one_error(proc, 1)
    assert proc.stderr == (f"jobtui: error: not cancelled: already succeeded (ids {done})\n"), (
        proc.stderr
    )
    assert proc.stdout == ""
    proc = run_cli("jobs", "cancel", str(done), str(pending), dsn=dsn)
    assert proc.stdout == "cancelled 1 job\n"
    assert_one_error(proc, 1, f"not cancelled: already succeeded (ids {done})")
    # A ready job is not waiting for anything: run-now has nothing to do.
    ready = _job(conn)
    assert_one_error(
        run_cli("jobs", "run-now", str(ready), dsn=dsn),
        1,
        f"not made ready: not waiting for a later time: ready (ids {ready})",
    )


def test_a_filter_that_matches_nothing_is_an_error(dsn: str, conn: psycopg.Connection) -> None:
    _job(conn, "mail")
    for args, line in (
        (("jobs", "cancel", "--kind", "nope"), "nothing cancelled: no job matches"),
        (("dead", "requeue", "--kind", "nope"), "nothing requeued: no dead letter matches"),
        (("dead", "delete", "--all"), "nothing deleted: there is no dead letter to act on"),
        (("jobs", "run-now", "--kind", "mail"), "nothing made ready: no scheduled or retrying"),
    ):
        proc = run_cli(*args, dsn=dsn)
        assert_one_error(proc, 1, line)
        assert proc.stdout == ""
    assert assert_ok(run_cli("jobs", "cancel", "--kind", "mail", dsn=dsn)) == "cancelled 1 job\n"


def test_an_unknown_kind_is_an_error_unless_forced(dsn: str, conn: psycopg.Connection) -> None:
    for args in (
        ("kinds", "pause", "no_such_kind"),
        ("kinds", "limit", "no_such_kind", "--concurrency", "3"),
    ):
        proc = run_cli(*args, dsn=dsn)
        assert_one_error(proc, 1, "no kind named 'no_such_kind'", "--force")
        assert proc.stdout == ""
    assert conn.execute("SELECT count(*) FROM paused_kinds").fetchone() == (0,)
    assert conn.execute("SELECT count(*) FROM kind_limits").fetchone() == (0,)
    assert conn.execute("SELECT count(*) FROM audit_log").fetchone() == (0,)
    # A kind any worker, job, dead letter, schedule or limit names is known.
    conn.execute(
        "INSERT INTO workers (id, host, pid, kinds, concurrency) VALUES ('w', 'h', 1, '{sms}', 1)"
    )
    assert assert_ok(run_cli("kinds", "pause", "sms", dsn=dsn)) == "paused sms\n"
    _dead(conn, "old_kind")
    assert assert_ok(run_cli("kinds", "pause", "old_kind", dsn=dsn)) == "paused old_kind\n"
    # --force: "yes, for a kind that comes later".
    out = assert_ok(run_cli("kinds", "pause", "later", "--force", dsn=dsn))
    assert out == "paused later\n"
    # Pausing it again changes nothing: said, exit 1.
    assert_one_error(run_cli("kinds", "pause", "later", dsn=dsn), 1, "later was already paused")
    assert_one_error(run_cli("kinds", "resume", "nope", dsn=dsn), 1, "nope was not paused")


def test_clearing_an_override_leaves_no_phantom_kind(dsn: str, conn: psycopg.Connection) -> None:
    out = assert_ok(run_cli("kinds", "limit", "later", "--concurrency", "3", "--force", dsn=dsn))
    assert out.startswith("later: 3 running (override by ")
    assert re.search(r"^later\s", assert_ok(run_cli("kinds", "list", dsn=dsn)), re.M)
    out = assert_ok(run_cli("kinds", "limit", "later", "--clear", dsn=dsn))
    assert out == "later: no limits (–)\n"
    assert assert_ok(run_cli("kinds", "list", dsn=dsn)) == "no kinds yet\n"
    assert json.loads(assert_ok(run_cli("kinds", "list", "--json", dsn=dsn))) == []
    assert_one_error(
        run_cli("kinds", "limit", "later", "--clear", dsn=dsn),
        1,
        "nothing cleared: later has no override",
    )


def test_workers_list_names_each_worker_for_workers_stop(
    dsn: str, conn: psycopg.Connection
) -> None:
    assert assert_ok(run_cli("workers", "list", dsn=dsn)) == "no workers registered\n"
    conn.execute(
        "INSERT INTO workers (id, host, pid, kinds, concurrency)"
        " VALUES ('web-1:4242:9f3a1c', 'web-1', 4242, '{mail,sms}', 4)"
    )
    lines = assert_ok(run_cli("workers", "list", dsn=dsn)).splitlines()
    assert lines[0].split() == ["WORKER", "HOST", "PID", "KINDS", "RUN", "HEARTBEAT", "CONTROL"]
    assert lines[1].split()[:5] == ["web-1:4242:9f3a1c", "web-1", "4242", "mail,sms", "0/4"]
    data = json.loads(assert_ok(run_cli("workers", "list", "--json", dsn=dsn)))
    assert [w["id"] for w in data] == ["web-1:4242:9f3a1c"]
    out = assert_ok(run_cli("workers", "quiet", "web-1:4242:9f3a1c", dsn=dsn))
    assert out == "worker web-1:4242:9f3a1c quieted\n"
    assert_one_error(
        run_cli("workers", "quiet", "web-1:4242:9f3a1c", dsn=dsn),
        1,
        "worker web-1:4242:9f3a1c was already quieted",
    )


def test_jobs_help_shows_why_and_rerun() -> None:
    out = assert_ok(run_cli("jobs", "--help"))
    assert "jobtui jobs why 42" in out and "jobtui jobs rerun 42" in out


def test_an_empty_dsn_or_schema_is_refused_as_a_usage_error(dsn: str) -> None:
    proc = run_cli("--dsn", "", "dead", "list")
    assert_one_error(proc, 2, "--dsn is empty (was it `$(cat FILE)` of a missing file?)")
    assert proc.stdout == ""
    proc = run_cli("dead", "list", env=clean_env(JOBTUI_DSN=" "))
    assert_one_error(proc, 2, "JOBTUI_DSN is set but empty")
    # DATABASE_URL is the next place looked at: empty there is the same mistake.
    proc = run_cli("dead", "list", env=clean_env(DATABASE_URL=""))
    assert_one_error(proc, 2, "DATABASE_URL is set but empty")
    for schema in ("", "  "):
        proc = run_cli("--schema", schema, "dead", "list", dsn=dsn)
        assert_one_error(proc, 2, "--schema is empty")


def test_ids_and_counts_are_ascii_digits_only(dsn: str, conn: psycopg.Connection) -> None:
    live = _job(conn)
    assert live == 1 or live > 0
    # Python's int() reads Arabic-Indic and full-width digits and underscores; an operator who
    # pasted one of those meant something else than a plain id.
    for text in ("\u0661", "\uff11", "1_0"):
        proc = run_cli("jobs", "show", text, dsn=dsn)
        assert_one_error(proc, 2, "job ids are whole numbers")
        proc = run_cli("dead", "list", "--limit", text, dsn=dsn)
        assert_one_error(proc, 2, "expected")
    assert assert_ok(run_cli("jobs", "show", f" {live} ", dsn=dsn)).startswith("id:")


def test_a_kind_name_enqueue_would_refuse_is_refused_even_with_force(
    dsn: str, conn: psycopg.Connection
) -> None:
    for args in (
        ("kinds", "pause", "k" * 201, "--force"),
        ("kinds", "limit", "k" * 201, "--concurrency", "1", "--force"),
        ("kinds", "pause", " ", "--force"),
    ):
        proc = run_cli(*args, dsn=dsn)
        assert_one_error(proc, 2, "a kind name is")
    assert conn.execute("SELECT count(*) FROM paused_kinds").fetchone() == (0,)
    assert conn.execute("SELECT count(*) FROM kind_limits").fetchone() == (0,)
    assert assert_ok(run_cli("kinds", "pause", "k" * 200, "--force", dsn=dsn))


def test_setting_the_limits_a_kind_already_has_says_nothing_changed(
    dsn: str, conn: psycopg.Connection
) -> None:
    out = assert_ok(run_cli("kinds", "limit", "later", "--concurrency", "3", "--force", dsn=dsn))
    assert out.startswith("later: 3 running (override by ")
    at = conn.execute("SELECT overridden_at FROM kind_limits WHERE kind = 'later'").fetchone()
    proc = run_cli("kinds", "limit", "later", "--concurrency", "3", "--force", dsn=dsn)
    assert_one_error(proc, 1, "nothing changed: later: 3 running (override by ")
    assert proc.stdout == ""
    assert (
        conn.execute("SELECT overridden_at FROM kind_limits WHERE kind = 'later'").fetchone() == at
    )
    # The attempt is audited as an action that changed nothing.
    assert conn.execute(
        "SELECT count FROM audit_log WHERE action = 'set_kind_limits' ORDER BY id DESC LIMIT 1"
    ).fetchone() == (0,)
    out = assert_ok(run_cli("kinds", "limit", "later", "--concurrency", "4", dsn=dsn))
    assert out.startswith("later: 4 running (override by ")


def test_demo_print_dsn(tmp_path: Path, dsn: str) -> None:
    proc = run_cli("demo", "--print-dsn", "--data-dir", str(tmp_path))
    assert_one_error(proc, 1, "no demo is running", "start one with `jobtui demo`")
    (tmp_path / "dsn").write_text(dsn + "\n")  # a demo's server that answers
    out = assert_ok(run_cli("demo", "--print-dsn", "--data-dir", str(tmp_path)))
    assert out == dsn + "\n"
    # The DSN a killed demo left behind, its server gone: not running.
    (tmp_path / "dsn").write_text(f"host={tmp_path} port=1 dbname=postgres\n")
    proc = run_cli("demo", "--print-dsn", "--data-dir", str(tmp_path))
    assert_one_error(proc, 1, "no demo is running (the DSN in", "left from one that stopped")


@pytest.mark.slow
def test_the_demo_prints_commands_that_work_from_another_terminal() -> None:
    """Issue 27 item 2: as root the DSN file was not where the README said, and the command it
    gave passed an empty --dsn. The demo now prints the exact commands; both work as printed."""
    base = Path(tempfile.mkdtemp(prefix="jobtui-demo-test-"))
    os.chmod(base, 0o755)  # as root the embedded server's user must traverse it
    root = base / "demo"
    demo = subprocess.Popen(
        [*JOBTUI, "demo", "--data-dir", str(root), "--headless", "60s"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=clean_env(),
        text=True,
    )
    hints: dict[str, str] = {}
    try:
        assert demo.stderr is not None
        for raw in demo.stderr:  # the demo's notes, as they come; the hints come before it runs
            line = raw.rstrip("\n").removeprefix("jobtui demo: ")
            for key in ("from another terminal: ", "  or: "):
                if line.startswith(key):
                    hints[key.strip()] = line[len(key) :]
            if len(hints) == 2:
                break
        assert set(hints) == {"from another terminal:", "or:"}, hints
        direct, by_file = hints["from another terminal:"], hints["or:"]
        assert direct.endswith(" jobs list") and " --dsn " in direct
        assert f"demo --print-dsn --data-dir {root}" in by_file and by_file.endswith(" dead list")
        # Typed in another terminal (a shell, another working directory), both work.
        for command in (direct, by_file):
            proc = subprocess.run(
                ["bash", "-c", command],
                cwd=base,
                env=clean_env(PATH=os.environ["PATH"]),
                capture_output=True,
                text=True,
                timeout=60,
                check=False,
            )
            assert proc.returncode == 0, (command, proc.stderr)
            assert proc.stdout.split()[:2] == ["ID", "KIND"], proc.stdout
    finally:
        demo.send_signal(signal.SIGTERM)
        try:
            demo.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            demo.kill()
            demo.communicate(timeout=10)
        shutil.rmtree(base, ignore_errors=True)


def test_a_filter_that_matches_rows_the_action_cannot_change_says_so(
    dsn: str, conn: psycopg.Connection
) -> None:
    _job(conn, "mail", finished=True)
    _job(conn, "mail")
    assert_one_error(
        run_cli("jobs", "cancel", "--state", "succeeded", dsn=dsn),
        1,
        "nothing cancelled: 1 job matched, none could be cancelled now",
    )
    assert_one_error(
        run_cli("jobs", "run-now", "--state", "ready", dsn=dsn),
        1,
        "nothing made ready: 1 job matched, none waits for a later time now",
    )


def test_enqueue_of_an_empty_file_is_an_error(dsn: str, tmp_path: Path) -> None:
    empty = tmp_path / "jobs.jsonl"
    empty.write_text("\n  \n")
    proc = run_cli("enqueue", "--file", str(empty), dsn=dsn)
    assert_one_error(proc, 1, f"nothing enqueued: {empty} has no jobs")
    assert proc.stdout == ""
    assert_one_error(run_cli("enqueue", "--file", "-", input="", dsn=dsn), 1, "<stdin> has no jobs")


def test_rerun_checks_every_id_first_and_names_the_refused_after_the_rest(
    dsn: str, conn: psycopg.Connection
) -> None:
    """Found by the attack pass: `rerun DONE MISSING` made a job before it said MISSING was
    unknown, and `rerun READY DONE` stopped at READY without running DONE again."""
    done = _job(conn, "report", finished=True)
    ready = _job(conn, "report")
    proc = run_cli("jobs", "rerun", str(done), MISSING, dsn=dsn)
    assert_one_error(proc, 1, f"no job with id {MISSING}")
    assert "nothing done" in proc.stderr and proc.stdout == ""
    assert conn.execute("SELECT count(*) FROM jobs WHERE rerun_of IS NOT NULL").fetchone() == (0,)
    proc = run_cli("jobs", "rerun", str(ready), str(done), dsn=dsn)
    assert_one_error(proc, 1, "not run again:")
    assert f"ids {ready}" in proc.stderr
    new = conn.execute("SELECT id FROM jobs WHERE rerun_of = %s", (done,)).fetchone()
    assert new is not None and proc.stdout == f"job #{done} run again as job #{new[0]}\n"


def test_a_kind_with_a_line_separator_cannot_forge_a_check_line(
    dsn: str, conn: psycopg.Connection
) -> None:
    """Found by the attack pass: U+2028/U+2029 passed through raw, and `splitlines()` (as many
    readers do) broke the status line there."""
    forged = "!\u2028JOBTUI OK - all fine | forged=0;;;0;\u2029"
    conn.execute("INSERT INTO jobs (kind, payload) VALUES (%s, '{}')", (forged,))
    proc = run_cli("check", dsn=dsn)
    assert proc.returncode in (1, 2), proc
    assert "\u2028" not in proc.stdout and "\u2029" not in proc.stdout
    lines = proc.stdout.splitlines()
    assert lines[0].startswith("JOBTUI WARNING - ") or lines[0].startswith("JOBTUI CRITICAL - ")
    assert not any(line.startswith("JOBTUI OK") for line in lines)


def test_enqueue_file_lines_end_at_newline_only(
    dsn: str, conn: psycopg.Connection, tmp_path: Path
) -> None:
    """Found by the attack pass: valid JSON lines holding U+2028 or U+0085 were split there."""
    path = tmp_path / "jobs.jsonl"
    texts = ["para1\u2028para2", "a\u0085b"]
    path.write_text(
        "".join(
            json.dumps({"kind": "note", "payload": {"t": t}}, ensure_ascii=False) + "\n"
            for t in texts
        ),
        encoding="utf-8",
    )
    assert_ok(run_cli("enqueue", "--file", str(path), dsn=dsn))
    got = [r[0] for r in conn.execute("SELECT payload->>'t' FROM jobs ORDER BY id")]
    assert got == texts


def test_a_malformed_dsn_never_prints_its_password() -> None:
    # libpq quotes a malformed connection string whole in its error message.
    for env, args in (
        ({}, ("--dsn", "postgresql://root:S3cretPw@[::1/x", "stats")),
        ({"JOBTUI_DSN": "postgresql://root:S3cretPw@[::1/x"}, ("dead", "list")),
        ({"DATABASE_URL": "postgresql://root:S3cretPw@[::1/x"}, ("stats", "--json")),
    ):
        proc = run_cli(*args, env=clean_env(**env))
        line = assert_one_error(proc, 1, "IPv6 host address")
        assert "S3cretPw" not in proc.stderr + proc.stdout and "***" in line
