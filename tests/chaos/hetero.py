"""Heterogeneous chaos run: what an operator's ordinary week does to the engine, at once.

Usage: python tests/chaos/hetero.py [--jobs 3000] [--workers 3] [--seconds 60]

On its own embedded PostgreSQL it runs worker processes with *different* heartbeat intervals
and timeouts, restarted one by one with changed settings (a rolling deploy, SIGTERM), on plain
and async handlers, some overrunning their timeouts, some ignoring cancellation
(hetero_app.py). While it runs: operators cancel, requeue dead letters and pause kinds; a
VACUUM, a CREATE INDEX CONCURRENTLY and a long open transaction hold their locks; workers are
SIGKILLed; PostgreSQL restarts once. Then it waits for the queue to drain and checks, from the
ledger the handlers wrote themselves:

- overlapping attempts while heartbeats were current: two executions of one job at the same
  time, unless the first was a thread abandoned after its timeout or at shutdown, or its
  worker had really missed its own heartbeat timeout when the job was rescued (a trigger logs
  every heartbeat); must be 0;
- starts after a cancel committed (attempt claimed after the cancel's commit): must be 0;
- jobs run more than their effective max_attempts: must be 0;
- lost jobs (not succeeded, cancelled or dead at the end): must be 0.

Issue 25 adds: workers SIGSTOPped and SIGCONTed (by the run, and by themselves right after a
claim's reply arrived: mid-claim); a kind with a concurrency limit of 2 (`h_capped`) and one
with a rate limit (`h_metered`); an every-second schedule (`chaos_tick`); and halfway through,
a deploy that lowers `h_plain`'s max_attempts from 3 to 2. And checks:

- over a limit: moments when more than 2 `h_capped` handlers ran while none of them had been
  rescued from a worker judged dead (a limit counts a job until it is rescued) or left running
  by a worker that was stopped; and 1-second windows with more `h_metered` claims than the
  rate allows (N + N·T/period); must be 0;
- stranded: jobs left unlocked and unfinished at the end with no attempt left by the one rule
  (jobtui_max_attempts), or anything still pending; must be 0;
- ticks: each tick of the schedule enqueued once (none twice, none missed between the first
  and the last), and each tick's job accounted for like any other.
Exit status 0 when all of these are 0.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import os
import random
import signal
import subprocess
import sys
import tempfile
import threading
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import psycopg
from psycopg import conninfo

from jobtui.embedded import start_embedded
from jobtui.enqueue import enqueue_many
from jobtui.ops import Actor, cancel_jobs, pause_kind, requeue_dead, resume_kind
from jobtui.schema import migrate

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import hetero_app  # noqa: E402
from run import _connect  # noqa: E402

# (heartbeat interval, heartbeat timeout) of successive workers: a rolling deploy changes them.
SETTINGS = [(0.2, 1.5), (1.0, 6.0), (0.5, 3.0), (2.0, 10.0)]
OPERATOR = Actor("chaos-operator@hetero")
SETUP = """
CREATE TABLE chaos_cancels (job_id bigint not null, at timestamptz not null);
CREATE TABLE chaos_beats (worker text not null, at timestamptz not null, timeout_s float8);
CREATE FUNCTION chaos_beat() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO chaos_beats VALUES (NEW.id, NEW.heartbeat_at, NEW.heartbeat_timeout_s);
  RETURN NEW;
END $$;
CREATE TRIGGER chaos_beat AFTER INSERT OR UPDATE ON workers
  FOR EACH ROW EXECUTE FUNCTION chaos_beat();
