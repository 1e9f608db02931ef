""" "Why isn't this job running?" (issue 12 item 2): the answer in plain words, from the live
database, for `jobtui jobs why ID` and the console's job detail.

`explain(conn, schema, job_id)` reads the job and what decides its fate — the kind's pause, the
workers that handle it and how full they are, its limits, the worker holding it and that
worker's heartbeat — and returns a `WhyAnswer`: the state, every reason that applies (those that
keep it from running first), and for a due job its place in line in the claims' own order.
The rules are the claim's and the rescue's (jobtui/sql/worker.sql, limits.sql), read, not
guessed: a job the answer calls ready is one the next claim of its kind would take.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import psycopg
from psycopg.rows import dict_row

from jobtui.config import format_duration
from jobtui.control_state import STOPS_CLAIMING
from jobtui.sql import queries

# Rows locked by something that never heartbeats are rescued after the worker's lock timeout;
# this is WorkerSettings.lock_timeout's default (a test keeps the two equal).
DEFAULT_LOCK_TIMEOUT_S = 3600.0


@dataclass(frozen=True)
class Reason:
    """One finding. `code` is stable for scripts; `blocking` says it keeps the job from running
    now (False: information, such as its place in line)."""

    code: str
    text: str
    blocking: bool = True


@dataclass
class WhyAnswer:
    job_id: int
    kind: str
    state: str  # ready, scheduled, running, locked, exhausted, succeeded, cancelled, dead
    reasons: list[Reason] = field(default_factory=list)
    position: int | None = None  # 1 = next in line for its kind (due, claimable jobs only)

    @property
    def headline(self) -> str:
        return self.reasons[0].text if self.reasons else f"job {self.job_id} is {self.state}"

    def lines(self) -> list[str]:
        return [r.text for r in self.reasons]

    def as_json(self) -> dict[str, Any]:
        return {
            "id": self.job_id,
            "kind": self.kind,
            "state": self.state,
            "position": self.position,
            "reasons": [
                {"code": r.code, "text": r.text, "blocking": r.blocking} for r in self.reasons
            ],
        }


def _at(t: datetime) -> str:
    return t.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _ago(now: datetime, t: datetime) -> str:
    return format_duration((now - t).total_seconds()) + " ago"


async def _one(conn: psycopg.AsyncConnection, sql: str, params: dict[str, Any]) -> Any:
    async with conn.cursor(row_factory=dict_row) as cur:
        await cur.execute(sql, params)
        return await cur.fetchone()


async def _all(conn: psycopg.AsyncConnection, sql: str, params: dict[str, Any]) -> list[Any]:
    async with conn.cursor(row_factory=dict_row) as cur:
        await cur.execute(sql, params)
        return await cur.fetchall()


async def explain(
    conn: psycopg.AsyncConnection,
    schema: str,
    job_id: int,
    *,
    lock_timeout_s: float = DEFAULT_LOCK_TIMEOUT_S,
) -> WhyAnswer | None:
    """Why job `job_id` is (not) running; None when there is no such job or dead letter.

    `lock_timeout_s` is the workers' lock timeout (after which a row locked by something that
    never heartbeats is rescued). Read in a transaction of its own with JIT off, as the
    snapshot's reads are (`metrics_no_jit`): at scale, with a stale table's statistics, the
    workers query is estimated above jit_above_cost and compiling took longer than the query
    (6 ms of every job detail in the console, ~35 ms more for a session's first, which loads
    the JIT library: benchmarks/console_scale.py). Per transaction, so it holds behind a
    transaction pooler and leaves the session's settings alone.
    """
    async with conn.transaction():
        await conn.execute(queries(schema).metrics_no_jit)
        return await _explain(conn, schema, job_id, lock_timeout_s)


async def _explain(
    conn: psycopg.AsyncConnection, schema: str, job_id: int, lock_timeout_s: float
) -> WhyAnswer | None:
    q = queries(schema)
    job = await _one(conn, q.why_job, {"id": job_id})
    if job is None:
        dead = await _one(conn, q.why_dead, {"id": job_id})
        return None if dead is None else _dead(dead)
    now: datetime = job["now"]
    answer = WhyAnswer(job_id, job["kind"], "ready")
    if job["finished_at"] is not None:
        _finished(answer, job, now)
    elif job["locked_at"] is not None:
        _locked(answer, job, now, lock_timeout_s)
    else:
        await _pending(answer, job, now, conn, schema)
    return answer


def _dead(d: dict[str, Any]) -> WhyAnswer:
    answer = WhyAnswer(d["id"], d["kind"], "dead")
    answer.reasons.append(
        Reason(
            "dead",
            f"it is a dead letter (reason: {d['reason']}), moved {_ago(d['now'], d['died_at'])} "
            f"after {d['attempts']} of {d['max_attempts']} attempts: it runs again only if "
            "requeued",
        )
    )
    return answer


def _finished(answer: WhyAnswer, job: dict[str, Any], now: datetime) -> None:
    if job["cancelled_at"] is not None:
        answer.state = "cancelled"
        answer.reasons.append(
            Reason(
                "cancelled",
                f"it was cancelled {_ago(now, job['cancelled_at'])} "
                f"({_at(job['cancelled_at'])}): it will not run",
            )
        )
    else:
        answer.state = "succeeded"
        answer.reasons.append(
            Reason(
                "finished",
                f"it finished successfully {_ago(now, job['finished_at'])} "
                f"({_at(job['finished_at'])}): it will not run again",
            )
        )


def _locked(answer: WhyAnswer, job: dict[str, Any], now: datetime, lock_timeout_s: float) -> None:
    owner = job["locked_by"]
    answer.state = "running"
    if owner is None:
        answer.state = "locked"
        held = (now - job["locked_at"]).total_seconds()
        answer.reasons.append(
            Reason(
                "classic_lock",
                f"it is locked ({format_duration(held)} ago) by something that never "
                "heartbeats (a classic consumer: no locked_by); it will be rescued after the "
                f"lock timeout of {format_duration(lock_timeout_s)}, in "
                f"{format_duration(max(0.0, lock_timeout_s - held))}",
            )
        )
    elif not job["worker_known"]:
        answer.state = "locked"
        answer.reasons.append(
            Reason(
                "unknown_locker",
                f"it is locked by {owner!r}, which is not a known worker (no workers row, so "
                "it never heartbeats): the next rescue by any live worker puts it back",
            )
        )
    else:
        age = float(job["heartbeat_age_s"])
        timeout = float(job["heartbeat_timeout_s"])
        if age > timeout:
            answer.state = "locked"
            answer.reasons.append(
                Reason(
                    "stale_worker",
                    f"it is locked by worker {owner}, whose heartbeat is {format_duration(age)} "
                    f"old, past its {format_duration(timeout)} timeout: it will be rescued now, "
                    "at the next rescue by any live worker",
                )
            )
        else:
            answer.reasons.append(
                Reason(
                    "running",
                    f"it is running on worker {owner}, whose heartbeat is "
                    f"{format_duration(age)} old; should that worker stop, it will be rescued in "
                    f"{format_duration(max(0.0, timeout - age))}",
                )
            )
    if job["cancel_requested"]:
        answer.reasons.append(
            Reason("cancel_requested", "a cancel was requested: its worker is asked to stop it")
        )


async def _pending(
    answer: WhyAnswer,
    job: dict[str, Any],
    now: datetime,
    conn: psycopg.AsyncConnection,
    schema: str,
) -> None:
    kind = job["kind"]
    reasons = answer.reasons
    if job["cancel_requested"]:
        reasons.append(
            Reason(
                "cancel_requested",
                "a cancel was requested: a worker ends it as cancelled instead of running it",
            )
        )
    if job["attempts"] >= job["max_attempts"]:
        answer.state = "exhausted"
        live = await _one(conn, queries(schema).why_any_live_worker, {})
        reasons.append(Reason("exhausted", _exhausted(job, bool(live and live["live"]))))
        return
    due = job["run_at"] <= now
    if not due:
        answer.state = "scheduled"
        retry = " (a retry)" if job["attempts"] else ""
        reasons.append(
            Reason(
                "scheduled",
                f"it is scheduled for later{retry}: {_at(job['run_at'])}, in "
                f"{format_duration((job['run_at'] - now).total_seconds())}",
            )
        )
    if job["paused_at"] is not None:
        reasons.append(
            Reason(
                "paused",
                f"its kind {kind!r} is paused, by {job['paused_by']} since "
                f"{_at(job['paused_at'])} ({_ago(now, job['paused_at'])})",
            )
        )
    q = queries(schema)
    workers = await _all(conn, q.why_workers, {"kind": kind})
    # A worker an operator quieted or asked to stop claims nothing: it does not count.
    claiming = [w for w in workers if w["live"] and w["control"] not in STOPS_CLAIMING]
    quiet = [w for w in workers if w["live"] and w["control"] in STOPS_CLAIMING]
    live = claiming
    if not live and quiet:
        each = ", ".join(f"{w['id']} ({w['control']})" for w in quiet)
        reasons.append(
            Reason("workers_quiet", f"every live worker that handles {kind!r} is quieted: {each}")
        )
    elif not live:
        stale = f" ({len(workers)} stale worker(s) do)" if workers else ""
        reasons.append(Reason("no_worker", f"no live worker handles kind {kind!r}{stale}"))
    elif all(w["running"] + w["abandoned"] >= w["concurrency"] for w in live):
        each = ", ".join(_fullness(w) for w in live)
        reasons.append(
            Reason("workers_full", f"every worker that handles {kind!r} is full: {each}")
        )
    if job["limited"]:
        reasons.extend(await _limits(job, live, conn, schema))
    if not due or job["cancel_requested"]:
        return
    position = await _one(
        conn,
        q.why_position,
        {
            "kind": kind,
            "id": job["id"],
            "run_at": job["run_at"],
            "priority": job["priority"],
        },
    )
    answer.position = int(position["position"]) if position else None
    blocked = any(r.blocking for r in reasons)
    n = answer.position
    if not blocked:
        place = "next in line" if n == 1 else f"number {n} in line ({n - 1 if n else 0} ahead)"
        reasons.append(Reason("ready", f"it is ready, {place} for kind {kind!r}", blocking=False))
    else:
        reasons.append(
            Reason(
                "position",
                f"once that clears: number {n} in line for kind {kind!r}",
                blocking=False,
            )
        )


def _fullness(w: dict[str, Any]) -> str:
    """`w1 running 0 of 1, 1 slot held by a thread that overran its timeout`."""
    text = f"{w['id']} running {w['running']} of {w['concurrency']}"
    n = w["abandoned"]
    if n:
        held = "1 slot" if n == 1 else f"{n} slots"
        text += f", {held} held by a handler thread that overran its timeout and still runs"
    return text


def _exhausted(job: dict[str, Any], swept: bool) -> str:
    """What happens to a job with no attempt left, by the sweep's own rules
    (worker_bury_exhausted, worker_finish_cancelled; the limit is jobtui_max_attempts');
    `swept`: a live worker exists to sweep it."""
    limit, row = job["max_attempts"], job["row_max_attempts"]
    whose = f"; its handler's limit, the row says {row}" if limit != row else ""
    text = f"its attempts are exhausted ({job['attempts']} of {limit}{whose}): "
    text += "no worker will claim it; "
    if not swept:
        return text + "no worker is running to sweep it: it stays so until one starts"
    if job["cancel_requested"]:
        return text + "a running worker's next sweep ends it cancelled"
    text += "a running worker's next sweep moves it to dead letters (reason exhausted)"
    if job["id_in_dead"]:
        text += (
            f"; its id is taken by an older dead letter, so it moves under a new id, its old "
            f"id {job['id']} noted in its history"
        )
    return text


async def _limits(
    job: dict[str, Any],
    live: list[dict[str, Any]],
    conn: psycopg.AsyncConnection,
    schema: str,
) -> list[Reason]:
    """The kind's limits that hold it now, by limits_claim's own rules."""
    kind = job["kind"]
    out: list[Reason] = []
    if job["concurrency"] is not None:
        row = await _one(conn, queries(schema).why_running_kind, {"kind": kind})
        running = int(row["running"]) if row else 0
        if running >= job["concurrency"]:
            out.append(
                Reason(
                    "limit_concurrency",
                    f"a limit holds it: kind {kind!r} is at its concurrency limit, "
                    f"{running} of {job['concurrency']} running",
                )
            )
    per = job["per_worker"]
    if per is not None and live and all(w["running_kind"] >= per for w in live):
        out.append(
            Reason(
                "limit_per_worker",
                f"a limit holds it: every live worker that handles {kind!r} runs its per-worker "
                f"limit of {per}",
            )
        )
    tokens = job["tokens"]
    if job["rate"] is not None and tokens is not None and tokens < 1:
        wait = (1 - tokens) * job["period_s"] / job["rate"]
        per_what = "second" if job["period_s"] == 1 else "minute"
        out.append(
            Reason(
                "limit_rate",
                f"a limit holds it: kind {kind!r} has used its rate of {job['rate']} per "
                f"{per_what}; the next start is allowed in {wait:.1f}s",
            )
        )
    return out
