"""Attacks on migration 0029 (the limited claim takes a kind's jobs in the claim order of every
kind, priority DESC, run_at, id, through jobs_claim_kind) and on `why`'s place in line for a
limited kind.
"""

from __future__ import annotations

import asyncio
import threading
import time
import uuid
from pathlib import Path

import psycopg
import pytest
from apps.basic import LEDGER_DDL
from test_attack_engine import spawn, stop, worker_argv
from test_claim_tie_order import places_and_turns
from test_roles import _login

from jobtui import enqueue_many
from jobtui.limits import KindLimit, claim_limited, sync_kind_limits
from jobtui.roles import drop_roles_sql, roles_sql
from jobtui.schema import migrate
from jobtui.schema.migrator import Migration, load_migrations
from jobtui.why import explain

S = "public"


def _0029() -> Migration:
    [m] = [m for m in load_migrations() if m.version == 29]
    return m


def test_0029_applied_under_running_workers_loses_and_repeats_no_job(
    empty_dsn: str, tmp_path: Path
) -> None:
    """A database at 0028, two real workers draining a limited kind (`capped`, 3 at once) and an
    unlimited one (`free`), with a 1 s statement_timeout: 0029 (CREATE OR REPLACE of the claim
    function) is applied in a transaction held open 2.5 s after it. The workers ride through,
    claiming with the old function until it commits: every job runs once, the limit holds."""
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        migrate(conn, S, up_to=28)
        conn.execute(LEDGER_DDL)
        conn.execute(
            "INSERT INTO jobs (kind, payload) SELECT 'capped', '{\"sleep\": 0.01}'"
            " FROM generate_series(1, 400)"
        )
        conn.execute(
            "INSERT INTO jobs (kind, payload) SELECT 'free', '{}' FROM generate_series(1, 3000)"
        )
        opts = {
            "app": "limited",
            "kinds": ["capped", "free"],
            "concurrency": 4,
            "poll_interval": 0.05,
            "heartbeat_interval": 0.5,
            "heartbeat_timeout": 5.0,
            "statement_timeout": 1.0,
        }
        procs = spawn([worker_argv(empty_dsn, opts) for _ in range(2)], tmp_path / "w.log")
        try:
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                row = conn.execute("SELECT count(*) FROM ledger").fetchone()
                if row and row[0] >= 20:
                    break
                time.sleep(0.05)
            with conn.transaction():
                conn.execute(_0029().for_schema(S))
                conn.execute(
                    "INSERT INTO jobtui_migrations (version, name) VALUES (29, %s)",
                    (_0029().name,),
                )
                conn.execute("SELECT pg_sleep(2.5)")
            deadline = time.monotonic() + 90
            while time.monotonic() < deadline:
                row = conn.execute("SELECT count(*) FROM jobs WHERE finished_at IS NULL").fetchone()
                if row == (0,):
                    break
                time.sleep(0.2)
            alive = [p.poll() is None for p in procs]
        finally:
            stop(procs)
        log = (tmp_path / "w.log").read_text(errors="replace")
        assert all(alive), log[-3000:]
        left = conn.execute(
            "SELECT kind, count(*) FROM jobs WHERE finished_at IS NULL GROUP BY kind"
        ).fetchall()
        assert left == [], (left, log[-3000:])
        assert conn.execute(
            "SELECT count(*) FROM jobs WHERE attempts <> 1 OR cancelled_at IS NOT NULL"
        ).fetchone() == (0,)
        runs = conn.execute(
            "SELECT count(*), count(DISTINCT job_id) FROM ledger l JOIN jobs j ON j.id = l.job_id"
            " WHERE j.kind = 'capped'"
        ).fetchone()
        assert runs == (400, 400), runs
        spans = conn.execute(
            "SELECT started_at, ended_at FROM ledger WHERE ended_at IS NOT NULL"
        ).fetchall()
        events = sorted([(s, 1) for s, _ in spans] + [(e, -1) for _, e in spans])
        level = peak = 0
        for _, d in events:
            level += d
            peak = max(peak, level)
        assert peak <= 3, peak


