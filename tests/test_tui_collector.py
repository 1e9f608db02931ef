"""What keeps the first and the p95 press of a key cheap at scale (issue 15 item 7), each
checked on its own against a real PostgreSQL; benchmarks/console_scale.py times them.

- The cycle collector's full walks of the heap wait until nobody waits for the screen
  (jobtui.tui.collector): start-up's objects are frozen once the first data is drawn, no full
  collection of the console's own runs while keys come, one runs once they stop, and the
  process gets its collector back when the console closes.
- The screens' CSS is read with the app's, so a first Enter does not restyle every widget.
- The job detail's "why" reads run with JIT off and leave the session's setting alone.
"""

from __future__ import annotations

import gc
import importlib
import inspect
import pkgutil
from pathlib import Path

import psycopg
from test_tui_console import SIZE, config, fresh, until
from textual.screen import Screen

import jobtui.tui.screens
from jobtui import why
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


def test_a_settle_after_release_changes_nothing() -> None:
    """A settle queued by the last refresh may run after the console's unmount has released."""
    before = gc.get_threshold()
    late = collector.Collector()
    late.release()
    late.settle()
    assert not late.settled
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


async def test_a_click_counts_as_waiting_a_mouse_moving_does_not(dsn: str) -> None:
    app = JobtuiApp(dsn, "public", config=config())
    app.collector.quiet_s = 0.3  # the tick's period too: set before the console starts
    app.collector.min_interval_s = 0.0
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.collector.settled)
        await pilot.pause(0.4)
        await pilot.hover("#status")
        gc.collect(1)
        assert app.collector.tick() is True
        await pilot.click("#status")
        gc.collect(1)
        assert app.collector.tick() is False


async def test_screens_css_is_read_with_the_app(dsn: str) -> None:
    """A screen's CSS_PATH read at its first push re-parsed the stylesheet and restyled every
    widget: ~50 ms of the first Enter on a job at 120x40. Every screen of the console that has
    its own CSS file is found here, so a new one cannot be left out of SCREEN_CSS."""
    screens = []
    for info in pkgutil.iter_modules(jobtui.tui.screens.__path__, "jobtui.tui.screens."):
        module = importlib.import_module(info.name)
        for _, cls in inspect.getmembers(module, inspect.isclass):
            if issubclass(cls, Screen) and cls.__module__ == info.name and cls.CSS_PATH:
                screens.append(cls)
    assert len(screens) >= 4  # detail, kind, confirm, export
    app = JobtuiApp(dsn, "public", config=config())
    async with app.run_test(size=SIZE) as pilot:
        await fresh(app, pilot)
        for cls in screens:
            assert isinstance(cls.CSS_PATH, str)
            path = Path(inspect.getfile(cls)).parent / cls.CSS_PATH
            assert app.stylesheet.has_source(str(path)), f"{cls.__name__}: {path} not read"


async def test_why_explains_with_jit_off_and_leaves_the_session_alone(
    dsn: str, conn: psycopg.Connection
) -> None:
    """why.explain (the detail's "why isn't it running?" and `jobtui jobs why`) runs in a
    transaction of its own with JIT off: the session's setting is untouched afterwards."""
    enqueue_many(conn, [JobSpec("email.send", {"n": 1})])
    row = conn.execute("SELECT max(id) FROM jobs").fetchone()
    assert row is not None
    job_id = row[0]
    aconn = await psycopg.AsyncConnection.connect(dsn, autocommit=True)
    try:
        cur = await aconn.execute("SHOW jit")
        session = await cur.fetchone()
        got = await why.explain(aconn, "public", job_id)
        assert got is not None and got.state == "ready" and got.position == 1
        cur = await aconn.execute("SHOW jit")
        assert await cur.fetchone() == session  # SET LOCAL: gone with its transaction
        assert aconn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
    finally:
        await aconn.close()
