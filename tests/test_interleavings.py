"""Randomised interleavings of the engine's own statements, from several connections.

A seeded random driver runs claims, completions, failures (retry or burial), releases, rescues,
cancels, requeues, exhausted-row sweeps and prunes, each on one of two connections whose
transactions stay open across steps (so locks and snapshots really interleave), plus commits,
rollbacks and workers that stall (stale heartbeat) or come back. A statement that would wait
for a lock gives up after 50 ms (its transaction is rolled back, as a timed-out worker's
would be). A failure names its seed and every step before it.

After every step, on committed data: every job is in exactly one of jobs / dead_letters (or was
pruned); no job waits unlocked with a cancel request; no row has more attempts than its limit,
and rows of the kind with a handler limit carry that limit once claimed; burials have used
every attempt; no job is claimed while another attempt of it still holds it; no job is claimed
after a cancel of it committed.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from typing import Any

import psycopg
import pytest

from jobtui.sql import queries
from jobtui.worker.statements import _pairs, _rows_by_id

Q = queries("public")
WORKERS = ("w0", "w1")
KINDS = ["k1", "k2"]
LIMITS = json.dumps({"k1": 2})  # the k1 handler's max_attempts (kind_handlers); k2: the row's
N_JOBS = 3
LOST = {"lost_msg": "WorkerLost: stalled", "lock_msg": "WorkerLost: article lock"}


class Interleavings:
    """The engine's statements on connections whose transactions stay open across steps."""

    def __init__(self, dsn: str) -> None:
        self.admin = psycopg.connect(dsn, autocommit=True)
        self.admin.execute(
            "TRUNCATE jobs, dead_letters, workers, audit_log, kind_stats RESTART IDENTITY"
        )
        for w in WORKERS:
            self.admin.execute(
                "INSERT INTO workers (id, host, pid, kinds, concurrency, heartbeat_timeout_s) "
                "VALUES (%s, 'h', 1, %s, 1, 30)",
                (w, KINDS),
            )
        # The k1 handler's declaration, as a starting worker writes it: since migration 0023
        # the one rule (jobtui_max_attempts) reads the limit there, not from each claimer.
        self.admin.execute(
            "INSERT INTO kind_handlers (kind, max_attempts, backoff_base_s, backoff_cap_s, "
            "declared_by) VALUES ('k1', 2, 1, 60, 'w0') ON CONFLICT (kind) DO UPDATE "
            "SET max_attempts = 2"
        )
        self.admin.execute(
            "INSERT INTO jobs (kind, payload, max_attempts) "
            "SELECT CASE WHEN g %% 2 = 0 THEN 'k1' ELSE 'k2' END, '{}', 3 "
            "FROM generate_series(1, %s) g",
            (N_JOBS,),
        )
        self.conns = [psycopg.connect(dsn) for _ in WORKERS]
        for c in self.conns:
            c.execute("SET lock_timeout = '50ms'")
            c.commit()
        self.pending: list[list[Callable[[], None]]] = [[] for _ in WORKERS]
        self.running: dict[int, tuple[int, str]] = {}  # committed claims not yet ended
        self.held: dict[str, dict[int, int]] = {w: {} for w in WORKERS}  # what each believes
        self.cancelled: set[int] = set()
        self.pruned = 0
        self.violations: list[str] = []

    def teardown(self) -> None:
        for c in self.conns:
            c.close()
        self.admin.close()

    # ------------------------------------------------------------------ helpers

    def _run(self, i: int, sql: str, params: dict[str, Any]) -> list[tuple[Any, ...]] | None:
        """One statement in connection i's open transaction; None if it failed (rolled back)."""
        try:
            cur = self.conns[i].execute(sql, params)
            return cur.fetchall() if cur.description is not None else []
        except psycopg.Error:
            self.conns[i].rollback()
            self.pending[i] = []
            return None

    def _ended(self, i: int, job_id: int, attempt: int) -> None:
        def apply() -> None:
            if self.running.get(job_id, (None,))[0] == attempt:
                del self.running[job_id]

        self.pending[i].append(apply)

    def _mine(self, i: int, pick: int) -> tuple[int, int] | None:
        held = sorted(self.held[WORKERS[i]].items())
        return held[pick % len(held)] if held else None

    # -------------------------------------------------------------------- rules

    def claim(self, i: int, limit: int, then: bool) -> None:
        w = WORKERS[i]
        rows = self._run(
            i, Q.worker_claim, {"kinds": KINDS, "worker": w, "limit": limit, "limits": LIMITS}
        )
        for job_id, _kind, _payload, attempt, _max in rows or []:
            self.held[w][job_id] = attempt

            def apply(job_id: int = job_id, attempt: int = attempt) -> None:
                if job_id in self.running:
                    self.violations.append(f"job {job_id} claimed while {self.running[job_id]}")
                if job_id in self.cancelled:
                    self.violations.append(f"job {job_id} claimed after its cancel")
                self.running[job_id] = (attempt, w)

            self.pending[i].append(apply)
        if then:
            self.finish_transaction(i, True)

    def end_attempt(self, i: int, pick: int, how: str, then: bool) -> None:
        mine = self._mine(i, pick)
        if mine is None:
            return
        job_id, attempt = mine
        w = WORKERS[i]
        del self.held[w][job_id]
        me = {"worker": w}
        if how == "done":
            rows = self._run(i, Q.worker_complete, {**me, **_pairs([mine])})
        elif how == "release":
            params = {**me, **_pairs([mine]), "channel": "jobtui_public"}
            rows = self._run(i, Q.worker_release, params)
        else:
            limit = self.admin.execute(
                "SELECT max_attempts FROM jobs WHERE id = %s", (job_id,)
            ).fetchone()
            if limit is not None and attempt >= limit[0]:
                rows = self._run(
                    i, Q.worker_bury, {**me, **_rows_by_id([(job_id, attempt, "E: x", None)])}
                )
            else:
                rows = self._run(
                    i, Q.worker_retry, {**me, **_rows_by_id([(job_id, attempt, 0.0, "E: x", None)])}
                )
        if rows:
            self._ended(i, job_id, attempt)
        if then:
            self.finish_transaction(i, True)

    def rescue(self, i: int, then: bool) -> None:
        rows = self._run(i, Q.worker_rescue, {"worker": WORKERS[i], "lock_timeout": 3600, **LOST})
        for _fate, job_id, _kind in rows or []:

            def apply(job_id: int = job_id) -> None:
                self.running.pop(job_id, None)

            self.pending[i].append(apply)
        if then:
            self.finish_transaction(i, True)

    def cancel(self, i: int, pick: int, then: bool) -> None:
        # Mostly a job some worker runs: the case where a cancel must win over what follows.
        running = sorted(self.running) or list(range(1, N_JOBS + 1))
        job = running[pick % len(running)]
        rows = self._run(i, Q.ops_cancel_ids, {"ids": [job]})
        if rows:
            self.pending[i].append(lambda: self.cancelled.add(job))
        if then:
            self.finish_transaction(i, True)

    def requeue(self, i: int, pick: int, then: bool) -> None:
        dead = [r[0] for r in self.admin.execute("SELECT id FROM dead_letters ORDER BY id")]
        job = dead[pick % len(dead)] if dead else 1
        rows = self._run(i, Q.ops_requeue_ids, {"ids": [job]})
        if rows:
            self.pending[i].append(lambda: self.cancelled.discard(job))
        if then:
            self.finish_transaction(i, True)

    def sweep(self, i: int, then: bool) -> None:
        self._run(i, Q.worker_bury_exhausted, {"kinds": KINDS, "limits": LIMITS})
        if then:
            self.finish_transaction(i, True)

    def prune(self, i: int, then: bool) -> None:
        rows = self._run(i, Q.ops_prune_batch, {"cutoff": "infinity", "batch": 10})
        if rows:
            n = len(rows)

            def apply() -> None:
                self.pruned += n

            self.pending[i].append(apply)
        if then:
            self.finish_transaction(i, True)

    def finish_transaction(self, i: int, commit: bool) -> None:
        if commit:
            try:
                self.conns[i].commit()
            except psycopg.Error:
                self.pending[i] = []
                return
            for apply in self.pending[i]:
                apply()
        else:
            self.conns[i].rollback()
            self.held[WORKERS[i]].clear()  # a worker that rolled back forgets its claims
        self.pending[i] = []

    def heartbeat(self, w: str, alive: bool) -> None:
        """Like a worker's liveness link, the beat gives up after a lock timeout: a rescue in an
        open transaction holds the owner's `workers` row until it ends (worker_rescue)."""
        ago = "0 seconds" if alive else "1 hour"
        try:
            with self.admin.transaction():
                self.admin.execute("SET LOCAL lock_timeout = '50ms'")
                self.admin.execute(
                    "UPDATE workers SET heartbeat_at = now() - %s::interval WHERE id = %s", (ago, w)
                )
        except psycopg.errors.LockNotAvailable:
            pass  # held back by a rescue's row lock: this beat is lost, as a real one would be

    # --------------------------------------------------------------- invariants

    def promises_hold(self) -> None:
        one = lambda sql: self.admin.execute(sql).fetchone()[0]  # noqa: E731
        assert not self.violations, self.violations
        both = one("SELECT count(*) FROM jobs JOIN dead_letters USING (id)")
        total = one("SELECT (SELECT count(*) FROM jobs) + (SELECT count(*) FROM dead_letters)")
        assert both == 0 and total + self.pruned == N_JOBS, (both, total, self.pruned)
        assert (
            one(
                "SELECT count(*) FROM jobs "
                "WHERE cancel_requested AND locked_at IS NULL AND finished_at IS NULL"
            )
            == 0
        ), "a cancel-requested job waits to run again"
        assert (
            one("SELECT count(*) FROM jobs WHERE cancelled_at IS NOT NULL AND finished_at IS NULL")
            == 0
        )
        assert one("SELECT count(*) FROM jobs WHERE attempts > max_attempts") == 0
        assert (
            one(
                "SELECT count(*) FROM jobs WHERE kind = 'k1' AND attempts > 0 AND max_attempts <> 2"
            )
            == 0
        ), "the handler limit is not in the row"
        assert one("SELECT count(*) FROM dead_letters WHERE attempts > max_attempts") == 0
        assert (
            one(
                "SELECT count(*) FROM dead_letters WHERE reason = 'failed' "
                "AND attempts <> max_attempts"
            )
            == 0
        )


