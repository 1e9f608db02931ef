"""Issues 9 and 15 in the console: which database, which environment, which clock.

- Every age (Jobs, Dead letters, Workers, detail) is measured against the server's clock: a
  console whose clock is minutes off shows the same ages (issue 9 item 9).
- The header names the live connection; an environment banner, red for production names and
  reverse video under NO_COLOR; banners stack at 80×24 (issue 15 item 4).
- On a hot standby a REPLICA badge with the lag, and write actions hidden with the reason
  (issue 15 item 2).
- The Workers tab shows how each worker is woken, abandoned threads and outcome errors
  (issue 9 items 4 and 5, issue 15 item 1).
"""

from __future__ import annotations

import itertools
import re
import sys
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest
from test_tui_console import SIZE, add_dead, config, goto, rendered, table, until
from textual.color import Color
from topology import ReplicaDB

from jobtui.enqueue import enqueue
from jobtui.tui.app import JobtuiApp
from jobtui.tui.connection import APPLICATION_NAME
from jobtui.tui.screens.detail import DetailScreen
from jobtui.tui.widgets.banners import env_is_dangerous
from jobtui.tui.widgets.status import StatusBar

SKEW = timedelta(minutes=7)


def seconds(text: str) -> int:
    """`10m02s`, `1h00m`, `42s` → seconds (the first duration in `text`)."""
    match = re.search(r"(\d+)([dhms])(?:(\d+)([hms]))?", text)
    assert match, text
    unit = {"d": 86400, "h": 3600, "m": 60, "s": 1}
    total = int(match.group(1)) * unit[match.group(2)]
    if match.group(3):
        total += int(match.group(3)) * unit[match.group(4)]
    return total


class Skewed(datetime):
    """The console machine's clock, minutes ahead of the server's."""

    @classmethod
    def now(cls, tz: Any = None) -> Any:
        return datetime.now(tz) + SKEW


def skew_console_clock(monkeypatch: pytest.MonkeyPatch) -> int:
    """Make every jobtui module read a clock SKEW ahead (the database keeps its own)."""
    patched = 0
    for name, module in list(sys.modules.items()):
        if name.startswith("jobtui") and getattr(module, "datetime", None) is datetime:
            monkeypatch.setattr(module, "datetime", Skewed)
            patched += 1
    return patched


async def ages_shown(dsn: str, job_id: int, dead_id: int) -> dict[str, int]:
    app = JobtuiApp(dsn, "public", config=config())
    out: dict[str, int] = {}
    async with app.run_test(size=SIZE) as pilot:
        await goto(app, pilot, "2")
        jobs = table(app, "#jobs-table")
        await until(pilot, lambda: str(job_id) in jobs.keys)
        out["jobs.when"] = seconds(str(jobs.get_cell(str(job_id), "when")))
        await goto(app, pilot, "3")
        dead = table(app, "#dead-rows")
        await until(pilot, lambda: str(dead_id) in dead.keys)
        out["dead.died"] = seconds(str(dead.get_cell(str(dead_id), "died")))
        groups = table(app, "#dead-groups")
        key = next(k for k in groups.keys if k != "*")
        out["dead.last"] = seconds(str(groups.get_cell(key, "last")))
        await goto(app, pilot, "4")
        workers = table(app, "#workers-table")
        await until(pilot, lambda: "w:1:a" in workers.keys)
        out["workers.up"] = seconds(str(workers.get_cell("w:1:a", "up")))
        out["workers.hb"] = seconds(str(workers.get_cell("w:1:a", "hb")))
        await goto(app, pilot, "2")
        await pilot.press("enter")  # the cursor is on the only job
        await until(pilot, lambda: isinstance(app.screen, DetailScreen))
        await until(pilot, lambda: "run at" in rendered(app.screen.query_one("#detail-head")))
        head = app.screen.query_one("#detail-head")
        line = next(x for x in rendered(head).splitlines() if x.startswith("run at"))
        out["detail.run_at"] = seconds(line.split("UTC", 1)[1])
    return out


