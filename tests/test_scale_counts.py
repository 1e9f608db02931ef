"""Migration 0016's per-kind state counts stay exact for every writer of `jobs`.

Each step writes `jobs` as some producer or consumer would (the article's classic SQL, the
bundled worker, operator actions, TRUNCATE) and then compares the counts the snapshot and the
Jobs tab read (`metrics_state_counts`, `browse.count_jobs`) with the rows counted one by one.
"""

from __future__ import annotations

import time
from datetime import timedelta
from typing import Any

import psycopg
import pytest
from apps.helpers import running_worker, wait_until

from jobtui import browse, enqueue, metrics, ops
from jobtui.enqueue import enqueue_many
from jobtui.models import JOB_STATES, DeadFilter, JobFilter
from jobtui.ops import Actor
from jobtui.registry import Registry
from jobtui.sql import queries
from jobtui.worker.link import Link
from jobtui.worker.statements import WorkerDB

S = "public"
STATES = ("ready", "scheduled", "retrying", "running", "exhausted", "succeeded", "cancelled")

# The states as browse's filter defines them, counted row by row: the ground truth.
TRUTH = """
SELECT j.kind,
  count(*) FILTER (WHERE j.finished_at IS NULL AND j.locked_at IS NULL AND j.run_at <= now()
                     AND j.attempts < j.max_attempts) AS ready,
  count(*) FILTER (WHERE j.finished_at IS NULL AND j.locked_at IS NULL AND j.run_at > now()
                     AND j.attempts < j.max_attempts) AS scheduled,
  count(*) FILTER (WHERE j.finished_at IS NULL AND j.locked_at IS NULL AND j.attempts > 0
                     AND j.attempts < j.max_attempts) AS retrying,
  count(*) FILTER (WHERE j.finished_at IS NULL AND j.locked_at IS NOT NULL) AS running,
  count(*) FILTER (WHERE j.finished_at IS NULL AND j.locked_at IS NULL
                     AND j.attempts >= j.max_attempts) AS exhausted,
  count(*) FILTER (WHERE j.finished_at IS NOT NULL AND j.cancelled_at IS NULL) AS succeeded,
  count(*) FILTER (WHERE j.cancelled_at IS NOT NULL) AS cancelled
FROM jobs j GROUP BY j.kind ORDER BY j.kind
"""


def truth(conn: psycopg.Connection) -> dict[str, dict[str, int]]:
    rows = conn.execute(TRUTH).fetchall()
    return {r[0]: dict(zip(STATES, map(int, r[1:]), strict=True)) for r in rows}


def counted(conn: psycopg.Connection) -> dict[str, dict[str, int]]:
    cur = conn.execute(queries(S).metrics_state_counts)
    names = [c.name for c in cur.description or []]
    out = {}
    for row in cur.fetchall():
        r = dict(zip(names, row, strict=True))
        figures = {s: int(r[s]) for s in STATES}
        if any(figures.values()):
            out[r["kind"]] = figures
    return out


def check(conn: psycopg.Connection) -> dict[str, dict[str, int]]:
    """The trigger-kept counts equal the row counts, before and after a fold."""
    want = truth(conn)
    want = {k: v for k, v in want.items() if any(v.values())}
    assert counted(conn) == want
    conn.execute("SELECT jobtui_fold_job_counts()")
    assert counted(conn) == want
    return want


def insert(conn: psycopg.Connection, kind: str, n: int, run_at: str = "now()") -> None:
    """The article's producer: a plain INSERT, defaults for everything else."""
    conn.execute(
        f"INSERT INTO jobs (kind, payload, run_at) SELECT %s, '{{}}', {run_at} "
        "FROM generate_series(1, %s)",
        (kind, n),
    )


