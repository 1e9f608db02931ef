"""What the demo puts in its database: a backlog of realistic jobs, a few dead letters with
real-looking tracebacks, an hour of history for the charts, and a trickle of new jobs.
"""

from __future__ import annotations

import random
import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
from psycopg.types.json import Jsonb

from jobtui.demo.handlers import CRM_URL
from jobtui.enqueue import JobSpec, enqueue_many
from jobtui.sql import queries
from jobtui.stats import N_BUCKETS, bucket_index

SEED_BACKLOG_LIMIT = 100  # a reused demo with this many pending jobs gets no new batch


_FIRST = ("ann", "bob", "chen", "dara", "emil", "fatima", "goran", "hana", "ivan", "julia")
_DOMAINS = ("example.com", "example.org", "mail.example.net", "corp.example")
_REPORTS = ("monthly_revenue", "churn_by_cohort", "invoice_aging", "usage_by_plan")


def _email(rng: random.Random) -> str:
    return f"{rng.choice(_FIRST)}.{rng.randint(1, 999)}@{rng.choice(_DOMAINS)}"


def make_job(kind: str, rng: random.Random, *, delay: timedelta | None = None) -> JobSpec:
    """One realistic job of `kind`."""
    payload: dict[str, Any]
    if kind == "send_email":
        payload = {
            "campaign": rng.choice(("weekly-digest", "trial-ending", "invoice-ready")),
            "batch": rng.randint(1, 400),
            "recipients": [_email(rng) for _ in range(rng.randint(3, 12))],
        }
    elif kind == "generate_report":
        payload = {
            "report": rng.choice(_REPORTS),
            "account_id": rng.randint(1000, 9999),
            "period": "2026-13" if rng.random() < 0.05 else f"2026-{rng.randint(1, 11):02d}",
            "format": rng.choice(("pdf", "xlsx")),
        }
    elif kind == "export_crm":
        bad = rng.random() < 0.08
        payload = {
            "contact_id": rng.randint(10_000, 99_999),
            "email": "n/a" if bad else _email(rng),
            "crm": "salesforce-sandbox",
        }
    elif kind == "rebuild_search_index":
        payload = {"tenant": f"tenant-{rng.randint(1, 40)}", "batches": 60}
    elif kind == "import_catalog":
        payload = {"supplier": rng.choice(("acme", "globex", "initech")), "steps": 60}
    else:
        payload = {
            "endpoint": f"https://hooks.customer-{rng.randint(1, 40)}.example/jobtui",
            "event": rng.choice(("invoice.paid", "subscription.renewed", "user.deleted")),
            "event_id": str(uuid.UUID(int=rng.getrandbits(128))),
        }
    max_attempts = {"send_email": 4, "generate_report": 3, "export_crm": 3}.get(kind, 4)
    priority = {"deliver_webhook": 5, "export_crm": 3}.get(kind, 0)
    return JobSpec(
        kind=kind, payload=payload, delay=delay, max_attempts=max_attempts, priority=priority
    )


def initial_jobs(rng: random.Random) -> list[JobSpec]:
    """The first batch: a backlog across kinds and some work scheduled for later."""
    jobs = [make_job("send_email", rng) for _ in range(60)]
    jobs += [make_job("generate_report", rng) for _ in range(10)]
    jobs += [make_job("export_crm", rng) for _ in range(40)]
    jobs += [make_job("deliver_webhook", rng) for _ in range(30)]
    jobs += [make_job(k, rng) for k in ("rebuild_search_index", "import_catalog") for _ in "ab"]
    for _ in range(20):
        kind = rng.choice(("send_email", "generate_report", "deliver_webhook"))
        jobs.append(make_job(kind, rng, delay=timedelta(minutes=rng.randint(2, 90))))
    # One contact the CRM always rejects, whatever the draw: its retries (1 s, then 2 s apart)
    # and its dead letter show within the demo's first seconds. Without it, 1 run in a few
    # hundred drew no such contact and no failure streak, and showed no new dead letter.
    rejected = make_job("export_crm", rng)
    jobs.append(replace(rejected, payload={**rejected.payload, "email": "n/a"}))
    rng.shuffle(jobs)
    return jobs


