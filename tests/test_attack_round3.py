"""Round 3 attacks on migrate's locks and the worker's `jobtui.fold_in_trigger = off`.

Each test sets up what an operator would run (the article's table being migrated while others
read it, the worker behind a real PgBouncer) and checks the promise that was at risk. (The
attacks on migration 0019 itself went with that file, folded into the baseline.)
"""

from __future__ import annotations

import asyncio
import random
import threading
import time

import psycopg
import pytest
from apps.helpers import running_worker, wait_until
from test_privileges import logins  # noqa: F401 - a fixture
from test_scale_counts import counted, truth

from benchmarks.article import ARTICLE_DDL
from jobtui.registry import Registry
from jobtui.schema import load_migrations, migrate
from jobtui.sql import queries
from jobtui.worker.link import Link

S = "public"
# A reader that waits longer than this for a lock on `jobs` counts as blocked.
READER_LOCK_TIMEOUT = "1s"


def test_readers_are_not_blocked_while_migrate_analyzes_jobs(empty_dsn: str) -> None:
    """Migrate's ANALYZE of `jobs` (a second or more on a large table) runs after the commit:
    inside the migration's transaction it would hold the ACCESS EXCLUSIVE lock the migration
    took (the baseline extending the article's table; 0019's DROP INDEX when this was found)
    the whole time, so every read and write of `jobs`, the classic consumers' included, waited.

    An operator's expression index on an IMMUTABLE function that sleeps makes the ANALYZE slow
    (it evaluates the expression on its sample) and nothing else: a reader started while it
    runs must get its lock at once."""
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        conn.execute(ARTICLE_DDL)
        conn.execute("INSERT INTO jobs (kind, payload) SELECT 'k', '{}' FROM generate_series(1, 4)")
        conn.execute(
            "CREATE FUNCTION slow_key(bigint) RETURNS bigint LANGUAGE plpgsql IMMUTABLE AS "
            "$$BEGIN PERFORM pg_sleep(0.4); RETURN $1; END$$"
        )
        conn.execute("CREATE INDEX jobs_slow_key ON jobs (slow_key(id))")  # 4 rows: 1.6 s
        failures: list[BaseException] = []

        def run() -> None:
            try:
                with psycopg.connect(empty_dsn, autocommit=True) as mig:
                    migrate(mig, S)
            except Exception as exc:  # noqa: BLE001 - reported by the assertion below
                failures.append(exc)

        migrator = threading.Thread(target=run)
        migrator.start()
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            row = conn.execute(
                "SELECT 1 FROM pg_stat_activity WHERE datname = current_database() "
                "AND state = 'active' AND query ILIKE 'ANALYZE%%jobs%%'"
            ).fetchone()
            if row or not migrator.is_alive():
                break
            time.sleep(0.02)
        assert row, "migrate's ANALYZE was never seen running"
        conn.execute("SELECT set_config('lock_timeout', %s, false)", (READER_LOCK_TIMEOUT,))
        try:
            conn.execute("SELECT count(*) FROM jobs").fetchone()
            conn.execute("INSERT INTO jobs (kind, payload) VALUES ('k', '{}')")
        finally:
            migrator.join()
        assert not failures, failures
        assert conn.execute("SELECT max(version) FROM jobtui_migrations").fetchone() == (
            load_migrations()[-1].version,
        )


async def test_the_worker_sets_nothing_that_leaks_through_a_transaction_pooler(
    tx_pooled_dsn: str,
) -> None:
    """Behind PgBouncer in transaction pooling a session `SET jobtui.fold_in_trigger = off`
    stays on the server connection for whichever client gets it next (the article's producer
    would then never fold: job_counts grows without bound). The worker's links must not set it
    there; the first half shows the pooler does hand such a setting on."""
    probe = "SELECT current_setting('jobtui.fold_in_trigger', true)"
    with psycopg.connect(tx_pooled_dsn, autocommit=True, prepare_threshold=None) as leaker:
        leaker.execute("SELECT set_config('jobtui.fold_in_trigger', 'leaked', false)")
    with psycopg.connect(tx_pooled_dsn, autocommit=True, prepare_threshold=None) as client:
        seen = {client.execute(probe).fetchone()[0] for _ in range(20)}  # type: ignore[index]
        assert "leaked" in seen  # the control: a session setting does leak
        client.execute("RESET ALL")  # on this server connection only; the next ones are clean

    links = [Link(tx_pooled_dsn, f"attack {i}", statement_timeout=5.0) for i in range(3)]
    try:
        for link in links:
            await link.fetch("SELECT 1")
        with psycopg.connect(tx_pooled_dsn, autocommit=True, prepare_threshold=None) as client:
            seen = {client.execute(probe).fetchone()[0] for _ in range(50)}  # type: ignore[index]
    finally:
        for link in links:
            await link.close()
    assert "off" not in seen


