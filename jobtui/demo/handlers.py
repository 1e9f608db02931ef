"""The demo's application: handlers for six kinds of work.

`jobtui demo` runs `jobtui worker --app jobtui.demo.handlers`, so this module is also an example of
a handlers module. The kinds behave like real ones: e-mail batches are quick, reports are slow,
the CRM export talks to a flaky third-party API (about 40 % of calls fail with the chained
exceptions a real HTTP client raises, so retries and dead letters appear within seconds), and
webhooks fail now and then. Back-off is seconds, not minutes, so the demo moves.

Two kinds run for minutes (a search index rebuild, a catalogue import), so there is always a
running job an operator can practise cancelling: `c` on it in the Jobs tab, and the handler stops
(the async one is cancelled; the plain one calls `current_job().check_cancelled()` between
steps).
"""

from __future__ import annotations

import asyncio
import random
import smtplib
import time
from typing import Any

from jobtui.registry import Registry
from jobtui.worker import current_job

registry = Registry()

KINDS = (
    "send_email",
    "generate_report",
    "export_crm",
    "deliver_webhook",
    "rebuild_search_index",
    "import_catalog",
)
LONG_KINDS = ("rebuild_search_index", "import_catalog")  # minutes each: cancel one while it runs
LONG_RUN_S = (60.0, 180.0)  # how long a long job runs, at random within these
CRM_FAILURE_RATE = 0.4


# --- the flaky third party ------------------------------------------------------------------


class CRMError(Exception):
    """The CRM export failed."""


class CRMUnavailable(CRMError):
    """The CRM API could not be reached or answered 5xx."""


class CRMRateLimited(CRMError):
    """The CRM API answered 429."""


class CRMRejected(CRMError):
    """The CRM API refused the record (422): retrying will not help."""


class HTTPError(Exception):
    """A non-2xx answer, as an HTTP client library would raise it."""

    def __init__(self, status: int, reason: str, url: str) -> None:
        super().__init__(f"{status} {reason} for url: {url}")
        self.status = status


CRM_URL = "https://api.crm-partner.example.com/v2/contacts"


def _transport(url: str, rng: random.Random) -> None:
    roll = rng.random()
    if roll < 0.35:
        raise TimeoutError(f"The read operation timed out after 5.0 seconds ({url})")
    if roll < 0.6:
        raise ConnectionResetError(104, "Connection reset by peer")
    if roll < 0.8:
        raise HTTPError(502, "Bad Gateway", url)
    raise HTTPError(429, "Too Many Requests", url)


def _post_contact(payload: dict[str, Any], rng: random.Random) -> None:
    email = str(payload.get("email", ""))
    if "@" not in email:
        try:
            raise HTTPError(422, "Unprocessable Entity", CRM_URL)
        except HTTPError as exc:
            raise CRMRejected(
                f"contact {payload.get('contact_id')}: email {email!r} is not valid"
            ) from exc
    if rng.random() < CRM_FAILURE_RATE:
        try:
            _transport(CRM_URL, rng)
        except HTTPError as exc:
            if exc.status == 429:
                raise CRMRateLimited(
                    "rate limit exceeded: 120 requests/min (retry after 30s)"
                ) from exc
            raise CRMUnavailable(f"POST {CRM_URL} failed: upstream answered {exc.status}") from exc
        except (TimeoutError, ConnectionResetError) as exc:
            raise CRMUnavailable(f"POST {CRM_URL} failed: {type(exc).__name__}") from exc


@registry.handler("export_crm", max_attempts=3, timeout=10, backoff_base=1, backoff_cap=5)
async def export_crm(payload: dict[str, Any]) -> None:
    """Push one contact to the partner's CRM."""
    await asyncio.sleep(random.uniform(0.05, 0.5))
    _post_contact(payload, random.Random())


# --- e-mail, reports, webhooks --------------------------------------------------------------


@registry.handler("send_email", max_attempts=4, timeout=30, backoff_base=2, backoff_cap=20)
async def send_email(payload: dict[str, Any]) -> None:
    """Send one batch of a campaign."""
    recipients = payload.get("recipients") or []
    await asyncio.sleep(0.02 + 0.03 * len(recipients) + random.uniform(0, 0.2))
    if random.random() < 0.05:
        raise smtplib.SMTPServerDisconnected(
            "Connection unexpectedly closed: smtp.mail.example.net:587"
        )


@registry.handler("generate_report", max_attempts=3, timeout=20, backoff_base=3, backoff_cap=30)
def generate_report(payload: dict[str, Any]) -> None:
    """Render a report: slow, CPU-light (sleeps), runs in a thread like any plain function."""
    time.sleep(random.uniform(1.0, 4.0))
    if payload.get("period") == "2026-13":
        raise ValueError(f"invalid period {payload['period']!r}: month must be 1..12")
    if random.random() < 0.04:
        raise MemoryError("report too large to render in memory (rows: 2_400_000)")


@registry.handler("deliver_webhook", max_attempts=4, timeout=10, backoff_base=2, backoff_cap=20)
async def deliver_webhook(payload: dict[str, Any]) -> None:
    """POST an event to a customer's endpoint."""
    await asyncio.sleep(random.uniform(0.03, 0.3))
    if random.random() < 0.15:
        endpoint = str(payload.get("endpoint", "https://hooks.example.com"))
        try:
            raise ConnectionRefusedError(111, "Connection refused")
        except ConnectionRefusedError as exc:
            raise HTTPError(503, "Service Unavailable", endpoint) from exc


# --- long-running work -----------------------------------------------------------------------


@registry.handler("rebuild_search_index", max_attempts=2, timeout=600, backoff_base=5)
async def rebuild_search_index(payload: dict[str, Any]) -> None:
    """Reindex a tenant's documents in batches: a few minutes; a cancel stops it at once."""
    batches = int(payload.get("batches", 60))
    pause = random.uniform(*LONG_RUN_S) / max(1, batches)
    for _ in range(batches):
        await asyncio.sleep(pause)


@registry.handler("import_catalog", max_attempts=2, timeout=600, backoff_base=5)
def import_catalog(payload: dict[str, Any]) -> None:
    """Import a supplier's catalogue row by row in a thread, checking for a cancel each step."""
    steps = int(payload.get("steps", 60))
    pause = random.uniform(*LONG_RUN_S) / max(1, steps)
    job = current_job()
    for _ in range(steps):
        if job is not None:
            job.check_cancelled()  # raises JobCancelled: the job ends cancelled, not succeeded
        time.sleep(pause)


# Periodic jobs, so the Schedules tab has something to show: each tick is enqueued once however
# many workers run (jobtui.schedules).
registry.schedule(
    "ops digest",
    "* * * * *",
    "send_email",
    {"campaign": "ops-digest", "recipients": ["ops@example.com"]},
)
registry.schedule(
    "monthly report",
    "0 6 1 * *",
    "generate_report",
    {"period": "2026-11"},
    timezone="Europe/Berlin",
    missed="latest",
)
