"""Migration 0026: the INSERT trigger's short path for one-row statements keeps the counts and
the flow exact, and so does every other write of a foreign writer: each state on arrival and
every transition after, one row or many at a time (an update or delete of one row as of any
state, the rows it arrived with being the short path's).

After each statement the delta rows of job_counts (no fold in between, so each still carries
its exact due minute) must sum to a recount of `jobs` per (kind, state, due), with the
retrying and cancel_open rows per kind; and job_flow must have gained, per kind, the
statement's net change of unfinished rows as arrivals (if positive) or departures (if
negative), as 0025's grouped statement wrote it.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import psycopg
import pytest

# The ground truth, in job_counts' own form: a row per (kind, state, due) and the retrying and
# cancel_open rows per kind, straight from the rows.
RECOUNT = """
WITH j AS (
  SELECT j.kind, j.run_at, j.attempts, j.finished_at, j.cancelled_at,
         jobtui_job_state(j.attempts, j.max_attempts, j.locked_at, j.finished_at,
                          j.cancelled_at) AS state
  FROM jobs j
)
SELECT j.kind, j.state, CASE WHEN j.state = 'waiting'
                             THEN date_trunc('minute', j.run_at, 'UTC') END::text, count(*)
FROM j GROUP BY 1, 2, 3
UNION ALL
SELECT j.kind, 'retrying', NULL, count(*) FROM j
WHERE j.state = 'waiting' AND j.attempts > 0 GROUP BY 1
UNION ALL
SELECT j.kind, 'cancel_open', NULL, count(*) FROM j
WHERE j.finished_at IS NULL AND j.cancelled_at IS NOT NULL GROUP BY 1
"""
COUNTED = (
    "SELECT c.kind, c.state, c.due::text, sum(c.n) FROM job_counts c"
    " GROUP BY 1, 2, 3 HAVING sum(c.n) <> 0"
)
UNFINISHED = "SELECT j.kind, count(*) FROM jobs j WHERE j.finished_at IS NULL GROUP BY 1"
FLOW = "SELECT f.kind, sum(f.arrived), sum(f.departed) FROM job_flow f GROUP BY 1"


def rows(conn: psycopg.Connection, sql: str) -> Counter[tuple[Any, ...]]:
    return Counter({tuple(r[:-1]): int(r[-1]) for r in conn.execute(sql).fetchall()})


def flow(conn: psycopg.Connection) -> dict[str, tuple[int, int]]:
    return {k: (int(a), int(d)) for k, a, d in conn.execute(FLOW).fetchall()}


def step(conn: psycopg.Connection, sql: str, params: tuple[Any, ...] = ()) -> int:
    """Run one statement of a foreign writer; check counts and flow after it; its row count."""
    before_unfinished = rows(conn, UNFINISHED)
    before_flow = flow(conn)
    cur = conn.execute(sql, params)
    assert rows(conn, COUNTED) == rows(conn, RECOUNT), sql
    after_unfinished = rows(conn, UNFINISHED)
    after_flow = flow(conn)
    for (kind,) in set(before_unfinished) | set(after_unfinished):
        net = after_unfinished[(kind,)] - before_unfinished[(kind,)]
        arrived0, departed0 = before_flow.get(kind, (0, 0))
        arrived1, departed1 = after_flow.get(kind, (0, 0))
        assert (arrived1 - arrived0, departed1 - departed0) == (max(net, 0), max(-net, 0)), (
            sql,
            kind,
        )
    return cur.rowcount


# One writer's statements, each meant once for one row (`ONE`) and once for several: an id
# list picks the rows. Every transition between the states and the retrying and cancel_open
# rows, kind renames, due times moved within and across minutes, nothing changed at all.
INSERTS = (
    "INSERT INTO jobs (kind, payload) SELECT k, '{}' FROM unnest(%s::text[]) k",
    "INSERT INTO jobs (kind, payload, run_at)"
    " SELECT k, '{}', now() + interval '2 hours' FROM unnest(%s::text[]) k",
    "INSERT INTO jobs (kind, payload, attempts)"  # retrying on arrival
    " SELECT k, '{}', 1 FROM unnest(%s::text[]) k",
    "INSERT INTO jobs (kind, payload, attempts, max_attempts)"  # exhausted on arrival
    " SELECT k, '{}', 3, 3 FROM unnest(%s::text[]) k",
    "INSERT INTO jobs (kind, payload, locked_at, attempts)"  # running
    " SELECT k, '{}', now(), 1 FROM unnest(%s::text[]) k",
    "INSERT INTO jobs (kind, payload, finished_at)"  # succeeded: neither arrives nor departs
    " SELECT k, '{}', now() FROM unnest(%s::text[]) k",
    "INSERT INTO jobs (kind, payload, finished_at, cancelled_at)"
    " SELECT k, '{}', now(), now() FROM unnest(%s::text[]) k",
    "INSERT INTO jobs (kind, payload, cancelled_at, attempts)"  # cancel_open and retrying
    " SELECT k, '{}', now(), 2 FROM unnest(%s::text[]) k",
)
UPDATES = (
    "UPDATE jobs SET locked_at = now(), attempts = attempts + 1 WHERE id = ANY(%s)",  # claim
    "UPDATE jobs SET finished_at = now() WHERE id = ANY(%s)",  # complete
    "UPDATE jobs SET finished_at = NULL, locked_at = NULL WHERE id = ANY(%s)",  # back again
    "UPDATE jobs SET locked_at = NULL, run_at = now() + interval '3 minutes',"  # a retry later
    " last_error = 'boom' WHERE id = ANY(%s)",
    "UPDATE jobs SET run_at = date_trunc('minute', run_at) WHERE id = ANY(%s)",  # same minute
    "UPDATE jobs SET run_at = run_at - interval '1 day' WHERE id = ANY(%s)",  # another minute
    "UPDATE jobs SET payload = '{\"x\": 1}' WHERE id = ANY(%s)",  # nothing counted changes
    "UPDATE jobs SET kind = kind || '.v2' WHERE id = ANY(%s)",  # a rename keeps every state
    "UPDATE jobs SET attempts = max_attempts WHERE id = ANY(%s)",  # exhausted (if waiting)
    "UPDATE jobs SET max_attempts = attempts + 5 WHERE id = ANY(%s)",  # waiting again
    "UPDATE jobs SET cancelled_at = now() WHERE id = ANY(%s)",  # cancel_open (or cancelled)
    "UPDATE jobs SET kind = 'other', cancelled_at = NULL, attempts = 1 WHERE id = ANY(%s)",
    "UPDATE jobs SET finished_at = now(), cancelled_at = now() WHERE id = ANY(%s)",
    "UPDATE jobs SET finished_at = NULL, cancelled_at = now(), locked_at = now()"
    " WHERE id = ANY(%s)",
    "UPDATE jobs SET locked_at = NULL, attempts = 0 WHERE id = ANY(%s)",
    "UPDATE jobs SET kind = 'mail' WHERE id = ANY(%s)",
)


@pytest.mark.parametrize("several", [False, True], ids=["one row", "several rows"])
def test_every_transition_by_a_foreign_writer_keeps_counts_and_flow_exact(
    conn: psycopg.Connection, several: bool
) -> None:
    # No fold in a trigger: each delta row keeps its exact due minute, so the check is exact.
    conn.execute("SET jobtui.fold_in_trigger = off")
    conn.execute("SELECT jobtui_fold_job_counts()")
    kinds = ["mail", "sms", "mail"] if several else ["mail"]
    for sql in INSERTS:
        assert step(conn, sql, (kinds,)) == len(kinds)
    all_ids = [r[0] for r in conn.execute("SELECT id FROM jobs ORDER BY id").fetchall()]
    # Each update on every row in turn (one at a time), or on slices of 3 rows of mixed states.
    for sql in UPDATES:
        if several:
            for at in range(0, len(all_ids), 3):
                step(conn, sql, (all_ids[at : at + 3],))
        else:
            for job in all_ids:
                assert step(conn, sql, ([job],)) == 1
    assert step(conn, UPDATES[0], ([-1],)) == 0  # no row: nothing written
    half = all_ids[: len(all_ids) // 2]
    if several:
        step(conn, "DELETE FROM jobs WHERE id = ANY(%s)", (half,))
    else:
        for job in half:
            step(conn, "DELETE FROM jobs WHERE id = %s", (job,))
    # The same after a fold: what the snapshot reads is the folded rows' sum.
    conn.execute("SELECT jobtui_fold_job_counts()")
    assert sum(rows(conn, COUNTED).values()) == sum(rows(conn, RECOUNT).values())


def test_a_one_row_claim_writes_one_pair_of_count_rows_and_no_flow(
    conn: psycopg.Connection,
) -> None:
    conn.execute("SET jobtui.fold_in_trigger = off")
    conn.execute("INSERT INTO jobs (kind, payload) VALUES ('mail', '{}')")
    conn.execute("SELECT jobtui_fold_job_counts()")
    flow_rows = conn.execute("SELECT count(*) FROM job_flow").fetchone()
    counts_rows = conn.execute("SELECT count(*) FROM job_counts").fetchone()
    conn.execute(
        "UPDATE jobs SET locked_at = now(), attempts = attempts + 1 WHERE id = ("
        "SELECT id FROM jobs WHERE finished_at IS NULL AND locked_at IS NULL"
        " ORDER BY id LIMIT 1 FOR UPDATE SKIP LOCKED)"
    )
    assert conn.execute("SELECT count(*) FROM job_flow").fetchone() == flow_rows
    after = conn.execute("SELECT count(*) FROM job_counts").fetchone()
    assert after is not None and counts_rows is not None and after[0] == counts_rows[0] + 2


@pytest.mark.parametrize("fold_setting", ["off", "unset"])
def test_a_delete_folds_by_the_rule_of_the_other_count_triggers(
    conn: psycopg.Connection, fold_setting: str
) -> None:
    """0024's DELETE trigger folded 1 statement in 64 in READ COMMITTED whatever the
    connection said and however small job_counts was: a worker's dead-letter move or prune (a
    DELETE, on a connection with `jobtui.fold_in_trigger = off`) waited for a fold, and a
    foreign writer's deletes folded a table of a few rows. Now neither: 600 one-row DELETEs
    (a fold among them, before: all but 1 run in 10,000) each leave their count row."""
    conn.execute("SET jobtui.fold_in_trigger = off")
    conn.execute(
        "INSERT INTO jobs (kind, payload, run_at)"
        " SELECT 'mail', '{}', now() + g * interval '1 minute' FROM generate_series(1, 600) g"
    )
    if fold_setting == "unset":  # a foreign writer; job_counts is small (a few hundred rows)
        conn.execute("RESET jobtui.fold_in_trigger")
    ids = [r[0] for r in conn.execute("SELECT id FROM jobs ORDER BY id").fetchall()]
    before = conn.execute("SELECT count(*) FROM job_counts").fetchone()
    assert before is not None
    for job in ids:
        conn.execute("DELETE FROM jobs WHERE id = %s", (job,))
    assert conn.execute("SELECT count(*) FROM job_counts").fetchone() == (before[0] + 600,)
    assert rows(conn, COUNTED) == rows(conn, RECOUNT) == Counter()
    assert flow(conn) == {"mail": (600, 600)}


DEAD = (
    "INSERT INTO dead_letters (id, kind, payload, attempts, max_attempts, created_at, run_at,"
    " reason) VALUES (%s, 'mail', '{}', 1, 1, now(), now(), 'exhausted')"
)
# A seed under which the session's next random() is below 0.05: the dead-letter trigger's
# 1-in-20 compaction then runs (setseed makes random() repeatable).
COMPACTS = 0.027


def test_a_dead_letter_written_under_repeatable_read_never_fails_on_a_compaction(
    dsn: str, conn: psycopg.Connection
) -> None:
    """dead_letter_counts' compaction under REPEATABLE READ deleted rows a concurrent
    compaction had deleted since the snapshot: 'could not serialize access due to concurrent
    delete' failed the writer's statement. Now it compacts in READ COMMITTED only."""
    conn.execute("SELECT setseed(%s)", (COMPACTS,))
    assert conn.execute("SELECT random() < 0.05").fetchone() == (True,)
    conn.execute(DEAD, (1,))
    with psycopg.connect(dsn, autocommit=True) as writer:
        writer.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
        writer.execute("SELECT count(*) FROM dead_letters")  # the snapshot
        conn.execute("SELECT setseed(%s)", (COMPACTS,))
        conn.execute(DEAD, (2,))  # compacts: deletes and rewrites the kind's rows
        writer.execute("SELECT setseed(%s)", (COMPACTS,))
        writer.execute(DEAD, (3,))  # would compact: the rows it sees are gone
        writer.execute("COMMIT")
    counted = conn.execute("SELECT sum(n) FROM dead_letter_counts WHERE kind = 'mail'")
    assert counted.fetchone() == (3,)
    conn.execute("SELECT setseed(%s)", (COMPACTS,))
    conn.execute(DEAD, (4,))  # READ COMMITTED still compacts: one row for the kind
    assert conn.execute("SELECT count(*), sum(n) FROM dead_letter_counts").fetchone() == (1, 4)
