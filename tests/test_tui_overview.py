"""Issue 12 items 3 and 4 in the Overview: the alert rules' alarms on its first line, the kinds
table marked by the same rules as `jobtui check`, and the drain estimate per kind.

The real console runs against a real database, with a config file read as the CLI reads it;
the screen is read as the terminal gets it (the compositor's lines).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import psycopg
import pytest
from rich.style import Style
from test_alerts import _check_firing
from test_cli_support import run_cli
from test_drain_estimate import age_flow, arrive, finish
from test_tui_console import until
from test_tui_layout import assert_on_screen, screen_lines

from jobtui.alerts import Level
from jobtui.console_config import load_console_config
from jobtui.enqueue import JobSpec, enqueue_many
from jobtui.tui.app import JobtuiApp
from jobtui.tui.palette import cell_styles
from jobtui.tui.widgets.alarms import AlarmList
from jobtui.tui.widgets.keyed_table import KeyedTable

# A custom rule (dead letters of `report*` kinds are critical from the first) beside the
# defaults the file does not change (no_worker warns on any ready job nobody handles).
CONFIG = """
[console]
refresh = "0.5s"

[alerts]
oldest_ready = { warn = "10m", crit = "30m" }

[alerts.kinds."report*"]
dead_letters = { warn = 0, crit = 0 }
"""

NO_FILE = {"XDG_CONFIG_HOME": "/nonexistent"}  # the built-in rules, no developer's file

EXPECTED = {
    ("oldest_ready", "send_email"): Level.CRIT,  # 40 minutes > 30m
    ("dead_letters", "report"): Level.CRIT,  # 2 > 0 under the report* rule
    ("no_worker", "orphan"): Level.WARN,  # 2 ready jobs, no worker handles the kind
}


def _incident(conn: psycopg.Connection) -> None:
    """Old ready jobs, dead letters, a kind no worker handles."""
    conn.execute(
        "INSERT INTO workers (id, host, pid, kinds, concurrency, heartbeat_at)"
        " VALUES ('h:1:a', 'h', 1, '{send_email,report}', 4, now())"
    )
    old = datetime.now(UTC) - timedelta(minutes=40)
    enqueue_many(conn, [JobSpec("send_email", {"n": i}, run_at=old) for i in range(3)])
    enqueue_many(conn, [JobSpec("orphan", {"n": i}) for i in range(2)])
    conn.execute(
        """INSERT INTO dead_letters (id, kind, payload, attempts, max_attempts, created_at,
               run_at, last_error, reason)
           SELECT nextval(pg_get_serial_sequence('jobs', 'id')), 'report', '{}', 3, 3,
                  now(), now(), 'E: x', 'failed'
           FROM generate_series(1, 2)"""
    )


def _config_file(tmp_path: Path) -> Path:
    path = tmp_path / "config.toml"
    path.write_text(CONFIG, encoding="utf-8")
    return path


def _line_with(app: JobtuiApp, word: str) -> str:
    found = [line for line in screen_lines(app) if word in line]
    assert found, f"{word!r} not on screen:\n" + "\n".join(screen_lines(app))
    return found[0]


def _style(table: KeyedTable, kind: str, column: str) -> str:
    return str(table.get_cell(kind, column).style)


async def test_alarms_on_the_first_line_with_checks_verdict(
    dsn: str, conn: psycopg.Connection, tmp_path: Path
) -> None:
    _incident(conn)
    path = _config_file(tmp_path)
    cfg = load_console_config(path)
    assert cfg.refresh_s == 0.5  # the file is the one the console reads

    proc = run_cli("check", "--config", str(path), dsn=dsn)
    assert proc.returncode == 2, (proc.stdout, proc.stderr)  # CRITICAL
    line = proc.stdout  # the status line, then one line per problem (issue 27)
    assert _check_firing(line) == set(EXPECTED), line

    app = JobtuiApp(dsn, "public", config=cfg)
    async with app.run_test(size=(80, 24)) as pilot:
        alarms = app.query_one("#alarms", AlarmList)
        kinds = app.query_one("#kinds", KeyedTable)
        await until(pilot, lambda: alarms.display and len(kinds.keys) == 3)
        await pilot.pause(0.2)
        console = {(f.rule, f.kind): f.level for f in alarms.firings}
        assert console == EXPECTED, console  # the same verdict as `check`'s line
        assert max(console.values()) == Level.CRIT  # and its exit code 2

        # The alarm list is the Overview's first line, most severe first, named by rule.
        pane = app.query_one("#overview-pane")
        assert alarms.region.y == pane.region.y and alarms.region.height == 3
        lines = screen_lines(app)[alarms.region.y : alarms.region.y + 3]
        assert lines[0].strip().startswith("✗ CRIT send_email: oldest ready job 40m > 30m00s")
        assert lines[0].rstrip().endswith("[oldest_ready]"), lines
        assert "✗ CRIT report: dead letters 2 > 0" in lines[1] and "[dead_letters]" in lines[1]
        assert "! WARN orphan: no live worker handles it (2 ready)" in lines[2]

        # The kinds table is marked by the same firings: each rule's cell at its level.
        st = cell_styles(app)
        assert _style(kinds, "send_email", "oldest") == st.error
        assert _style(kinds, "report", "oldest") == ""  # report's jobs are dead, none ready
        assert kinds.get_cell("orphan", "status").plain == "no worker handles this kind"
        assert _style(kinds, "orphan", "status") == st.warning
        # Its oldest job is the rule that fires: the status column names it, not "ok".
        assert kinds.get_cell("send_email", "status").plain == "✗ OLD"
        # Troubled kinds first: two critical kinds (by name), then the warning.
        assert kinds.keys == ["report", "send_email", "orphan"]
        oldest = app.query_one("#t-oldest")
        assert oldest.has_class("-crit") and "!!" in str(oldest.render())

        # The rule is what decides: the orphan kind gets a worker, its alarm goes, in both.
        conn.execute("UPDATE workers SET kinds = kinds || '{orphan}'::text[]")
        await until(
            pilot, lambda: ("no_worker", "orphan") not in {(f.rule, f.kind) for f in alarms.firings}
        )
        await pilot.pause(0.2)
        assert "orphan: no live worker" not in "\n".join(screen_lines(app))
        assert kinds.get_cell("orphan", "status").plain == "ok"
    line = run_cli("check", "--config", str(path), dsn=dsn).stdout
    assert _check_firing(line) == set(EXPECTED) - {("no_worker", "orphan")}, line


async def test_nothing_firing_hides_the_alarm_line(dsn: str, conn: psycopg.Connection) -> None:
    enqueue_many(conn, [JobSpec("mail", {})])
    conn.execute(
        "INSERT INTO workers (id, host, pid, kinds, concurrency, heartbeat_at)"
        " VALUES ('h:1:a', 'h', 1, '{mail}', 4, now())"
    )
    app = JobtuiApp(dsn, "public", config=load_console_config(env=NO_FILE).with_(refresh_s=0.5))
    async with app.run_test(size=(80, 24)) as pilot:
        kinds = app.query_one("#kinds", KeyedTable)
        await until(pilot, lambda: kinds.keys == ["mail"])
        await pilot.pause(0.2)
        alarms = app.query_one("#alarms", AlarmList)
        assert not alarms.display and alarms.region.height == 0 and alarms.firings == []
        assert "CRIT" not in "\n".join(screen_lines(app))
        assert "WARN" not in "\n".join(screen_lines(app))


def _drain_data(conn: psycopg.Connection) -> None:
    """`mail`: 550 ready, arriving 10 and completed 40 a minute (drains in 550 / 30 min);
    `sms`: 300 ready, arrivals keeping up with completions (never drains); `idle`: nothing
    ready (nothing to drain). As tests/test_drain_estimate.py sets them up."""
    arrive(conn, "mail", 1000)
    age_flow(conn, 30)  # the backlog arrived before the 15-minute window
    arrive(conn, "mail", 150)
    finish(conn, "mail", 600)
    arrive(conn, "sms", 600)
    finish(conn, "sms", 300)
    arrive(conn, "idle", 2)
    finish(conn, "idle", 2)
    conn.execute(
        "INSERT INTO workers (id, host, pid, kinds, concurrency, heartbeat_at)"
        " VALUES ('h:1:a', 'h', 1, '{*}', 4, now())"
    )


async def test_drain_column_at_80x24(dsn: str, conn: psycopg.Connection) -> None:
    _drain_data(conn)
    app = JobtuiApp(dsn, "public", config=load_console_config(env=NO_FILE).with_(refresh_s=0.5))
    async with app.run_test(size=(80, 24)) as pilot:
        kinds = app.query_one("#kinds", KeyedTable)
        await until(pilot, lambda: set(kinds.keys) == {"mail", "sms", "idle"})
        await pilot.pause(0.3)
        # Issue 26 item 6: at 80 columns the depth, oldest age, dead letters, run time
        # (p95) and failure rate fit beside the status; the drain estimate is behind `w`.
        assert kinds.shown_columns == ["kind", "ready", "status", "oldest", "dead", "p95", "fail"]
        assert kinds.hidden_columns == ["drain", "done/m", "run", "limit", "p50"]
        assert_on_screen(app, "fail%", "+5→", "status")
        # The default rules leave drain time alone: nothing fires for it.
        assert all(f.rule != "drain_time" for f in app.query_one(AlarmList).firings)
        await pilot.press("w")
        await until(pilot, lambda: "drain" in kinds.shown_columns)
        await pilot.pause(0.2)
        assert kinds.get_cell("mail", "drain").plain == "~18m"  # 550 / 30 a minute: 18m20s
        sms = kinds.get_cell("sms", "drain")
        assert sms.plain == "! not draining" and "bold" in str(sms.style)
        assert kinds.get_cell("idle", "drain").plain == ""  # no backlog


async def test_drain_column_at_120_columns(dsn: str, conn: psycopg.Connection) -> None:
    _drain_data(conn)
    app = JobtuiApp(dsn, "public", config=load_console_config(env=NO_FILE).with_(refresh_s=0.5))
    async with app.run_test(size=(120, 30)) as pilot:
        kinds = app.query_one("#kinds", KeyedTable)
        await until(pilot, lambda: set(kinds.keys) == {"mail", "sms", "idle"})
        await pilot.pause(0.3)
        assert "drain" in kinds.shown_columns
        assert "~18m" in _line_with(app, "mail ")
        assert "! not draining" in _line_with(app, "sms ")


async def test_a_drain_rule_marks_the_cell_and_fires(
    dsn: str, conn: psycopg.Connection, tmp_path: Path
) -> None:
    _drain_data(conn)
    path = tmp_path / "config.toml"
    path.write_text('[alerts]\ndrain_time = { warn = "10m", crit = "1h" }\n', encoding="utf-8")
    cfg = load_console_config(path).with_(refresh_s=0.5)
    app = JobtuiApp(dsn, "public", config=cfg)
    async with app.run_test(size=(120, 30)) as pilot:
        alarms = app.query_one("#alarms", AlarmList)
        kinds = app.query_one("#kinds", KeyedTable)
        await until(pilot, lambda: set(kinds.keys) == {"mail", "sms", "idle"} and alarms.display)
        await pilot.pause(0.2)
        fired = {(f.rule, f.kind): f.level for f in alarms.firings}
        assert fired == {("drain_time", "sms"): Level.CRIT, ("drain_time", "mail"): Level.WARN}
        st = cell_styles(app)
        assert _style(kinds, "sms", "drain") == st.error
        assert _style(kinds, "mail", "drain") == st.warning
        assert_on_screen(app, "✗ CRIT sms: not draining", "! WARN mail: drain time 18m > 10m00s")
    line = run_cli("check", "--config", str(path), dsn=dsn).stdout
    assert _check_firing(line) == set(fired), line


async def test_no_color_not_draining_stands_out(
    dsn: str, conn: psycopg.Connection, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("NO_COLOR", "1")
    _drain_data(conn)
    app = JobtuiApp(dsn, "public", config=load_console_config(env=NO_FILE).with_(refresh_s=0.5))
    async with app.run_test(size=(120, 30)) as pilot:
        assert app.no_color
        kinds = app.query_one("#kinds", KeyedTable)
        await until(pilot, lambda: set(kinds.keys) == {"mail", "sms", "idle"})
        await pilot.pause(0.3)
        for strip in app.screen._compositor.render_strips():
            if "sms " in "".join(seg.text for seg in strip):
                style = next(s.style for s in strip if "not draining" in s.text)
                assert isinstance(style, Style) and style.bold and not style.dim, style
                break
        else:
            raise AssertionError("sms not on screen")
