"""Attacks on the r11 CLI edges (bc154c6, d56638e, c25a2c1, daf9a81, a52fceb): inputs their
own tests (test_cli_r11_edges.py, test_migrate_nullable_article.py) do not use.

Tests marked FAULT failed before the fix beside them; the others pin properties that held,
so what follows keeps them.
"""

from __future__ import annotations

import os
import re
import subprocess
import threading
from pathlib import Path

import psycopg
import pytest
from test_cli_support import JOBTUI, assert_ok, assert_one_error, clean_env, run_cli

from benchmarks.article import ARTICLE_DDL
from jobtui.cli.args import REFRESH

HERE = Path(__file__).parent
SECRET = "s3cr3tpw"


# --- --refresh: the bounds themselves (held) ---


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("0.5s", 0.5), ("500ms", 0.5), ("0.5", 0.5), ("5m", 300.0), ("300", 300.0), ("300s", 300.0)],
)
def test_refresh_takes_its_bounds_in_every_spelling(text: str, seconds: float) -> None:
    assert REFRESH(text) == seconds


@pytest.mark.parametrize("text", ["0.49s", "301", "5m1s", "1h", "inf", "nan", "-1s", "0s", "1e400"])
def test_refresh_outside_or_unreadable_is_refused(text: str) -> None:
    with pytest.raises(Exception, match=r"expected 0\.5s to 5m|invalid duration"):
        REFRESH(text)


# --- DSNs: what a failure prints ---


@pytest.mark.parametrize(
    "dsn",
    [
        f"postgresql://u:{SECRET}@[::1/db",  # invalid (libpq quotes the URI whole)
        f"host=127.0.0.1 password={SECRET} nosuchoption=1",  # invalid
        f"postgresql://root:{SECRET}@127.0.0.1:1/postgres",  # unreachable
        f"host=127.0.0.1 port=1 password={SECRET}",  # unreachable
        f"postgresql://root:{SECRET}@127.0.0.1/no_such_db_r11",  # database missing
        f"postgresql://root:{SECRET}@127.0.0.1/postgres?sslmode=bogus",  # a value refused
    ],
)
def test_no_failure_prints_the_password(dsn: str) -> None:
    """FAULT (check only): `jobtui check` printed its UNKNOWN line without the redaction every
    `jobtui: error:` line gets: `JOBTUI UNKNOWN - invalid DSN: … in URI:
    "postgresql://u:<password>@[::1/db"`, on stdout, into a monitoring system's history."""
    for args in (["jobs", "list"], ["check"], ["stats", "--json"]):
        proc = run_cli(*args, dsn=dsn, timeout=30)
        assert proc.returncode in (1, 3), (args, proc.returncode, proc.stderr)
        assert SECRET not in proc.stdout + proc.stderr, (args, proc.stdout, proc.stderr)


@pytest.mark.parametrize(
    ("dsn", "needle"),
    [
        ("host=127.0.0.1 sslmode=bogus", 'invalid sslmode value: "bogus"'),
        ("postgresql://root@127.0.0.1/postgres?port=abc", 'invalid integer value "abc"'),
        ("host=a,b port=1,2,3", "could not match 3 port numbers to 2 hosts"),
        ("service=no_such_service_r11", 'definition of service "no_such_service_r11"'),
    ],
)
def test_a_dsn_value_libpq_refuses_is_called_an_invalid_dsn(dsn: str, needle: str) -> None:
    """FAULT: only a DSN libpq cannot parse was called invalid; one it parses but refuses the
    values of said `database error: connection is bad: invalid sslmode value: "bogus"`."""
    line = assert_one_error(run_cli("jobs", "list", dsn=dsn), 1, "invalid DSN: ", needle)
    assert "database error" not in line and "connection is bad" not in line


def _config(tmp_path: Path, **targets: str) -> Path:
    path = tmp_path / "config.toml"
    path.write_text("".join(f'[targets.{k}]\ndsn = "{v}"\n' for k, v in targets.items()))
    return path