"""


class Fleet:
    """Worker processes: started with the next settings, killed, or rolled (SIGTERM)."""

    def __init__(self, dsn: str, env: dict[str, str], log_dir: Path) -> None:
        self.dsn, self.env = dsn, env
        self.log = open(log_dir / "workers.log", "ab")  # noqa: SIM115
        self.procs: list[subprocess.Popen[bytes]] = []
        self.stopping: list[subprocess.Popen[bytes]] = []
        self.settings = itertools.cycle(SETTINGS)
        self.killed: dict[int, datetime] = {}
        self.terminated: dict[int, datetime] = {}
        self.stopped = False

        self.frozen: dict[int, float] = {}  # pid -> monotonic time to send SIGCONT
        self.freezes: list[tuple[int, datetime, float, bool]] = []  # pid, at, seconds, self

    def start(self) -> None:
        beat, timeout = next(self.settings)
        cmd = [sys.executable, str(HERE / "run_worker.py"), self.dsn, "hetero_app"]
        cmd += [str(beat), str(timeout)]
        self.procs.append(
            subprocess.Popen(cmd, env=self.env, stdout=self.log, stderr=subprocess.STDOUT)
        )

    def kill_one(self, now: datetime) -> None:
        victim = random.choice(self.procs)
        victim.send_signal(signal.SIGKILL)
        victim.wait()
        self.killed[victim.pid] = now
        self.procs.remove(victim)
        self.start()

    def roll_one(self, now: datetime) -> None:
        """SIGTERM the oldest worker (it drains on its own) and start one with new settings."""
        oldest = self.procs.pop(0)
        oldest.send_signal(signal.SIGTERM)
        self.terminated[oldest.pid] = now
        self.stopping.append(oldest)
        self.start()

    def freeze_one(self, now: datetime) -> None:
        """SIGSTOP a running worker for 0.5-4 s (a VM pause, a network split)."""
        live = [p for p in self.procs if p.pid not in self.frozen and p.poll() is None]
        if live:
            victim = random.choice(live)
            seconds = random.uniform(0.5, 4.0)
            victim.send_signal(signal.SIGSTOP)
            self.frozen[victim.pid] = time.monotonic() + seconds
            self.freezes.append((victim.pid, now, seconds, False))

    def thaw(self, now: datetime) -> None:
        """SIGCONT workers whose freeze is over; notice workers that stopped themselves
        mid-claim (CHAOS_FREEZE_IN_CLAIM) and give them 0.3-3 s."""
        t = time.monotonic()
        for p in self.procs + self.stopping:
            if p.pid in self.frozen:
                if t >= self.frozen[p.pid]:
                    del self.frozen[p.pid]
                    _cont(p)
            elif _stopped(p.pid):
                seconds = random.uniform(0.3, 3.0)
                self.frozen[p.pid] = t + seconds
                self.freezes.append((p.pid, now, seconds, True))

    def stop(self) -> None:
        if self.stopped:
            return
        self.stopped = True
        for p in self.procs + self.stopping:
            _cont(p)
        for p in self.procs + self.stopping:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in self.procs + self.stopping:
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        self.log.close()


def _stopped(pid: int) -> bool:
    """Whether the process is stopped (SIGSTOP): state T in /proc/PID/stat."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] in ("T", "t")


def _cont(p: subprocess.Popen[bytes]) -> None:
    if p.poll() is None:
        p.send_signal(signal.SIGCONT)


def _hold_locks(dsn: str, stop: threading.Event, log: list[str]) -> list[threading.Thread]:
    """A long open transaction, a CREATE INDEX CONCURRENTLY (which waits for it, holding
    SHARE UPDATE EXCLUSIVE on jobs all that time, so every ANALYZE is blocked) and VACUUMs,
    in threads."""

    def long_transaction() -> None:
        with psycopg.connect(dsn, connect_timeout=3) as conn:
            # REPEATABLE READ keeps its snapshot: VACUUM cannot clean behind it, and the
            # CREATE INDEX CONCURRENTLY below waits for it (holding its lock all that time).
            conn.isolation_level = psycopg.IsolationLevel.REPEATABLE_READ
            conn.execute("SELECT count(*) FROM jobs").fetchone()
            log.append("long transaction open")
            stop.wait(8.0)
            conn.rollback()
        log.append("long transaction closed")

    def index_concurrently() -> None:
        time.sleep(0.5)
        with _connect(dsn) as conn:
            conn.execute("CREATE INDEX CONCURRENTLY chaos_cic ON jobs (kind, priority)")
            log.append("CREATE INDEX CONCURRENTLY done")
            conn.execute("DROP INDEX CONCURRENTLY chaos_cic")

    def vacuums() -> None:
        while not stop.wait(2.0):
            try:
                with _connect(dsn) as conn:
                    conn.execute("VACUUM jobs")
                log.append("VACUUM")
            except psycopg.Error:
                pass

    def guarded(work: Any) -> Any:
        def run() -> None:
            try:
                work()
            except psycopg.Error as exc:  # the PostgreSQL restart may cut one short
                log.append(f"{work.__name__} cut short ({type(exc).__name__})")

        return run

    threads = [
        threading.Thread(target=guarded(f), daemon=True)
        for f in (long_transaction, index_concurrently, vacuums)
    ]
    for t in threads:
        t.start()
    return threads


