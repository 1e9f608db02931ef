"""Rendering for the command line: plain tables, detail views, JSON and Prometheus output.

Text that comes from the database (payloads, error messages, kind names) goes through the one
escaper, `jobtui.inert`, before it is printed; nothing is printed through Rich markup.
"""

from __future__ import annotations

import dataclasses
import shutil
import sys
from collections.abc import Iterable, Sequence
from datetime import date, datetime, timedelta
from typing import Any

from jobtui.config import format_duration
from jobtui.control_state import control_text
from jobtui.inert import ascii_json, clean, cut, first_line, payload_json
from jobtui.inert import prometheus_label as _label
from jobtui.models import DeadLetterRow, ErrorEntry, JobRow, Snapshot, WorkerRow

# Throughput and run-time figures come from the per-minute `kind_stats` rows that the bundled
# worker writes: jobs another consumer finishes (say, one written from the article) are not in
# them. Said wherever those figures are shown.
THROUGHPUT_SOURCE = "bundled worker only"


def table(headers: Sequence[str], rows: Iterable[Sequence[object]], *, flex: int = -1) -> str:
    """A plain aligned table; column `flex` shrinks to fit a terminal, others stay whole."""
    cells = [[clean(c) for c in row] for row in rows]
    widths = [len(h) for h in headers]
    for row in cells:
        for i, c in enumerate(row):
            widths[i] = max(widths[i], len(c))
    flex = flex % len(headers)
    if sys.stdout.isatty():
        total = shutil.get_terminal_size((120, 24)).columns
        others = sum(w for i, w in enumerate(widths) if i != flex) + 2 * (len(widths) - 1)
        widths[flex] = max(len(headers[flex]), min(widths[flex], total - others))
    else:
        widths[flex] = min(widths[flex], 160)
    lines = ["  ".join(h.ljust(widths[i]) for i, h in enumerate(headers)).rstrip()]
    for row in cells:
        lines.append(
            "  ".join(cut(c, widths[i]).ljust(widths[i]) for i, c in enumerate(row)).rstrip()
        )
    return "\n".join(lines)


def age(since: datetime | None, now: datetime) -> str:
    """`3m05s` since `since`, for tables."""
    return "–" if since is None else format_duration((now - since).total_seconds())


