"""Issue 26 item 4: the detail screen stays live, as the tabs are; opened by `jobtui --job ID`
its status line leaves "connecting…"."""

from __future__ import annotations

import psycopg
from test_tui_actions import head, open_detail, text_of
from test_tui_console import config, until

from jobtui.enqueue import JobSpec, enqueue_many
from jobtui.tui.app import DeepLink, JobtuiApp
from jobtui.tui.screens.detail import DetailScreen
from jobtui.tui.widgets.status import StatusBar
from jobtui.tui.widgets.why import WhyView

JOB_ID = 10_000_123  # ids past 10,000,000 (issue 26: numbers are never cut)


def _ready_job(conn: psycopg.Connection) -> int:
    conn.execute("SELECT setval(pg_get_serial_sequence('jobs', 'id'), %s)", (JOB_ID - 1,))
    enqueue_many(conn, [JobSpec("report", {"n": 1})])
    row = conn.execute("SELECT max(id) FROM jobs").fetchone()
    assert row is not None and row[0] == JOB_ID
    return int(row[0])


async def test_detail_follows_the_job_as_it_finishes(dsn: str, conn: psycopg.Connection) -> None:
    job = _ready_job(conn)
    app = JobtuiApp(dsn, "public", config=config())
    async with app.run_test(size=(80, 24)) as pilot:
        detail = await open_detail(app, pilot, "job", job)
        assert f"#{job}  report  ready" in head(detail)
        assert "no live worker handles" in text_of(detail.query_one(WhyView))

        # A worker (here: the test) runs it and it succeeds while the screen is open.
        conn.execute(
            "UPDATE jobs SET locked_at = now() - interval '2 seconds', finished_at = now(),"
            " attempts = 1, locked_by = 'h:1:a' WHERE id = %s",
            (job,),
        )
        await until(pilot, lambda: "succeeded" in head(detail), timeout=5)
        assert "no live worker" not in text_of(detail.query_one(WhyView))
        assert app.screen is detail


async def test_detail_opened_by_deep_link_is_live(dsn: str, conn: psycopg.Connection) -> None:
    job = _ready_job(conn)
    app = JobtuiApp(dsn, "public", config=config(), opening=DeepLink(detail=("job", job)))
    async with app.run_test(size=(80, 24)) as pilot:
        await until(pilot, lambda: isinstance(app.screen, DetailScreen))
        detail = app.screen
        assert isinstance(detail, DetailScreen)
        status = detail.query_one("#detail-status", StatusBar)
        await until(pilot, lambda: detail.row is not None)
        await until(pilot, lambda: "live" in status.plain, timeout=5)
        assert "connecting" not in status.plain, status.plain
        loads = detail.loads
        await until(pilot, lambda: detail.loads >= loads + 2, timeout=5)  # it keeps reading


async def test_detail_shows_the_effective_attempt_limit(dsn: str, conn: psycopg.Connection) -> None:
    """Issue 26 item 7: a job enqueued with max_attempts 5 whose handler declares 2 reads
    "attempts 0 of 2" (the engine's one rule: the handler's declared limit wins)."""
    job = _ready_job(conn)
    assert conn.execute("SELECT max_attempts FROM jobs WHERE id = %s", (job,)).fetchone() == (5,)
    conn.execute(
        "INSERT INTO kind_handlers (kind, max_attempts, timeout_s, backoff_base_s, backoff_cap_s,"
        " declared_by) VALUES ('report', 2, NULL, 60, 3600, 'h:1:a')"
    )
    app = JobtuiApp(dsn, "public", config=config())
    async with app.run_test(size=(80, 24)) as pilot:
        detail = await open_detail(app, pilot, "job", job)
        await until(pilot, lambda: "attempts 0 of 2" in head(detail), timeout=5)
        assert "of 5" not in head(detail)