async def _operator(dsn: str, ids: list[int], stop: asyncio.Event, counts: dict[str, int]) -> None:
    """Cancel, requeue dead letters, pause and resume kinds, at random, while it runs."""
    conn: psycopg.AsyncConnection | None = None
    kinds = list(hetero_app.LIMITS)
    paused: set[str] = set()
    while not stop.is_set():
        await asyncio.sleep(random.uniform(0.1, 0.4))
        try:
            if conn is None or conn.closed:
                conn = await psycopg.AsyncConnection.connect(dsn, autocommit=True)
            roll = random.random()
            if roll < 0.5:
                # Mostly running or pending jobs (cancelling a finished one does nothing).
                row = await (
                    await conn.execute(
                        "SELECT id FROM jobs WHERE finished_at IS NULL "
                        "AND (locked_at IS NULL) = %s ORDER BY random() LIMIT 1",
                        (random.random() < 0.5,),
                    )
                ).fetchone()
                job = row[0] if row else random.choice(ids)
                if await cancel_jobs(conn, "public", [job], actor=OPERATOR):
                    await conn.execute(
                        "INSERT INTO chaos_cancels VALUES (%s, clock_timestamp())", (job,)
                    )
                    counts["cancels"] += 1
            elif roll < 0.8:
                row = await (
                    await conn.execute("SELECT id FROM dead_letters ORDER BY random() LIMIT 1")
                ).fetchone()
                if row and await requeue_dead(conn, "public", [row[0]], actor=OPERATOR):
                    counts["requeues"] += 1
            else:
                kind = random.choice(kinds)
                await pause_kind(conn, "public", kind, actor=OPERATOR)
                paused.add(kind)
                counts["pauses"] += 1
                await asyncio.sleep(random.uniform(0.3, 1.0))
                await resume_kind(conn, "public", kind, actor=OPERATOR)
                paused.discard(kind)
        except psycopg.Error:
            conn = None
            await asyncio.sleep(0.3)
    # An operator who paused a kind resumes it, even when the resume first met a restart.
    while paused:
        try:
            async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as last:
                for kind in sorted(paused):
                    await resume_kind(last, "public", kind, actor=OPERATOR)
                    paused.discard(kind)
        except psycopg.Error:
            await asyncio.sleep(0.3)


