"""Issue 24: the Jobs listing reads waiting rows in claim order (priority DESC, run_at, id),
what runs next first, keyset-paged on that order; running rows come before them and finished
rows after, newest first."""

from __future__ import annotations

import psycopg
from test_browse import S, all_pages, page_order

from jobtui import browse
from jobtui.models import JobFilter

FIRST_ID = 10_000_001  # ids past 10,000,000: wider than any page's numbers


def claim_order_fixture(conn: psycopg.Connection) -> list[int]:
    """Waiting rows over three kinds and three priorities with many run_at ties (infinite
    run_at both ways among them), a few running and finished rows; every id."""
    conn.execute("SELECT setval(pg_get_serial_sequence('jobs', 'id'), %s, false)", (FIRST_ID,))
    conn.execute(
        """INSERT INTO jobs (kind, payload, priority, run_at)
           SELECT 'k' || (g % 3), jsonb_build_object('g', g), (g % 3 - 1) * 5,
                  CASE WHEN g % 17 = 0 THEN 'infinity'::timestamptz
                       WHEN g % 19 = 0 THEN '-infinity'::timestamptz
                       ELSE '2026-01-01'::timestamptz + (g % 4) * interval '1 hour'
                            + CASE WHEN g % 5 = 0 THEN interval '1 year' ELSE '0' END END
           FROM generate_series(1, 150) g"""
    )
    conn.execute(
        "UPDATE jobs SET locked_at = now(), locked_by = 'w', attempts = 1 WHERE id % 23 = 0"
    )
    conn.execute("UPDATE jobs SET finished_at = now(), attempts = 1 WHERE id % 29 = 0")
    return [r[0] for r in conn.execute("SELECT id FROM jobs")]


async def test_waiting_rows_come_in_claim_order_and_pages_neither_skip_nor_repeat(
    aconn: psycopg.AsyncConnection, conn: psycopg.Connection
) -> None:
    ids = claim_order_fixture(conn)
    assert min(ids) > 10_000_000
    kinds = dict(conn.execute("SELECT id, kind FROM jobs").fetchall())
    waiting = {
        r[0]
        for r in conn.execute("SELECT id FROM jobs WHERE finished_at IS NULL AND locked_at IS NULL")
    }
    for flt, want in (
        (JobFilter(), page_order(conn, ids)),
        (JobFilter(kind="k1"), page_order(conn, (i for i in ids if kinds[i] == "k1"))),
        (JobFilter(states=("ready", "scheduled")), page_order(conn, waiting)),
    ):
        assert len(want) > 40
        for limit in (2, 7, 50, 1000):
            got = await all_pages(aconn, flt, limit=limit)
            assert got == want, (flt, limit)
    # What runs next comes first: the first waiting row shown is the one the claim would take.
    first = await browse.list_jobs(aconn, S, JobFilter(states=("ready",)), limit=1)
    row = conn.execute(
        "SELECT id FROM jobs WHERE finished_at IS NULL AND locked_at IS NULL AND run_at <= now()"
        " ORDER BY priority DESC, run_at, id LIMIT 1"
    ).fetchone()
    assert row is not None and [r.id for r in first.rows] == [row[0]]


async def test_a_page_continued_from_a_bare_id_starts_after_that_row(
    aconn: psycopg.AsyncConnection, conn: psycopg.Connection
) -> None:
    ids = claim_order_fixture(conn)
    want = page_order(conn, ids)
    for at in (3, 60, len(want) - 10):  # a running row, a waiting one, a finished one
        page = await browse.list_jobs(aconn, S, JobFilter(), before=int(want[at]), limit=5)
        assert [r.id for r in page.rows] == want[at + 1 : at + 6], at
    gone = await browse.list_jobs(aconn, S, JobFilter(), before=max(ids) + 1, limit=1000)
    finished = [i for i in want if i % 29 == 0]
    assert [r.id for r in gone.rows] == finished  # an id no row has: among the finished rows