def test_classic_producers_and_consumers_are_counted_exactly(conn: psycopg.Connection) -> None:
    assert check(conn) == {}
    insert(conn, "mail", 30)
    insert(conn, "sms", 5, "now() + interval '1 hour'")
    # Due later in the current minute: scheduled now, ready within the minute.
    insert(conn, "sms", 2, "now() + interval '2 seconds'")
    insert(conn, "sms", 3, "now() - interval '3 hours'")
    got = check(conn)
    assert got["mail"]["ready"] == 30 and got["sms"]["scheduled"] == 7

    # The article's consumer: claim one at a time, finish, fail with a retry, give up.
    claim = (
        "UPDATE jobs SET locked_at = now(), attempts = attempts + 1 WHERE id = ("
        " SELECT id FROM jobs WHERE finished_at IS NULL AND locked_at IS NULL"
        " AND run_at <= now() AND kind = %s ORDER BY run_at, id LIMIT 1 FOR UPDATE SKIP LOCKED)"
        " RETURNING id"
    )
    ids = [conn.execute(claim, ("mail",)).fetchone()[0] for _ in range(12)]  # type: ignore[index]
    check(conn)
    conn.execute("UPDATE jobs SET finished_at = now() WHERE id = ANY(%s)", (ids[:4],))
    conn.execute(
        "UPDATE jobs SET locked_at = NULL, last_error = 'boom', run_at = now() + interval '5 s'"
        " WHERE id = ANY(%s)",
        (ids[4:8],),
    )
    conn.execute(
        "UPDATE jobs SET locked_at = NULL, attempts = max_attempts WHERE id = ANY(%s)", (ids[8:10],)
    )
    got = check(conn)
    assert got["mail"]["running"] == 2 and got["mail"]["exhausted"] == 2
    assert got["mail"]["retrying"] == 4 and got["mail"]["succeeded"] == 4

    # A consumer that deletes what it did, one that renames kinds, a cancel left unfinished.
    conn.execute("DELETE FROM jobs WHERE id = ANY(%s)", (ids[10:],))
    conn.execute("UPDATE jobs SET kind = 'mail.v2' WHERE kind = 'sms' AND run_at < now()")
    conn.execute(
        "UPDATE jobs SET cancelled_at = now() WHERE id IN "
        "(SELECT id FROM jobs WHERE kind = 'mail' AND finished_at IS NULL LIMIT 3)"
    )
    conn.execute(
        "UPDATE jobs SET finished_at = now(), cancelled_at = now() WHERE id IN "
        "(SELECT id FROM jobs WHERE kind = 'mail' AND cancelled_at IS NULL"
        " AND finished_at IS NULL LIMIT 2)"
    )
    got = check(conn)
    assert got["mail"]["cancelled"] == 5 and got["mail.v2"]["ready"] == 3

    # Many rows in one statement, in one transaction with other writes, rolled back or not.
    with conn.transaction():
        insert(conn, "bulk", 5000)
        conn.execute("UPDATE jobs SET attempts = 1 WHERE kind = 'bulk' AND id % 2 = 0")
    with pytest.raises(psycopg.errors.DivisionByZero), conn.transaction():
        insert(conn, "bulk", 100)
        conn.execute("SELECT 1 / 0")
    got = check(conn)
    assert got["bulk"]["ready"] == 5000 and got["bulk"]["retrying"] == 2500

    conn.execute("TRUNCATE jobs CASCADE")
    assert check(conn) == {}
    insert(conn, "after", 2)
    assert check(conn) == {"after": dict.fromkeys(STATES, 0) | {"ready": 2}}


async def test_bundled_worker_and_operator_actions_keep_counts_exact(
    dsn: str, aconn: psycopg.AsyncConnection, conn: psycopg.Connection
) -> None:
    reg = Registry()

    @reg.handler("ok")
    async def ok(payload: Any) -> None:
        return None

    @reg.handler("bad", max_attempts=1)
    async def bad(payload: Any) -> None:
        raise RuntimeError("no")

    for i in range(40):
        await enqueue(aconn, "ok", {"i": i})
    for i in range(6):
        await enqueue(aconn, "bad", {"i": i})
    later = await enqueue(aconn, "ok", {"later": True}, delay=timedelta(hours=1))
    async with running_worker(dsn, reg):

        async def drained() -> bool:
            row = conn.execute(
                "SELECT count(*) FROM jobs WHERE finished_at IS NULL AND run_at <= now()"
            ).fetchone()
            dead = conn.execute("SELECT count(*) FROM dead_letters").fetchone()
            return row is not None and row[0] == 0 and dead is not None and dead[0] == 6

        await wait_until(drained, what="ok jobs done and bad ones dead")
    got = check(conn)
    assert got["ok"]["succeeded"] == 40 and got["ok"]["scheduled"] == 1
    assert "bad" not in got  # dead letters left `jobs`

    dead_ids = [r[0] for r in conn.execute("SELECT id FROM dead_letters").fetchall()]
    assert await ops.requeue_dead(aconn, S, dead_ids[:4], actor=Actor.current()) == 4
    assert await ops.run_now(aconn, S, [later], actor=Actor.current()) == 1
    got = check(conn)
    assert got["bad"]["ready"] == 4 and got["ok"]["ready"] == 1

    # The Jobs tab's counts read the same figures, and agree with the row-by-row count.
    for kind in (None, "ok", "bad"):
        for state in (None, *JOB_STATES):
            flt = JobFilter(states=(state,) if state else (), kind=kind)
            exact = conn.execute(
                browse.statement(S, "browse_jobs_count"), browse.job_filter_params(flt)
            ).fetchone()
            assert exact is not None
            assert await browse.count_jobs(aconn, S, flt) == exact[0], (kind, state)
    assert await browse.count_dead(aconn, S, DeadFilter()) == 2
    snap = await metrics.snapshot(aconn, S)
    assert snap.totals.ready == 5 and snap.totals.dead == 2