def analyse(conn: psycopg.Connection, ids: list[int], fleet: Fleet) -> dict[str, Any]:
    one = lambda sql, *p: conn.execute(sql, p).fetchone()[0]  # noqa: E731
    lost = one(
        "SELECT count(*) FROM unnest(%s::bigint[]) g(id) "
        "WHERE NOT EXISTS (SELECT 1 FROM jobs j WHERE j.id = g.id AND j.finished_at IS NOT NULL)"
        "  AND NOT EXISTS (SELECT 1 FROM dead_letters d WHERE d.id = g.id)",
        ids,
    )
    # A start after a cancel committed: an attempt claimed after the operator saw the cancel
    # commit (its start time when the claim is unknown, i.e. the row was rescued meanwhile),
    # or the job already cancelled (finished) in the database when the handler began: its own
    # clock at its first line is later than the cancelling transaction (the row's reading is
    # taken by the ledger write, which a PostgreSQL restart can delay past a rescue). A job
    # claimed before the cancel is running: its handler may start and is then stopped.
    after_cancel = one(
        "SELECT count(*) FROM hetero_ledger l WHERE l.started_at > l.cancelled_at "
        "OR EXISTS (SELECT 1 FROM chaos_cancels c WHERE c.job_id = l.job_id "
        "AND coalesce(l.claimed_at, l.started_at) > c.at)"
    )
    over, repeats = _over_limit(conn, fleet)
    # History of every job, wherever it ended: (job, attempt) -> [(error, at)].
    history: dict[tuple[int, int], list[tuple[str, datetime]]] = {}
    for job_id, attempt, error, at in conn.execute(
        "SELECT id, (e->>'attempt')::int, e->>'error', (e->>'at')::timestamptz FROM ("
        " SELECT id, errors FROM jobs UNION ALL SELECT id, errors FROM dead_letters) t,"
        " jsonb_array_elements(t.errors) e"
    ):
        history.setdefault((job_id, attempt), []).append((error or "", at))
    beats: dict[str, list[tuple[datetime, float]]] = {}
    for worker, at, timeout_s in conn.execute("SELECT worker, at, timeout_s FROM chaos_beats"):
        beats.setdefault(worker, []).append((at, timeout_s))
    rows = conn.execute(
        "SELECT job_id, attempt, pid, worker, claimed_at, started_at, ended_at "
        "FROM hetero_ledger ORDER BY job_id, started_at"
    ).fetchall()
    figures = {
        "overlapping (violations)": 0,
        "overlaps after an abandoned thread": 0,
        "overlaps after a missed heartbeat": 0,
    }
    by_job: dict[int, list[tuple[Any, ...]]] = {}
    for r in rows:
        by_job.setdefault(r[0], []).append(r)
    violations = []
    for runs in by_job.values():
        for i, a in enumerate(runs):
            a_end = a[6] or fleet.killed.get(a[2])
            for b in runs[i + 1 :]:
                if a_end is not None and b[5] >= a_end:
                    continue
                verdict = _classify(a, b, history, beats, fleet)
                figures[verdict] += 1
                if verdict == "overlapping (violations)":
                    violations.append((a, b, history.get((a[0], a[1]), [])))
    for a, b, entries in violations[:5]:
        frozen = [f for f in fleet.freezes if f[0] == a[2]]
        print(
            f"  overlap (job, attempt, pid, worker, claimed, started, ended): {a} then {b}; "
            f"history of the first: {entries}; its worker's freezes: {frozen}",
            flush=True,
        )
    if after_cancel:
        seen = conn.execute(
            "SELECT l.job_id, l.attempt, l.kind, l.worker, l.claimed_at, l.started_at, "
            "l.cancelled_at, (SELECT min(c.at) FROM chaos_cancels c WHERE c.job_id = l.job_id) "
            "FROM hetero_ledger l WHERE l.started_at > l.cancelled_at "
            "OR EXISTS (SELECT 1 FROM chaos_cancels c WHERE c.job_id = l.job_id "
            "AND coalesce(l.claimed_at, l.started_at) > c.at) LIMIT 10"
        ).fetchall()
        print(
            "  started after cancel (job, attempt, kind, worker, claimed, started, "
            f"cancelled in row, cancel committed): {seen}",
            flush=True,
        )
    if lost:
        missing = conn.execute(
            "SELECT g.id, j.finished_at, j.locked_by, j.attempts, j.kind, "
            "j.run_at - clock_timestamp(), j.max_attempts, "
            "EXISTS (SELECT 1 FROM paused_kinds p WHERE p.kind = j.kind) "
            "FROM unnest(%s::bigint[]) g(id) "
            "LEFT JOIN jobs j ON j.id = g.id WHERE NOT EXISTS (SELECT 1 FROM dead_letters d "
            "WHERE d.id = g.id) AND (j.id IS NULL OR j.finished_at IS NULL) LIMIT 10",
            (ids,),
        ).fetchall()
        print(
            "  lost jobs (id, finished_at, locked_by, attempts, kind, due in, max_attempts, "
            f"kind paused): {missing}",
            flush=True,
        )
    capped = _over_capacity(conn, history, fleet)
    metered = _over_rate(conn)
    ticks = _ticks(conn)
    stranded = one(
        "SELECT count(*) FROM jobs j WHERE j.finished_at IS NULL AND j.locked_at IS NULL "
        "AND j.attempts >= jobtui_max_attempts(jobtui_attempt_limits(), j.kind, j.max_attempts)"
    )
    return {
        "jobs enqueued": len(ids),
        "over a limit": capped["violations"] + metered,
        "over h_capped's limit while one of them had been rescued or abandoned (allowed)": capped[
            "excused"
        ],
        "h_capped most at once": capped["most"],
        "h_metered windows over its rate": metered,
        "stranded (no attempt left, never moved)": stranded,
        **ticks,
        "freezes (SIGSTOP/SIGCONT)": len(fleet.freezes),
        "of them mid-claim (the worker stopped itself after a claim's reply)": sum(
            1 for f in fleet.freezes if f[3]
        ),
        "executions": len(rows),
        "lost": lost,
        "started after cancel": after_cancel,
        "over effective max_attempts": over,
        "starts again after a shutdown release (allowed)": repeats,
        **figures,
        "workers killed": len(fleet.killed),
        "workers rolled (SIGTERM, new settings)": len(fleet.terminated),
    }


