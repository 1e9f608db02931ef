"""Issue 26 item 11: the demo has long-running kinds, so an operator can practise cancelling a
running job: a real worker runs the demo's handlers, the job is cancelled from the console's
Jobs tab while it runs, and it ends cancelled."""

from __future__ import annotations

import random
import subprocess
import sys
import time

import psycopg
import pytest
from test_tui_console import config, goto, notifications, until

from jobtui.demo import data, handlers
from jobtui.enqueue import enqueue_many
from jobtui.models import JobFilter
from jobtui.tui.app import JobtuiApp
from jobtui.tui.panes.jobs import JobsPane
from jobtui.tui.screens.confirm import ConfirmScreen
from jobtui.tui.widgets.keyed_table import KeyedTable


def test_the_demo_seeds_and_trickles_long_kinds() -> None:
    rng = random.Random(7)
    seeded = {j.kind for j in data.initial_jobs(rng)}
    assert set(handlers.LONG_KINDS) <= seeded
    assert min(handlers.LONG_RUN_S) >= 30  # far longer than the 2 s refresh
    trickled = {j.kind for _ in range(3000) for j in data.trickle_jobs(rng)}
    assert set(handlers.LONG_KINDS) <= trickled
    for kind in handlers.LONG_KINDS:
        assert handlers.registry.get(kind) is not None


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["rebuild_search_index", "import_catalog"])
async def test_cancel_a_running_demo_job_from_the_console(
    dsn: str, conn: psycopg.Connection, kind: str
) -> None:
    enqueue_many(conn, [data.make_job(kind, random.Random(1))])
    worker = subprocess.Popen(
        [sys.executable, "-m", "jobtui", "worker", "--app", "jobtui.demo.handlers",
         "--dsn", dsn, "--heartbeat", "1s"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        app = JobtuiApp(dsn, "public", config=config())
        async with app.run_test(size=(80, 24)) as pilot:
            await goto(app, pilot, "2")
            pane = app.query_one(JobsPane)
            table = app.query_one("#jobs-table", KeyedTable)
            await until(pilot, lambda: len(table.keys) >= 1)
            pane.set_filter(JobFilter(states=("running",), kind=kind))
            await until(pilot, lambda: len(table.keys) == 1, timeout=30)
            await pilot.pause(2.5)  # a refresh or more later it still runs
            assert pane.states.get(table.keys[0]) == "running"
            await pilot.press("c")
            await until(pilot, lambda: isinstance(app.screen, ConfirmScreen))
            await pilot.press("1")
            await until(pilot, lambda: any("Cancel" in n for n in notifications(app)))
        # A running job's cancel reaches its handler; the worker then ends it cancelled.
        for _ in range(100):
            # By kind: the demo's handlers bring its schedules, whose ticks (a send_email at
            # each minute's start) share the table and finish on their own.
            row = conn.execute(
                "SELECT cancelled_at, finished_at FROM jobs WHERE kind = %s", (kind,)
            ).fetchone()
            if row is not None and row[0] is not None:
                break
            time.sleep(0.1)
        assert row is not None and row[0] is not None and row[1] is not None, row
        assert not any("already changed" in n for n in notifications(app))
    finally:
        worker.terminate()
        worker.wait(15)