async def test_capped_counts_stop_at_the_cap_unless_the_counts_can_answer(
    aconn: psycopg.AsyncConnection, conn: psycopg.Connection
) -> None:
    insert(conn, "mail", 30)
    conn.execute('UPDATE jobs SET payload = \'{"to": "x@example.com"}\' WHERE id % 3 = 0')
    # Answerable from the state counts: exact whatever the cap.
    got = await browse.count_jobs_capped(aconn, S, JobFilter(kind="mail"), cap=10)
    assert (got.n, got.capped, got.text) == (30, False, "30")
    # A text search must read rows: it stops after the cap.
    got = await browse.count_jobs_capped(aconn, S, JobFilter(text="example"), cap=7)
    assert (got.n, got.capped, got.text) == (7, True, "7+")
    got = await browse.count_jobs_capped(aconn, S, JobFilter(text="example"), cap=1000)
    assert (got.n, got.capped) == (10, False)
    got = await browse.count_jobs_capped(aconn, S, JobFilter(text="example"), cap=browse.COUNT_CAP)
    assert got.text == "10"
    conn.execute(
        """INSERT INTO dead_letters (id, kind, payload, attempts, max_attempts, created_at,
               run_at, last_error, reason)
           SELECT -g, 'mail', '{}', 3, 3, now(), now(), 'E: x', 'failed'
           FROM generate_series(1, 2500) g"""
    )
    got = await browse.count_dead_capped(aconn, S, DeadFilter(error="E:"), cap=2000)
    assert (got.n, got.capped, got.text) == (2000, True, "2k+")
    got = await browse.count_dead_capped(aconn, S, DeadFilter(kind="mail"), cap=2000)
    assert (got.n, got.capped) == (2500, False)


def test_the_fold_merges_delta_rows_and_keeps_flow_of_the_window(
    conn: psycopg.Connection,
) -> None:
    with conn.transaction():  # the trigger never folds under REPEATABLE READ
        conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
        for _ in range(50):
            insert(conn, "mail", 1)
    before = conn.execute("SELECT count(*) FROM job_counts").fetchone()
    conn.execute("SELECT jobtui_fold_job_counts()")
    after = conn.execute("SELECT count(*), sum(n) FROM job_counts").fetchone()
    assert before is not None and after is not None
    assert before[0] == 50 and after == (1, 50)  # one waiting row, due now or earlier
    conn.execute(
        "INSERT INTO job_flow (minute, kind, arrived, departed) VALUES"
        " (date_trunc('minute', now(), 'UTC') - interval '8 days', 'mail', 7, 7)"
    )
    conn.execute("SELECT jobtui_fold_job_counts()")
    flow = conn.execute("SELECT kind, sum(arrived), sum(departed) FROM job_flow GROUP BY 1")
    assert flow.fetchall() == [("mail", 50, 0)]