def _over_capacity(
    conn: psycopg.Connection,
    history: dict[tuple[int, int], list[tuple[str, datetime]]],
    fleet: Fleet,
) -> dict[str, int]:
    """Starts of `h_capped` at which more than CAPPED of its handlers were running. Excused
    when one of those running had been rescued (WorkerLost in its history: the limit counts a
    job until it is rescued) or its worker had been killed or stopped (SIGTERM) by then."""
    rows = conn.execute(
        "SELECT job_id, attempt, pid, started_at, ended_at FROM hetero_ledger "
        "WHERE kind = 'h_capped' ORDER BY started_at"
    ).fetchall()
    out = {"violations": 0, "excused": 0, "most": 0}
    for i, (_, _, _, started, _) in enumerate(rows):
        running = []
        for job, attempt, pid, s2, e2 in rows[: i + 1]:
            gone = fleet.killed.get(pid) or fleet.terminated.get(pid)
            end_at = e2 or gone
            if s2 <= started and (end_at is None or end_at > started):
                running.append((job, attempt, pid, gone))
        out["most"] = max(out["most"], len(running))
        if len(running) <= hetero_app.CAPPED:
            continue
        excused = any(
            any(
                e.startswith(("WorkerLost", "HeartbeatLost"))
                for e, _ in history.get((job, attempt), [])
            )
            or (gone is not None and gone <= started)
            for job, attempt, pid, gone in running
        )
        out["excused" if excused else "violations"] += 1
    return out


def _over_rate(conn: psycopg.Connection) -> int:
    """1-second windows (from each claim) holding more `h_metered` claims than the token
    bucket allows: RATE + RATE·T/period with T = 1 s."""
    allowed = 2 * hetero_app.RATE
    return int(
        conn.execute(
            "SELECT count(*) FROM hetero_ledger a WHERE a.kind = 'h_metered' "
            "AND a.claimed_at IS NOT NULL AND (SELECT count(*) FROM hetero_ledger b "
            "WHERE b.kind = 'h_metered' AND b.claimed_at >= a.claimed_at "
            "AND b.claimed_at < a.claimed_at + interval '1 second') > %s",
            (allowed,),
        ).fetchone()[0]  # type: ignore[index]
    )


def _ticks(conn: psycopg.Connection) -> dict[str, int]:
    """The schedule's ticks: enqueued, enqueued twice, missed between the first and the last,
    and ticks whose job is in neither table (lost)."""
    enqueued, twice, first, last = conn.execute(
        "SELECT count(*), count(*) - count(DISTINCT tick), min(tick), max(tick) "
        "FROM schedule_ticks WHERE schedule = 'chaos_tick' AND NOT manual"
    ).fetchone()  # type: ignore[misc]
    span = int((last - first).total_seconds()) + 1 if first is not None else 0
    lost = conn.execute(
        "SELECT count(*) FROM schedule_ticks t WHERE t.schedule = 'chaos_tick' "
        "AND NOT EXISTS (SELECT 1 FROM jobs j WHERE j.id = t.job_id) "
        "AND NOT EXISTS (SELECT 1 FROM dead_letters d WHERE d.id = t.job_id)"
    ).fetchone()[0]  # type: ignore[index]
    return {
        "ticks enqueued": enqueued,
        "ticks enqueued twice": twice,
        "ticks missed": max(0, span - (enqueued - twice)),
        "ticks whose job is lost": lost,
    }


def _over_limit(conn: psycopg.Connection, fleet: Fleet) -> tuple[int, int]:
    """Jobs with more counted attempts than their effective limit, and starts repeated after a
    shutdown release. README: attempts count unless released at shutdown (the attempt is given
    back, so the next start has the same number). A start whose number repeats the one before it
    counts as an attempt of its own unless that earlier start's worker was SIGTERMed after it
    began; so a job is over when its counted starts exceed its kind's limit. A requeue from dead
    letters (the number drops) starts a fresh count."""
    over, repeats = 0, 0
    counted: dict[int, int] = {}
    previous: dict[int, tuple[int, int, datetime]] = {}
    rows = conn.execute(
        "SELECT job_id, kind, attempt, pid, started_at FROM hetero_ledger "
        "ORDER BY job_id, started_at"
    ).fetchall()
    kinds: dict[int, str] = {}
    for job_id, kind, attempt, pid, started in rows:
        kinds[job_id] = kind
        prev = previous.get(job_id)
        term = fleet.terminated.get(prev[1]) if prev else None
        if prev and attempt < prev[0]:
            counted[job_id] = 1  # requeued from dead letters: a fresh set of attempts
        elif prev and prev[0] == attempt and term is not None and term >= prev[2]:
            repeats += 1
        else:
            counted[job_id] = counted.get(job_id, 0) + 1
        previous[job_id] = (attempt, pid, started)
    for job_id, n in counted.items():
        if n > hetero_app.LIMITS[kinds[job_id]]:
            over += 1
            if over <= 5:
                starts = [(a, p, f"{t:%H:%M:%S.%f}") for j, _, a, p, t in rows if j == job_id]
                print(f"  over its limit: job {job_id} ({kinds[job_id]}): {starts}", flush=True)
    return over, repeats