# Which claim took each job, and when. A claim writes its rows while it holds the kind's row
# (FOR UPDATE, to its commit), so the sequence's values, drawn as it writes them, order the
# claims of a kind. Neither the xid (assigned at the claim's first lock, which may be of
# another kind's row, taken before the previous claim of this kind committed) nor locked_at
# (now(), the statement's start) does.
CLAIM_LOG = """
CREATE SEQUENCE claim_seq;
CREATE TABLE claim_log (id bigint PRIMARY KEY, xid bigint NOT NULL, seq bigint NOT NULL);
CREATE FUNCTION claim_logged() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO claim_log VALUES (NEW.id, txid_current(), nextval('claim_seq'));
  RETURN NULL;
END $$;
CREATE TRIGGER claim_logged AFTER UPDATE OF locked_at ON jobs FOR EACH ROW
  WHEN (OLD.locked_at IS NULL AND NEW.locked_at IS NOT NULL) EXECUTE FUNCTION claim_logged();
"""


@pytest.mark.parametrize(
    "limits",
    [
        [KindLimit("a", concurrency=5)],
        [KindLimit("a", concurrency=3, per_worker=1), KindLimit("b", concurrency=4)],
    ],
    ids=["one-kind", "two-kinds-per-worker"],
)
def test_concurrent_limited_claims_over_ties_take_each_job_once_in_line_within_the_limits(
    dsn: str, limits: list[KindLimit]
) -> None:
    """Six sessions claim limited kinds (2 a claim) over 600 jobs of one enqueue_many (some
    updated out of heap order, some of a higher priority, some with a cancel request, some
    exhausted), finishing what they took before claiming again: no job is taken twice, no kind
    runs more than its limit nor a claimer more than its per-worker limit, and as the kinds'
    rows serialise their claims, each kind's jobs are taken in claim order overall (by claiming
    transaction): priority 2 first, then the rest in id order."""
    kinds = [k.kind for k in limits]
    cap = {k.kind: k.concurrency for k in limits}
    per_worker = {k.kind: k.per_worker for k in limits}
    with psycopg.connect(dsn, autocommit=True) as conn:
        asyncio.run(_sync(dsn, limits))
        conn.execute(CLAIM_LOG)
        enqueue_many(conn, [{"kind": kinds[n % len(kinds)], "payload": {}} for n in range(600)])
        ids = [r[0] for r in conn.execute("SELECT id FROM jobs ORDER BY id")]
        conn.execute("UPDATE jobs SET priority = 5 WHERE id % 3 = 0")
        conn.execute("UPDATE jobs SET priority = 0 WHERE id % 3 = 0")  # set back, not HOT
        conn.execute("UPDATE jobs SET priority = 2 WHERE id % 11 = 0")  # ahead in line
        cancel = set(ids[10::37])
        exhausted = set(ids[5::41]) - cancel
        conn.execute("UPDATE jobs SET cancel_requested = true WHERE id = ANY(%s)", (list(cancel),))
        conn.execute(
            "UPDATE jobs SET attempts = max_attempts WHERE id = ANY(%s)", (list(exhausted),)
        )
    taken: list[int] = []
    over: list[tuple[str, str, int]] = []
    errors: list[BaseException] = []

    def claimer(name: str) -> None:
        try:
            with psycopg.connect(dsn, autocommit=True) as c:
                idle = 0
                while idle < 40:
                    rows = c.execute(
                        "SELECT id, kind FROM jobtui_claim_limited(%s, %s, 2, 0.01)"
                        " WHERE id IS NOT NULL",
                        (kinds, name),
                    ).fetchall()
                    if not rows:
                        idle += 1
                        time.sleep(0.005)
                        continue
                    idle = 0
                    taken.extend(r[0] for r in rows)
                    for kind in kinds:
                        mine = sum(1 for r in rows if r[1] == kind)
                        if per_worker[kind] is not None and mine > per_worker[kind]:
                            over.append((name, kind, mine))
                    for kind, n in c.execute(
                        "SELECT kind, count(*) FROM jobs WHERE locked_at IS NOT NULL"
                        " AND finished_at IS NULL GROUP BY kind"
                    ).fetchall():
                        if n > cap[kind]:
                            over.append(("all", kind, n))
                    c.execute(
                        "UPDATE jobs SET finished_at = clock_timestamp() WHERE id = ANY(%s)",
                        ([r[0] for r in rows],),
                    )
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=claimer, args=(f"w{i}",)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not errors, errors
    assert over == []
    assert len(taken) == len(set(taken))
    assert set(taken) == set(ids) - cancel - exhausted
    with psycopg.connect(dsn, autocommit=True) as conn:
        for kind in kinds:
            order = conn.execute(
                "SELECT -j.priority, l.id FROM claim_log l JOIN jobs j ON j.id = l.id"
                " WHERE j.kind = %s"
                " ORDER BY min(l.seq) OVER (PARTITION BY l.xid), -j.priority, l.id",
                (kind,),
            ).fetchall()
            assert order == sorted(order), kind
            assert order[0][0] == -2, kind


