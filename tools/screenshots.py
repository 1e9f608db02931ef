"""`python tools/screenshots.py OUTDIR` (`make screenshots`): SVGs of each tab over demo data.

Starts an embedded PostgreSQL in a temporary directory, migrates it, seeds a believable queue
(several kinds, a running worker and a stale one, retrying jobs, dead letters with real-looking
tracebacks, an hour of per-minute history so the sparklines are full, schedules and kind limits)
and saves one SVG per tab plus the detail view, at 120×36.
"""

from __future__ import annotations

import asyncio
import random
import sys
import tempfile
from datetime import UTC, datetime, timedelta
from pathlib import Path

import psycopg
from psycopg.types.json import Jsonb

from jobtui import ops
from jobtui.console_config import ConsoleConfig
from jobtui.enqueue import JobSpec, enqueue_many
from jobtui.schedules import Schedule, sync_schedules
from jobtui.sql import queries
from jobtui.stats import BUCKETS_MS, bucket_index

SIZE = (120, 36)
KINDS = ("email.send", "image.resize", "report.build", "webhook.deliver", "billing.charge")

TRACEBACKS = {
    "email.send": (
        "SMTPRecipientsRefused: {'{user}@example.org': (550, b'5.1.1 mailbox unavailable')}",
        "Traceback (most recent call last):\n"
        '  File "/srv/app/jobs/email.py", line 41, in send\n'
        "    smtp.send_message(msg)\n"
        '  File "/usr/lib/python3.12/smtplib.py", line 986, in send_message\n'
        "    return self.sendmail(from_addr, to_addrs, flatmsg, mail_options, rcpt_options)\n"
        '  File "/usr/lib/python3.12/smtplib.py", line 901, in sendmail\n'
        "    raise SMTPRecipientsRefused(senderrs)\n"
        "smtplib.SMTPRecipientsRefused: "
        "{'{user}@example.org': (550, b'5.1.1 mailbox unavailable')}",
    ),
    "webhook.deliver": (
        "ConnectTimeout: timed out connecting to 'hooks.partner-{n}.example' after 10.0s",
        "Traceback (most recent call last):\n"
        '  File "/srv/app/jobs/webhooks.py", line 77, in deliver\n'
        "    resp = await client.post(url, json=body, timeout=10.0)\n"
        '  File "/srv/venv/lib/python3.12/site-packages/httpx/_client.py", line 1859, in post\n'
        "    return await self.request(...)\n"
        '  File "/srv/venv/lib/python3.12/site-packages/httpx/_transports/default.py", '
        "line 72, in map_httpcore_exceptions\n"
        "    raise mapped_exc(message) from exc\n"
        "httpx.ConnectTimeout: timed out connecting to 'hooks.partner-{n}.example' after 10.0s",
    ),
    "billing.charge": (
        "CardDeclined: card ending {n} declined for invoice 'inv_{user}' (insufficient_funds)",
        "Traceback (most recent call last):\n"
        '  File "/srv/app/jobs/billing.py", line 118, in charge\n'
        "    intent = gateway.charge(customer, amount_cents, idempotency_key=key)\n"
        '  File "/srv/app/billing/gateway.py", line 64, in charge\n'
        "    raise CardDeclined(card.last4, invoice.id, reason)\n"
        "app.billing.errors.CardDeclined: "
        "card ending {n} declined for invoice 'inv_{user}' (insufficient_funds)",
    ),
    "image.resize": (
        "KeyError: 'thumbnail'",
        "Traceback (most recent call last):\n"
        '  File "/srv/app/jobs/images.py", line 23, in resize\n'
        '    spec = PRESETS[payload["preset"]]\n'
        "KeyError: 'thumbnail'",
    ),
}

USERS = ("ada", "grace", "linus", "guido", "barbara", "ken", "margaret", "dennis")


