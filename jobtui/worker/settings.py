"""How a worker runs: intervals, limits and timeouts, checked before anything starts."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

# The largest concurrency the `workers` row stores (an int4): above it the worker failed at
# start with `database error: integer out of range`.
MAX_CONCURRENCY = 2**31 - 1


@dataclass
class WorkerSettings:
    """How a worker runs; every interval is in seconds.

    `heartbeat_interval` and `heartbeat_timeout` are written into the worker's `workers` row:
    other workers judge this worker's jobs by them, not by their own settings.
    `listen_dsn` is where the worker LISTENs (see jobtui.worker.listener).
    `statement_timeout` bounds every claim and outcome write; housekeeping statements (rescue,
    prune, ANALYZE, sweeps, samples) wait at most `housekeeping_lock_timeout` for a lock and run
    at most `housekeeping_timeout`, and are skipped (and logged) when they cannot.
    """

    concurrency: int = 10
    kinds: tuple[str, ...] | None = None  # None = every kind in the registry
    poll_interval: float = 1.0
    heartbeat_interval: float = 5.0
    heartbeat_timeout: float = 30.0
    lock_timeout: float = 3600.0  # rows locked by something that never heartbeats
    shutdown_grace: float = 30.0
    retention: timedelta = timedelta(days=7)
    prune_interval: float = 60.0
    stats_flush_interval: float = 1.0
    claim_batch: int | None = None
    statement_timeout: float = 60.0
    housekeeping_lock_timeout: float = 1.0
    housekeeping_timeout: float = 30.0
    # A session-mode DSN for LISTEN when `dsn` goes through a transaction pooler; None: the
    # JOBTUI_LISTEN_DSN environment variable, else the worker's DSN.
    listen_dsn: str | None = None

    def check(self) -> None:
        """Raise ValueError (one line) for settings the worker cannot run with."""
        if isinstance(self.concurrency, bool) or not isinstance(self.concurrency, int):
            raise ValueError(f"concurrency must be an integer, not {self.concurrency!r}")
        if not 1 <= self.concurrency <= MAX_CONCURRENCY:
            raise ValueError(
                f"concurrency must be from 1 to {MAX_CONCURRENCY}, not {self.concurrency}"
            )
        for name in (
            "poll_interval",
            "heartbeat_interval",
            "heartbeat_timeout",
            "lock_timeout",
            "prune_interval",
            "stats_flush_interval",
            "statement_timeout",
            "housekeeping_lock_timeout",
            "housekeeping_timeout",
        ):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
                raise ValueError(f"{name} must be a positive number of seconds, not {value!r}")
        if not self.shutdown_grace >= 0:
            raise ValueError(f"shutdown_grace must be >= 0, not {self.shutdown_grace!r}")
        if self.heartbeat_timeout <= self.heartbeat_interval:
            raise ValueError(
                f"heartbeat_timeout ({self.heartbeat_timeout}s) must be longer than "
                f"heartbeat_interval ({self.heartbeat_interval}s)"
            )
        if self.retention.total_seconds() <= 0:
            raise ValueError("retention must be a positive duration")
        if self.claim_batch is not None and self.claim_batch < 1:
            raise ValueError(f"claim_batch must be at least 1, not {self.claim_batch}")

    def prunes_anything(self) -> bool:
        """False when the retention reaches back before year 1 (`--retention 999999999d`, a
        way to say "never"): no job finished then, and `now() - retention` is out of
        PostgreSQL's range, so the prune chore failed every interval."""
        return self.retention < datetime.now(UTC) - datetime.min.replace(tzinfo=UTC)