async def _sync(dsn: str, limits: list[KindLimit]) -> None:
    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as a:
        await sync_kind_limits(a, S, limits)


async def test_why_places_agree_with_the_limited_claim_among_ties_of_mixed_priority(
    aconn: psycopg.AsyncConnection, conn: psycopg.Connection
) -> None:
    """A limited kind's batch sharing a run_at, with priorities that differ, a retrying job
    (attempts 1, due), an exhausted one and one with a cancel request among the ties: the claim
    (concurrency 1) takes them priority first, then by id, and why's place for each claimable
    job is the turn it is taken in; the others have none."""
    await sync_kind_limits(aconn, S, [KindLimit("lim", concurrency=1)])
    enqueue_many(conn, [{"kind": "lim", "payload": {"n": n}} for n in range(10)])
    ids = [r[0] for r in conn.execute("SELECT id FROM jobs ORDER BY id")]
    conn.execute("UPDATE jobs SET priority = 9 WHERE id = ANY(%s)", (ids[5:],))
    conn.execute("UPDATE jobs SET priority = -3 WHERE id = %s", (ids[1],))
    conn.execute("UPDATE jobs SET attempts = 1 WHERE id = %s", (ids[2],))  # a retry, due
    conn.execute("UPDATE jobs SET attempts = max_attempts WHERE id = %s", (ids[3],))
    conn.execute("UPDATE jobs SET cancel_requested = true WHERE id = %s", (ids[6],))
    places, taken = await places_and_turns(aconn, ids)
    assert taken == [*ids[5:6], *ids[7:], ids[0], ids[2], ids[4], ids[1]]
    assert [places[i] for i in taken] == list(range(1, len(taken) + 1))
    assert places[ids[3]] is None and places[ids[6]] is None


async def test_the_worker_role_granted_at_0028_still_claims_limited_kinds_after_0029(
    empty_dsn: str,
) -> None:
    """`jobtui roles` run at 0028; 0029 recreates the claim function: a login in the worker
    group declares limits (concurrency, rate) and claims them, in id order (one priority),
    without any new grant."""
    p = f"t{uuid.uuid4().hex[:8]}_"
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        migrate(conn, S, up_to=28)
        conn.execute(roles_sql(S, p))
        assert 29 in [m.version for m in migrate(conn, S)]
        name = f"{p}login_worker"
        try:
            role_dsn = _login(conn, empty_dsn, p, "worker")
            enqueue_many(conn, [{"kind": k, "payload": {}} for k in ("c", "r") for _ in range(6)])
            ids = {
                k: [
                    r[0]
                    for r in conn.execute("SELECT id FROM jobs WHERE kind = %s ORDER BY id", (k,))
                ]
                for k in ("c", "r")
            }
            async with await psycopg.AsyncConnection.connect(role_dsn, autocommit=True) as a:
                await sync_kind_limits(
                    a, S, [KindLimit("c", concurrency=2), KindLimit("r", rate=3, rate_period_s=60)]
                )
                got = await claim_limited(a, S, "w", ["c", "r"], 10)
            claimed = sorted(c[0] for c in got)
            assert claimed == sorted(ids["c"][:2] + ids["r"][:3]), got
        finally:
            conn.execute(f"DROP OWNED BY {name}")
            conn.execute(f"DROP ROLE {name}")
            conn.execute(drop_roles_sql(p))