async def test_ages_use_the_servers_clock_not_the_consoles(
    dsn: str, conn: psycopg.Connection, monkeypatch: pytest.MonkeyPatch
) -> None:
    job = conn.execute(
        "INSERT INTO jobs (kind, payload, run_at) VALUES ('k', '{}', now() - interval '10 min')"
        " RETURNING id"
    ).fetchone()
    assert job is not None
    [dead] = add_dead(conn, "k", "Boom: x")
    conn.execute("UPDATE dead_letters SET died_at = now() - interval '20 min'")
    conn.execute(
        "INSERT INTO workers (id, host, pid, kinds, concurrency, heartbeat_at, started_at)"
        " VALUES ('w:1:a', 'h', 1, '{k}', 4, now() - interval '3 s', now() - interval '30 min')"
    )
    right = await ages_shown(dsn, job[0], dead)
    assert skew_console_clock(monkeypatch) > 0
    assert datetime.now(UTC) - Skewed.now(UTC) < -SKEW + timedelta(seconds=1)
    skewed = await ages_shown(dsn, job[0], dead)
    expected = {
        "jobs.when": 600,
        "dead.died": 1200,
        "dead.last": 1200,
        "workers.up": 1800,
        "workers.hb": 3,
        "detail.run_at": 600,
    }
    for name, want in expected.items():
        assert want <= right[name] <= want + 20, (name, right)
        assert abs(skewed[name] - right[name]) <= 5, (name, right, skewed)


async def test_header_names_the_live_connection(dsn: str, conn: psycopg.Connection) -> None:
    info = conn.info
    host = "local" if (info.host or "/").startswith("/") else info.host
    app = JobtuiApp(dsn, "public", config=config())
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.polls >= 1)
        await pilot.pause(1.1)  # the status line is redrawn every second
        header = app.query_one(StatusBar).plain
        assert f"{info.user}@{host}:{info.port}/{info.dbname}" in header, header


def test_danger_pattern() -> None:
    assert env_is_dangerous("prod", "prod*")
    assert env_is_dangerous("Production", "prod*")
    assert env_is_dangerous("live-eu", "prod*,live*")
    assert not env_is_dangerous("staging", "prod*")
    assert not env_is_dangerous("preprod", "prod*")


@pytest.mark.parametrize(
    ("env", "danger"), [("production", True), ("staging", False), (None, False)]
)
async def test_environment_banner(
    dsn: str, conn: psycopg.Connection, env: str | None, danger: bool
) -> None:
    app = JobtuiApp(dsn, "public", config=config(), env=env)
    async with app.run_test(size=(80, 24)) as pilot:
        await until(pilot, lambda: app.polls >= 1)
        banner = app.query_one("#env-banner")
        assert banner.display == (env is not None)
        if env is None:
            return
        assert f"ENVIRONMENT {env.upper()}" in rendered(banner)
        assert banner.has_class("-danger") == danger
        error = app.get_css_variables()["error"]
        # As a colour, not as text: with 16 colours (TERM=xterm) the theme's error is ansi_red.
        assert (banner.styles.background == Color.parse(error)) == danger
        assert banner.region.y == 1 and banner.region.width == 80


async def test_environment_banner_reverse_video_under_no_color(
    dsn: str, conn: psycopg.Connection, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("NO_COLOR", "1")
    app = JobtuiApp(dsn, "public", config=config(), env="prod")
    async with app.run_test(size=(80, 24)) as pilot:
        await until(pilot, lambda: app.polls >= 1)
        banner = app.query_one("#env-banner")
        assert app.no_color and banner.styles.text_style.reverse
        assert "ENVIRONMENT PROD" in rendered(banner)
        # Alarms in tables are reverse video too (the theme's red would become a dim grey).
        conn.execute(
            "INSERT INTO workers (id, host, pid, kinds, concurrency, heartbeat_at)"
            " VALUES ('w:9:z', 'h', 9, '{k}', 1, now() - interval '10 minutes')"
        )
        await goto(app, pilot, "4")
        workers = table(app, "#workers-table")
        await until(pilot, lambda: "w:9:z" in workers.keys)
        assert "reverse" in str(workers.get_cell("w:9:z", "hb").style)


async def test_banners_stack_at_80x24(dsn: str, conn: psycopg.Connection) -> None:
    """Environment, READ-ONLY, DB DOWN and PAUSED at once: each on its own line."""
    enqueue(conn, "k", {})
    app = JobtuiApp(dsn, "public", config=config(read_only=True), env="prod")
    async with app.run_test(size=(80, 24)) as pilot:
        await until(pilot, lambda: app.polls >= 1)
        conn.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
            " WHERE application_name = %s AND datname = current_database()",
            (APPLICATION_NAME,),
        )
        banner = app.query_one("#banner")
        await until(pilot, lambda: banner.display)
        await pilot.press("p")
        await pilot.pause(0.2)
        ids = ("#status", "#env-banner", "#banner", "#mode-banner", "#paused-banner")
        regions = [app.query_one(i).region for i in ids]
        assert all(r.height >= 1 and r.width == 80 for r in regions), regions
        for upper, lower in itertools.pairwise(regions):
            assert upper.bottom <= lower.y, regions  # stacked, none hidden
        assert "READ-ONLY" in rendered(app.query_one("#mode-banner"))
        tabs = app.query_one("#tabs").region
        assert tabs.y >= regions[-1].bottom and tabs.height >= 10