def _payload(kind: str, i: int, rnd: random.Random) -> dict[str, object]:
    user = rnd.choice(USERS)
    if kind == "email.send":
        return {
            "to": f"{user}@example.org",
            "template": rnd.choice(["welcome", "receipt", "reset"]),
            "locale": "en",
        }
    if kind == "image.resize":
        return {
            "bucket": "uploads",
            "key": f"u/{user}/{i:05d}.jpg",
            "preset": rnd.choice(["thumbnail", "hero"]),
        }
    if kind == "report.build":
        return {"report": "monthly-usage", "account": 1000 + i % 37, "month": "2026-10"}
    if kind == "webhook.deliver":
        return {
            "url": f"https://hooks.partner-{i % 9}.example/events",
            "event": "invoice.paid",
            "id": i,
        }
    return {
        "customer": f"cus_{user}{i}",
        "amount_cents": rnd.choice([900, 1900, 4900]),
        "currency": "EUR",
    }


def _error(
    kind: str, attempt: int, at: datetime, worker: str, rnd: random.Random
) -> tuple[str, dict[str, object]]:
    head, tb = TRACEBACKS.get(kind, TRACEBACKS["image.resize"])
    user, n = rnd.choice(USERS), rnd.randint(1000, 9999)
    head = head.replace("{user}", user).replace("{n}", str(n))
    tb = tb.replace("{user}", user).replace("{n}", str(n))
    return head, {
        "attempt": attempt,
        "at": at.isoformat(),
        "error": head,
        "traceback": tb,
        "worker": worker,
    }