@pytest.mark.parametrize("locked", [0, 5000])
def test_the_articles_claim_reads_jobs_pending_after_0019(
    conn: psycopg.Connection, locked: int
) -> None:
    """The seed article's claim (`order by run_at`) still walks jobs_pending, and with many
    locked rows it no longer steps over them (they are out of the index)."""
    conn.execute(
        "INSERT INTO jobs (kind, payload, run_at, locked_at) "
        "SELECT 'k', '{}', now() - interval '1 hour', CASE WHEN g <= %s THEN now() END "
        "FROM generate_series(1, %s) g",
        (locked, locked + 20000),
    )
    conn.execute("ANALYZE jobs")
    plan = "\n".join(
        r[0]
        for r in conn.execute(
            "EXPLAIN (ANALYZE, BUFFERS, FORMAT TEXT) "
            "select id from jobs where finished_at is null and locked_at is null "
            "and run_at <= now() order by run_at limit 1 for update skip locked"
        ).fetchall()
    )
    assert "jobs_pending" in plan, plan
    assert "Rows Removed by Filter" not in plan, plan


CLASSIC_CLAIM = """
update jobs set locked_at = now(), attempts = attempts + 1
where id = (
  select id from jobs
  where kind = 'classic' and finished_at is null and locked_at is null and run_at <= now()
  order by run_at limit 1 for update skip locked
)
returning id
"""

# Operator SQL, each in the isolation level named: pushes some waiting jobs an hour on, brings
# them back, cancels a few, deletes finished ones (what a hand-written prune would do).
OPERATOR_SQL = [
    (
        "repeatable read",
        "UPDATE jobs SET run_at = now() + interval '1 hour' "
        "WHERE id %% 7 = 0 AND finished_at IS NULL AND locked_at IS NULL AND run_at <= now()",
    ),
    (
        "serializable",
        "UPDATE jobs SET run_at = now() - interval '1 hour' "
        "WHERE id %% 7 = 0 AND finished_at IS NULL AND locked_at IS NULL AND run_at > now()",
    ),
    (
        "serializable",
        "UPDATE jobs SET cancelled_at = now(), finished_at = now() "
        "WHERE id %% 53 = 0 AND finished_at IS NULL AND locked_at IS NULL",
    ),
    ("repeatable read", "DELETE FROM jobs WHERE id %% 5 = 0 AND finished_at IS NOT NULL"),
    (
        "read committed",
        "UPDATE jobs SET attempts = 0, run_at = now() - interval '1 hour' "
        "WHERE id %% 11 = 0 AND finished_at IS NULL AND locked_at IS NULL "
        "AND attempts >= max_attempts",
    ),
]


def _classic_consumer(dsn: str, stop: threading.Event, errors: list[BaseException]) -> None:
    """The article's consumer: claim, then succeed, or fail (its last attempt stays exhausted)."""
    try:
        with psycopg.connect(dsn, autocommit=True) as c:
            while not stop.is_set():
                row = c.execute(CLASSIC_CLAIM).fetchone()
                if row is None:
                    time.sleep(0.01)
                    continue
                job_id = row[0]
                if job_id % 3 == 0:  # fails: back to waiting, an hour-old run_at (ready)
                    c.execute(
                        "update jobs set locked_at = null, last_error = 'x', "
                        "run_at = now() - interval '1 hour' where id = %s",
                        (job_id,),
                    )
                else:
                    c.execute("update jobs set finished_at = now() where id = %s", (job_id,))
    except Exception as exc:  # noqa: BLE001 - reported by the test
        errors.append(exc)


def _producer_and_operator(dsn: str, stop: threading.Event, errors: list[BaseException]) -> None:
    try:
        with psycopg.connect(dsn, autocommit=True) as c:
            i = 0
            while not stop.is_set():
                i += 1
                c.execute(
                    "INSERT INTO jobs (kind, payload, max_attempts, run_at) SELECT k, '{}', 2, "
                    "now() - interval '1 hour' FROM unnest(ARRAY['classic', 'ok', 'flaky']) k, "
                    "generate_series(1, 5)"
                )
                level, sql = OPERATOR_SQL[i % len(OPERATOR_SQL)]
                try:
                    with c.transaction():
                        c.execute(f"SET TRANSACTION ISOLATION LEVEL {level}")
                        c.execute(sql, ())
                except (psycopg.errors.SerializationFailure, psycopg.errors.DeadlockDetected):
                    pass  # an operator retries; the rolled-back statement counted nothing
                time.sleep(0.01)
    except Exception as exc:  # noqa: BLE001 - reported by the test
        errors.append(exc)


