"""Issue 26 item 3: with no worker writing samples, the depth and oldest-age charts say that
their history stopped, and their last point is the figure read now."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import psycopg
from test_tui_console import config, until
from test_tui_layout import screen_lines

from jobtui.enqueue import JobSpec, enqueue_many
from jobtui.tui.app import JobtuiApp
from jobtui.tui.widgets.tiles import Spark

SAMPLE = """INSERT INTO queue_samples (minute, ready, scheduled, running, retrying, dead,
                                      oldest_ready_age_s)
            VALUES (date_trunc('minute', now()) - %s * interval '1 minute', 5, 0, 0, 0, 0, 5)"""


async def test_charts_say_the_samples_stopped(dsn: str, conn: psycopg.Connection) -> None:
    old = datetime.now(UTC) - timedelta(minutes=40)
    enqueue_many(conn, [JobSpec("orphan", {"n": i}, run_at=old) for i in range(432)])
    conn.execute(SAMPLE, (20,))  # the last worker sampled 20 minutes ago, then stopped
    app = JobtuiApp(dsn, "public", config=config())
    async with app.run_test(size=(120, 40)) as pilot:
        depth = app.query_one("#s-depth", Spark)
        oldest = app.query_one("#s-oldest", Spark)
        await until(pilot, lambda: depth._values is not None and depth._values[-1] == 432)
        assert str(depth.border_subtitle) == "stopped 20m ago", depth.border_subtitle
        assert str(oldest.border_subtitle) == "stopped 20m ago", oldest.border_subtitle
        # The figure read now is the chart's last point, whatever the samples said.
        assert depth._values is not None and depth._values[-1] == 432
        assert oldest._values is not None and oldest._values[-1] >= 40 * 60

        conn.execute(SAMPLE, (0,))  # a worker samples again: the chart is current
        await until(pilot, lambda: str(depth.border_subtitle).startswith("max "))
        assert str(depth.border_subtitle) == "max 5", depth.border_subtitle  # its own samples


async def test_no_samples_at_all(dsn: str, conn: psycopg.Connection) -> None:
    enqueue_many(conn, [JobSpec("orphan", {"n": i}) for i in range(3)])
    app = JobtuiApp(dsn, "public", config=config())
    async with app.run_test(size=(80, 24)) as pilot:
        depth = app.query_one("#s-depth", Spark)
        await until(pilot, lambda: depth._values is not None and depth._values[-1] == 3)
        assert str(depth.border_subtitle) == "no worker samples", depth.border_subtitle
        await pilot.pause(0.2)
        # Whole at 80 columns, where each chart is 26 columns wide (it read "no samples (no work…").
        shown = "\n".join(screen_lines(app))
        assert shown.count("─ no worker samples ─") == 2, shown
