"""Per-kind concurrency and rate limits, enforced when jobs are claimed, in the database.

Limits are declared on handlers (`KindLimit`, synced by workers at start) and can be
overridden by an operator (jobtui.ops.set_kind_limits / clear_kind_limits, audited); the
`kind_limits` table keeps both and where the effective values came from.

How a worker claims (the contract for the worker's claim loop):
- The fast claim (worker_claim) must not take limited kinds: leave them out of its kinds
  list, as paused kinds are (best in its SQL: `EXCEPT SELECT kind FROM kind_limits WHERE
  limited`, so an operator's new limit applies at the next claim). Its cost is unchanged.
- For the limited kinds it handles, the worker calls `claim_limited(conn, schema, worker_id,
  kinds, want)` with its free slots as `want`, on an autocommit claim connection.
  It returns rows shaped like worker_claim's (id, kind, payload text, attempts, max_attempts).

Why it cannot exceed a limit with any number of workers: each limited kind's row in
`kind_limits` is locked (FOR UPDATE SKIP LOCKED) by one statement of the function
jobtui_claim_limited (migration 0023), and the running jobs are counted and claimed by the
next one, with a new snapshot, in the same transaction. Any other claim of that kind holds the
same row lock until it commits, so the second statement's snapshot sees all of them. The
function is one client statement: the server commits it without waiting on the worker, so a
worker frozen mid-claim holds no lock that stops the others (issue 25).
A kind another worker is claiming at that moment is skipped rather than waited for, so a
worker never queues behind another and a kind at its limit never holds up other kinds.

Guarantees, stated exactly:
- concurrency N: at no moment are more than N jobs of the kind locked and unfinished (as
  long as every claimer goes through claim_limited; the article's bare claim query or an old
  worker does not know about limits). A job whose worker died counts until it is rescued.
- per_worker N: the same, per worker id.
- rate N per second/minute: a token bucket of N tokens refilled at N per period; a start
  spends one token. Over any interval of length T there are at most N + N·T/period starts
  (a burst of N after an idle period, then the steady rate); over a long run, N per period.
"""

from __future__ import annotations

import contextlib
import re
import time
import weakref
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg.types.json import Jsonb

from jobtui.models import KindLimitRow
from jobtui.sql import queries

PERIODS = {"s": 1, "sec": 1, "second": 1, "m": 60, "min": 60, "minute": 60}
MAX_LIMIT = 2**31 - 1
# How soon a worker looks again at a kind at its concurrency limit with jobs waiting.
FULL_POLL_S = 0.05
# How long a connection that found no five-argument claim (a schema before 0030) claims with
# four arguments before it tries five again: not at every claim, where each try is an error
# (a round trip, and an ERROR line with the statement in the server's log).
MERGE_RETRY_S = 60.0
_UNMERGED: weakref.WeakKeyDictionary[Any, float] = weakref.WeakKeyDictionary()
_RATE = re.compile(r"^\s*(\d+)\s*/\s*([a-z]+)\s*$")


class InvalidLimit(ValueError):
    """A limit that cannot be used; str() is one line naming the field."""


def parse_rate(text: str) -> tuple[int, int]:
    """`"100/m"` → (100, 60); `"5/s"` → (5, 1). Raises InvalidLimit."""
    match = _RATE.match(text.lower()) if isinstance(text, str) else None
    if not match or match.group(2) not in PERIODS:
        raise InvalidLimit(f"rate must look like 100/s or 100/m, not {text!r}")
    rate = int(match.group(1))
    _positive("rate", rate)
    return rate, PERIODS[match.group(2)]


def _positive(name: str, value: int | None) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_LIMIT:
        raise InvalidLimit(f"{name} must be a whole number from 1 to {MAX_LIMIT}, not {value!r}")
    return value


@dataclass(frozen=True)
class KindLimit:
    """The limits of one kind; None means "no limit of that sort"."""

    kind: str
    concurrency: int | None = None
    per_worker: int | None = None
    rate: int | None = None
    rate_period_s: int = 1  # 1 (per second) or 60 (per minute)

    def __post_init__(self) -> None:
        if not isinstance(self.kind, str) or not self.kind.strip() or "\x00" in self.kind:
            raise InvalidLimit(f"kind must be a non-empty string, not {self.kind!r}")
        _positive("concurrency", self.concurrency)
        _positive("per_worker", self.per_worker)
        _positive("rate", self.rate)
        if self.rate_period_s not in (1, 60):
            raise InvalidLimit(f"rate period must be 1 or 60 seconds, not {self.rate_period_s!r}")

    @classmethod
    def declared(
        cls,
        kind: str,
        *,
        concurrency: int | None = None,
        per_worker: int | None = None,
        rate: str | int | None = None,
    ) -> KindLimit:
        """What a handler declares, e.g. `@registry.handler("mail", concurrency=5,
        rate="100/m")`; an int rate is per second."""
        if rate is None or isinstance(rate, int):
            return cls(kind, concurrency, per_worker, rate, 1)
        n, period = parse_rate(rate)
        return cls(kind, concurrency, per_worker, n, period)

    @property
    def limited(self) -> bool:
        return any(v is not None for v in (self.concurrency, self.per_worker, self.rate))

    def row(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "concurrency": self.concurrency,
            "per_worker": self.per_worker,
            "rate": self.rate,
            "period_s": self.rate_period_s,
        }