def test_a_targets_malformed_dsn_is_called_invalid_too(tmp_path: Path) -> None:
    """FAULT: the "invalid DSN" line was given to --dsn and JOBTUI_DSN only; a config file's
    target said `database error: missing "=" after "not" in connection info string` in
    `--target`, `check` and `stats` (the DSN was returned before it was judged)."""
    config = str(_config(tmp_path, bad=f"not a dsn password={SECRET}"))
    assert_one_error(
        run_cli("--config", config, "--target", "bad", "jobs", "list"), 1, "invalid DSN: "
    )
    proc = run_cli("check", "--config", config, "--target", "bad")
    assert proc.returncode == 3 and "bad: invalid DSN: " in proc.stdout, proc.stdout
    proc = run_cli("stats", "--config", config, "--target", "bad", "--json")
    assert proc.returncode == 1 and "invalid DSN: " in proc.stdout, proc.stdout
    assert "database error" not in proc.stdout + proc.stderr
    assert SECRET not in proc.stdout + proc.stderr


# --- not migrated: every way in (held) ---


def test_not_migrated_names_the_database_in_check_and_through_a_target(
    empty_dsn: str, tmp_path: Path
) -> None:
    dbname = psycopg.conninfo.conninfo_to_dict(empty_dsn)["dbname"]
    proc = run_cli("check", dsn=empty_dsn)
    assert proc.returncode == 3, proc  # Nagios UNKNOWN, not 1
    assert proc.stdout.startswith("JOBTUI UNKNOWN - ") and f"database '{dbname}'" in proc.stdout
    config = str(_config(tmp_path, t=empty_dsn))
    assert_one_error(
        run_cli("--config", config, "--target", "t", "jobs", "list"), 1, f"database '{dbname}'"
    )


def test_migrate_run_again_on_a_migrated_database_is_not_refused(dsn: str) -> None:
    """The nullable-column check runs on a table jobtui has not migrated only: jobtui's own
    nullable columns (locked_at…) must not refuse a second migrate."""
    assert_ok(run_cli("migrate", dsn=dsn))


# --- worker flags ---


def test_a_bad_worker_flag_is_refused_before_the_database_is_reached(empty_dsn: str) -> None:
    """FAULT: `--heartbeat 0` was judged after connecting, so an unmigrated (or unreachable)
    database hid the usage error: exit 1 "not migrated" instead of exit 2 naming the flag."""
    proc = run_cli(
        "worker", "--app", "apps.basic", "--heartbeat", "0", dsn=empty_dsn, cwd=HERE, timeout=30
    )
    assert_one_error(proc, 2, "--heartbeat must be a positive number of seconds")
    proc = run_cli(
        "worker", "--app", "apps.basic", "--retention", "0", "--dsn", "host=127.0.0.1 port=1",
        cwd=HERE, timeout=30,
    )  # fmt: skip
    assert_one_error(proc, 2, "--retention must be a positive duration")


def test_the_worker_message_keeps_the_values_it_echoes(dsn: str) -> None:
    """Held: the field-to-flag substitution leaves the rest of the line alone."""
    proc = run_cli(
        "worker", "--app", "apps.basic", "--heartbeat", "40s", dsn=dsn, cwd=HERE, timeout=30
    )
    assert_one_error(
        proc, 2, "--heartbeat-timeout (30.0s) must be longer than --heartbeat (40.0s)"
    )


# --- stats --output: what it writes over ---


def test_stats_output_through_a_symlink_writes_its_target(dsn: str, tmp_path: Path) -> None:
    """FAULT: the temporary file was renamed over the link, which became a plain file, and
    the file it named kept its old figures (a textfile collector reading it saw none)."""
    real = tmp_path / "real.prom"
    real.write_text("old\n")
    link = tmp_path / "link.prom"
    link.symlink_to(real.name)
    assert_ok(run_cli("stats", "--prometheus", "--output", str(link), dsn=dsn))
    assert link.is_symlink()
    assert "jobtui_" in real.read_text()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["link.prom", "real.prom"]