def test_one_statement_spread_over_a_month_folds_its_own_count_rows(
    conn: psycopg.Connection,
) -> None:
    """Reminders inserted in one statement, due over the next 30 days, with no worker (whose
    housekeeper folds) and no other writer: the statement folds its own delta rows, so the
    snapshot sums O(kinds) rows at once, not one per kind and due minute until some later
    writer's 1-in-64 fold. Counts stay exact."""
    for kind in ("remind", "expire"):
        # 3,000 due minutes each (generate_series is the row's number)
        insert(conn, kind, 3000, "now() + interval '10 minutes' * generate_series")
    rows = conn.execute("SELECT count(*) FROM job_counts").fetchone()
    assert rows is not None and rows[0] < 500, rows
    assert check(conn)["remind"]["scheduled"] == 3000


async def test_dead_letter_groups_from_counts_equal_the_grouped_rows(
    aconn: psycopg.AsyncConnection, conn: psycopg.Connection
) -> None:
    def dead(kind: str, error: str, n: int, died: str = "now()") -> None:
        conn.execute(
            f"""INSERT INTO dead_letters (id, kind, payload, attempts, max_attempts, created_at,
                   run_at, last_error, reason, died_at)
               SELECT nextval(pg_get_serial_sequence('jobs', 'id')), %s, '{{}}', 3, 3, now(),
                      now(), %s || g, 'failed', {died} - g * interval '1 minute'
               FROM generate_series(1, %s) g""",
            (kind, error, n),
        )

    def grouped(flt: DeadFilter) -> list[tuple[Any, ...]]:
        params = {**browse.dead_filter_params(flt), "limit": 500}
        cur = conn.execute(browse.statement(S, "browse_dead_groups"), params)
        return [tuple(r) for r in cur.fetchall()]

    async def check_groups(flt: DeadFilter | None = None) -> list[tuple[Any, ...]]:
        flt = flt or DeadFilter()
        got = [
            (g.kind, g.error_signature, g.count, g.first_seen, g.last_seen, g.sample_id)
            for g in await browse.dead_groups(aconn, S, flt)
        ]
        assert got == grouped(flt)
        return got

    dead("mail", "Timeout after ", 30)
    dead("mail", "KeyError: 'x' at ", 5, "now() - interval '1 day'")
    dead("sms", "Timeout after ", 12)
    groups = await check_groups()
    assert [(g[0], g[2]) for g in groups] == [("mail", 30), ("sms", 12), ("mail", 5)]
    # Deletes (the oldest of a group: its first seen moves), a requeue, a kind renamed.
    conn.execute(
        "DELETE FROM dead_letters WHERE id IN (SELECT id FROM dead_letters WHERE kind = 'mail'"
        " ORDER BY died_at LIMIT 7)"
    )
    dead_ids = [r[0] for r in conn.execute("SELECT id FROM dead_letters WHERE kind = 'sms'")]
    assert await ops.requeue_dead(aconn, S, dead_ids[:4], actor=Actor.current()) == 4
    conn.execute("UPDATE dead_letters SET kind = 'sms.v2' WHERE kind = 'sms' AND id % 2 = 0")
    await check_groups()
    signature = groups[0][1]
    await check_groups(DeadFilter(kind="mail"))
    await check_groups(DeadFilter(signature=signature))
    await check_groups(DeadFilter(error="timeout"))  # needs the rows: the grouping statement
    exact = conn.execute(
        "SELECT count(*) FROM dead_letters WHERE error_signature = %s", (signature,)
    ).fetchone()
    assert exact is not None
    assert await browse.count_dead(aconn, S, DeadFilter(signature=signature)) == exact[0]
    conn.execute("TRUNCATE dead_letters")
    assert await check_groups() == []


def delta_rows(conn: psycopg.Connection) -> int:
    row = conn.execute("SELECT count(*) FROM job_counts").fetchone()
    assert row is not None
    return int(row[0])