async def test_counts_stay_exact_with_every_kind_of_writer_at_once(dsn: str) -> None:
    """Two bundled workers (success, failure with back-off, exhaustion to dead letters), the
    article's producer and consumer, and an operator's UPDATE / DELETE under READ COMMITTED,
    REPEATABLE READ and SERIALIZABLE, all at once; then jobtui's counts equal the rows."""
    reg = Registry()

    @reg.handler("ok")
    async def ok(payload: object) -> None:
        return None

    @reg.handler("flaky", max_attempts=2)
    async def flaky(payload: object) -> None:
        if random.random() < 0.5:
            raise RuntimeError("flaky")

    stop = threading.Event()
    errors: list[BaseException] = []
    threads = [
        threading.Thread(target=_classic_consumer, args=(dsn, stop, errors)),
        threading.Thread(target=_producer_and_operator, args=(dsn, stop, errors)),
    ]
    async with running_worker(dsn, reg), running_worker(dsn, reg):
        for t in threads:
            t.start()
        try:
            await asyncio.sleep(5)
        finally:
            stop.set()
            for t in threads:
                t.join()
    assert not errors, errors
    with psycopg.connect(dsn, autocommit=True) as conn:
        # Retries back off by seconds: ready and scheduled differ at the minute's edge only,
        # so they are compared summed; every other state exactly.
        def merged(figures: dict[str, dict[str, int]]) -> dict[str, dict[str, int]]:
            return {
                k: {**v, "ready": v["ready"] + v["scheduled"], "scheduled": 0}
                for k, v in figures.items()
                if any(v.values())
            }

        assert merged(counted(conn)) == merged(truth(conn))
        conn.execute("SELECT jobtui_fold_job_counts()")
        assert merged(counted(conn)) == merged(truth(conn))
        n = conn.execute("SELECT count(*) FROM jobs").fetchone()
        assert n is not None and n[0] > 500, "too little happened to prove anything"
        got = truth(conn)
        assert got["ok"]["succeeded"] > 0 and got["classic"]["succeeded"] > 0


async def test_as_the_worker_role_the_link_turns_the_fold_off_and_the_housekeeper_folds(
    dsn: str,
    logins: dict[str, tuple[str, str]],  # noqa: F811 - the fixture imported above
) -> None:
    """A worker that is not the owner (roles from `jobtui roles`): its links may set the custom
    setting, its writes fire the owner's SECURITY DEFINER triggers, and its housekeeper's fold
    (the only one left on its connections) merges the delta rows."""
    link = Link(logins["worker"][1], "attack", statement_timeout=30.0)
    try:
        conn = await link.connection()
        cur = await conn.execute("SELECT current_setting('jobtui.fold_in_trigger', true)")
        assert await cur.fetchone() == ("off",)
        for _ in range(100):
            await conn.execute("INSERT INTO jobs (kind, payload) VALUES ('mail', '{}')")
        with psycopg.connect(dsn, autocommit=True) as owner:  # the worker may not read it
            before = owner.execute("SELECT count(*) FROM job_counts").fetchone()
        await link.fetch(queries(S).worker_fold_counts)
    finally:
        await link.close()
    with psycopg.connect(dsn, autocommit=True) as owner:
        after = owner.execute("SELECT count(*) FROM job_counts").fetchone()
        assert counted(owner) == {k: v for k, v in truth(owner).items() if any(v.values())}
    assert before == (100,) and after == (1,)


async def test_a_worker_with_a_long_heartbeat_still_folds_every_few_seconds(dsn: str) -> None:
    """Since 0019 the worker's writes never fold in their triggers: its housekeeper alone keeps
    job_counts small. Folding once per heartbeat let `--heartbeat 30s` leave ~18,000 delta rows
    (measured at 100k jobs), each summed by every snapshot; it folds at least every 5 s."""
    reg = Registry()

    @reg.handler("ok")
    async def ok(payload: object) -> None:
        return None

    async with running_worker(dsn, reg, heartbeat_interval=30.0, heartbeat_timeout=90.0):
        await asyncio.sleep(0.5)  # past its first fold, at start
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute("SELECT set_config('jobtui.fold_in_trigger', 'off', false)")
            for _ in range(200):  # as the worker's own links write: no fold in a trigger
                conn.execute("INSERT INTO jobs (kind, payload) VALUES ('nobody', '{}')")

            def folded() -> bool:
                row = conn.execute("SELECT count(*) FROM job_counts").fetchone()
                return row is not None and row[0] <= 2

            await wait_until(folded, timeout=8.0, what="the housekeeper's fold")
