"""Attacks on issue 24's Jobs listing (running, then waiting in claim order, then finished rows
finished by the time the listing's first page was read) and its keyset paging (JobCursor).

Each test walks the pages as the console and the CLI do (`before=page.next_before`) and
changes the queue between two pages the way a worker, an operator or the server clock can. The
tests marked xfail(strict=True) are findings left open (a fix is not small): each one's reason
says what goes wrong; they pass, and so fail as xfail, once it is fixed.
"""

from __future__ import annotations

import psycopg
import pytest
from test_browse import S, add_job, all_pages, page_order

from jobtui import browse
from jobtui.models import JobFilter
from jobtui.sql import queries


def claim(conn: psycopg.Connection, kinds: list[str], limit: int) -> list[int]:
    """What a worker's claim takes (the worker's own statement)."""
    rows = conn.execute(
        queries().worker_claim, {"kinds": kinds, "worker": "attack-w", "limit": limit}
    ).fetchall()
    return [r[0] for r in rows]


async def test_finished_rows_dated_past_the_server_clock_are_listed_on_every_page(
    aconn: psycopg.AsyncConnection, conn: psycopg.Connection
) -> None:
    """The server clock stepped back (NTP correction, a failover to a host whose clock runs
    behind, a restore from one whose clock ran ahead): rows finished before the listing began
    carry a finished_at later than now(). The first page shows them (it has no `listed_at`
    yet); every later page compared finished_at with the first page's now() and left them out,
    so a walk with pages of 1 showed none of them, one with a page of 1000 all of them."""
    ahead = [
        add_job(conn, "k", {"n": i}, attempts=1, locked_at="now", finished_at="now")
        for i in range(3)
    ]
    conn.execute(
        "UPDATE jobs SET finished_at = now() + interval '10 minutes' WHERE id = ANY(%s)", (ahead,)
    )
    others = [add_job(conn, "k", {"w": i}) for i in range(3)]
    want = page_order(conn, ahead + others)
    assert await all_pages(aconn, JobFilter(), limit=1000) == want
    for limit in (1, 2, 4):
        assert await all_pages(aconn, JobFilter(), limit=limit) == want, limit


@pytest.mark.xfail(
    strict=True,
    reason="open: a finish whose transaction began before the first page (finished_at = its "
    "now()) but committed after it is shown twice: as running on the first page, then among "
    "the finished rows, since finished_at <= listed_at",
)
async def test_a_finish_committed_after_the_first_page_is_not_listed_twice(
    aconn: psycopg.AsyncConnection, conn: psycopg.Connection, dsn: str
) -> None:
    running = add_job(conn, "k", {}, attempts=1, locked_at="now", locked_by="w")
    waiting = [add_job(conn, "k", {"n": i}) for i in range(3)]
    with psycopg.connect(dsn) as worker:  # the worker's finish, in flight: now() is fixed here
        worker.execute("UPDATE jobs SET finished_at = now() WHERE id = %s", (running,))

        def commit_after_first(n: int) -> None:
            if n == 1:
                worker.commit()

        seen = await all_pages(aconn, JobFilter(), limit=1, between=commit_after_first)
    assert seen[0] == running
    assert sorted(seen) == sorted([running, *waiting])  # each row once


@pytest.mark.xfail(
    strict=True,
    reason="open (the order's nature): a waiting row a worker claims before the walk reaches "
    "it moves to the running rows, already passed: a row that existed throughout the walk is "
    "never shown (nor among the finished ones once it finishes: after the listing began); in "
    "id order it was shown once",
)
async def test_a_row_claimed_during_a_walk_is_still_listed(
    aconn: psycopg.AsyncConnection, conn: psycopg.Connection
) -> None:
    ids = [add_job(conn, "k", {"n": i}, priority=i % 3) for i in range(8)]
    taken: list[int] = []

    def worker_takes_the_next(n: int) -> None:
        if n == 1:
            taken.extend(claim(conn, ["k"], 2))

    seen = await all_pages(aconn, JobFilter(), limit=1, between=worker_takes_the_next)
    assert len(taken) == 2
    assert set(seen) == set(ids), f"never listed: {sorted(set(ids) - set(seen))}"


@pytest.mark.xfail(
    strict=True,
    reason="open (the order's nature): `run now` on a scheduled row the walk has not reached "
    "moves it ahead of the walk (run_at = now()): it is never listed",
)
async def test_a_row_made_ready_now_during_a_walk_is_still_listed(
    aconn: psycopg.AsyncConnection, conn: psycopg.Connection
) -> None:
    soon = [add_job(conn, "k", {"n": i}, run_at="2998-01-01") for i in range(2)]
    later = add_job(conn, "k", {}, run_at="2999-01-01")

    def operator_runs_it_now(n: int) -> None:
        if n == 1:
            assert conn.execute(queries().ops_run_now, {"ids": [later]}).fetchall()

    seen = await all_pages(aconn, JobFilter(), limit=1, between=operator_runs_it_now)
    assert set(seen) == {*soon, later}


@pytest.mark.xfail(
    strict=True,
    reason="open (documentation): 'what runs next comes first' holds for ready rows only; "
    "with no state filter a scheduled row of a higher priority, an exhausted row or a row of "
    "a paused kind is listed before the ready row the claim takes next",
)
async def test_the_first_waiting_row_listed_is_the_one_the_claim_takes(
    aconn: psycopg.AsyncConnection, conn: psycopg.Connection
) -> None:
    add_job(conn, "k", {"later": True}, priority=10, run_at="2999-01-01")
    add_job(conn, "k", {"exhausted": True}, priority=9, attempts=5, max_attempts=5)
    add_job(conn, "paused", {}, priority=8)
    conn.execute("INSERT INTO paused_kinds (kind, paused_by) VALUES ('paused', 'op')")
    add_job(conn, "k", {"next": True}, priority=0)
    page = await browse.list_jobs(aconn, S, JobFilter(), limit=1)
    assert [r.id for r in page.rows] == claim(conn, ["k", "paused"], 1)


@pytest.mark.xfail(
    strict=True,
    reason="open (bare ids): an int `before` is placed where its row stands at the next call; "
    "a waiting row claimed since is placed among the running rows (the page repeats the "
    "waiting rows from the first), a running row that failed for good (moved to dead_letters) "
    "or finished is placed among the finished rows (the page skips every waiting row). A "
    "JobCursor keeps its place; only callers that keep the bare id are affected",
)
async def test_a_bare_id_continues_after_its_row_even_when_the_row_moved(
    aconn: psycopg.AsyncConnection, conn: psycopg.Connection
) -> None:
    running = add_job(conn, "k", {}, attempts=1, locked_at="now", locked_by="w")
    later = [add_job(conn, "k", {"n": i}, priority=10 - i, run_at="2999-01-01") for i in range(2)]
    ready = add_job(conn, "k", {}, priority=0)
    assert await all_pages(aconn, JobFilter(), limit=1000) == [running, *later, ready]
    conn.execute("DELETE FROM jobs WHERE id = %s", (running,))  # failed for good: a dead letter
    after_running = await browse.list_jobs(aconn, S, JobFilter(), before=running, limit=10)
    assert claim(conn, ["k"], 1) == [ready]
    after_ready = await browse.list_jobs(aconn, S, JobFilter(), before=ready, limit=10)
    assert [r.id for r in after_running.rows] == [*later, ready]  # got []: skipped
    assert [r.id for r in after_ready.rows] == []  # got `later` again
