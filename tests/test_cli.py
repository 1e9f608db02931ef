"""The `jobtui` executable: happy paths of the basic subcommands and one-line errors."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import psycopg
import pytest
from psycopg import conninfo
from test_cli_support import JOBTUI, assert_ok, assert_one_error, clean_env, run_cli

from jobtui.cli import main

SUBCOMMANDS = [
    ["console"],
    ["demo"],
    ["worker"],
    ["migrate"],
    ["enqueue"],
    ["stats"],
    ["check"],
    ["dead"],
    ["dead", "list"],
    ["dead", "show"],
    ["dead", "requeue"],
    ["dead", "delete"],
    ["jobs"],
    ["jobs", "list"],
    ["jobs", "show"],
    ["jobs", "cancel"],
    ["jobs", "run-now"],
    ["prune"],
    ["roles"],
]


def test_every_subcommand_has_help_with_examples(capsys: pytest.CaptureFixture[str]) -> None:
    out = assert_ok(run_cli("--help"))  # the real executable once; the parser in-process after
    assert "examples:" in out and "--dsn" in out
    for words in SUBCOMMANDS:
        with pytest.raises(SystemExit) as stop:
            main([*words, "--help"])
        assert stop.value.code == 0
        out = capsys.readouterr().out
        assert "examples:" in out, words
        assert "--dsn" in out, words


def test_cli_does_not_import_textual() -> None:
    code = (
        "import sys, jobtui.cli, jobtui.cli.jobs, jobtui.cli.output, jobtui.cli.nagios, "
        "jobtui.demo, jobtui.roles\n"
        "jobtui.cli.build_parser()\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'textual'))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_migrate_dry_run_then_migrate_then_up_to_date(empty_dsn: str) -> None:
    out = assert_ok(run_cli("migrate", "--dry-run", dsn=empty_dsn))
    assert "-- migration 0024_baseline" in out and "CREATE TABLE" in out
    with psycopg.connect(empty_dsn) as c:
        assert c.execute("SELECT to_regclass('public.jobs')").fetchone() == (None,)
    assert "migrated schema public to version" in assert_ok(run_cli("migrate", dsn=empty_dsn))
    assert "is up to date" in assert_ok(run_cli("migrate", dsn=empty_dsn))
    out = assert_ok(run_cli("migrate", "--schema", "queue", dsn=empty_dsn))
    assert "migrated schema queue" in out


def test_dsn_from_environment(dsn: str) -> None:
    for var in ("JOBTUI_DSN", "DATABASE_URL"):
        proc = run_cli("enqueue", "env_kind", env=clean_env(**{var: dsn}))
        assert assert_ok(proc).strip().isdigit()
    params = conninfo.conninfo_to_dict(dsn)
    pg_env = {"PGDATABASE": str(params["dbname"]), "PGHOST": str(params.get("host", ""))}
    if params.get("port"):
        pg_env["PGPORT"] = str(params["port"])
    if params.get("user"):
        pg_env["PGUSER"] = str(params["user"])
    if params.get("password"):
        pg_env["PGPASSWORD"] = str(params["password"])
    assert_ok(run_cli("enqueue", "env_kind", env=clean_env(**pg_env)))
    out = assert_ok(run_cli("jobs", "list", "--kind", "env_kind", "--json", dsn=dsn))
    assert len(json.loads(out)) == 3


def test_enqueue_one_with_options(dsn: str, conn: psycopg.Connection) -> None:
    out = assert_ok(
        run_cli(
            "enqueue",
            "send_email",
            '{"to": "ann@example.com"}',
            "--delay",
            "30s",
            "--max-attempts",
            "3",
            "--priority",
            "7",
            dsn=dsn,
        )
    )
    job_id = int(out)
    row = conn.execute(
        "SELECT kind, payload, max_attempts, priority, run_at - created_at FROM jobs WHERE id = %s",
        (job_id,),
    ).fetchone()
    assert row is not None
    assert row[:4] == ("send_email", {"to": "ann@example.com"}, 3, 7)
    assert 29 <= row[4].total_seconds() <= 31
    out = assert_ok(run_cli("enqueue", "report", "--run-at", "2031-01-02T03:04:05+00:00", dsn=dsn))
    run_at = conn.execute("SELECT run_at FROM jobs WHERE id = %s", (int(out),)).fetchone()
    assert run_at is not None and run_at[0].year == 2031


def test_enqueue_file_in_bulk(dsn: str, conn: psycopg.Connection, tmp_path: Path) -> None:
    lines = [json.dumps({"kind": "k", "payload": {"n": i}}) for i in range(2500)]
    lines.insert(10, "")
    lines.append(
        json.dumps(
            {"kind": "later", "payload": {}, "delay": "1h", "priority": 2, "max_attempts": 2}
        )
    )
    path = tmp_path / "jobs.jsonl"
    path.write_text("\n".join(lines) + "\n")
    assert (
        assert_ok(run_cli("enqueue", "--file", str(path), dsn=dsn)).strip() == "enqueued 2501 jobs"
    )
    assert conn.execute("SELECT count(*) FROM jobs WHERE kind = 'k'").fetchone() == (2500,)
    row = conn.execute(
        "SELECT priority, max_attempts, run_at > now() FROM jobs WHERE kind = 'later'"
    )
    assert row.fetchone() == (2, 2, True)
    proc = run_cli("enqueue", "--file", "-", input='{"kind": "stdin_kind"}\n', dsn=dsn)
    assert assert_ok(proc).strip() == "enqueued 1 job"


def test_enqueue_file_with_a_bad_line_writes_nothing(
    dsn: str, conn: psycopg.Connection, tmp_path: Path
) -> None:
    path = tmp_path / "jobs.jsonl"
    path.write_text('{"kind": "a", "payload": {}}\n{"kind": "b", "payload": {"x": 1,}}\n')
    assert_one_error(run_cli("enqueue", "--file", str(path), dsn=dsn), 1, "line 2", "column 34")
    path.write_text('{"kind": "a"}\n{"kind": "b", "max_attempts": 0}\n')
    assert_one_error(run_cli("enqueue", "--file", str(path), dsn=dsn), 1, "line 2", "max_attempts")
    path.write_text('{"kind": "a"}\n{"payload": {}}\n')
    assert_one_error(run_cli("enqueue", "--file", str(path), dsn=dsn), 1, "line 2", "kind")
    assert conn.execute("SELECT count(*) FROM jobs").fetchone() == (0,)
    assert_one_error(run_cli("enqueue", "--file", str(tmp_path / "nope"), dsn=dsn), 1, "nope")


def test_invalid_json_payload_names_the_position(dsn: str) -> None:
    proc = run_cli("enqueue", "k", '{"a": [1, 2}', dsn=dsn)
    assert_one_error(proc, 1, "invalid JSON payload", "line 1, column 12")


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["enqueue", "k", "--delay", "3x"], "invalid duration '3x'"),
        (["prune", "--older-than", "soon"], "invalid duration 'soon'"),
        (["frobnicate"], "invalid choice: 'frobnicate'"),
        (["stats", "--no-such-flag"], "unrecognized arguments: --no-such-flag"),
        (["jobs", "show", "abc"], "job ids are whole numbers"),
        (["dead"], "required"),
    ],
)
def test_usage_errors_are_one_line_exit_2(args: list[str], needle: str) -> None:
    assert_one_error(run_cli(*args), 2, needle)


def test_unreachable_host_is_one_line() -> None:
    t0 = time.monotonic()
    proc = run_cli("jobs", "list", dsn="postgresql://nobody@127.0.0.1:1/nothing")
    assert_one_error(proc, 1, "could not connect")
    assert time.monotonic() - t0 < 10


def test_database_missing_is_one_line(dsn: str) -> None:
    missing = conninfo.make_conninfo(dsn, dbname="jobtui_no_such_db")
    assert_one_error(run_cli("stats", dsn=missing), 1, "database missing", "jobtui_no_such_db")


def test_schema_not_migrated_says_run_migrate(empty_dsn: str) -> None:
    for args in (["stats"], ["jobs", "list"], ["enqueue", "k"], ["dead", "requeue", "1"]):
        assert_one_error(run_cli(*args, dsn=empty_dsn), 1, "run `jobtui migrate`")


def test_invalid_schema_name_is_one_line(dsn: str) -> None:
    assert_one_error(
        run_cli("stats", "--schema", "x; drop table jobs", dsn=dsn), 1, "invalid schema name"
    )


def test_wrong_password_is_one_line(dsn: str, pg_server_dsn: str) -> None:
    """A role that must give a password (an hba line for it alone); the server is trust else."""
    role = f"jobtui_pw_{int(time.time() * 1000) % 10**9}"
    with psycopg.connect(pg_server_dsn, autocommit=True) as admin:
        hba_file = admin.execute("SHOW hba_file").fetchone()[0]  # type: ignore[index]
        hba = Path(hba_file)
        try:
            original = hba.read_text()
            hba.write_text(
                f"local all {role} scram-sha-256\nhost all {role} all scram-sha-256\n" + original
            )
        except OSError:
            pytest.skip("cannot edit the test server's pg_hba.conf")
        admin.execute(f"CREATE ROLE {role} LOGIN PASSWORD 'right-password'")
        admin.execute("SELECT pg_reload_conf()")
        try:
            time.sleep(0.3)
            bad = conninfo.make_conninfo(dsn, user=role, password="wrong-password")
            assert_one_error(run_cli("stats", dsn=bad), 1, "authentication failed")
        finally:
            hba.write_text(original)
            admin.execute("SELECT pg_reload_conf()")
            admin.execute(f"DROP ROLE {role}")


def test_permission_denied_is_one_line(dsn: str, conn: psycopg.Connection) -> None:
    from jobtui.roles import drop_roles_sql, roles_sql

    prefix = f"t{int(time.time() * 1000) % 10**9}_"
    login = prefix + "alice"
    conn.execute(roles_sql("public", prefix))
    conn.execute(f"CREATE ROLE {login} LOGIN IN ROLE {prefix}monitor")
    conn.execute("INSERT INTO jobs (kind, payload) VALUES ('k', '{}')")
    try:
        as_monitor = conninfo.make_conninfo(dsn, user=login)
        try:
            psycopg.connect(as_monitor).close()
        except psycopg.OperationalError:
            pytest.skip("the test server does not let a new role log in without a password")
        assert_ok(run_cli("jobs", "list", dsn=as_monitor))
        assert_one_error(run_cli("jobs", "cancel", "1", dsn=as_monitor), 1, "permission denied")
        assert_one_error(run_cli("enqueue", "k", dsn=as_monitor), 1, "permission denied")
    finally:
        conn.execute(f"DROP ROLE {login}")
        conn.execute(drop_roles_sql(prefix))


def test_worker_app_that_fails_to_import_shows_its_error(dsn: str, tmp_path: Path) -> None:
    (tmp_path / "broken_app.py").write_text("import no_such_module_here\n")
    proc = run_cli("worker", "--app", "broken_app", dsn=dsn, cwd=tmp_path)
    assert_one_error(proc, 1, "broken_app", "No module named 'no_such_module_here'")
    (tmp_path / "syntax_app.py").write_text("def f(:\n")
    proc = run_cli("worker", "--app", "syntax_app", dsn=dsn, cwd=tmp_path)
    assert_one_error(proc, 1, "SyntaxError")
    assert_one_error(run_cli("worker", dsn=dsn), 2, "--app")


def test_worker_processes_jobs_and_stops_on_sigterm(
    dsn: str, conn: psycopg.Connection, tmp_path: Path
) -> None:
    (tmp_path / "tiny_app.py").write_text(
        textwrap.dedent("""
        from jobtui import Registry
        registry = Registry()

        @registry.handler("double")
        def double(payload):
            return payload["n"] * 2
    """)
    )
    for n in range(5):
        assert_ok(run_cli("enqueue", "double", json.dumps({"n": n}), dsn=dsn))
    proc = subprocess.Popen(
        [*JOBTUI, "worker", "--app", "tiny_app", "--dsn", dsn, "--log-level", "warning"],
        cwd=tmp_path,
        env=clean_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 20
        done = 0
        while time.monotonic() < deadline:
            row = conn.execute("SELECT count(*) FROM jobs WHERE finished_at IS NOT NULL").fetchone()
            done = row[0] if row else 0
            if done == 5:
                break
            time.sleep(0.1)
        assert done == 5
    finally:
        proc.terminate()
        _, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    assert "Traceback" not in err


def test_console_without_a_terminal_is_one_line(dsn: str) -> None:
    assert_one_error(run_cli("console", dsn=dsn), 1, "terminal")
    assert_one_error(run_cli(dsn=dsn), 1, "terminal")


def test_debug_shows_the_traceback(empty_dsn: str) -> None:
    proc = run_cli("stats", "--debug", dsn=empty_dsn)
    assert proc.returncode != 0
    assert "Traceback" in proc.stderr


def test_roles_print_sql() -> None:
    out = assert_ok(run_cli("roles", "--print-sql", "--schema", "queue"))
    assert 'GRANT USAGE ON SCHEMA "queue" TO jobtui_monitor;' in out
    assert "CREATE ROLE jobtui_operator NOLOGIN" in out
    assert_one_error(run_cli("roles", "--print-sql", "--prefix", "Bad-Prefix"), 1, "prefix")
    assert_one_error(run_cli("roles", "--print-sql", "--schema", 'a"b'), 1, "schema")


def test_payloads_postgres_cannot_store_are_refused_in_one_line(dsn: str, tmp_path: Path) -> None:
    assert_one_error(run_cli("enqueue", "k", '{"a": "x\\u0000y"}', dsn=dsn), 1, "NUL")
    path = tmp_path / "latin1.jsonl"
    path.write_bytes(b'{"kind": "k", "payload": {"name": "caf\xe9"}}\n')
    assert_one_error(run_cli("enqueue", "--file", str(path), dsn=dsn), 1, "not UTF-8")
    assert_one_error(
        run_cli("enqueue", "k", "[1, 2", "--max-attempts", "0", dsn=dsn), 2, "--max-attempts"
    )


def test_console_config_and_demo_terminal_errors_are_one_line(tmp_path: Path) -> None:
    assert_one_error(
        run_cli("console", "--config", str(tmp_path / "none.toml")), 1, "config file not found"
    )
    (tmp_path / "bad.toml").write_text("[console]\nrefresh = 'soon'\n")
    assert_one_error(run_cli("console", "--config", str(tmp_path / "bad.toml")), 1, "refresh")
    assert_one_error(run_cli("demo", "--data-dir", str(tmp_path / "d")), 1, "--headless")