def seed(dsn: str, schema: str = "public", *, seed_value: int = 7) -> None:
    """Fill a migrated database with a queue that looks like a busy evening in production."""
    rnd = random.Random(seed_value)
    q = queries(schema)
    now = datetime.now(UTC)
    live_a = "app-worker-1:4121:k3p9"
    live_b = "app-worker-2:3377:x81c"
    stale = "batch-7f9c:912:q0ze"
    specs: list[JobSpec] = []
    for i in range(420):
        kind = rnd.choices(KINDS, weights=(5, 3, 1, 3, 2))[0]
        age = timedelta(seconds=rnd.uniform(1, 400 if kind != "report.build" else 2400))
        specs.append(
            JobSpec(
                kind=kind,
                payload=_payload(kind, i, rnd),
                run_at=now - age,
                priority=rnd.choice([0, 0, 0, 10]),
            )
        )
    for i in range(60):
        kind = rnd.choice(KINDS)
        specs.append(
            JobSpec(
                kind=kind,
                payload=_payload(kind, 1000 + i, rnd),
                delay=timedelta(minutes=rnd.randint(2, 90)),
            )
        )
    rnd.shuffle(specs)  # ids mixed across states, as in a live queue
    with psycopg.connect(dsn, autocommit=True) as conn:
        enqueue_many(conn, specs, schema=schema)
        ids = [r[0] for r in conn.execute(q.screenshots_job_kinds)]
        kinds_by_id: dict[int, str] = dict(conn.execute(q.screenshots_job_kinds).fetchall())
        picks = rnd.sample(ids, 90)
        for job_id in picks[:12]:
            conn.execute(
                q.screenshots_running,
                {
                    "id": job_id,
                    "secs": rnd.uniform(0.5, 40),
                    "worker": rnd.choice([live_a, live_b]),
                },
            )
        for job_id in picks[12:40]:
            kind = kinds_by_id[job_id]
            attempts = rnd.randint(1, 3)
            errors = [
                _error(kind, a, now - timedelta(minutes=5 * a), live_a, rnd)[1]
                for a in range(1, attempts + 1)
            ]
            conn.execute(
                q.screenshots_retrying,
                {
                    "id": job_id,
                    "attempts": attempts,
                    "error": errors[-1]["error"],
                    "errors": Jsonb(errors),
                    "delay": rnd.choice([-30, 60, 120, 240]),
                },
            )
        for job_id in picks[40:90]:
            conn.execute(q.screenshots_done, {"id": job_id, "secs": rnd.uniform(1, 600)})
        dead_mix = [
            ("webhook.deliver", 34),
            ("billing.charge", 11),
            ("email.send", 7),
            ("image.resize", 3),
        ]
        for kind, count in dead_mix:
            for i in range(count):
                created = now - timedelta(minutes=rnd.randint(70, 600))
                errors = []
                for attempt in range(1, 6):
                    _, entry = _error(
                        kind, attempt, created + timedelta(minutes=2**attempt), live_b, rnd
                    )
                    errors.append(entry)
                conn.execute(
                    q.screenshots_dead_letter,
                    {
                        "kind": kind,
                        "payload": Jsonb(_payload(kind, 5000 + i, rnd)),
                        "attempts": 5,
                        "created": created,
                        "error": errors[-1]["error"],
                        "errors": Jsonb(errors),
                        "reason": "failed" if i % 9 else "worker_lost",
                        "died": created + timedelta(minutes=rnd.randint(20, 60)),
                    },
                )
        # A dead letter whose payload tries to act on the terminal; the console shows it inert.
        conn.execute(
            q.screenshots_dead_letter,
            {
                "kind": "email.send",
                "payload": Jsonb(
                    {"to": "x@example.org", "subject": "\x1b]52;c;aGk=\x07[bold]hi[/]"}
                ),
                "attempts": 5,
                "created": now - timedelta(hours=2),
                "error": "ValueError: bad subject \x1b[31m[red]x",
                "errors": Jsonb([]),
                "reason": "failed",
                "died": now - timedelta(hours=1),
            },
        )
        for wid, kinds, hb, running, conc in (
            (live_a, ["email.send", "webhook.deliver", "billing.charge"], 1.2, 7, 16),
            (live_b, ["*"], 3.4, 5, 8),
            (stale, ["report.build"], 312.0, 0, 2),
        ):
            host, pid, _ = wid.split(":")
            conn.execute(
                q.screenshots_worker,
                {
                    "id": wid,
                    "host": host,
                    "pid": int(pid),
                    "kinds": kinds,
                    "conc": conc,
                    "running": running,
                    "started": now - timedelta(hours=rnd.randint(2, 30)),
                    "hb": now - timedelta(seconds=hb),
                },
            )
        conn.execute(q.screenshots_pause, {"kind": "image.resize"})
        minute0 = now.replace(second=0, microsecond=0)
        ready = 300.0
        for m in range(60, -1, -1):
            minute = minute0 - timedelta(minutes=m)
            ready = max(40.0, ready + rnd.uniform(-25, 28) + (8 if 20 < m < 35 else 0))
            conn.execute(
                q.screenshots_queue_sample,
                {
                    "minute": minute,
                    "ready": int(ready),
                    "scheduled": 60,
                    "running": 12,
                    "retrying": 28,
                    "dead": 55,
                    "oldest": 120 + (60 - m) * 36 + rnd.uniform(0, 60),
                },
            )
            for kind in KINDS:
                base = {
                    "email.send": 140,
                    "image.resize": 0,
                    "report.build": 4,
                    "webhook.deliver": 90,
                    "billing.charge": 35,
                }[kind]
                if base == 0 and m < 25:
                    continue
                done = max(0, int(base * rnd.uniform(0.7, 1.3) * (0.6 if 20 < m < 35 else 1)))
                failed = int(
                    done * {"webhook.deliver": 0.22, "billing.charge": 0.04}.get(kind, 0.005)
                )
                hist = [0] * (len(BUCKETS_MS) + 1)
                total_ms = 0.0
                for _ in range(min(done, 50)):
                    ms = rnd.lognormvariate(4.5 if kind != "report.build" else 9.5, 0.8)
                    hist[bucket_index(ms)] += max(1, done // 50)
                    total_ms += ms * max(1, done // 50)
                conn.execute(
                    q.screenshots_kind_stats,
                    {
                        "minute": minute,
                        "kind": kind,
                        "done": done,
                        "failed": failed,
                        "dead": 0,
                        "sum": total_ms,
                        "hist": hist,
                    },
                )
        conn.execute(q.screenshots_analyze)


SCHEDULES = (
    Schedule("nightly-usage-report", "0 3 * * *", "report.build", timezone="Europe/Berlin"),
    Schedule("invoice-run", "0 6 1 * *", "billing.charge", timezone="America/New_York"),
    Schedule("webhook-retry-sweep", "*/5 * * * *", "webhook.deliver"),
    Schedule("digest-email", "30 7 * * 1-5", "email.send", timezone="Europe/London"),
)


async def seed_schedules_and_limits(dsn: str, schema: str = "public") -> None:
    """Schedules (one paused, one run by hand) and kind limits, through the engine's own calls."""
    actor = ops.Actor("ops@screenshots")
    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
        await sync_schedules(conn, schema, SCHEDULES)
        await ops.pause_schedule(conn, schema, "invoice-run", actor=actor)
        await ops.run_schedule_now(conn, schema, "webhook-retry-sweep", actor=actor)
        await ops.set_kind_limits(
            conn, schema, "webhook.deliver", concurrency=5, rate=100, rate_period_s=60, actor=actor
        )
        await ops.set_kind_limits(conn, schema, "billing.charge", per_worker=2, actor=actor)


async def capture(dsn: str, outdir: Path, schema: str = "public") -> list[Path]:
    """Drive the real app and save an SVG per tab and of the detail view."""
    from jobtui.tui.app import JobtuiApp

    outdir.mkdir(parents=True, exist_ok=True)
    app = JobtuiApp(dsn, schema, config=ConsoleConfig())
    saved: list[Path] = []

    async def settle(pilot: object) -> None:
        for _ in range(50):
            await pilot.pause(0.1)  # type: ignore[attr-defined]
            if not app._polling and app.updated_at is not None:
                break
        await pilot.pause(0.3)  # type: ignore[attr-defined]

    def save(name: str) -> None:
        saved.append(Path(app.save_screenshot(f"{name}.svg", str(outdir))))

    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        save("overview")
        await pilot.press("2")
        app.polls = 0
        await settle(pilot)
        save("jobs")
        await pilot.press("3")
        await settle(pilot)
        await pilot.press("down")
        await settle(pilot)
        await pilot.press("tab", "space", "down", "space", "down")
        await pilot.pause(0.3)
        save("dead-letters")
        await pilot.press("enter")
        await pilot.pause(1.0)
        save("detail")
        await pilot.press("escape", "4")
        await settle(pilot)
        save("workers")
        await pilot.press("5")
        await settle(pilot)
        save("schedules")
        await pilot.press("question_mark")
        await pilot.pause(0.5)
        save("help")
        await pilot.press("escape", "1")
        await settle(pilot)
        await pilot.press("enter")  # the kind under the cursor: its kind screen
        await pilot.pause(1.5)
        save("kind")
        await pilot.press("escape")
        await pilot.pause(0.3)
        # A real transaction left open by a report script: the Database tab names it.
        async with await psycopg.AsyncConnection.connect(
            dsn, application_name="nightly-report"
        ) as holder:
            await holder.execute("SELECT txid_current()")
            await holder.execute("SELECT count(*) FROM jobs")
            await asyncio.sleep(2.0)
            await pilot.press("6")
            await settle(pilot)
            save("database")
            await holder.rollback()
        # Why a job of a paused kind waits, from its detail.
        async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
            await ops.pause_kind(conn, schema, "report.build", actor=ops.Actor("ops@screenshots"))
            cur = await conn.execute(
                "SELECT id FROM jobs WHERE kind = 'report.build' AND finished_at IS NULL "
                "AND locked_at IS NULL AND run_at <= now() ORDER BY id LIMIT 1"
            )
            row = await cur.fetchone()
        if row is not None:
            app.open_detail("job", int(row[0]))
            await pilot.pause(1.5)
            save("why")
    # The size an operator often has over SSH.
    small = JobtuiApp(dsn, schema, config=ConsoleConfig())
    async with small.run_test(size=(80, 24)) as pilot:
        for _ in range(50):
            await pilot.pause(0.1)
            if not small._polling and small.updated_at is not None:
                break
        await pilot.pause(0.3)
        saved.append(Path(small.save_screenshot("overview-80x24.svg", str(outdir))))
    return saved


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python tools/screenshots.py OUTDIR", file=sys.stderr)
        return 2
    outdir = Path(args[0])
    from jobtui.embedded import EmbeddedUnavailable, start_embedded
    from jobtui.schema import migrate

    with tempfile.TemporaryDirectory(prefix="jobtui-shots-") as tmp:
        try:
            server = start_embedded(Path(tmp) / "pg")
        except EmbeddedUnavailable as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 1
        try:
            with psycopg.connect(server.dsn, autocommit=True) as conn:
                migrate(conn, "public")
            seed(server.dsn)
            asyncio.run(seed_schedules_and_limits(server.dsn))
            for path in asyncio.run(capture(server.dsn, outdir)):
                print(path)
        finally:
            server.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