def random_step(m: Interleavings, rng: random.Random) -> str:
    """One step chosen at random; returns what it did, for the failure message."""
    i, then = rng.randint(0, 1), rng.random() < 0.5
    what = rng.choice(
        ["claim", "end", "rescue", "cancel", "requeue", "sweep", "prune", "finish", "beat"]
    )
    if what == "claim":
        args: tuple[Any, ...] = (i, rng.randint(1, 3), then)
        m.claim(*args)
    elif what == "end":
        args = (i, rng.randint(0, 5), rng.choice(["done", "fail", "fail", "release"]), then)
        m.end_attempt(*args)
    elif what == "rescue":
        args = (i, then)
        m.rescue(*args)
    elif what in ("cancel", "requeue"):
        args = (i, rng.randint(0, 5), then)
        getattr(m, what)(*args)
    elif what == "sweep":
        args = (i, then)
        m.sweep(*args)
    elif what == "prune":
        args = (i, then)
        m.prune(*args)
    elif what == "finish":
        args = (i, rng.random() < 0.7)
        m.finish_transaction(*args)
    else:
        args = (rng.choice(WORKERS), rng.random() < 0.5)
        m.heartbeat(*args)
    return f"{what}{args}"


@pytest.mark.parametrize("seed", range(30))
def test_interleaved_statements_keep_the_invariants(dsn: str, seed: int) -> None:
    rng = random.Random(seed)
    m = Interleavings(dsn)
    steps: list[str] = []
    try:
        for _ in range(40):
            steps.append(random_step(m, rng))
            try:
                m.promises_hold()
            except AssertionError as exc:
                raise AssertionError(f"seed {seed}, after {' → '.join(steps)}: {exc}") from None
    finally:
        m.teardown()