def trickle_jobs(rng: random.Random) -> list[JobSpec]:
    """A few new jobs, as an application would enqueue them each second."""
    weights = (
        ("send_email", 4),
        ("export_crm", 3),
        ("deliver_webhook", 3),
        ("generate_report", 1),
        # About one a minute of each: with runs of 1-3 minutes, one or two always running.
        ("rebuild_search_index", 0.06),
        ("import_catalog", 0.06),
    )
    kinds = rng.choices(
        [k for k, _ in weights], weights=[w for _, w in weights], k=rng.randint(1, 4)
    )
    return [make_job(k, rng) for k in kinds]


def _traceback(frames: Iterable[tuple[str, int, str, str]], final: str) -> str:
    lines = ["Traceback (most recent call last):"]
    for path, line, func, code in frames:
        lines.append(f'  File "{path}", line {line}, in {func}')
        lines.append(f"    {code}")
    lines.append(final)
    return "\n".join(lines) + "\n"


def _crm_timeout_tb(contact_id: int) -> tuple[str, str]:
    inner = _traceback(
        [
            (
                "/app/crm/client.py",
                88,
                "_request",
                "resp = self._session.post(url, json=body, timeout=5.0)",
            ),
            ("/usr/lib/python3.12/ssl.py", 1251, "recv_into", "return self.read(nbytes, buffer)"),
        ],
        "TimeoutError: The read operation timed out after 5.0 seconds",
    )
    error = f"CRMUnavailable: POST {CRM_URL} failed: TimeoutError"
    outer = _traceback(
        [
            ("/app/jobs/export.py", 41, "export_crm", "client.upsert_contact(payload)"),
            (
                "/app/crm/client.py",
                63,
                "upsert_contact",
                "self._request('POST', '/v2/contacts', body)",
            ),
            (
                "/app/crm/client.py",
                95,
                "_request",
                "raise CRMUnavailable(f'POST {url} failed: ...') from exc",
            ),
        ],
        error,
    )
    tb = (
        inner + "\nThe above exception was the direct cause of the following exception:\n\n" + outer
    )
    return error, tb


def _seed_dead_letters(conn: psycopg.Connection, schema: str, rng: random.Random) -> int:
    q = queries(schema)
    rows = 0
    for i in range(6):
        contact = rng.randint(10_000, 99_999)
        kind = "export_crm" if i < 4 else "deliver_webhook"
        errors = []
        attempts = 3 if kind == "export_crm" else 4
        for attempt in range(1, attempts + 1):
            if kind == "export_crm":
                error, tb = _crm_timeout_tb(contact)
            else:
                error = "HTTPError: 503 Service Unavailable for url: https://hooks.customer-7.example/jobtui"
                tb = _traceback(
                    [("/app/jobs/webhooks.py", 27, "deliver_webhook", "resp.raise_for_status()")],
                    error,
                )
            at = datetime.now(UTC) - timedelta(minutes=40 - attempt * 3 + i)
            errors.append(
                {
                    "attempt": attempt,
                    "at": at.isoformat(),
                    "error": error,
                    "traceback": tb,
                    "worker": f"demo-host:{4000 + i}:a1b2c3",
                }
            )
        payload: dict[str, Any] = (
            {"contact_id": contact, "email": _email(rng), "crm": "salesforce-sandbox"}
            if kind == "export_crm"
            else {
                "endpoint": "https://hooks.customer-7.example/jobtui",
                "event": "invoice.paid",
                "event_id": str(uuid.UUID(int=rng.getrandbits(128))),
            }
        )
        conn.execute(
            q.demo_insert_dead,
            {
                "kind": kind,
                "payload": Jsonb(payload),
                "attempts": attempts,
                "max_attempts": attempts,
                "last_error": errors[-1]["error"],
                "errors": Jsonb(errors),
                "reason": "failed",
                "age": timedelta(minutes=30 - i * 4),
            },
        )
        rows += 1
    return rows


