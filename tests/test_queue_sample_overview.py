"""The worker's queue sample is the Overview's figures on the same data."""

from __future__ import annotations

import psycopg

from jobtui.metrics import snapshot
from jobtui.sql import queries


async def test_the_queue_sample_equals_the_overview_totals(
    conn: psycopg.Connection, aconn: psycopg.AsyncConnection
) -> None:
    conn.execute(
        "INSERT INTO jobs (kind, payload, run_at, attempts, max_attempts)"
        " SELECT k, '{}'::jsonb, now() - make_interval(secs => i), a, m"
        " FROM (VALUES ('a', 0, 5), ('a', 1, 5), ('a', 5, 5), ('b', 3, 3), ('b', 0, 1))"
        "   v(k, a, m), generate_series(1, 4) i"
    )
    # due later (seconds from now, and next hour), and running
    conn.execute(
        "INSERT INTO jobs (kind, payload, run_at, attempts, max_attempts) VALUES"
        " ('a', '{}', now() + interval '2 seconds', 0, 5),"
        " ('b', '{}', now() + interval '2 seconds', 2, 3),"
        " ('a', '{}', now() + interval '2 hours', 0, 5)"
    )
    conn.execute(
        "UPDATE jobs SET locked_at = now(), locked_by = 'w'"
        " WHERE id IN (SELECT id FROM jobs WHERE attempts = 0 ORDER BY id LIMIT 2)"
    )
    conn.execute("DELETE FROM queue_samples")
    conn.execute(queries("public").worker_queue_sample)
    conn.execute(queries("public").worker_queue_sample)  # a second worker, same minute
    rows = conn.execute(
        "SELECT ready, scheduled, running, retrying, dead, oldest_ready_age_s FROM queue_samples"
    ).fetchall()
    snap = await snapshot(aconn, "public")
    t = snap.totals
    assert len(rows) == 1
    assert rows[0][:5] == (t.ready, t.scheduled, t.running, t.retrying, t.dead)
    assert t.exhausted == 8 and t.ready > 0 and t.scheduled >= 1
    assert snap.oldest_ready_age_s is not None and rows[0][5] is not None
    assert abs(rows[0][5] - snap.oldest_ready_age_s) < 2