def test_the_workers_connections_leave_the_fold_to_its_housekeeper(
    conn: psycopg.Connection,
) -> None:
    """Migrations 0019 and 0021: a connection that says `jobtui.fold_in_trigger = off` (the
    bundled worker's) never folds in a trigger; any other writer folds, 1 statement in 64, only
    once job_counts holds over 10,000 live rows, or at any size where `track_counts` is off."""
    conn.execute("SELECT set_config('jobtui.fold_in_trigger', 'off', false)")
    for _ in range(300):
        insert(conn, "mail", 1)
    assert delta_rows(conn) == 300
    conn.execute("SELECT set_config('jobtui.fold_in_trigger', '', false)")
    for _ in range(1000):  # a small table: a classic producer leaves it to the housekeeper
        insert(conn, "mail", 1)
    assert delta_rows(conn) == 1300
    conn.execute("SET track_counts = off")  # no statistics to tell the size: fold as before
    for _ in range(1000):  # folds with certainty but 1 in 10^7
        insert(conn, "mail", 1)
    assert delta_rows(conn) < 1000
    conn.execute("RESET track_counts")
    check(conn)
    before = delta_rows(conn)
    for _ in range(300):  # small again, statistics on: no fold
        insert(conn, "mail", 1)
    assert delta_rows(conn) == before + 300
    # Grow it past 10,000 live rows with delta rows that sum to nothing, and wait for the
    # statistics to say so (a backend reports them when idle, at most once a second).
    conn.execute(
        "INSERT INTO job_counts (kind, state, due, n)"
        " SELECT 'padding', 'succeeded', NULL, CASE WHEN g % 2 = 0 THEN 1 ELSE -1 END"
        " FROM generate_series(1, 10000) g"
    )
    conn.execute("SELECT pg_stat_force_next_flush()")
    deadline = time.monotonic() + 10
    while conn.execute(
        "SELECT pg_stat_get_live_tuples('job_counts'::regclass) <= 10000"
    ).fetchone() == (True,):
        assert time.monotonic() < deadline, "the statistics never counted the rows"
        time.sleep(0.1)
    conn.execute("SELECT set_config('jobtui.fold_in_trigger', 'off', false)")
    for _ in range(300):  # had it folded, 1 in 64 over 300 statements: 99 runs in 100
        insert(conn, "mail", 1)
    assert delta_rows(conn) == before + 10_600
    conn.execute("SELECT set_config('jobtui.fold_in_trigger', '', false)")
    for _ in range(1000):  # a classic producer: folds with certainty but 1 in 10^7
        insert(conn, "mail", 1)
    # Folded: the padding is gone. Once the statistics catch up with a fold the table reads
    # small again and the folds stop, so up to the loop's rows may stay (never ~12,600).
    assert delta_rows(conn) < 1000 + 100
    check(conn)


async def test_a_worker_connection_does_not_fold_and_its_writes_stay_counted(dsn: str) -> None:
    """The worker's links say `jobtui.fold_in_trigger = off` (so its claims and completions
    never wait for a fold), and what they write is still counted exactly."""
    link = Link(dsn, "test", statement_timeout=30.0)
    try:
        conn = await link.connection()
        cur = await conn.execute("SELECT current_setting('jobtui.fold_in_trigger', true)")
        assert await cur.fetchone() == ("off",)
        await enqueue_many(conn, [{"kind": "mail"} for _ in range(30)])
        db = WorkerDB(S, "w:test")
        rows = await db.claim(link, ["mail"], 20)
        await db.write_group(link, "done", [(r[0], r[3]) for r in rows[:15]])
    finally:
        await link.close()
    with psycopg.connect(dsn, autocommit=True) as plain:
        got = check(plain)
    assert got["mail"]["ready"] == 10 and got["mail"]["running"] == 5
    assert got["mail"]["succeeded"] == 15


def test_the_article_claim_walks_jobs_pending_past_no_locked_row(conn: psycopg.Connection) -> None:
    """Migration 0019: jobs_pending holds unlocked unfinished rows only (a claim writes no
    entry into it), and the article's claim reads it without stepping over locked rows."""
    insert(conn, "mail", 50)
    conn.execute(
        "UPDATE jobs SET locked_at = now() WHERE id IN (SELECT id FROM jobs ORDER BY id LIMIT 20)"
    )
    conn.execute("ANALYZE jobs")
    conn.execute("SET enable_seqscan = off")
    plan = conn.execute(
        "EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF) SELECT id FROM jobs"
        " WHERE finished_at IS NULL AND locked_at IS NULL AND run_at <= now()"
        " ORDER BY run_at LIMIT 1 FOR UPDATE SKIP LOCKED"
    ).fetchall()
    text = "\n".join(r[0] for r in plan)
    assert "jobs_pending on jobs" in text and "Rows Removed by Filter" not in text
    conn.execute("RESET enable_seqscan")
    check(conn)


