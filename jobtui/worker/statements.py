"""The worker's statements with their parameters built: one method per thing it writes or asks.

No worker state lives here (only its id, schema and handler limits), so the parts of the worker
read as what they decide, and every statement's parameters are visible in one place.
"""

from __future__ import annotations

import asyncio
import json
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import psycopg
from psycopg.types.json import Jsonb

from jobtui import limits
from jobtui.sql import notify_channel, queries
from jobtui.worker.link import Link
from jobtui.worker.stats import Cell, as_rows

LOCK_NOT_AVAILABLE = "55P03"  # SQLSTATE of VACUUM (SKIP_LOCKED)'s warning when it skips

PRUNE_BATCH = 1000  # the LIMIT in worker_prune
PRUNE_BATCHES_PER_ROUND = 50


class UndecodablePayload(Exception):
    """A job's payload that PostgreSQL stored but Python cannot decode (nested too deeply).

    The worker records it as the failure of that job's attempt instead of running its handler.
    """


def decode_payload(text: str) -> Any:
    """The payload's value, or an UndecodablePayload to fail the job with."""
    try:
        return json.loads(text)
    except RecursionError:
        return UndecodablePayload(
            f"payload is nested too deeply for Python's JSON decoder ({len(text)} characters)"
        )
    except ValueError as exc:  # jsonb's own output: not expected, but never fatal
        return UndecodablePayload(f"payload could not be decoded: {exc}")


# Payload text (characters, all rows of one reply) above which the reply is decoded in a thread:
# json.loads of ~100 MB holds the event loop for over a second, and the heartbeat shares that
# loop (seen in tests/test_attack_engine.py). Small replies, the drain's, stay inline.
DECODE_INLINE_MAX = 1_000_000
ENGINE_THREADS = 2  # one decodes while the other's reply waits: a claim never waits on another


