"""Issue 12 item 3: the drain estimate per kind, against controlled arrival and completion rates.

Rows are really inserted, finished and deleted (migration 0016's triggers count them per
minute); the minute an arrival or departure is filed under is then moved back where a test
needs history, which is the only thing a test cannot wait for.
"""

from __future__ import annotations

import psycopg
import pytest

from jobtui import metrics
from jobtui.models import KindFigures

S = "public"


def arrive(conn: psycopg.Connection, kind: str, n: int) -> None:
    conn.execute(
        "INSERT INTO jobs (kind, payload) SELECT %s, '{}' FROM generate_series(1, %s)", (kind, n)
    )


def finish(conn: psycopg.Connection, kind: str, n: int) -> None:
    """A classic consumer's completions: claim and finish `n` of the oldest rows."""
    conn.execute(
        "UPDATE jobs SET locked_at = now(), attempts = attempts + 1 WHERE id IN (SELECT id FROM"
        " jobs WHERE kind = %s AND finished_at IS NULL AND locked_at IS NULL ORDER BY id"
        " LIMIT %s)",
        (kind, n),
    )
    conn.execute(
        "UPDATE jobs SET finished_at = now() WHERE kind = %s AND locked_at IS NOT NULL"
        " AND finished_at IS NULL",
        (kind,),
    )


def age_flow(conn: psycopg.Connection, minutes: int) -> None:
    """File every arrival and departure so far `minutes` earlier."""
    conn.execute("SELECT jobtui_fold_job_counts()")
    conn.execute("UPDATE job_flow SET minute = minute - %s * interval '1 minute'", (minutes,))


async def figures(aconn: psycopg.AsyncConnection, kind: str, window: int = 15) -> KindFigures:
    snap = await metrics.snapshot(aconn, S, window_minutes=window)
    return next(k for k in snap.kinds if k.kind == kind)


async def test_a_draining_kind_gets_backlog_over_net_rate(
    conn: psycopg.Connection, aconn: psycopg.AsyncConnection
) -> None:
    arrive(conn, "mail", 1000)
    age_flow(conn, 30)  # the backlog arrived before the window
    arrive(conn, "mail", 150)  # 10 a minute over 15 minutes
    finish(conn, "mail", 600)  # 40 a minute
    k = await figures(aconn, "mail")
    assert k.ready == 550
    assert k.arrived_per_min == pytest.approx(10.0)
    assert k.not_draining is False
    assert k.drain_s == pytest.approx(550 / 30 * 60)  # 550 rows at a net 30 a minute
    # Over a window of 60 minutes the old arrivals count: 1150 in, 600 out, not draining.
    k = await figures(aconn, "mail", window=60)
    assert k.not_draining is True and k.drain_s is None
    assert k.arrived_per_min == pytest.approx(1150 / 60)


async def test_arrivals_that_keep_up_mean_not_draining(
    conn: psycopg.Connection, aconn: psycopg.AsyncConnection
) -> None:
    arrive(conn, "sms", 600)
    finish(conn, "sms", 300)
    k = await figures(aconn, "sms")
    assert (k.ready, k.drain_s, k.not_draining) == (300, None, True)
    assert k.arrived_per_min == pytest.approx(40.0)
    # Equal rates do not drain either.
    arrive(conn, "eq", 100)
    age_flow(conn, 20)
    arrive(conn, "eq", 50)
    finish(conn, "eq", 50)
    k = await figures(aconn, "eq")
    assert (k.ready, k.drain_s, k.not_draining) == (100, None, True)


async def test_deletes_count_as_departures_and_an_empty_kind_has_nothing_to_drain(
    conn: psycopg.Connection, aconn: psycopg.AsyncConnection
) -> None:
    arrive(conn, "del", 300)
    age_flow(conn, 60)
    # A consumer that deletes the rows it has done: 150 departures in the window.
    conn.execute("DELETE FROM jobs WHERE id IN (SELECT id FROM jobs WHERE kind = 'del' LIMIT 150)")
    k = await figures(aconn, "del")
    assert k.drain_s == pytest.approx(150 / 10 * 60) and not k.not_draining
    conn.execute("DELETE FROM jobs WHERE kind = 'del'")
    arrive(conn, "del", 1)
    finish(conn, "del", 1)
    k = await figures(aconn, "del")
    assert (k.ready, k.drain_s, k.not_draining) == (0, None, False)


async def test_the_window_edge_is_exact(
    conn: psycopg.Connection, aconn: psycopg.AsyncConnection
) -> None:
    arrive(conn, "edge", 70)
    age_flow(conn, 14)  # 14 minutes back: inside a 15-minute window (current minute + 14)
    arrive(conn, "edge2", 70)
    age_flow(conn, 1)  # edge now 15 back (outside), edge2 1 back (inside)
    snap = await metrics.snapshot(aconn, S, window_minutes=15)
    rates = {k.kind: k.arrived_per_min for k in snap.kinds}
    assert rates == {"edge": 0.0, "edge2": pytest.approx(70 / 15)}


def test_the_estimate_formula() -> None:
    assert metrics.drain_estimate(0, 5.0, 1.0) == (None, False)
    assert metrics.drain_estimate(100, 5.0, 5.0) == (None, True)
    assert metrics.drain_estimate(100, 0.0, 50.0) == (120.0, False)


async def test_the_kind_screen_shows_the_same_estimate_as_the_overview(
    conn: psycopg.Connection, aconn: psycopg.AsyncConnection
) -> None:
    from jobtui import kindinfo

    arrive(conn, "mail", 1000)
    age_flow(conn, 30)
    arrive(conn, "mail", 150)
    finish(conn, "mail", 600)
    arrive(conn, "stuck", 40)  # arrivals and no completions: not draining
    k = await figures(aconn, "mail")
    info = await kindinfo.load(aconn, S, "mail", "hour")
    assert info.drain_s == pytest.approx(k.drain_s) and info.not_draining is False
    stuck = await kindinfo.load(aconn, S, "stuck", "hour")
    assert stuck.not_draining is True and stuck.drain_s is None