def _classify(
    a: tuple[Any, ...],
    b: tuple[Any, ...],
    history: dict[tuple[int, int], list[tuple[str, datetime]]],
    beats: dict[str, list[tuple[datetime, float]]],
    fleet: Fleet,
) -> str:
    """Why attempt `b` ran while `a` still did: excused at-least-once cases, or a violation."""
    entries = history.get((a[0], a[1]), [])
    if any(e.startswith("TimeoutError") for e, _ in entries):
        return "overlaps after an abandoned thread"  # a's thread overran its timeout
    term = fleet.terminated.get(a[2])
    if term is not None and b[4] is not None and b[4] >= term and b[1] == a[1]:
        return "overlaps after an abandoned thread"  # released at shutdown, thread ran on
    for error, at in entries:
        if error.startswith(("WorkerLost", "HeartbeatLost")):
            seen = [(t, to) for t, to in beats.get(a[3], []) if t <= at]
            if seen:
                last, timeout_s = max(seen)
                if (at - last).total_seconds() >= timeout_s:
                    return "overlaps after a missed heartbeat"
    return "overlapping (violations)"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=3000)
    ap.add_argument("--workers", type=int, default=3)
    ap.add_argument("--concurrency", type=int, default=8)
    ap.add_argument("--kill-every", type=float, default=3.0)
    ap.add_argument("--roll-every", type=float, default=4.0)
    ap.add_argument("--freeze-every", type=float, default=2.5, help="SIGSTOP a worker this often")
    ap.add_argument(
        "--freeze-in-claim", type=float, default=0.02, help="chance a worker stops mid-claim"
    )
    ap.add_argument("--max-sleep", type=float, default=0.1)
    ap.add_argument("--seconds", type=float, default=60.0, help="how long the chaos lasts")
    ap.add_argument("--timeout", type=float, default=300.0, help="give up draining after this")
    args = ap.parse_args(argv)
    return asyncio.run(_main(args))


