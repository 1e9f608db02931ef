"""What keeps the first and the p95 press of a key cheap at scale (issue 15 item 7), each
checked on its own against a real PostgreSQL; benchmarks/console_scale.py times them.

- The cycle collector's full walks of the heap wait until nobody waits for the screen
  (jobtui.tui.collector): start-up's objects are frozen once the first data is drawn, no full
  collection of the console's own runs while keys come, one runs once they stop, and the
  process gets its collector back when the console closes.
"""

from __future__ import annotations

import gc

import psycopg
from test_tui_console import SIZE, config, fresh, until

from jobtui.enqueue import JobSpec, enqueue_many
from jobtui.tui import collector
from jobtui.tui.app import JobtuiApp


async def test_start_up_is_frozen_once_drawn_and_given_back_at_exit(dsn: str) -> None:
    before = gc.get_threshold()
    assert gc.get_freeze_count() == 0
    app = JobtuiApp(dsn, "public", config=config())
    async with app.run_test(size=SIZE) as pilot:
        await fresh(app, pilot)
        await until(pilot, lambda: app.collector.settled)
        assert gc.get_freeze_count() > 10_000  # modules, classes, CSS, every tab's widgets
        if collector.TUNES_THRESHOLDS:
            assert gc.get_threshold() == (
                before[0],
                collector.MIDDLE_EVERY,
                collector.OLDEST_EVERY,
            )
    assert gc.get_freeze_count() == 0
    assert gc.get_threshold() == before


async def test_no_full_collection_while_keys_come_one_when_they_stop(
    dsn: str, conn: psycopg.Connection
) -> None:
    enqueue_many(conn, [JobSpec("email.send", {"n": i}) for i in range(5)])
    app = JobtuiApp(dsn, "public", config=config())
    app.collector.min_interval_s = 0.0  # due whenever nobody waits and something is there
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.collector.settled)
        for i in range(16):  # a key every ~0.15 s for ~2.5 s: never QUIET_S without one
            gc.collect(1)  # something reaches the oldest generation: a full one is due
            await pilot.press("2" if i % 2 == 0 else "1")
            await pilot.pause(0.15)
        assert app.collector.full_collections == 0
        gc.collect(1)
        await until(pilot, lambda: app.collector.full_collections >= 1, timeout=5.0)


async def test_a_full_collection_needs_something_to_collect(dsn: str) -> None:
    app = JobtuiApp(dsn, "public", config=config())
    app.collector.quiet_s = 0.2  # the tick's period too: set before the console starts
    app.collector.min_interval_s = 0.0
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.collector.settled)
        gc.collect(1)
        app.collector.input_seen()
        assert app.collector.tick() is False  # a key just now: not while someone waits
        await pilot.pause(0.3)
        gc.collect()  # nothing has reached the oldest generation since this one
        assert app.collector.tick() is False
        gc.collect(1)
        ran = app.collector.full_collections
        assert app.collector.tick() is True
        assert app.collector.full_collections == ran + 1