def _decode_rows(rows: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    return [(r[0], r[1], decode_payload(r[2]), r[3], r[4]) for r in rows]


async def decode_rows(
    rows: list[tuple[Any, ...]], executor: ThreadPoolExecutor | None = None
) -> list[tuple[Any, ...]]:
    """Claimed rows with their payloads decoded; a large reply off the event loop, one row per
    thread call, so the loop gets the interpreter back between payloads.

    The threads are the worker's own (`executor`, WorkerDB.engine_threads), never the loop's
    default executor: `asyncio.to_thread` in handlers uses that one, and threads a timed-out
    handler left hanging there once held claimed jobs unstarted for as long as they hung."""
    if sum(len(r[2]) for r in rows) <= DECODE_INLINE_MAX:
        return _decode_rows(rows)
    loop = asyncio.get_running_loop()
    return [(await loop.run_in_executor(executor, _decode_rows, [r]))[0] for r in rows]


def int_array(values: list[int]) -> str:
    """An int array as a PostgreSQL literal: much cheaper to send than a list of ints, which
    psycopg dumps element by element (the statements cast it with `::bigint[]`)."""
    return "{" + ",".join(map(str, values)) + "}"


def _pairs(pairs: list[tuple[int, int]]) -> dict[str, str]:
    """`ids` and `by_id` ({"id": attempt}) for the statements that end attempts."""
    return {
        "ids": int_array([p[0] for p in pairs]),
        "by_id": "{" + ",".join([f'"{i}":{a}' for i, a in pairs]) + "}",
    }


def _rows_by_id(rows: list[tuple[Any, ...]]) -> dict[str, str]:
    """`ids` and `by_id` ({"id": [the rest of the row]}) for retries and burials."""
    return {
        "ids": int_array([r[0] for r in rows]),
        "by_id": json.dumps({str(r[0]): r[1:] for r in rows}, ensure_ascii=False),
    }


class WorkerDB:
    """Statements of one worker (`worker_id`) in one schema."""

    def __init__(self, schema: str, worker_id: str) -> None:
        self.q = queries(schema)
        self.worker_id = worker_id
        self.channel = notify_channel(schema)
        # The engine's own threads (decoding large claims): handlers cannot exhaust them
        # (issue 25 item 7). Threads start on first use.
        self.engine_threads = ThreadPoolExecutor(
            max_workers=ENGINE_THREADS, thread_name_prefix="jobtui-engine"
        )

    def close(self) -> None:
        """Let the engine's threads go (the worker has stopped)."""
        self.engine_threads.shutdown(wait=False, cancel_futures=True)

    # ---- claim

    async def claim(
        self, link: Link, kinds: list[str], limit: int, *, per_kind: bool = False
    ) -> list[tuple[Any, ...]]:
        """Up to `limit` jobs as (id, kind, payload, attempts, max_attempts), now ours; with
        `per_kind`, by worker_claim_per_kind (when some of `kinds` have a limit).

        A payload that cannot be decoded comes back as an UndecodablePayload instance.
        """
        sql = self.q.worker_claim_per_kind if per_kind else self.q.worker_claim
        rows = await link.fetch(sql, {"kinds": kinds, "worker": self.worker_id, "limit": limit})
        later = [r[0] for r in rows if r[2] is None]
        if later:  # past the reply's byte budget: read now that the claim has committed
            got = dict(await link.fetch(self.q.worker_claimed_payloads, {"ids": later}))
            rows = [
                (r[0], r[1], got.get(r[0], "null"), *r[3:]) if r[2] is None else r for r in rows
            ]
        return await decode_rows(rows, self.engine_threads)

    async def claim_limited(
        self, link: Link, kinds: list[str], want: int, others: list[str]
    ) -> tuple[list[tuple[Any, ...]], limits.LimitedRows]:
        """Up to `want` jobs of these limited kinds within their limits and ahead of `others`'
        in the claim order, decoded as by `claim`; and what claim_limited said."""
        got = await limits.claim_limited(
            await link.connection(), self.q.schema, self.worker_id, kinds, want, others
        )
        return await decode_rows(got, self.engine_threads), got

    async def limited_kinds(self, link: Link) -> set[str]:
        """Kinds with an effective limit right now."""
        return await limits.limited_kinds(await link.connection(), self.q.schema)

    async def release_orphans(self, link: Link, known: list[int]) -> list[int]:
        """Release rows locked by this worker that it does not know about; their ids."""
        rows = await link.fetch(
            self.q.worker_release_orphans, {"worker": self.worker_id, "known": int_array(known)}
        )
        return [r[0] for r in rows]

    # ---- outcomes

    async def write_group(self, link: Link, group: str, items: list[Any]) -> list[Any]:
        """Write one group of outcomes ("done", "retry", "bury", "cancelled", "released");
        the rows the database wrote, as (id, fate) with fate "cancelled" for jobs whose cancel
        won over a retry, burial or release."""
        me = {"worker": self.worker_id}
        if group == "done":
            rows = await link.fetch(self.q.worker_complete, {**me, **_pairs(items)})
            return [(r[0], "done") for r in rows]
        if group == "cancelled":
            rows = await link.fetch(self.q.worker_cancelled, {**me, **_pairs(items)})
            return [(r[0], "cancelled") for r in rows]
        if group == "released":
            params = {**me, **_pairs(items), "channel": self.channel}
            rows = await link.fetch(self.q.worker_release, params)
            return [(r[0], "cancelled" if r[1] is None else "released") for r in rows]
        if group == "retry":
            rows = await link.fetch(self.q.worker_retry, {**me, **_rows_by_id(items)})
            return [(r[0], "cancelled" if r[1] else "retry") for r in rows]
        if group == "bury":
            rows = await link.fetch(self.q.worker_bury, {**me, **_rows_by_id(items)})
            return [(r[0], r[1]) for r in rows]
        raise ValueError(f"unknown outcome group {group!r}")

    async def write_stats(self, link: Link, cells: dict[tuple[int, str], Cell]) -> None:
        await link.fetch(self.q.worker_stats_flush, {"rows": Jsonb(as_rows(cells))})

    # ---- maintenance

    async def heartbeat(self, link: Link, params: dict[str, Any]) -> float:
        """Write the worker's row; the server's clock as epoch seconds."""
        rows = await link.fetch(self.q.worker_heartbeat, {**params, "worker": self.worker_id})
        return float(rows[0][0])

    async def probe(self, link: Link, payload: str) -> None:
        """A self-NOTIFY on this schema's channel (the listener checks that it is heard)."""
        await link.fetch(self.q.worker_probe_notify, {"channel": self.channel, "payload": payload})

    async def unregister(self, link: Link) -> None:
        await link.fetch(self.q.worker_unregister, {"worker": self.worker_id})

    async def my_jobs(self, link: Link) -> dict[int, tuple[int, bool]]:
        """Jobs the database says this worker holds: id -> (attempts, cancel_requested)."""
        rows = await link.fetch(self.q.worker_my_jobs, {"worker": self.worker_id})
        return {r[0]: (r[1], r[2]) for r in rows}

    async def rescue(self, link: Link, lock_timeout: float) -> list[tuple[str, int, str]]:
        """Rescue jobs of dead workers (judged by their own heartbeat timeout) and stale locks
        of consumers without a `workers` row: (fate, id, kind) rows."""
        rows = await link.fetch(
            self.q.worker_rescue,
            {
                "worker": self.worker_id,
                "lock_timeout": lock_timeout,
                "lost_msg": (
                    "WorkerLost: the worker running this attempt stopped heartbeating "
                    "for longer than its own heartbeat timeout"
                ),
                "lock_msg": (
                    f"WorkerLost: locked without a worker heartbeat for over {lock_timeout:g}s"
                ),
            },
        )
        return [(r[0], r[1], r[2]) for r in rows]

    async def bury_exhausted(self, link: Link, kinds: list[str]) -> list[tuple[str, int, str]]:
        rows = await link.fetch(self.q.worker_bury_exhausted, {"kinds": kinds})
        return [("dead", r[0], r[1]) for r in rows]

    async def finish_cancelled(self, link: Link) -> int:
        """End unlocked rows with a cancel request as cancelled; how many."""
        return len(await link.fetch(self.q.worker_finish_cancelled))

    async def forget_stale_workers(self, link: Link) -> None:
        await link.fetch(self.q.worker_forget_stale_workers, {"worker": self.worker_id})

    async def prune(self, link: Link, retention_s: float) -> int:
        """Delete finished jobs older than the retention, batch by batch; how many."""
        total = 0
        for _ in range(PRUNE_BATCHES_PER_ROUND):
            rows = await link.fetch(self.q.worker_prune, {"retention": retention_s})
            n = int(rows[0][0]) if rows else 0
            total += n
            if n < PRUNE_BATCH:
                break
            await asyncio.sleep(0)  # let the other loops in between batches
        return total

    async def queue_sample(self, link: Link) -> None:
        await link.fetch(self.q.worker_queue_sample)

    async def analyze(self, link: Link) -> None:
        """ANALYZE jobs through jobtui_analyze_jobs (0032: the owner's rights, so the worker
        role's statistics come too); the plain ANALYZE on a schema before 0032 or where the
        role has no EXECUTE on it yet (`jobtui roles` not run again since migrate)."""
        try:
            await link.fetch(self.q.worker_analyze)
        except (psycopg.errors.UndefinedFunction, psycopg.errors.InsufficientPrivilege):
            await link.fetch(self.q.worker_analyze_plain)

    async def jobs_vacuum_due(self, link: Link, min_dead: int, pause_s: float) -> bool:
        """Whether `jobs` needs the VACUUM autovacuum is off to give (worker_jobs_vacuum_due)."""
        rows = await link.fetch(
            self.q.worker_jobs_vacuum_due,
            {"tables": ["jobs"], "min_dead": min_dead, "pause_s": pause_s},
        )
        return bool(rows and rows[0][0])

    async def vacuum_jobs(self, link: Link) -> bool:
        """VACUUM `jobs`; False when it was skipped because something held the table
        (SKIP_LOCKED: PostgreSQL only warns, and the statement succeeds)."""
        conn = await link.connection()
        skipped: list[bool] = []

        def note(diag: psycopg.errors.Diagnostic) -> None:
            if diag.sqlstate == LOCK_NOT_AVAILABLE:
                skipped.append(True)

        conn.add_notice_handler(note)
        try:
            await link.fetch(self.q.worker_vacuum_jobs)
        finally:
            conn.remove_notice_handler(note)
        return not skipped

    async def vacuum_blocks(self, link: Link) -> bool:
        """Whether a VACUUM of `jobs` holds up a lock that stops the queue
        (worker_vacuum_blocks)."""
        rows = await link.fetch(self.q.worker_vacuum_blocks)
        return bool(rows and rows[0][0])