_PROFILE = {  # jobs per minute, failure ratio, run time range in ms
    "send_email": (40, 0.04, (40, 400)),
    "generate_report": (3, 0.05, (1000, 4000)),
    "export_crm": (18, 0.4, (60, 600)),
    "deliver_webhook": (20, 0.15, (30, 300)),
}


def _seed_history(
    conn: psycopg.Connection, schema: str, rng: random.Random, minutes: int = 60
) -> None:
    """An hour of per-minute figures, so the console's sparklines are full from the start."""
    q = queries(schema)
    for ago in range(minutes, 0, -1):
        wave = 1.0 + 0.5 * (1 if (ago // 12) % 2 else -0.4)
        ready_total = 0
        for kind, (rate, fail, (lo, hi)) in _PROFILE.items():
            done = max(0, int(rng.gauss(rate * wave, rate * 0.2)))
            failed = sum(1 for _ in range(done) if rng.random() < fail)
            hist = [0] * N_BUCKETS
            runtime_sum = 0.0
            for _ in range(done):
                ms = rng.uniform(lo, hi)
                runtime_sum += ms
                hist[bucket_index(ms)] += 1
            dead = 1 if kind == "export_crm" and rng.random() < 0.25 else 0
            conn.execute(
                q.demo_insert_kind_stats,
                {
                    "ago": ago,
                    "kind": kind,
                    "done": done - failed,
                    "failed": failed,
                    "dead": dead,
                    "runtime_sum_ms": runtime_sum,
                    "hist": hist,
                },
            )
            ready_total += int(rate * wave * rng.uniform(0.2, 1.5))
        conn.execute(
            q.demo_insert_queue_sample,
            {
                "ago": ago,
                "ready": ready_total,
                "scheduled": rng.randint(10, 30),
                "running": rng.randint(3, 10),
                "retrying": rng.randint(2, 15),
                "dead": 6 + (60 - ago) // 10,
                "oldest": rng.uniform(1, 40) * wave,
            },
        )


def seed(conn: psycopg.Connection, schema: str, *, rng: random.Random | None = None) -> int:
    """Seed jobs, a few dead letters and an hour of history; returns the jobs added.

    On a reused demo database only what is missing is added: dead letters when there are none,
    history for minutes without figures, jobs when the backlog has run down.
    `conn` is an autocommit connection; jobs go in one COPY.
    """
    rng = rng or random.Random()
    q = queries(schema)
    with conn.transaction():
        row = conn.execute(q.demo_dead_count).fetchone()
        if row is not None and row[0] == 0:
            _seed_dead_letters(conn, schema, rng)
        _seed_history(conn, schema, rng)
    row = conn.execute(q.demo_pending_count).fetchone()
    if row is not None and row[0] >= SEED_BACKLOG_LIMIT:
        return 0
    return enqueue_many(conn, initial_jobs(rng), schema=schema)


def run_trickle(dsn: str, schema: str, stop: Callable[[], bool]) -> None:
    """Enqueue one to four jobs about every second until `stop()`; outages are retried quietly."""
    rng = random.Random()
    conn: psycopg.Connection | None = None
    while not stop():
        try:
            if conn is None or conn.closed:
                conn = psycopg.connect(
                    dsn, autocommit=True, application_name="jobtui-demo-trickle", connect_timeout=5
                )
            enqueue_many(conn, trickle_jobs(rng), schema=schema)
        except psycopg.Error:
            conn = None
        deadline = time.monotonic() + rng.uniform(0.6, 1.4)
        while not stop() and time.monotonic() < deadline:
            time.sleep(0.05)
    if conn is not None:
        conn.close()