class LimitedRows(list[tuple[Any, ...]]):
    """Claimed rows (id, kind, payload text, attempts, max_attempts), like worker_claim's.

    `wait_s` maps each rate-limited kind that ran out of tokens to the seconds until its next
    one (claim again then), and each kind at its concurrency (or per-worker) limit with jobs
    ready to FULL_POLL_S (room comes back when a job of it finishes on any worker, which sends
    no NOTIFY: look again then). `skipped` lists the kinds asked for that were not looked at:
    another worker was claiming them at that moment (claim again soon: they may have room left), or
    they are paused or no longer limited (the fast claim takes those).
    """

    wait_s: dict[str, float]
    skipped: list[str]


async def claim_limited(
    conn: psycopg.AsyncConnection,
    schema: str,
    worker_id: str,
    kinds: Sequence[str],
    want: int,
    others: Sequence[str] = (),
) -> LimitedRows:
    """Claim up to `want` jobs of these limited kinds without exceeding any kind's limits.

    `others`: the worker's kinds without a limit, which it claims next with what is left. A
    limited job is claimed only where one claim order over both (priority DESC, run_at, id)
    puts it among the first `want` (migration 0030); a kind some of whose jobs were held
    back so comes back with wait 0 (claim it again at the next turn). On a schema before 0030
    the limited kinds are claimed alone, as there.

    One statement (jobtui_claim_limited, migration 0023), committed by the server on its own:
    no lock is held across a round trip to this worker. Kinds without a limit in `kinds` are
    reported skipped (the fast claim takes them). The attempt limit is the one rule of
    jobtui_max_attempts, written into each claimed row.
    """
    result = LimitedRows()
    result.wait_s, result.skipped = {}, []
    if want < 1 or not kinds:
        return result
    q = queries(schema)
    params = {"kinds": list(kinds), "worker": worker_id, "want": want, "full_poll_s": FULL_POLL_S}
    cur = None
    if others and time.monotonic() >= _UNMERGED.get(conn, 0.0):
        # A schema before 0030 has no five-argument claim: `jobtui migrate` runs before new
        # workers start, but one started first keeps claiming, as 0029 did.
        with contextlib.suppress(psycopg.errors.UndefinedFunction):
            cur = await conn.execute(q.limits_claim, {**params, "others": list(others)})
        if cur is None:
            _UNMERGED[conn] = time.monotonic() + MERGE_RETRY_S
    if cur is None:
        cur = await conn.execute(q.limits_claim_own, params)
    claimed = []
    for job_id, kind, attempts, limit, wait_s in await cur.fetchall():
        if job_id is not None:
            claimed.append((job_id, kind, attempts, limit))
        elif wait_s is None:
            result.skipped.append(kind)
        else:
            result.wait_s[kind] = float(wait_s)
    result.skipped.sort()
    if claimed:
        # Read once the claim has committed: a large reply holds no lock while it travels.
        cur = await conn.execute(
            queries(schema).worker_claimed_payloads, {"ids": [c[0] for c in claimed]}
        )
        payloads: dict[int, str] = {r[0]: r[1] for r in await cur.fetchall()}
        result += [(i, k, payloads.get(i, "null"), a, m) for i, k, a, m in claimed]
    return result


async def limited_kinds(conn: psycopg.AsyncConnection, schema: str) -> set[str]:
    """Kinds with an effective limit (for a worker that filters its fast claim in Python)."""
    cur = await conn.execute(queries(schema).limits_limited_kinds)
    return {r[0] for r in await cur.fetchall()}


async def sync_kind_limits(
    conn: psycopg.AsyncConnection, schema: str, limits: Iterable[KindLimit]
) -> list[str]:
    """Upsert declared limits (pass every handled kind; all-None clears a stale declaration).

    Operator overrides are kept. Returns the kinds whose declaration changed.
    """
    rows = [limit.row() for limit in limits]
    if not rows:
        return []
    # One statement and no BEGIN/COMMIT around it: on the worker's autocommit connection the
    # server commits it as it ends, so no lock on the rows it upserts waits on the worker (a
    # worker frozen between the two would stop every other worker; behind a pooler, for good).
    cur = await conn.execute(queries(schema).limits_sync, {"rows": Jsonb(rows)})
    return [r[0] for r in await cur.fetchall()]


async def list_kind_limits(conn: psycopg.AsyncConnection, schema: str) -> list[KindLimitRow]:
    """Every kind with a limits row, by kind."""
    cur = await conn.execute(queries(schema).limits_list)
    return [KindLimitRow(*r) for r in await cur.fetchall()]