async def _main(args: argparse.Namespace) -> int:
    root = Path(tempfile.mkdtemp(prefix="jobtui-hetero-"))
    server = start_embedded(root / "pg")
    fleet: Fleet | None = None
    try:
        with psycopg.connect(server.dsn, autocommit=True) as admin:
            admin.execute("CREATE DATABASE chaos")
        dsn = conninfo.make_conninfo(server.dsn, dbname="chaos")
        with psycopg.connect(dsn, autocommit=True) as conn:
            migrate(conn, "public")
            conn.execute(hetero_app.LEDGER_DDL)
            conn.execute(SETUP)
            kinds = [k for k in hetero_app.LIMITS if k != "h_tick"]  # h_tick: the schedule's
            enqueue_many(
                conn,
                [
                    {"kind": k, "payload": {"n": i}, "max_attempts": hetero_app.ROW_MAX[k]}
                    for i in range(args.jobs)
                    for k in [kinds[i % len(kinds)]]
                ],
            )
            ids = [r[0] for r in conn.execute("SELECT id FROM jobs ORDER BY id")]
            conn.execute("ANALYZE")
        env = dict(os.environ)
        env.update(
            CHAOS_DSN=dsn,
            CHAOS_MAX_SLEEP=str(args.max_sleep),
            CHAOS_CONCURRENCY=str(args.concurrency),
            CHAOS_GRACE="1.0",
            CHAOS_FREEZE_IN_CLAIM=str(args.freeze_in_claim),
            PYTHONPATH=os.pathsep.join([str(HERE), env.get("PYTHONPATH", "")]),
        )
        print(
            f"hetero chaos: {args.jobs} jobs, {args.workers} workers, heartbeat settings "
            f"{SETTINGS}, kill every {args.kill_every}s, roll every {args.roll_every}s, "
            f"{args.seconds}s of chaos, cores: {os.cpu_count()}",
            flush=True,
        )
        fleet = Fleet(dsn, env, root)
        for _ in range(args.workers):
            fleet.start()
        watch = _connect(dsn)

        def now() -> datetime:
            nonlocal watch
            while True:
                try:
                    return watch.execute("SELECT clock_timestamp()").fetchone()[0]  # type: ignore[index]
                except psycopg.OperationalError:
                    watch = _connect(dsn)

        def pending() -> int:
            nonlocal watch
            while True:
                try:
                    row = watch.execute("SELECT count(*) FROM jobs WHERE finished_at IS NULL")
                    return int(row.fetchone()[0])  # type: ignore[index]
                except psycopg.OperationalError:
                    watch = _connect(dsn)

        stop_ops, stop_locks = asyncio.Event(), threading.Event()
        counts = {"cancels": 0, "requeues": 0, "pauses": 0}
        operator = asyncio.create_task(_operator(dsn, ids, stop_ops, counts))
        lock_log: list[str] = []
        t0 = time.monotonic()
        next_kill, next_roll = t0 + args.kill_every, t0 + args.roll_every
        next_freeze = t0 + args.freeze_every
        locks_started = restarted = lowered = False
        while True:
            await asyncio.sleep(0.05)
            t = time.monotonic()
            fleet.thaw(now())
            if not lowered and t - t0 > args.seconds / 2:
                # A deploy lowers h_plain's max_attempts: every worker started from now on.
                lowered = True
                fleet.env["CHAOS_LOWERED"] = "1"
                print("hetero chaos: deploying max_attempts 3 -> 2 for h_plain", flush=True)
            if t - t0 > args.seconds:
                stop_ops.set()
                if pending() == 0 or t - t0 > args.seconds + args.timeout:
                    break
                continue
            if not locks_started and t - t0 > 1.0:
                locks_started = True
                _hold_locks(dsn, stop_locks, lock_log)
            if t >= next_kill:
                fleet.kill_one(now())
                next_kill = t + args.kill_every
                if not restarted and t - t0 > 10.0:  # after the long transaction ends
                    print("hetero chaos: restarting PostgreSQL", flush=True)
                    await asyncio.to_thread(server.restart, down_for=1.0)
                    restarted = True
            if t >= next_roll:
                fleet.roll_one(now())
                next_roll = t + args.roll_every
            if t >= next_freeze:
                fleet.freeze_one(now())
                next_freeze = t + args.freeze_every
            if pending() == 0 and t - t0 > 5:
                # Keep the operators busy: requeued dead letters come back as work.
                await asyncio.sleep(0.2)
        stop_ops.set()
        stop_locks.set()
        await operator  # its last action may have requeued a job: drain that too
        while pending() and time.monotonic() - t0 < args.seconds + args.timeout:
            fleet.thaw(now())
            await asyncio.sleep(0.1)
        elapsed = time.monotonic() - t0
        left = pending()
        await asyncio.to_thread(fleet.stop)
        with psycopg.connect(dsn, autocommit=True) as conn:
            ticked = [r[0] for r in conn.execute("SELECT job_id FROM schedule_ticks")]
            figures = analyse(conn, ids + ticked, fleet)
        figures.update({f"operator {k}": v for k, v in counts.items()})
        figures["pending at the end"] = left
        figures["locks held"] = ", ".join(dict.fromkeys(lock_log)) or "none"
        figures["elapsed s"] = round(elapsed, 1)
        for name, value in figures.items():
            print(f"  {name}: {value}", flush=True)
        ok = (
            figures["lost"] == 0
            and figures["overlapping (violations)"] == 0
            and figures["started after cancel"] == 0
            and figures["over effective max_attempts"] == 0
            and figures["over a limit"] == 0
            and figures["stranded (no attempt left, never moved)"] == 0
            and figures["ticks enqueued twice"] == 0
            and figures["ticks missed"] == 0
            and figures["ticks whose job is lost"] == 0
            and left == 0
        )
        print("hetero chaos: OK" if ok else "hetero chaos: FAILED", flush=True)
        if not ok:
            print(f"hetero chaos: worker logs in {root / 'workers.log'}", flush=True)
        return 0 if ok else 1
    finally:
        if fleet is not None:
            fleet.stop()  # also when the run itself fails: no worker outlives it
        server.stop()


if __name__ == "__main__":
    sys.exit(main())