async def test_every_set_of_states_counts_as_its_rows(
    aconn: psycopg.AsyncConnection, conn: psycopg.Connection
) -> None:
    """`#` and the count line of the Jobs tab read a state set (the default view is five
    states) from the state counts where a sum can answer, and the rows where it cannot: every
    one of the 128 sets, of every kind and of all, equals the rows counted one by one."""
    insert(conn, "mail", 9)
    insert(conn, "mail", 4, "now() + interval '1 hour'")
    insert(conn, "sms", 6, "now() - interval '2 hours'")
    insert(conn, "sms", 3, "now() + interval '2 hours'")
    # Retries due now and later, running rows, rows a consumer gave up on, finished rows.
    conn.execute(
        "UPDATE jobs SET attempts = 1 WHERE id IN (SELECT id FROM jobs ORDER BY id LIMIT 2)"
    )
    conn.execute(
        "UPDATE jobs SET attempts = 1 WHERE id IN"
        " (SELECT id FROM jobs WHERE run_at > now() ORDER BY id LIMIT 3)"
    )
    conn.execute(
        "UPDATE jobs SET locked_at = now(), attempts = attempts + 1 WHERE id IN"
        " (SELECT id FROM jobs WHERE attempts = 0 AND run_at <= now() ORDER BY id DESC LIMIT 4)"
    )
    conn.execute(
        "UPDATE jobs SET attempts = max_attempts WHERE id IN"
        " (SELECT id FROM jobs WHERE locked_at IS NULL AND attempts = 0 AND run_at <= now()"
        " ORDER BY id LIMIT 2)"
    )
    conn.execute(
        "UPDATE jobs SET finished_at = now() WHERE id IN"
        " (SELECT id FROM jobs WHERE locked_at IS NOT NULL ORDER BY id LIMIT 2)"
    )
    # Cancelled: finished, and asked of an unfinished row of each unfinished state.
    conn.execute(
        "UPDATE jobs SET finished_at = now(), cancelled_at = now() WHERE id IN"
        " (SELECT id FROM jobs WHERE finished_at IS NULL AND attempts = 0 AND run_at <= now()"
        " AND locked_at IS NULL ORDER BY id DESC LIMIT 2)"
    )
    for state_sql in (
        "locked_at IS NULL AND run_at <= now() AND attempts < max_attempts",
        "locked_at IS NULL AND run_at > now() AND attempts < max_attempts",
        "locked_at IS NOT NULL",
        "locked_at IS NULL AND attempts >= max_attempts",
    ):
        conn.execute(
            "UPDATE jobs SET cancelled_at = now() WHERE id IN (SELECT id FROM jobs WHERE"
            f" finished_at IS NULL AND cancelled_at IS NULL AND {state_sql} ORDER BY id LIMIT 1)"
        )
    got = check(conn)
    assert all(got["mail"][s] or got["sms"][s] for s in STATES), got
    from itertools import combinations

    answered = 0
    for size in range(len(STATES) + 1):
        for states in combinations(STATES, size):
            for kind in (None, "mail", "sms"):
                flt = JobFilter(states=states, kind=kind)
                row = conn.execute(
                    browse.statement(S, "browse_jobs_count"), browse.job_filter_params(flt)
                ).fetchone()
                assert row is not None
                assert await browse.count_jobs(aconn, S, flt) == row[0], (kind, states)
                capped = await browse.count_jobs_capped(aconn, S, flt, cap=5)
                want = (5, True) if capped.capped else (row[0], False)
                assert (capped.n, capped.capped) == want and row[0] >= capped.n, (kind, states)
                answered += await browse._counted_jobs(aconn, S, flt) is not None
    # The default view (every unfinished state) is read from the counts, exactly.
    unfinished = JobFilter(states=("ready", "scheduled", "retrying", "running", "exhausted"))
    counts_said = await browse._counted_jobs(aconn, S, unfinished)
    assert counts_said is not None
    assert (await browse.count_jobs_capped(aconn, S, unfinished, cap=5)).capped is False
    assert answered > 3 * 8  # more than the single states and no filter