def to_jsonable(value: Any) -> Any:
    """Records (dataclasses) as plain JSON values: datetimes in ISO 8601, sets as lists."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: to_jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, datetime | date):
        return value.isoformat()
    if isinstance(value, timedelta):
        return value.total_seconds()
    if isinstance(value, frozenset | set):
        return sorted(to_jsonable(v) for v in value)
    if isinstance(value, list | tuple):
        return [to_jsonable(v) for v in value]
    if isinstance(value, dict):
        return {str(k): to_jsonable(v) for k, v in value.items()}
    return value


def stats_json(snap: Snapshot) -> str:
    """`stats --json`: the snapshot, with where throughput figures come from."""
    return ascii_json({**to_jsonable(snap), "throughput_source": THROUGHPUT_SOURCE}, indent=2)


def dumps(value: Any) -> str:
    """JSON for scripts; ASCII-only, so control characters always travel escaped."""
    return ascii_json(to_jsonable(value), indent=2)


# --- detail views -------------------------------------------------------------------------


def _errors_block(errors: Sequence[ErrorEntry]) -> list[str]:
    lines: list[str] = []
    for e in errors:
        lines.append(f"  attempt {e.attempt} at {clean(e.at)} on {clean(e.worker or '?')}:")
        lines.append("    " + clean(e.error))
        if e.traceback:
            for tb_line in clean(e.traceback, multiline=True).rstrip().splitlines():
                lines.append("      " + tb_line)
    return lines or ["  (none)"]


def job_detail(job: JobRow) -> str:
    """Everything about one job, for `jobtui jobs show`."""
    fields = [
        ("id", job.id),
        ("kind", job.kind),
        ("state", job.state),
        ("priority", job.priority),
        ("attempts", f"{job.attempts}/{job.max_attempts}"),
        ("created", job.created_at.isoformat()),
        ("run at", job.run_at.isoformat()),
        ("locked", f"{job.locked_at.isoformat()} by {job.locked_by}" if job.locked_at else "–"),
        ("finished", job.finished_at.isoformat() if job.finished_at else "–"),
        ("cancelled", job.cancelled_at.isoformat() if job.cancelled_at else "–"),
        ("cancel requested", "yes" if job.cancel_requested else "no"),
        ("last error", first_line(job.last_error) or "–"),
    ]
    lines = [f"{name + ':':<18}{clean(value)}" for name, value in fields]
    lines += ["payload:", _indent(payload_json(job.payload)), "errors:", *_errors_block(job.errors)]
    return "\n".join(lines)


def dead_detail(row: DeadLetterRow) -> str:
    """Everything about one dead letter, for `jobtui dead show`."""
    fields = [
        ("id", row.id),
        ("kind", row.kind),
        ("reason", row.reason),
        ("attempts", f"{row.attempts}/{row.max_attempts}"),
        ("priority", row.priority),
        ("created", row.created_at.isoformat()),
        ("died", row.died_at.isoformat()),
        ("last error", first_line(row.last_error) or "–"),
        ("signature", row.error_signature),
    ]
    lines = [f"{name + ':':<18}{clean(value)}" for name, value in fields]
    lines += ["payload:", _indent(payload_json(row.payload)), "errors:", *_errors_block(row.errors)]
    return "\n".join(lines)


def _indent(text: str) -> str:
    return "\n".join("  " + line for line in text.splitlines())


# --- stats --------------------------------------------------------------------------------


def stats_text(snap: Snapshot) -> str:
    """The human summary printed by `jobtui stats`."""
    t = snap.totals
    head = (
        replica_line(snap) + f"ready {t.ready}  scheduled {t.scheduled}  running {t.running}  "
        f"retrying {t.retrying}  exhausted {t.exhausted}  dead {t.dead}\n"
        f"oldest ready {format_duration(snap.oldest_ready_age_s)}  "
        f"done/min {snap.done_per_min:.1f}  failure rate {snap.failure_rate:.1%} "
        f"({THROUGHPUT_SOURCE})  "
        f"workers {sum(1 for w in snap.workers if not w.stale)} live"
        + (
            f", {sum(1 for w in snap.workers if w.stale)} stale"
            if any(w.stale for w in snap.workers)
            else ""
        )
    )
    tail = workers_text(snap.workers)
    if not snap.kinds:
        return head + "\n(no jobs yet)" + tail
    rows = [
        (
            k.kind + (" (paused)" if k.paused else "") + ("" if k.handled else " (no worker)"),
            k.ready,
            k.scheduled,
            k.running,
            k.retrying,
            k.exhausted,
            k.dead,
            format_duration(k.oldest_ready_age_s),
            f"{k.done_per_min:.1f}",
            f"{k.failure_rate:.0%}",
            "–" if k.p50_ms is None else f"{k.p50_ms:.0f}ms",
            "–" if k.p95_ms is None else f"{k.p95_ms:.0f}ms",
            limits_text(k.concurrency_limit, k.per_worker_limit, k.rate_limit),
        )
        for k in snap.kinds
    ]
    headers = (
        "KIND",
        "READY",
        "SCHED",
        "RUN",
        "RETRY",
        "EXH",
        "DEAD",
        "OLDEST",
        "DONE/MIN",
        "FAIL",
        "P50",
        "P95",
        "LIMITS",
    )
    return head + "\n\n" + table(headers, rows, flex=0) + tail


def replica_line(snap: Snapshot) -> str:
    """`replica (hot standby), lag 0.3s` and a newline on a standby; empty on a primary."""
    if snap.replica is None:
        return ""
    return f"replica (hot standby, read-only), lag {lag_text(snap.replica.lag_s)}\n"


def lag_text(lag_s: float | None) -> str:
    return "unknown (nothing replayed yet)" if lag_s is None else f"{lag_s:.1f}s"


def limits_text(concurrency: int | None, per_worker: int | None, rate: str | None) -> str:
    """`5 running, 2/worker, 100/m` or `–`."""
    parts = []
    if concurrency is not None:
        parts.append(f"{concurrency} running")
    if per_worker is not None:
        parts.append(f"{per_worker}/worker")
    if rate is not None:
        parts.append(rate)
    return ", ".join(parts) or "–"


def wakeup_text(w: WorkerRow) -> str:
    """How a worker is woken: `listen`, or `polling every 0.25s (why)`."""
    if w.wakeup_mode == "listen":
        return "listen"
    why = f" ({w.wakeup_note})" if w.wakeup_note else ""
    return f"{w.wakeup_mode} every {w.poll_interval_s:g}s{why}"


def workers_text(workers: Sequence[WorkerRow]) -> str:
    """The workers: liveness, what an operator asked of each (quiet, stop) and whether it has
    acted on it, how each is woken, abandoned threads and outcome errors."""
    if not workers:
        return "\n\nno workers registered"
    rows = [
        (
            w.id,
            f"{w.running}/{w.concurrency}",
            format_duration(w.heartbeat_age_s) + (" STALE" if w.stale else ""),
            control_text(w) or "–",
            f"{w.heartbeat_interval_s:g}s/{w.heartbeat_timeout_s:g}s",
            w.abandoned,
            w.outcome_errors,
            wakeup_text(w),
        )
        for w in workers
    ]
    headers = (
        "WORKER",
        "RUN",
        "HEARTBEAT",
        "CONTROL",
        "EVERY/TIMEOUT",
        "ABANDONED",
        "OUTCOME ERR",
        "WAKEUP",
    )
    lines = [table(headers, rows, flex=-1)]
    for w in workers:
        if w.last_outcome_error:
            error = clean(first_line(w.last_outcome_error))
            lines.append(f"last outcome error on {clean(w.id)}: {error}")
    return "\n\n" + "\n".join(lines)


def prometheus_text(snap: Snapshot) -> str:
    """The snapshot in the Prometheus text exposition format (for a textfile collector)."""
    out: list[str] = []

    def family(name: str, help_: str, samples: list[tuple[dict[str, str], float]]) -> None:
        out.append(f"# HELP {name} {help_}")
        out.append(f"# TYPE {name} gauge")
        for labels, value in samples:
            lbl = ",".join(f'{k}="{_label(v)}"' for k, v in labels.items())
            out.append(f"{name}{{{lbl}}} {_num(value)}" if lbl else f"{name} {_num(value)}")

    t = snap.totals
    family(
        "jobtui_jobs",
        "Jobs by state (dead = rows in dead_letters).",
        [
            ({"state": s}, getattr(t, s))
            for s in ("ready", "scheduled", "running", "retrying", "exhausted", "dead")
        ],
    )
    family(
        "jobtui_is_replica",
        "1 when connected to a hot standby (read-only), 0 on a primary.",
        [({}, 0 if snap.replica is None else 1)],
    )
    if snap.replica is not None and snap.replica.lag_s is not None:
        family(
            "jobtui_replica_lag_seconds",
            "Replay lag of the standby in seconds (0 when all WAL received is replayed).",
            [({}, snap.replica.lag_s)],
        )
    family(
        "jobtui_oldest_ready_age_seconds",
        "Age of the oldest ready job in seconds (0 when none is waiting).",
        [({}, snap.oldest_ready_age_s or 0.0)],
    )
    family(
        "jobtui_done_per_minute",
        f"Jobs completed per minute over the window ({THROUGHPUT_SOURCE}).",
        [({}, snap.done_per_min)],
    )
    family(
        "jobtui_failure_ratio",
        f"Failed attempts / all finished attempts over the window ({THROUGHPUT_SOURCE}).",
        [({}, snap.failure_rate)],
    )
    live = sum(1 for w in snap.workers if not w.stale)
    family(
        "jobtui_workers",
        "Registered workers by heartbeat status.",
        [({"status": "live"}, live), ({"status": "stale"}, len(snap.workers) - live)],
    )
    family(
        "jobtui_workers_running_jobs",
        "Jobs running on live workers.",
        [({}, sum(w.running for w in snap.workers if not w.stale))],
    )
    kinds = snap.kinds
    family(
        "jobtui_kind_jobs",
        "Jobs by kind and state.",
        [
            ({"kind": k.kind, "state": s}, getattr(k, s))
            for k in kinds
            for s in ("ready", "scheduled", "running", "retrying", "exhausted", "dead")
        ],
    )
    family(
        "jobtui_kind_oldest_ready_age_seconds",
        "Age of the oldest ready job of a kind.",
        [({"kind": k.kind}, k.oldest_ready_age_s or 0.0) for k in kinds],
    )
    family(
        "jobtui_kind_done_per_minute",
        f"Jobs of a kind completed per minute ({THROUGHPUT_SOURCE}).",
        [({"kind": k.kind}, k.done_per_min) for k in kinds],
    )
    family(
        "jobtui_kind_failed_per_minute",
        "Failed attempts of a kind per minute.",
        [({"kind": k.kind}, k.failed_per_min) for k in kinds],
    )
    family(
        "jobtui_kind_failure_ratio",
        "Failure ratio of a kind over the window.",
        [({"kind": k.kind}, k.failure_rate) for k in kinds],
    )
    family(
        "jobtui_kind_runtime_seconds",
        f"Run-time quantiles of a kind over the window ({THROUGHPUT_SOURCE}).",
        [
            ({"kind": k.kind, "quantile": q}, v / 1000.0)
            for k in kinds
            for q, v in (("0.5", k.p50_ms), ("0.95", k.p95_ms))
            if v is not None
        ],
    )
    family(
        "jobtui_kind_paused",
        "1 when the kind is paused.",
        [({"kind": k.kind}, 1 if k.paused else 0) for k in kinds],
    )
    family(
        "jobtui_kind_handled",
        "1 when a live worker handles the kind.",
        [({"kind": k.kind}, 1 if k.handled else 0) for k in kinds],
    )
    family(
        "jobtui_kind_concurrency_limit",
        "Effective concurrency limit of a kind (only kinds that have one).",
        [({"kind": k.kind}, k.concurrency_limit) for k in kinds if k.concurrency_limit],
    )
    workers = snap.workers
    family(
        "jobtui_worker_abandoned_threads",
        "Handler threads a worker abandoned (timeout or cancel) that still hold a slot.",
        [({"worker": w.id}, w.abandoned) for w in workers],
    )
    family(
        "jobtui_worker_outcome_errors",
        "Outcomes a worker could not write since it started.",
        [({"worker": w.id}, w.outcome_errors) for w in workers],
    )
    family(
        "jobtui_worker_polling",
        "1 when a worker is woken by polling (no working LISTEN), 0 when by LISTEN.",
        [({"worker": w.id}, 0 if w.wakeup_mode == "listen" else 1) for w in workers],
    )
    family(
        "jobtui_worker_stale",
        "1 when a worker's heartbeat is older than its own timeout.",
        [({"worker": w.id}, 1 if w.stale else 0) for w in workers],
    )
    return "\n".join(out) + "\n"


def _num(value: float) -> str:
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, int):
        return str(value)
    return repr(float(value))