def test_jobtui_migrate_to_0029_behind_a_reader_applies_at_once(empty_dsn: str) -> None:
    """A database at 0028; a session idles in a transaction that read `jobs` and called the
    limited claim. 0029 replaces the function only and takes no lock on jobs: `jobtui migrate`
    (0.3 s lock timeout, 1 retry) applies it behind that reader, jobs_pending_kind is left as
    it was, and a second run applies nothing."""
    from test_cli_support import run_cli

    index = "SELECT pg_get_indexdef('jobs_pending_kind'::regclass)"
    fn = "SELECT md5(prosrc) FROM pg_proc WHERE proname = 'jobtui_claim_limited'"
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        migrate(conn, S, up_to=28)
        before = conn.execute(index).fetchone(), conn.execute(fn).fetchone()
        with psycopg.connect(empty_dsn) as reader:
            reader.execute("SELECT count(*) FROM jobs")
            reader.execute("SELECT * FROM jobtui_claim_limited(ARRAY['k'], 'r', 1, 1.0)")
            proc = run_cli(
                "migrate", "--lock-timeout", "0.3s", "--lock-retries", "1", dsn=empty_dsn
            )
            assert proc.returncode == 0, (proc.stdout, proc.stderr)
            assert "0029_limited_claim_in_claim_order" in proc.stdout, proc.stdout
            reader.rollback()
        assert conn.execute(index).fetchone() == before[0]
        assert conn.execute(fn).fetchone() != before[1]
        again = run_cli("migrate", dsn=empty_dsn)
        assert again.returncode == 0 and "0029" not in again.stdout, again.stdout


async def test_a_claim_of_two_limited_kinds_keeps_each_kinds_line_priority_then_age(
    aconn: psycopg.AsyncConnection, conn: psycopg.Connection
) -> None:
    """The case 0030 (folded into 0029 and dropped) was written for: a claim of several limited
    kinds picks each kind's first room.n jobs, then keeps `want` of them all. The pick and the
    keep are now one order (priority DESC, run_at, id), so what a kind gives is the head of its
    line, and across kinds priority goes first, then age. 'b' has two older jobs; 'a' a batch
    [3, 4] whose 4 has priority 9. want 2: [a 4, b 1]; want 2 again: [b 2, a 3] (b 2 older).
    why's places (a: 4 then 3; b: 1 then 2) are the kinds' turns."""
    await sync_kind_limits(
        aconn, S, [KindLimit("a", concurrency=10), KindLimit("b", concurrency=10)]
    )
    enqueue_many(conn, [{"kind": "b", "payload": {}}, {"kind": "b", "payload": {}}])
    conn.execute("UPDATE jobs SET run_at = run_at - interval '1 minute'")  # b's are older
    enqueue_many(conn, [{"kind": "a", "payload": {}}, {"kind": "a", "payload": {}, "priority": 9}])
    a = [r[0] for r in conn.execute("SELECT id FROM jobs WHERE kind = 'a' ORDER BY id")]
    b = [r[0] for r in conn.execute("SELECT id FROM jobs WHERE kind = 'b' ORDER BY id")]
    places = {}
    for job_id in a + b:
        answer = await explain(aconn, S, job_id)
        assert answer is not None
        places[job_id] = answer.position
    assert [places[i] for i in (a[1], a[0], b[0], b[1])] == [1, 2, 1, 2]
    first = await claim_limited(aconn, S, "w", ["a", "b"], 2)
    assert sorted((c[1], c[0]) for c in first) == [("a", a[1]), ("b", b[0])], first
    second = await claim_limited(aconn, S, "w", ["a", "b"], 2)
    assert sorted((c[1], c[0]) for c in second) == [("a", a[0]), ("b", b[1])], second


async def test_a_claim_of_two_limited_kinds_with_room_for_one_takes_priority_then_age(
    aconn: psycopg.AsyncConnection, conn: psycopg.Connection
) -> None:
    """want 1 over two kinds with room: the job first in the one claim order of both kinds'
    lines. Here 'b' is older but 'a' has priority 1: a's head goes; then b's (older than a's
    next of priority 0)."""
    await sync_kind_limits(
        aconn, S, [KindLimit("a", concurrency=10), KindLimit("b", concurrency=10)]
    )
    enqueue_many(conn, [{"kind": "b", "payload": {}}])
    conn.execute("UPDATE jobs SET run_at = run_at - interval '1 minute'")
    enqueue_many(conn, [{"kind": "a", "payload": {}}, {"kind": "a", "payload": {}, "priority": 1}])
    ids = [r[0] for r in conn.execute("SELECT id FROM jobs ORDER BY id")]
    taken = []
    for _ in ids:
        got = await claim_limited(aconn, S, "w", ["a", "b"], 1)
        assert len(got) == 1, got
        taken.append(got[0][0])
    assert taken == [ids[2], ids[0], ids[1]]
