"""The worker's housekeeping statements read the rows they look for, not every waiting row
(migration 0028): at 2M ready jobs each walk of jobs_pkey or jobs_pending took 3-15 s of a
worker's database time. 200,000 waiting rows beside 100,000 finished ones, with and without
statistics; each statement's plan (EXPLAIN ANALYZE, rolled back) must touch few buffers, and
each still does its work: a dead worker's jobs rescued, exhausted rows buried (by their own
limit and by a handler's lowered one), cancel-requested rows ended."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest

from jobtui.sql import queries

Q = queries("public")
WAITING, FINISHED = 200_000, 100_000
# The walks touch thousands (bury, finish_cancelled: ~2,500-3,100) to ~150,000 (rescue, when
# the statistics count finished rows' locked_at as running) buffers; the indexes a handful.
MAX_BUFFERS = 500

PARAMS: dict[str, dict[str, Any]] = {
    "worker_rescue": {
        "worker": "me",
        "lock_timeout": 300.0,
        "lost_msg": "lost",
        "lock_msg": "lock",
    },
    "worker_bury_exhausted": {"kinds": ["k1"]},
    "worker_finish_cancelled": {},
    "worker_my_jobs": {"worker": "me"},
    "worker_prune": {"retention": 86400.0},
    "worker_forget_stale_workers": {"worker": "me"},
    # the once-a-minute sample: the state counts' rows, not the waiting rows
    "worker_queue_sample": {},
}


def _populate(conn: psycopg.Connection, analysed: bool) -> dict[str, list[int]]:
    """Fresh waiting rows, old finished ones (locked_at kept, as a completion leaves it), and the
    few rows each sweep is for; ids of the latter by what should happen to them."""
    conn.execute(
        "INSERT INTO jobs (kind, payload, locked_at, locked_by, finished_at, attempts)"
        " SELECT 'k1', '{}', now() - interval '1 minute', 'w-old', now(), 1"
        " FROM generate_series(1, %s)",
        (FINISHED,),
    )
    conn.execute(
        "INSERT INTO jobs (kind, payload) SELECT 'k1', '{}' FROM generate_series(1, %s)",
        (WAITING,),
    )
    conn.execute(
        "INSERT INTO workers (id, host, pid, kinds, concurrency, heartbeat_at, heartbeat_timeout_s)"
        " VALUES ('dead', 'h', 1, '{k1}', 4, now() - interval '10 minutes', 30)"
    )
    conn.execute(
        "INSERT INTO kind_handlers (kind, max_attempts, backoff_base_s, backoff_cap_s,"
        " declared_by) VALUES ('lowered', 2, 1, 60, 'test')"
    )

    def ids(sql: str) -> list[int]:
        return [r[0] for r in conn.execute(sql + " RETURNING id").fetchall()]

    rows = {
        "rescued": ids(
            "INSERT INTO jobs (kind, payload, locked_at, locked_by, attempts)"
            " SELECT 'k1', '{}', now() - interval '10 minutes', 'dead', 1"
            " FROM generate_series(1, 3)"
        ),
        "buried": ids(
            "INSERT INTO jobs (kind, payload, attempts, max_attempts) VALUES"
            " ('k1', '{}', 3, 3), ('lowered', '{}', 2, 5), ('other', '{}', 0, 0)"
        ),
        "kept": ids(
            "INSERT INTO jobs (kind, payload, attempts, max_attempts) VALUES"
            " ('k1', '{}', 2, 3), ('lowered', '{}', 1, 5), ('lowered', '{}', 0, 5)"
        ),
        "cancelled": ids(
            "INSERT INTO jobs (kind, payload, attempts, cancel_requested)"
            " VALUES ('k1', '{}', 1, true), ('k1', '{}', 0, true)"
        ),
    }
    if analysed:
        conn.execute("ANALYZE jobs")
    return rows


def _most_buffers(plan: dict[str, Any]) -> int:
    """The most shared buffers any node of the plan touched (each counts its children)."""
    here = plan.get("Shared Hit Blocks", 0) + plan.get("Shared Read Blocks", 0)
    return max([here, *(_most_buffers(p) for p in plan.get("Plans", []))])


@pytest.mark.parametrize("analysed", [False, True], ids=["unanalysed", "analysed"])
def test_housekeeping_reads_few_buffers_among_many_waiting_rows(
    conn: psycopg.Connection, analysed: bool
) -> None:
    _populate(conn, analysed)
    for name, params in PARAMS.items():
        sql = getattr(Q, name)
        with conn.transaction(force_rollback=True):
            conn.execute(sql, params)  # the catalogue reads of a first call stay out
        with conn.transaction(force_rollback=True):
            row = conn.execute("EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) " + sql, params).fetchone()
        assert row is not None
        touched = _most_buffers(row[0][0]["Plan"])
        assert touched < MAX_BUFFERS, (name, touched)


@pytest.mark.parametrize("analysed", [False, True], ids=["unanalysed", "analysed"])
def test_housekeeping_still_does_its_work(conn: psycopg.Connection, analysed: bool) -> None:
    rows = _populate(conn, analysed)
    rescued = conn.execute(Q.worker_rescue, PARAMS["worker_rescue"]).fetchall()
    assert sorted((fate, job) for fate, job, _ in rescued) == [
        ("retry", job) for job in rows["rescued"]
    ]
    buried = conn.execute(Q.worker_bury_exhausted, PARAMS["worker_bury_exhausted"]).fetchall()
    assert sorted(r[0] for r in buried) == rows["buried"]
    ended = conn.execute(Q.worker_finish_cancelled).fetchall()
    assert sorted(r[0] for r in ended) == rows["cancelled"]
    kept = conn.execute(
        "SELECT count(*) FROM jobs"
        " WHERE id = ANY(%s) AND finished_at IS NULL AND locked_at IS NULL",
        (rows["kept"] + rows["rescued"],),
    ).fetchone()
    assert kept == (len(rows["kept"]) + len(rows["rescued"]),)
    dead = conn.execute("SELECT count(*) FROM dead_letters").fetchone()
    assert dead == (len(rows["buried"]),)


def test_a_handler_limit_below_one_is_refused(conn: psycopg.Connection) -> None:
    # jobs_waiting_tried leaves out rows never tried: only a handler limit of at least 1 keeps
    # every exhausted row in it.
    with pytest.raises(psycopg.errors.CheckViolation):
        conn.execute(
            "INSERT INTO kind_handlers (kind, max_attempts, backoff_base_s, backoff_cap_s,"
            " declared_by) VALUES ('zero', 0, 1, 60, 'test')"
        )