async def test_finished_rows_are_read_past_a_thousand_kinds_and_an_infinite_run_at(
    aconn: psycopg.AsyncConnection, conn: psycopg.Connection
) -> None:
    """Reads of finished rows start at the newest finished id, found by a probe per kind; past
    1,000 kinds they walk from the top instead: either way every finished row is read, newest
    first. A run_at of -infinity or infinity (plain SQL allows both) is shown clamped."""
    conn.execute(
        "INSERT INTO jobs (kind, payload, finished_at) SELECT 'k' || g, '{}', now()"
        " FROM generate_series(1, 1001) g"
    )
    insert(conn, "later", 5)  # unfinished rows above every finished one
    conn.execute(
        "INSERT INTO jobs (kind, payload, run_at) VALUES ('odd', '{}', '-infinity'),"
        " ('odd', '{}', 'infinity')"
    )
    finished = [
        r[0]
        for r in conn.execute(
            "SELECT id FROM jobs WHERE finished_at IS NOT NULL ORDER BY id DESC"
        ).fetchall()
    ]
    for drop in (0, 1):  # 1,001 kinds, then 1,000
        if drop:
            conn.execute("DELETE FROM jobs WHERE kind = 'k1'")
            finished = finished[:-1]
        seen: list[int] = []
        before = None
        while True:
            page = await browse.list_jobs(
                aconn, S, JobFilter(states=("succeeded",)), before=before, limit=300
            )
            seen += [r.id for r in page.rows]
            if page.next_before is None:
                break
            before = page.next_before
        assert seen == finished
    rows = (await browse.list_jobs(aconn, S, JobFilter(kind="odd"))).rows
    assert sorted(r.run_at.year for r in rows) == [1, 9999]


# --- issue 24: counts at any horizon --------------------------------------------------------

SPREAD = """
INSERT INTO jobs (kind, payload, run_at)
SELECT 'k' || (g %% %(kinds)s), '{}', now() + %(start)s::interval + %(span)s::interval * g / %(n)s
FROM generate_series(1, %(n)s) g
"""


def waiting_rows(conn: psycopg.Connection) -> int:
    row = conn.execute("SELECT count(*) FROM job_counts WHERE state = 'waiting'").fetchone()
    assert row is not None
    return int(row[0])


def test_the_count_rows_stay_o_kinds_at_a_30_day_spread(conn: psycopg.Connection) -> None:
    """1,000 jobs due over the next 30 days, 3 kinds: at most one row per minute to the end of
    the next hour, per hour to the end of tomorrow, one for the rest and one for the past, per
    kind (0024), where per due minute (0016) it was one a job."""
    conn.execute(SPREAD, {"kinds": 3, "start": "1 second", "span": "30 days", "n": 1000})
    insert(conn, "k0", 10, "now() - interval '1 hour'")
    conn.execute("SELECT jobtui_fold_job_counts()")
    assert waiting_rows(conn) <= 3 * (1 + 120 + 48 + 1)
    check(conn)
    # Rows deleted, moved and claimed far out and near: still O(kinds), still exact.
    conn.execute("DELETE FROM jobs WHERE id % 7 = 0")
    conn.execute("UPDATE jobs SET run_at = run_at + interval '3 days' WHERE id % 5 = 0")
    conn.execute("UPDATE jobs SET locked_at = now(), attempts = 1 WHERE id % 11 = 0")
    conn.execute("SELECT jobtui_fold_job_counts()")
    assert waiting_rows(conn) <= 3 * (1 + 120 + 48 + 1)
    check(conn)


def test_counts_stay_exact_as_the_clock_reaches_coarse_rows(conn: psycopg.Connection) -> None:
    """Folds as of earlier times leave hour rows and a far row that now() has reached: the
    counts read them exactly before the next fold, and the next fold splits them exactly.
    Between folds, the article's consumer claims, retries into other hours, deletes."""
    conn.execute(SPREAD, {"kinds": 4, "start": "-3 days", "span": "33 days", "n": 4000})
    conn.execute(SPREAD, {"kinds": 2, "start": "-2 hours", "span": "4 hours", "n": 600})
    insert(conn, "k1", 3, "'infinity'")
    for step, ago in enumerate(
        (
            "3 days",
            "49 hours",
            "27 hours",
            "4 hours",
            "150 minutes",
            "61 minutes",
            "30 minutes",
            "2 minutes",
            "0 minutes",
        )
    ):
        conn.execute("SELECT jobtui_fold_job_counts_at(now() - %s::interval)", (ago,))
        assert counted(conn) == {k: v for k, v in truth(conn).items() if any(v.values())}, ago
        conn.execute(
            "UPDATE jobs SET locked_at = now(), attempts = attempts + 1 WHERE id IN (SELECT id"
            " FROM jobs WHERE locked_at IS NULL AND finished_at IS NULL AND id %% 13 = %s)",
            (step,),
        )
        conn.execute(
            "UPDATE jobs SET locked_at = NULL, run_at = run_at + interval '97 minutes'"
            " WHERE locked_at IS NOT NULL AND id % 3 = 0"
        )
        conn.execute("DELETE FROM jobs WHERE id %% 29 = %s", (step,))
        assert counted(conn) == {k: v for k, v in truth(conn).items() if any(v.values())}, ago
    check(conn)
    assert waiting_rows(conn) <= 4 * (1 + 120 + 48 + 1)


