"""Deep links: `jobtui --tab dead --filter 'kind:x'` and `jobtui --job 123` open the console
there (Pilot, against a real database); bad values are one line and a non-zero exit before
the console starts (subprocess)."""

from __future__ import annotations

import subprocess
import sys

import psycopg
import pytest
from test_tui_console import add_dead, config, rendered, until

from jobtui.models import DeadFilter, JobFilter
from jobtui.tui.app import DeepLink, JobtuiApp, deep_link
from jobtui.tui.screens.detail import DetailScreen
from jobtui.tui.widgets.keyed_table import KeyedTable


def test_deep_link_reads_tab_and_filter() -> None:
    assert deep_link(None, None) == DeepLink("overview")
    assert deep_link("Workers", None) == DeepLink("workers")
    assert deep_link("dead", "kind:export_crm") == DeepLink("dead", DeadFilter(kind="export_crm"))
    assert deep_link(None, "state:ready kind:a") == DeepLink(
        "jobs", JobFilter(states=("ready",), kind="a")
    )


async def test_tab_and_filter_open_the_dead_letters_filtered(
    dsn: str, conn: psycopg.Connection
) -> None:
    crm = add_dead(conn, "export_crm", "Timeout: crm", n=2)
    add_dead(conn, "email", "SMTP down", n=3)
    app = JobtuiApp(dsn, "public", config=config(), opening=deep_link("dead", "kind:export_crm"))
    async with app.run_test(size=(80, 24)) as pilot:
        assert app.active_tab == "dead"
        rows = app.query_one("#dead-rows", KeyedTable)
        await until(pilot, lambda: len(rows.keys) == 2)
        assert sorted(int(k) for k in rows.keys) == crm
        info = rendered(app.query_one("#dead-info"))
        assert "filter kind:export_crm" in info
        assert "email" not in rendered(rows)


async def test_filter_alone_opens_jobs_filtered(dsn: str, conn: psycopg.Connection) -> None:
    ids = insert_jobs(conn, ["a", "a", "b"])
    app = JobtuiApp(dsn, "public", config=config(), opening=deep_link(None, "kind:b"))
    async with app.run_test(size=(80, 24)) as pilot:
        assert app.active_tab == "jobs"
        table = app.query_one("#jobs-table", KeyedTable)
        await until(pilot, lambda: len(table.keys) == 1)
        assert [int(k) for k in table.keys] == [ids[2]]


def insert_jobs(conn: psycopg.Connection, kinds: list[str]) -> list[int]:
    rows = [
        conn.execute(
            "INSERT INTO jobs (kind, payload) VALUES (%s, '{}') RETURNING id", (k,)
        ).fetchone()
        for k in kinds
    ]
    return [r[0] for r in rows if r is not None]


@pytest.mark.parametrize("what", ["job", "dead"])
async def test_job_link_opens_the_detail(dsn: str, conn: psycopg.Connection, what: str) -> None:
    if what == "dead":
        row_id = add_dead(conn, "export_crm", "Timeout: crm")[0]
    else:
        row_id = insert_jobs(conn, ["report"])[0]
    app = JobtuiApp(dsn, "public", config=config(), opening=DeepLink(detail=(what, row_id)))
    async with app.run_test(size=(80, 24)) as pilot:
        await until(pilot, lambda: isinstance(app.screen, DetailScreen))
        screen = app.screen
        assert isinstance(screen, DetailScreen)
        await until(pilot, lambda: screen.row is not None)
        assert screen.row is not None and screen.row.id == row_id
        head = rendered(screen.query_one("#detail-head"))
        assert ("export_crm" if what == "dead" else "report") in head
        await pilot.press("escape")
        await until(pilot, lambda: not isinstance(app.screen, DetailScreen))
        assert app.active_tab == "overview"


def jobtui(dsn: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "jobtui", "--dsn", dsn, *args],
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["--tab", "deadletters"],
            "unknown tab 'deadletters': use one of overview, jobs, dead, workers, schedules, "
            "database",
        ),
        (
            ["--tab", "workers", "--filter", "kind:a"],
            "the Workers tab has no filter; --filter works with --tab jobs or --tab dead",
        ),
        (
            ["--tab", "jobs", "--filter", "state:bogus"],
            "--filter: unknown state 'bogus': use one of",
        ),
        (["--filter", "kind:"], "--filter: kind: needs a value, e.g. kind:something"),
        (["console", "--tab", "nope"], "unknown tab 'nope'"),
        (["--job", "999999"], "--job 999999: no job or dead letter has this id"),
        (["--job", "abc"], "argument --job: job ids are whole numbers, not 'abc'"),
    ],
)
def test_bad_links_are_one_line_and_non_zero(dsn: str, args: list[str], message: str) -> None:
    done = jobtui(dsn, *args)
    assert done.returncode != 0
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("jobtui") and message in lines[0], lines[0]
    assert done.stdout == ""


def test_good_links_pass_the_checks_and_stop_only_for_want_of_a_terminal(
    dsn: str, conn: psycopg.Connection
) -> None:
    dead = add_dead(conn, "export_crm", "Timeout: crm")[0]
    for args in (["--job", str(dead)], ["--tab", "dead", "--filter", "kind:export_crm"]):
        done = jobtui(dsn, *args)
        assert done.returncode != 0
        assert "the console needs a terminal" in done.stderr, done.stderr