async def test_workers_tab_shows_wakeups_abandoned_and_outcome_errors(
    dsn: str, conn: psycopg.Connection
) -> None:
    conn.execute(
        "INSERT INTO workers (id, host, pid, kinds, concurrency, heartbeat_at, wakeup_mode,"
        " wakeup_note, listen_connected, poll_interval_s, abandoned, outcome_errors,"
        " last_outcome_error) VALUES"
        " ('w:1:listen', 'h', 1, '{k}', 4, now(), 'listen', NULL, true, 1, 0, 0, NULL),"
        " ('w:2:poll', 'h', 2, '{k}', 4, now(), 'polling',"
        "  'behind a transaction pooler, no --listen-dsn', false, 0.5, 2, 3,"
        "  'permission denied for table dead_letters')"
    )
    app = JobtuiApp(dsn, "public", config=config())
    async with app.run_test(size=SIZE) as pilot:
        await goto(app, pilot, "4")
        workers = table(app, "#workers-table")
        await until(pilot, lambda: len(workers.keys) == 2)
        assert str(workers.get_cell("w:1:listen", "wake")) == "listen"
        poll = workers.get_cell("w:2:poll", "wake")
        assert poll.plain == "POLL 0.5s" and "bold" in str(poll.style)
        assert str(workers.get_cell("w:2:poll", "abandoned")) == "2"
        assert str(workers.get_cell("w:2:poll", "errors")) == "3"
        assert "bold" in str(workers.get_cell("w:2:poll", "errors").style)
        assert "bold" not in str(workers.get_cell("w:1:listen", "errors").style)
        info = rendered(app.query_one("#workers-info"))
        assert "1 polling: behind a transaction pooler, no --listen-dsn" in info
        assert "2 abandoned threads" in info
        assert "3 outcome errors, last: permission denied for table dead_letters" in info


async def test_console_on_a_standby_shows_replica_badge_and_hides_writes(
    replica_db: ReplicaDB,
) -> None:
    with psycopg.connect(replica_db.primary_dsn, autocommit=True) as conn:
        add_dead(conn, "k", "Boom: x")
    replica_db.wait_replayed()
    app = JobtuiApp(replica_db.standby_dsn, "public", config=config())
    async with app.run_test(size=(80, 24)) as pilot:
        await until(pilot, lambda: app.replica is not None and app.read_only)
        await pilot.pause(1.1)
        mode = rendered(app.query_one("#mode-banner"))
        assert re.search(r"REPLICA lag \d+\.\ds", mode), mode
        assert "READ-ONLY: replica: read-only (hot standby)" in mode
        await goto(app, pilot, "3")
        await until(pilot, lambda: len(table(app, "#dead-rows").keys) == 1)
        footer = rendered(app.query_one("Footer"))
        assert "Requeue" not in footer and "Delete" not in footer
        await goto(app, pilot, "5")
        footer = rendered(app.query_one("Footer"))
        assert "Pause/resume" not in footer and "Run now" not in footer
    with psycopg.connect(replica_db.primary_dsn, autocommit=True) as conn:
        assert conn.execute("SELECT count(*) FROM dead_letters").fetchone() == (1,)
        assert conn.execute("SELECT count(*) FROM audit_log").fetchone() == (0,)


async def test_primary_has_no_replica_badge(dsn: str, conn: psycopg.Connection) -> None:
    app = JobtuiApp(dsn, "public", config=config())
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.polls >= 2)
        assert app.replica is None and not app.read_only
        assert not app.query_one("#mode-banner").display
        assert "REPLICA" not in app.query_one(StatusBar).plain
