"""Issue 24: "why isn't this job running?" says a job's place in line by reading the rows ahead
of it, not every waiting row of its kind. The console's job detail asks it on every open
(benchmarks/console_scale.py: 15-57 ms of the Enter on Jobs' first row, at 10,000 due rows of
its kind, before why_position read an index range from the head of the line to the job).

20,000 due rows of one kind beside rows that are not in line (of a higher priority but not due,
exhausted by the row's limit or a handler's, cancel-requested, running, finished, of another
kind): each position equals a plain count in the claim's order (worker_claim's, which the
limited claim follows too since migration 0029), and the job at the head of the line is placed
by reading a handful of buffers.
"""

from __future__ import annotations

from typing import Any

import psycopg
from test_housekeeping_scale import _most_buffers
from test_tui_actions import head, open_detail, text_of
from test_tui_console import config, until

from jobtui.sql import queries
from jobtui.tui.app import JobtuiApp
from jobtui.tui.screens.detail import DetailScreen
from jobtui.tui.widgets.why import WhyView
from jobtui.why import explain

Q = queries("public")
DUE = 20_000
HEAD_MAX_BUFFERS = 50  # the whole line: ~1,000 heap pages and ~100 index pages

# Claimable rows of the kind in claim order, numbered: the reference.
REF = """
SELECT x.id, row_number() OVER (ORDER BY x.priority DESC, x.run_at, x.id) AS position
FROM jobs x
WHERE x.kind = %(kind)s AND x.finished_at IS NULL AND x.locked_at IS NULL
  AND x.run_at <= now() AND NOT x.cancel_requested
  AND x.attempts < coalesce((SELECT h.max_attempts FROM kind_handlers h
                             WHERE h.kind = x.kind), x.max_attempts)
"""


def _populate(conn: psycopg.Connection, kind: str) -> None:
    conn.execute(
        "INSERT INTO jobs (kind, payload, run_at, priority, attempts, max_attempts)"
        " SELECT %(kind)s, '{}', now() - make_interval(secs => (g * 7919) %% 5000),"
        "        CASE WHEN g %% 97 = 0 THEN 3 ELSE 0 END, g %% 4, 5"
        " FROM generate_series(1, %(n)s) g",
        {"kind": kind, "n": DUE},
    )
    conn.execute(
        "INSERT INTO jobs (kind, payload, run_at, priority, attempts, max_attempts,"
        "                  cancel_requested, locked_at, locked_by, finished_at) VALUES"
        # not due, of a higher priority; exhausted; cancel-requested; running; finished
        " (%(kind)s, '{}', now() + interval '1 hour', 9, 0, 5, false, NULL, NULL, NULL),"
        " (%(kind)s, '{}', now() - interval '2 hours', 0, 5, 5, false, NULL, NULL, NULL),"
        " (%(kind)s, '{}', now() - interval '2 hours', 0, 0, 5, true, NULL, NULL, NULL),"
        " (%(kind)s, '{}', now() - interval '2 hours', 9, 1, 5, false, now(), 'w', NULL),"
        " (%(kind)s, '{}', now() - interval '2 hours', 9, 1, 5, false, now(), 'w', now()),"
        " ('other', '{}', now() - interval '2 hours', 9, 0, 5, false, NULL, NULL, NULL)",
        {"kind": kind},
    )
    conn.execute("ANALYZE jobs")


def _params(conn: psycopg.Connection, job_id: int) -> dict[str, Any]:
    row = conn.execute("SELECT kind, run_at, priority FROM jobs WHERE id = %s", (job_id,))
    kind, run_at, priority = row.fetchone() or (None, None, None)
    return {"kind": kind, "id": job_id, "run_at": run_at, "priority": priority}


def test_positions_are_exact_and_the_head_reads_few_buffers(conn: psycopg.Connection) -> None:
    _populate(conn, "mail")
    # A handler's lower limit makes the rows with 3 attempts exhausted too.
    conn.execute(
        "INSERT INTO kind_handlers (kind, max_attempts, backoff_base_s, backoff_cap_s,"
        " declared_by) VALUES ('mail', 3, 1, 60, 'test')"
    )
    ref = dict(
        conn.execute(REF, {"kind": "mail"}).fetchall()  # type: ignore[arg-type]
    )
    assert len(ref) == DUE * 3 // 4  # attempts 3 of every fourth row: exhausted by the handler
    by_place = sorted(ref, key=lambda i: ref[i])
    for job_id in [by_place[0], by_place[1], by_place[150], by_place[-1]]:
        row = conn.execute(Q.why_position, _params(conn, job_id)).fetchone()
        assert row is not None and row[0] == ref[job_id], job_id
    head = _params(conn, by_place[0])
    conn.execute(Q.why_position, head)  # the catalogue reads of a first call stay out
    plan = conn.execute("EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) " + Q.why_position, head)
    touched = _most_buffers(plan.fetchone()[0][0]["Plan"])  # type: ignore[index]
    assert touched < HEAD_MAX_BUFFERS, touched


async def test_explain_places_the_head_of_a_long_line_first(
    conn: psycopg.Connection, aconn: psycopg.AsyncConnection
) -> None:
    """Through `why.explain`, as the job detail asks it."""
    _populate(conn, "mail")
    ref = conn.execute(REF + " ORDER BY 2 LIMIT 2", {"kind": "mail"})
    (first, _), (second, _) = ref.fetchall()
    answers = [await explain(aconn, "public", job_id) for job_id in (first, second)]
    assert [a.position if a else None for a in answers] == [1, 2]


async def test_job_detail_says_the_place_in_a_long_line(dsn: str, conn: psycopg.Connection) -> None:
    """The console's job detail (Pilot, real database) on the head of the line and on a job
    150 rows behind it, among 20,000 due rows of the kind."""
    _populate(conn, "mail")
    ref = conn.execute(REF + " ORDER BY 2", {"kind": "mail"})
    by_place = [job_id for job_id, _ in ref.fetchall()]
    app = JobtuiApp(dsn, "public", config=config())
    async with app.run_test(size=(120, 40)) as pilot:
        for place in (1, 151):
            detail = await open_detail(app, pilot, "job", by_place[place - 1])
            why = text_of(detail.query_one(WhyView))
            assert f"number {place} in line for kind 'mail'" in why, why
            assert f"#{by_place[place - 1]}  mail  " in head(detail)
            await pilot.press("escape")
            await until(pilot, lambda: not isinstance(app.screen, DetailScreen))


def test_positions_at_the_ends_of_the_priority_range(conn: psycopg.Connection) -> None:
    """Priorities are plain ints: the lowest and the highest ones, beside rows that share one
    run_at, are placed as the plain count says. The form before cc49664 negated the priority
    (`-x.priority`) and failed with "integer out of range" for every job of a kind that had a
    row at -2147483648."""
    conn.execute(
        "INSERT INTO jobs (kind, payload, run_at, priority)"
        " SELECT 'mail', '{}', date_trunc('second', now()) - interval '1 minute', p"
        " FROM unnest(ARRAY[-2147483648, 2147483647, 0, -2147483648, 2147483647, 0]) p"
    )
    ref = dict(
        conn.execute(REF, {"kind": "mail"}).fetchall()  # type: ignore[arg-type]
    )
    assert len(ref) == 6
    for job_id, place in ref.items():
        row = conn.execute(Q.why_position, _params(conn, job_id)).fetchone()
        assert row is not None and row[0] == place, job_id
