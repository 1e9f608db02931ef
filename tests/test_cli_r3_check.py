"""Issue 27 items 3, 6, 7 and 8: `jobtui check` in the Nagios plugin format, safe from hostile
kind names; the failure-rate alert's critical level; alert rules for exact kind names."""

from __future__ import annotations

from pathlib import Path

import psycopg
from test_cli_support import run_cli
from test_hostile import HOSTILE, INJECTION, no_raw_control

# The console's hostile corpus plus what the plugin format reserves: `|` starts the performance
# data, `'` and `=` are special inside its labels; a newline would start the long output.
FORGERY = "mail|ready=0;;;0; x"
CORPUS = (FORGERY, HOSTILE, INJECTION, "it's=1", "a\nJOBTUI OK - fine | ok=1", "x" * 500)


def _dead(conn: psycopg.Connection, kind: str, n: int = 1) -> None:
    conn.execute(
        """INSERT INTO dead_letters (id, kind, payload, attempts, max_attempts, created_at,
               run_at, last_error, reason)
           SELECT nextval(pg_get_serial_sequence('jobs', 'id')), %s, '{}', 1, 1, now(), now(),
                  'E: x', 'failed'
           FROM generate_series(1, %s)""",
        (kind, n),
    )


def _perf(first_line: str) -> list[str]:
    _status, perf = first_line.split(" | ")
    return perf.split(" ")


def test_a_hostile_kind_name_cannot_forge_the_status_or_the_performance_data(
    dsn: str, conn: psycopg.Connection
) -> None:
    for kind in CORPUS:
        _dead(conn, kind)
    proc = run_cli("check", dsn=dsn)
    assert proc.returncode == 1 and proc.stderr == "", proc
    lines = proc.stdout.splitlines()
    # One status line, then one line per kind's problem: no name added a line of its own.
    assert len(lines) == 1 + len(CORPUS), proc.stdout
    assert lines[0].startswith("JOBTUI WARNING - 6 warning: ")
    assert lines[0].count("|") == 1, lines[0]
    labels = [item.split("=", 1)[0] for item in _perf(lines[0])]
    assert labels == [
        "oldest_ready_age",
        "dead",
        "ready",
        "problems_critical",
        "problems_warning",
    ]
    for line in lines[1:]:
        assert line.startswith("WARNING: ") and line.endswith(" [dead_letters]"), line
        assert "|" not in line and no_raw_control(line), line
        assert len(line) <= 320
    assert any("mail/ready=0;;;0; x: dead letters 1 > 0" in line for line in lines)
    assert all(no_raw_control(line) for line in lines)


def test_a_queue_in_trouble_gives_a_short_first_line_and_the_rest_below(
    dsn: str, conn: psycopg.Connection
) -> None:
    """72 problems once made one line of 3,406 characters; NRPE cut it."""
    for i in range(70):
        _dead(conn, f"kind_{i:02d}_{'y' * 30}")
    conn.execute(
        "INSERT INTO kind_stats (minute, kind, done, failed)"
        " VALUES (date_trunc('minute', now()) - interval '1 minute', 'flaky', 1, 9),"
        "        (date_trunc('minute', now()) - interval '1 minute', 'shaky', 1, 3)"
    )
    proc = run_cli("check", dsn=dsn)
    assert proc.returncode == 2, proc
    first, *details = proc.stdout.splitlines()
    assert len(first) < 400, len(first)
    assert first.startswith("JOBTUI CRITICAL - 2 critical, 70 warning: flaky: failure rate 90%")
    assert "problems_critical=2;;;0; problems_warning=70;;;0;" in first
    assert len(details) == 72
    # Critical first, then the warnings.
    assert [d.split(":")[0] for d in details] == ["CRITICAL"] * 2 + ["WARNING"] * 70


def test_the_failure_rate_alert_is_critical_above_30_percent_by_default(
    dsn: str, conn: psycopg.Connection
) -> None:
    """The README said crit = "30%"; the code had no crit level, so 46% was only a WARNING."""
    conn.execute(
        "INSERT INTO workers (id, host, pid, kinds, concurrency) VALUES ('w', 'h', 1, '{sync}', 1)"
    )
    conn.execute(
        "INSERT INTO kind_stats (minute, kind, done, failed)"
        " VALUES (date_trunc('minute', now()) - interval '1 minute', 'sync', 54, 46)"
    )
    proc = run_cli("check", dsn=dsn)
    assert proc.returncode == 2, proc
    assert proc.stdout.splitlines() == [
        proc.stdout.splitlines()[0],
        "CRITICAL: sync: failure rate 46% > 30% [failure_rate]",
    ]
    assert proc.stdout.startswith(
        "JOBTUI CRITICAL - 1 critical: sync: failure rate 46% > 30% [failure_rate] | "
    )


def test_an_alert_rule_for_sync_eu_applies_to_that_kind_only(
    dsn: str, conn: psycopg.Connection, tmp_path: Path
) -> None:
    """`[alerts.kinds."sync[eu]"]` was a glob: it matched `synce`, never `sync[eu]`."""
    config = tmp_path / "config.toml"
    config.write_text(
        '[alerts]\ndead_letters = false\n[alerts.kinds."sync[eu]"]\ndead_letters = { crit = 0 }\n'
        '[alerts.kinds."glob:export_*"]\ndead_letters = { warn = 5 }\n'
    )
    for kind, n in (("sync[eu]", 1), ("synce", 1), ("export_crm", 6), ("export_pdf", 1)):
        _dead(conn, kind, n)
    proc = run_cli("check", "--config", str(config), dsn=dsn)
    assert proc.returncode == 2, proc
    assert proc.stdout.splitlines()[1:] == [
        "CRITICAL: sync[eu]: dead letters 1 > 0 [dead_letters]",
        "WARNING: export_crm: dead letters 6 > 5 [dead_letters]",
    ]
    # A config written before the prefix: `export_*` is still a pattern, `sync[eu]` a name;
    # `name:` makes a key with `*` a name.
    config.write_text(
        '[alerts]\ndead_letters = false\n[alerts.kinds."export_*"]\ndead_letters = { warn = 5 }\n'
        '[alerts.kinds."name:sync*"]\ndead_letters = { warn = 0 }\n'
    )
    _dead(conn, "sync*")
    proc = run_cli("check", "--config", str(config), dsn=dsn)
    assert proc.stdout.splitlines()[1:] == [
        "WARNING: export_crm: dead letters 6 > 5 [dead_letters]",
        "WARNING: sync*: dead letters 1 > 0 [dead_letters]",
    ], proc.stdout


def test_a_thousand_problems_stop_at_a_hundred_lines_and_a_count(
    dsn: str, conn: psycopg.Connection
) -> None:
    for i in range(150):
        _dead(conn, f"kind_{i:03d}")
    proc = run_cli("check", dsn=dsn)
    first, *details = proc.stdout.splitlines()
    assert first.startswith("JOBTUI WARNING - 150 warning: kind_000: dead letters 1 > 0")
    assert "problems_warning=150;;;0;" in first
    assert len(details) == 101 and details[99].startswith("WARNING: kind_099: ")
    assert details[100] == "… and 50 more (`jobtui stats` lists them all)"


def test_performance_labels_are_quoted_as_the_plugin_format_asks() -> None:
    from jobtui.cli.nagios import perf_label, text

    assert perf_label("ready") == "ready"
    assert perf_label("it's=1 x") == "'it''s_1 x'"
    assert perf_label(FORGERY) == "'mail/ready_0;;;0; x'"
    assert text("a|b\nc") == "a/b\\nc"