def test_a_fold_never_counts_from_the_future(conn: psycopg.Connection) -> None:
    insert(conn, "mail", 5, "now() + interval '2 hours'")
    conn.execute("SELECT jobtui_fold_job_counts_at(now() + interval '1 day')")
    assert check(conn)["mail"]["scheduled"] == 5


@pytest.mark.slow
def test_counts_stay_exact_while_writers_race_the_folds(dsn: str) -> None:
    """Writers insert, claim, retry into other hours and delete, near and 30 days out, while
    folds run as of times the clock has passed (each splitting coarse rows from the index)."""
    import random
    import threading

    stop = threading.Event()
    errors: list[BaseException] = []

    def writer(seed: int) -> None:
        rnd = random.Random(seed)
        with psycopg.connect(dsn, autocommit=True) as c:
            while not stop.is_set():
                try:
                    step = rnd.randrange(4)
                    if step == 0:
                        c.execute(
                            SPREAD,
                            {
                                "kinds": 3,
                                "start": f"-{rnd.randrange(3000)} minutes",
                                "span": "30 days",
                                "n": 40,
                            },
                        )
                    elif step == 1:
                        c.execute(
                            "UPDATE jobs SET locked_at = now(), attempts = attempts + 1"
                            " WHERE id IN (SELECT id FROM jobs WHERE locked_at IS NULL"
                            " AND finished_at IS NULL ORDER BY random() LIMIT 15"
                            " FOR UPDATE SKIP LOCKED)"
                        )
                    elif step == 2:
                        c.execute(
                            "UPDATE jobs SET locked_at = NULL, run_at = run_at"
                            " + %s * interval '1 minute' WHERE id IN (SELECT id FROM jobs"
                            " WHERE locked_at IS NOT NULL ORDER BY random() LIMIT 10"
                            " FOR UPDATE SKIP LOCKED)",
                            (rnd.randrange(-500, 3000),),
                        )
                    else:
                        c.execute(
                            "DELETE FROM jobs WHERE id IN (SELECT id FROM jobs"
                            " ORDER BY random() LIMIT 5 FOR UPDATE SKIP LOCKED)"
                        )
                except BaseException as exc:  # noqa: BLE001 - reported by the test below
                    errors.append(exc)
                    return

    def folder() -> None:
        rnd = random.Random(9)
        with psycopg.connect(dsn, autocommit=True) as c:
            while not stop.is_set():
                try:
                    c.execute(
                        "SELECT jobtui_fold_job_counts_at(now() - %s * interval '1 minute')",
                        (rnd.choice((0, 0, 1, 59, 61, 150, 1500, 3000)),),
                    )
                except BaseException as exc:  # noqa: BLE001 - reported by the test below
                    errors.append(exc)
                    return

    threads = [threading.Thread(target=writer, args=(s,)) for s in (1, 2)]
    threads.append(threading.Thread(target=folder))
    for t in threads:
        t.start()
    time.sleep(4)
    stop.set()
    for t in threads:
        t.join(30)
    assert not errors, errors
    with psycopg.connect(dsn, autocommit=True) as c:
        c.execute("SELECT jobtui_fold_job_counts_at(now() - interval '2 days')")
        assert counted(c) == {k: v for k, v in truth(c).items() if any(v.values())}
        check(c)
        assert waiting_rows(c) <= 3 * (1 + 120 + 48 + 1)