def test_stats_output_to_a_fifo_writes_through_it(dsn: str, tmp_path: Path) -> None:
    """FAULT: a FIFO (as /dev/stdout or /dev/full, which root may replace) was renamed over:
    the reader got nothing and a plain file took its place."""
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    got: list[str] = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_text()), daemon=True)
    reader.start()
    proc = run_cli("stats", "--output", str(fifo), dsn=dsn, timeout=30)
    if reader.is_alive():  # nothing opened it for writing: release the reader
        with open(fifo, "w"):
            pass
    reader.join(10)
    assert_ok(proc)
    assert fifo.is_fifo()
    assert got and "ready" in got[0]


# --- enqueue --file: BOM edges (held) ---


def test_a_byte_order_mark_past_line_one_is_refused_naming_its_line(
    dsn: str, tmp_path: Path
) -> None:
    path = tmp_path / "jobs.jsonl"
    path.write_bytes(b'{"kind": "a"}\n\xef\xbb\xbf{"kind": "b"}\n')
    assert_one_error(run_cli("enqueue", "--file", str(path), dsn=dsn), 1, "line 2")


# --- migrate's nullable-column refusal ---


def test_the_alter_offered_for_a_mixed_case_schema_runs(empty_dsn: str) -> None:
    """FAULT: the refusal offered `ALTER TABLE Queue.jobs …`, which PostgreSQL folds to
    queue.jobs (`schema "queue" does not exist`, or another schema's table)."""
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        conn.execute('CREATE SCHEMA "Queue"')
        conn.execute('SET search_path TO "Queue"')
        conn.execute(re.sub(r"(\n  kind +text) not null", r"\1", ARTICLE_DDL))
    line = assert_one_error(
        run_cli("--schema", "Queue", "migrate", dsn=empty_dsn), 1, "column kind allows NULL"
    )
    match = re.search(r"ALTER TABLE \S+ ALTER COLUMN kind SET NOT NULL", line)
    assert match, line
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        conn.execute(match[0])
    assert run_cli("--schema", "Queue", "migrate", dsn=empty_dsn).returncode == 0


def test_migrate_dry_run_refuses_what_migrate_refuses(empty_dsn: str) -> None:
    """FAULT: `migrate --dry-run` printed the SQL, exit 0, for an article table with a
    nullable kind that `migrate` then refused (pending_sql skipped the column check)."""
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        conn.execute(re.sub(r"(\n  kind +text) not null", r"\1", ARTICLE_DDL))
    for args in (["migrate", "--dry-run"], ["migrate"]):
        assert_one_error(run_cli(*args, dsn=empty_dsn), 1, "column kind allows NULL")


def test_stdin_is_read_as_a_file_is(dsn: str, conn: psycopg.Connection) -> None:
    """FAULT: stdin was read as text: a UTF-16 file piped in said `line 1: invalid JSON`
    where the same file by name says `not UTF-8 text`, and lines ended by a lone CR (which a
    file by name splits) were one line of invalid JSON."""
    utf16 = '{"kind": "a"}\n'.encode("utf-16")
    proc = subprocess.run(
        [*JOBTUI, "--dsn", dsn, "enqueue", "--file", "-"],
        input=utf16, capture_output=True, env=clean_env(), timeout=60, check=False,
    )  # fmt: skip
    assert proc.returncode == 1 and b"<stdin>: not UTF-8 text" in proc.stderr, proc.stderr
    text = '\ufeff{"kind": "a"}\r{"kind": "b"}\r'
    assert "enqueued 2 jobs" in assert_ok(run_cli("enqueue", "--file", "-", dsn=dsn, input=text))
    assert conn.execute("SELECT kind FROM jobs ORDER BY id").fetchall() == [("a",), ("b",)]
