"""Hostile and bad input, one case per test: each names the exact message or behaviour.

Payloads, error texts, filters and settings that an application (or anyone who can put text in
a job) might send. Whatever comes in is either stored intact and shown inert, or refused with
one clear line; the worker never stops working and nothing prints a traceback.

Cases covered elsewhere and not repeated here: handlers raising SystemExit, KeyboardInterrupt
and a BaseException subclass (test_worker.py::test_base_exceptions_are_recorded_as_failures_
and_the_worker_survives), handlers hanging past their timeout that honour the cancel event
(test_worker.py::test_timeouts_of_async_and_plain_handlers_are_failures), unknown kinds never
dead-lettered (test_worker.py::test_unknown_kind_stays_pending_and_is_never_dead_lettered), a
wrong password (test_cli.py::test_wrong_password_is_one_line), the schema missing for stats,
jobs, enqueue and dead (test_cli.py::test_schema_not_migrated_says_run_migrate), NUL and NaN
payloads through the CLI (test_cli.py::test_payloads_postgres_cannot_store_are_refused_in_one_
line), hostile text in dead-letter detail in the console (test_tui_console.py::test_hostile_
payload_and_error_render_inert).
"""

from __future__ import annotations

import asyncio
import functools
import json
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest
from apps.helpers import fetchall, fetchval, running_worker, wait_until
from psycopg import conninfo
from psycopg.types.json import Jsonb
from rich.text import Text
from test_cli_support import assert_ok, assert_one_error, run_cli

from jobtui import browse, metrics
from jobtui.config import CONNECT_TIMEOUT_S
from jobtui.enqueue import InvalidJob, JobSpec, enqueue, enqueue_many
from jobtui.models import DeadFilter, JobFilter
from jobtui.registry import Registry
from jobtui.worker import Worker, WorkerSettings

OSC52 = "\x1b]52;c;aGVsbG8=\x07"  # set the terminal's clipboard
CLEAR = "\x1b[2J"  # clear the screen
MARKUP = "[bold red]x[/]"
HOSTILE = f"{OSC52} {CLEAR} {MARKUP}"
INJECTION = "x'; DROP TABLE jobs; --"
RAW_CONTROL = ("\x1b", "\x07", "\x9b")
HERE = Path(__file__).parent


def no_raw_control(text: str) -> bool:
    return not any(c in text for c in RAW_CONTROL)


def nested(depth: int) -> Any:
    value: Any = []
    for _ in range(depth - 1):
        value = [value]
    return value


async def dead_row(aconn: psycopg.AsyncConnection, kind: str) -> tuple[Any, ...]:
    rows = await fetchall(
        aconn,
        "SELECT id, last_error, errors, reason, attempts FROM dead_letters WHERE kind = %s",
        (kind,),
    )
    assert len(rows) == 1, rows
    return tuple(rows[0])


async def succeeded(aconn: psycopg.AsyncConnection, job_id: int) -> bool:
    return bool(
        await fetchval(
            aconn,
            "SELECT finished_at IS NOT NULL AND cancelled_at IS NULL FROM jobs WHERE id = %s",
            (job_id,),
        )
    )


# --------------------------------------------------------------------------- payloads


async def test_a_10mb_payload_is_stored_intact_and_shown_by_the_cli_and_browse(
    dsn: str, aconn: psycopg.AsyncConnection
) -> None:
    blob = ("0123456789abcdé€" * 625_000)[:10_000_000]
    payload = {"blob": blob, "n": 1}
    job_id = await enqueue(aconn, "big", payload)
    assert await fetchval(
        aconn, "SELECT payload = %s FROM jobs WHERE id = %s", (Jsonb(payload), job_id)
    )
    job = await browse.get_job(aconn, "public", job_id)
    assert job is not None and job.payload == payload
    listed = await browse.list_jobs(aconn, "public", JobFilter(kind="big"))
    assert [r.id for r in listed.rows] == [job_id]
    t0 = time.monotonic()
    shown = assert_ok(run_cli("jobs", "show", str(job_id), dsn=dsn))
    assert time.monotonic() - t0 < 30
    assert f'"blob": "{blob}"' in shown  # the whole payload, once
    assert shown.count(blob) == 1
    # A listing shows a cut preview, not ten megabytes per row.
    listing = assert_ok(run_cli("jobs", "list", "--kind", "big", dsn=dsn))
    assert str(job_id) in listing
    assert max(len(line) for line in listing.splitlines()) < 1000


async def test_a_payload_500_levels_deep_round_trips_through_the_worker(
    dsn: str, aconn: psycopg.AsyncConnection
) -> None:
    payload = {"deep": nested(500)}
    got: list[Any] = []
    reg = Registry()

    @reg.handler("deep")
    async def deep(p: Any) -> None:
        got.append(p)

    job_id = await enqueue(aconn, "deep", payload)
    async with running_worker(dsn, reg):
        await wait_until(lambda: succeeded(aconn, job_id), what="the deep job")
    assert got == [payload]


def test_a_payload_5000_levels_deep_is_one_line_from_the_cli_and_writes_nothing(
    dsn: str, conn: psycopg.Connection
) -> None:
    text = "[" * 5000 + "]" * 5000
    line = assert_one_error(run_cli("enqueue", "deep", text, dsn=dsn), 1, "jobtui: error:")
    assert "RecursionError" in line or "nested" in line
    assert conn.execute("SELECT count(*) FROM jobs").fetchone() == (0,)


def test_a_payload_5000_levels_deep_is_refused_by_enqueue_with_invalid_job(
    conn: psycopg.Connection,
) -> None:
    with pytest.raises(InvalidJob, match="nested too deeply"):
        enqueue(conn, "deep", nested(5000))
    assert conn.execute("SELECT count(*) FROM jobs").fetchone() == (0,)


def test_a_nul_character_anywhere_in_a_payload_is_refused_and_nothing_written(
    conn: psycopg.Connection,
) -> None:
    message = "payload contains a NUL character, which PostgreSQL jsonb cannot store"
    for payload in ({"a\x00b": 1}, ["ok", {"deep": ["x\x00"]}]):
        with pytest.raises(InvalidJob) as info:
            enqueue(conn, "k", payload)
        assert str(info.value) == message
    with pytest.raises(InvalidJob, match="NUL character"):
        enqueue_many(conn, [JobSpec("k", {}), JobSpec("k", {"s": "\x00"})])
    assert conn.execute("SELECT count(*) FROM jobs").fetchone() == (0,)


def test_a_lone_surrogate_in_a_cli_payload_is_one_line_and_writes_nothing(
    dsn: str, conn: psycopg.Connection
) -> None:
    # JSON may spell a lone surrogate; PostgreSQL's jsonb refuses it.
    proc = run_cli("enqueue", "k", '{"a": "\\ud800"}', dsn=dsn)
    assert_one_error(proc, 1, "payload contains a lone surrogate")
    assert conn.execute("SELECT count(*) FROM jobs").fetchone() == (0,)


def test_bytes_that_are_not_utf8_in_cli_arguments_are_one_line(dsn: str) -> None:
    import subprocess

    from test_cli_support import JOBTUI, clean_env

    cases: list[list[str | bytes]] = [
        ["jobs", "list", "--kind", b"\xff\xfe"],
        ["enqueue", b"k\xff", "{}"],
    ]
    for args in cases:
        proc = subprocess.run(
            [*JOBTUI, "--dsn", dsn, *args], capture_output=True, env=clean_env(), timeout=60
        )
        err = proc.stderr.decode("utf-8", "replace")
        assert proc.returncode == 1, err
        assert len(err.splitlines()) == 1 and "Traceback" not in err
        assert err.startswith("jobtui: error: ")


# ---------------------------------------------------------------- attempts and run_at


def test_max_attempts_of_zero_or_negative_is_refused_by_enqueue(conn: psycopg.Connection) -> None:
    for bad in (0, -1, -(2**40)):
        with pytest.raises(InvalidJob) as info:
            enqueue(conn, "k", {}, max_attempts=bad)
        assert str(info.value) == f"max_attempts must be at least 1, not {bad}"
        with pytest.raises(InvalidJob, match="at least 1"):
            enqueue_many(conn, [{"kind": "k", "max_attempts": bad}])
    assert conn.execute("SELECT count(*) FROM jobs").fetchone() == (0,)


def test_max_attempts_of_zero_or_negative_is_refused_by_the_cli(
    dsn: str, conn: psycopg.Connection
) -> None:
    line = assert_one_error(run_cli("enqueue", "k", "--max-attempts", "0", dsn=dsn), 2)
    assert line == (
        "jobtui enqueue: error: argument --max-attempts: expected 1 or more, not 0 "
        "(see `jobtui enqueue --help`)"
    )
    line = assert_one_error(run_cli("enqueue", "k", "--max-attempts", "-3", dsn=dsn), 2)
    assert "argument --max-attempts" in line and "-3" in line
    proc = run_cli("enqueue", "--file", "-", dsn=dsn, input='{"kind": "k", "max_attempts": 0}\n')
    assert_one_error(proc, 1, "max_attempts must be at least 1, not 0")
    assert conn.execute("SELECT count(*) FROM jobs").fetchone() == (0,)


async def test_run_at_in_year_1_runs_at_once_and_its_age_is_reported_in_days(
    dsn: str, aconn: psycopg.AsyncConnection
) -> None:
    ancient = datetime(1, 1, 1, tzinfo=UTC)
    job_id = await enqueue(aconn, "old", {}, run_at=ancient)
    snap = await metrics.snapshot(aconn, "public")
    years = (snap.oldest_ready_age_s or 0) / (365.25 * 86400)
    assert 2020 < years < 2100
    assert snap.totals.ready == 1
    stats = assert_ok(run_cli("stats", dsn=dsn))
    assert "oldest ready 7" in stats and "d" in stats.split("oldest ready ")[1].split()[0]
    reg = Registry()

    @reg.handler("old")
    async def old(p: Any) -> None:
        return None

    started = time.monotonic()
    async with running_worker(dsn, reg):
        await wait_until(lambda: succeeded(aconn, job_id), what="the ancient job")
    assert time.monotonic() - started < 10


async def test_run_at_in_year_9999_is_scheduled_not_ready_and_shown(
    dsn: str, aconn: psycopg.AsyncConnection
) -> None:
    far = datetime(9999, 12, 31, 23, 0, tzinfo=UTC)
    job_id = await enqueue(aconn, "far", {}, run_at=far)
    snap = await metrics.snapshot(aconn, "public")
    assert (snap.totals.ready, snap.totals.scheduled) == (0, 1)
    assert snap.oldest_ready_age_s is None
    page = await browse.list_jobs(aconn, "public", JobFilter(states=("scheduled",)))
    assert [(r.id, r.run_at) for r in page.rows] == [(job_id, far)]
    shown = assert_ok(run_cli("jobs", "show", str(job_id), dsn=dsn))
    assert "state:            scheduled" in shown
    assert "run at:           9999-12-31T23:00:00+00:00" in shown
    reg = Registry()
    ran: list[Any] = []

    @reg.handler("far")
    async def far_handler(p: Any) -> None:
        ran.append(p)

    async with running_worker(dsn, reg):
        await asyncio.sleep(0.5)
    assert ran == []
    assert await fetchval(aconn, "SELECT attempts FROM jobs WHERE id = %s", (job_id,)) == 0


# ------------------------------------------------------------------ what handlers do


async def test_error_text_with_surrogates_from_undecodable_bytes_is_stored_and_dead_lettered(
    dsn: str, aconn: psycopg.AsyncConnection
) -> None:
    reg = Registry()
    bad = b"caf\xe9 \xff\xfe".decode("utf-8", "surrogateescape")  # as os.fsdecode makes them

    @reg.handler("bytes", max_attempts=1)
    def raises_bytes(p: Any) -> None:
        raise ValueError(f"bad name {bad}")

    @reg.handler("fine")
    async def fine(p: Any) -> None:
        return None

    await enqueue(aconn, "bytes", {})
    async with running_worker(dsn, reg):
        await wait_until(
            lambda: fetchval(aconn, "SELECT count(*) = 1 FROM dead_letters"), what="dead"
        )
        later = await enqueue(aconn, "fine", {})
        await wait_until(lambda: succeeded(aconn, later), what="a later job")
    _, last_error, errors, reason, attempts = await dead_row(aconn, "bytes")
    assert last_error == "ValueError: bad name caf\\udce9 \\udcff\\udcfe"
    assert (reason, attempts) == ("failed", 1)
    assert errors[0]["error"] == last_error
    assert "caf\\udce9 \\udcff\\udcfe" in errors[0]["traceback"]


async def test_a_nul_in_an_error_message_is_escaped_when_stored(
    dsn: str, aconn: psycopg.AsyncConnection
) -> None:
    reg = Registry()

    @reg.handler("nul", max_attempts=1)
    async def nul(p: Any) -> None:
        raise RuntimeError("before\x00after")

    await enqueue(aconn, "nul", {})
    async with running_worker(dsn, reg):
        await wait_until(
            lambda: fetchval(aconn, "SELECT count(*) = 1 FROM dead_letters"), what="dead"
        )
    _, last_error, errors, _, _ = await dead_row(aconn, "nul")
    assert last_error == "RuntimeError: before\\0after"
    assert "before\\0after" in errors[0]["traceback"]


class Unprintable(Exception):
    def __str__(self) -> str:
        raise RuntimeError("str() of this exception fails")


async def test_an_exception_whose_str_fails_is_recorded_and_the_worker_goes_on(
    dsn: str, aconn: psycopg.AsyncConnection
) -> None:
    reg = Registry()

    @reg.handler("unprintable", max_attempts=1)
    async def unprintable(p: Any) -> None:
        raise Unprintable()

    @reg.handler("fine")
    async def fine(p: Any) -> None:
        return None

    job_id = await enqueue(aconn, "unprintable", {})
    async with running_worker(dsn, reg):
        await wait_until(
            lambda: fetchval(aconn, "SELECT count(*) = 1 FROM dead_letters"), what="dead"
        )
        later = await enqueue(aconn, "fine", {})
        await wait_until(lambda: succeeded(aconn, later), what="a later job")
    dead_id, last_error, errors, reason, _ = await dead_row(aconn, "unprintable")
    assert dead_id == job_id and reason == "failed"
    assert last_error == "Unprintable: <exception str() failed>"
    assert "Unprintable" in errors[0]["traceback"]


async def test_a_handler_raising_cancelled_error_itself_is_a_failure_not_a_cancel(
    dsn: str, aconn: psycopg.AsyncConnection
) -> None:
    reg = Registry()

    @reg.handler("selfcancel", max_attempts=2, backoff_base=0, jitter=0)
    async def selfcancel(p: Any) -> None:
        raise asyncio.CancelledError("not asked by anyone")

    job_id = await enqueue(aconn, "selfcancel", {})
    async with running_worker(dsn, reg):
        await wait_until(
            lambda: fetchval(aconn, "SELECT count(*) = 1 FROM dead_letters"), what="dead"
        )
    dead_id, last_error, errors, reason, attempts = await dead_row(aconn, "selfcancel")
    assert (dead_id, reason, attempts) == (job_id, "failed", 2)
    assert last_error == "CancelledError: not asked by anyone"
    assert [e["attempt"] for e in errors] == [1, 2]


async def test_handlers_returning_values_that_are_not_json_still_succeed(
    dsn: str, aconn: psycopg.AsyncConnection
) -> None:
    reg = Registry()

    @reg.handler("obj")
    async def obj(p: Any) -> Any:
        return object()

    @reg.handler("lam")
    def lam(p: Any) -> Any:
        return lambda: None

    @reg.handler("gen")
    def gen(p: Any) -> Any:
        return (i for i in range(3))

    @reg.handler("nan")
    def nan(p: Any) -> Any:
        return {float("nan"): {1, 2}}

    ids = [await enqueue(aconn, k, {}) for k in ("obj", "lam", "gen", "nan")]
    async with running_worker(dsn, reg):
        for job_id in ids:
            await wait_until(functools.partial(succeeded, aconn, job_id), what=f"job {job_id}")
    assert await fetchval(aconn, "SELECT count(*) FROM dead_letters") == 0
    assert await fetchval(aconn, "SELECT count(*) FROM jobs WHERE last_error IS NOT NULL") == 0


async def test_a_plain_handler_that_ignores_its_timeout_does_not_stop_the_worker(
    dsn: str, aconn: psycopg.AsyncConnection
) -> None:
    """The thread cannot be killed; other jobs run in the slots left, its job stays locked
    while its thread runs (issue 25: so it counts toward its kind's limits and never runs
    twice at once), a stop request returns within grace + a bit, and the attempt is then
    recorded as failed by its timeout."""
    reg = Registry()
    release = threading.Event()

    @reg.handler("stuck", timeout=0.3, max_attempts=1)
    def stuck(p: Any) -> None:
        release.wait(30)  # ignores current_job().cancelled

    @reg.handler("fine")
    def fine(p: Any) -> None:
        return None

    stuck_id = await enqueue(aconn, "stuck", {})
    try:
        async with running_worker(dsn, reg, concurrency=2, shutdown_grace=1.0) as worker:
            await wait_until(
                lambda: fetchval(aconn, "SELECT abandoned = 1 FROM workers"), what="overran"
            )
            ids = [await enqueue(aconn, "fine", {"n": i}) for i in range(5)]
            for job_id in ids:
                await wait_until(functools.partial(succeeded, aconn, job_id), what="fine")
            held = "SELECT locked_by IS NOT NULL FROM jobs WHERE id = %s"
            assert await fetchval(aconn, held, (stuck_id,)) is True
            t0 = time.monotonic()
            worker.request_stop()
        assert time.monotonic() - t0 < worker.settings.shutdown_grace + 5
    finally:
        release.set()
    _, last_error, _, reason, _ = await dead_row(aconn, "stuck")
    assert (last_error, reason) == ("TimeoutError: handler exceeded its timeout of 0.3s", "failed")
    assert stuck_id not in {r[0] for r in await fetchall(aconn, "SELECT id FROM jobs")}


async def test_an_async_handler_that_swallows_cancellation_is_released_at_stop(
    dsn: str, aconn: psycopg.AsyncConnection
) -> None:
    """Past its timeout and the grace, the worker stops anyway; the job is given back (not
    left locked by a worker that is gone) so another worker can run it at once."""
    reg = Registry()
    refusals = 0
    give_up = asyncio.Event()

    @reg.handler("stubborn", timeout=0.2)
    async def stubborn(p: Any) -> None:
        nonlocal refusals
        while not give_up.is_set():
            try:
                await asyncio.sleep(30)
            except asyncio.CancelledError:
                refusals += 1

    job_id = await enqueue(aconn, "stubborn", {})
    worker = Worker(
        dsn,
        "public",
        reg,
        WorkerSettings(
            poll_interval=0.1, heartbeat_interval=0.2, heartbeat_timeout=2.0, shutdown_grace=0.5
        ),
    )
    task = asyncio.create_task(worker.run())
    try:
        await wait_until(lambda: refusals >= 1, what="the timeout to be refused")
        t0 = time.monotonic()
        worker.request_stop()
        await asyncio.wait_for(asyncio.shield(task), 15)
        assert time.monotonic() - t0 < 0.5 + 2.0 + 1.0 + 2.0
    finally:
        give_up.set()
        await asyncio.wait_for(task, 5)
    row = await fetchall(
        aconn, "SELECT locked_by, attempts, finished_at FROM jobs WHERE id = %s", (job_id,)
    )
    assert row == [(None, 0, None)]
    assert await fetchval(aconn, "SELECT count(*) FROM workers") == 0


async def test_a_handler_leaking_threads_does_not_keep_the_worker_from_stopping(
    dsn: str, aconn: psycopg.AsyncConnection
) -> None:
    reg = Registry()
    leak = threading.Event()
    leaked: list[threading.Thread] = []

    @reg.handler("leaky")
    def leaky(p: Any) -> None:
        t = threading.Thread(target=leak.wait, args=(60,), name=f"leaked-{p['n']}")
        t.start()  # non-daemon, never joined
        leaked.append(t)

    ids = [await enqueue(aconn, "leaky", {"n": i}) for i in range(5)]
    try:
        async with running_worker(dsn, reg, shutdown_grace=1.0) as worker:
            for job_id in ids:
                await wait_until(functools.partial(succeeded, aconn, job_id), what="leaky")
            t0 = time.monotonic()
            worker.request_stop()
        assert time.monotonic() - t0 < 3
        assert len(leaked) == 5 and all(t.is_alive() for t in leaked)
    finally:
        leak.set()
        for t in leaked:
            t.join(5)
    assert await fetchval(aconn, "SELECT count(*) FROM workers") == 0


# ----------------------------------------------------------- escape sequences, markup


async def test_escape_sequences_and_markup_from_a_handler_are_stored_intact_and_printed_inert(
    dsn: str, aconn: psycopg.AsyncConnection
) -> None:
    reg = Registry()

    @reg.handler("evil", max_attempts=1)
    async def evil(p: Any) -> None:
        raise ValueError(HOSTILE)

    payload = {"subject": HOSTILE, HOSTILE: 1}
    dead_id = await enqueue(aconn, "evil", payload)
    pending_id = await enqueue(aconn, "evil_pending", payload)
    async with running_worker(dsn, reg):
        await wait_until(
            lambda: fetchval(aconn, "SELECT count(*) = 1 FROM dead_letters"), what="dead"
        )
    # Stored exactly as given.
    row = await fetchall(
        aconn, "SELECT payload, last_error, errors FROM dead_letters WHERE id = %s", (dead_id,)
    )
    assert row[0][0] == payload and row[0][1] == f"ValueError: {HOSTILE}"
    assert row[0][2][0]["error"] == f"ValueError: {HOSTILE}"
    escaped = "\\x1b]52;c;aGVsbG8=\\x07 \\x1b[2J [bold red]x[/]"
    outputs = {
        "dead list": assert_ok(run_cli("dead", "list", dsn=dsn)),
        "dead show": assert_ok(run_cli("dead", "show", str(dead_id), dsn=dsn)),
        "jobs list": assert_ok(run_cli("jobs", "list", dsn=dsn)),
        "jobs show": assert_ok(run_cli("jobs", "show", str(pending_id), dsn=dsn)),
    }
    for name, out in outputs.items():
        assert no_raw_control(out), (name, out)
        assert "[bold red]" in out, name  # markup printed as the characters it is
    assert f"ValueError: {escaped}" in outputs["dead show"]
    assert f"ValueError: {escaped}" in outputs["dead list"]
    # JSON escapes the control characters its own way (\u001b), just as inert.
    assert "\\u001b]52;c;aGVsbG8=\\u0007" in outputs["jobs show"]
    js = json.loads(assert_ok(run_cli("dead", "show", str(dead_id), "--json", dsn=dsn)))
    assert js["last_error"] == f"ValueError: {HOSTILE}"


async def test_the_console_job_detail_shows_escape_sequences_and_markup_inert(
    dsn: str, conn: psycopg.Connection
) -> None:
    from textual.geometry import Region
    from textual.widgets import Static

    from jobtui.console_config import ConsoleConfig
    from jobtui.tui.app import JobtuiApp
    from jobtui.tui.screens.detail import DetailScreen

    job_id = enqueue(conn, "evil", {"subject": HOSTILE})
    entry = {
        "attempt": 1,
        "at": "2026-01-01T00:00:00+00:00",
        "error": f"ValueError: {HOSTILE}",
        "traceback": f"Traceback (most recent call last):\nValueError: {HOSTILE}",
        "worker": f"w{CLEAR}:1:a",
    }
    conn.execute(
        "UPDATE jobs SET attempts = 1, last_error = %s, errors = %s, run_at = now() + '1h' "
        "WHERE id = %s",
        (entry["error"], Jsonb([entry]), job_id),
    )

    def text_of(widget: Any) -> str:
        """What the widget shows, as text (the lines it renders, joined)."""
        content = widget.content if isinstance(widget, Static) else None
        if isinstance(content, Text):
            return content.plain
        region = Region(0, 0, widget.size.width, widget.size.height)
        return "".join(strip.text.rstrip() for strip in widget.render_lines(region))

    app = JobtuiApp(dsn, "public", config=ConsoleConfig(refresh_s=0.5))
    async with app.run_test(size=(200, 60)) as pilot:
        await pilot.press("2")
        for _ in range(160):
            await pilot.pause(0.05)
            if app.polls >= 2:
                break
        app.open_detail("job", job_id)
        for _ in range(160):
            await pilot.pause(0.05)
            if isinstance(app.screen, DetailScreen) and app.screen.row is not None:
                break
        assert isinstance(app.screen, DetailScreen) and app.screen.row is not None
        await pilot.pause(0.2)
        payload = text_of(app.screen.query_one("#detail-payload"))
        errors = text_of(app.screen.query_one("#detail-errors"))
        screenshot = app.export_screenshot()
    assert "\\u001b]52;c;aGVsbG8=\\u0007" in payload and MARKUP in payload
    assert "\\x1b]52;c;aGVsbG8=\\x07" in errors and MARKUP in errors
    for text in (payload, errors, screenshot):
        assert no_raw_control(text)


# ---------------------------------------------------------------- filters, SQL-shaped


async def test_filters_shaped_like_sql_injection_through_browse_match_literally(
    aconn: psycopg.AsyncConnection,
) -> None:
    await enqueue_many(aconn, [JobSpec("k", {"n": i}) for i in range(3)])
    literal = await enqueue(aconn, INJECTION, {"note": "100% _real_"})
    for text in (INJECTION, "' OR 1=1 --", "'); DELETE FROM jobs; --", "\\", "%", "_"):
        page = await browse.list_jobs(aconn, "public", JobFilter(kind=text))
        assert [r.id for r in page.rows] == ([literal] if text == INJECTION else [])
        await browse.list_dead(aconn, "public", DeadFilter(kind=text, text=text))
        await browse.count_jobs(aconn, "public", JobFilter(text=text))
    # LIKE wildcards in search text are literal characters.
    for text, expected in (("100%", [literal]), ("_real_", [literal]), ("%%", []), ("__", [])):
        page = await browse.list_jobs(aconn, "public", JobFilter(text=text))
        assert [r.id for r in page.rows] == expected, text
    assert await fetchval(aconn, "SELECT count(*) FROM jobs") == 4


def test_a_kind_shaped_like_sql_injection_through_the_cli_is_just_text(
    dsn: str, conn: psycopg.Connection
) -> None:
    enqueue(conn, "k", {})
    assert assert_ok(run_cli("jobs", "list", "--kind", INJECTION, dsn=dsn)) == "no jobs match\n"
    assert assert_ok(run_cli("dead", "list", "--kind", INJECTION, dsn=dsn)) == (
        "no dead letters match\n"
    )
    out = assert_ok(
        run_cli("enqueue", INJECTION, '{"x": "\'; DROP TABLE dead_letters; --"}', dsn=dsn)
    )
    listed = assert_ok(run_cli("jobs", "list", "--kind", INJECTION, dsn=dsn))
    assert out.strip() in listed and INJECTION in listed
    assert conn.execute("SELECT count(*) FROM jobs").fetchone() == (2,)
    assert conn.execute("SELECT count(*) FROM dead_letters").fetchone() == (0,)


# ---------------------------------------------------------------------- unknown kind


async def test_an_unknown_kind_is_reported_unhandled_while_a_worker_runs_others(
    dsn: str, aconn: psycopg.AsyncConnection
) -> None:
    reg = Registry()

    @reg.handler("known")
    async def known(p: Any) -> None:
        return None

    stranger = await enqueue(aconn, "stranger", {})
    mine = await enqueue(aconn, "known", {})
    async with running_worker(dsn, reg):
        await wait_until(lambda: succeeded(aconn, mine), what="the known job")
        await enqueue(aconn, "known", {}, run_at=datetime.now(UTC) + timedelta(hours=1))
        snap = await metrics.snapshot(aconn, "public", heartbeat_timeout=2.0)
        stats = assert_ok(run_cli("stats", dsn=dsn))
    figures = {k.kind: k for k in snap.kinds}
    assert figures["stranger"].handled is False and figures["stranger"].ready == 1
    assert figures["known"].handled is True
    assert "stranger (no worker)" in stats and "known (no worker)" not in stats
    row = await fetchall(
        aconn, "SELECT attempts, locked_at, finished_at FROM jobs WHERE id = %s", (stranger,)
    )
    assert row == [(0, None, None)]


# ------------------------------------------------------------------------ connections


def test_an_unknown_host_is_one_line_within_the_connect_timeout() -> None:
    t0 = time.monotonic()
    proc = run_cli("stats", "--dsn", "postgresql://nosuchhost.invalid/db")
    line = assert_one_error(proc, 1)
    assert time.monotonic() - t0 < CONNECT_TIMEOUT_S + 5
    assert line.startswith("jobtui: error: could not connect to PostgreSQL: ")
    assert "nosuchhost.invalid" in line


def test_a_worker_against_a_missing_database_is_one_line(dsn: str) -> None:
    missing = conninfo.make_conninfo(dsn, dbname="jobtui_no_such_db")
    proc = run_cli("worker", "--app", "apps.basic", "--dsn", missing, cwd=HERE, timeout=60)
    assert_one_error(proc, 1, "database missing", 'database "jobtui_no_such_db" does not exist')


def test_a_worker_against_a_database_without_the_schema_says_run_migrate(empty_dsn: str) -> None:
    proc = run_cli("worker", "--app", "apps.basic", "--dsn", empty_dsn, cwd=HERE, timeout=60)
    line = assert_one_error(proc, 1)
    dbname = conninfo.conninfo_to_dict(empty_dsn)["dbname"]
    assert line.startswith(
        f"jobtui: error: jobtui's tables are not in schema 'public' of database '{dbname}' on "
    ), line
    assert line.endswith(
        ": run `jobtui migrate` first, or give --dsn of the database that has them"
    )


def test_a_wrong_password_on_the_machine_postgresql(pg_server_dsn: str) -> None:
    """Only against the machine's PostgreSQL (password auth on TCP); the embedded server
    trusts local sockets, and test_cli.py covers it there by editing pg_hba.conf."""
    info = conninfo.conninfo_to_dict(pg_server_dsn)
    if (info.get("host"), str(info.get("port", "5432"))) != ("127.0.0.1", "5432"):
        pytest.skip("JOBTUI_TEST_DSN does not point at 127.0.0.1:5432")
    role = f"jobtui_pw_{time.time_ns() % 10**9}"
    with psycopg.connect(pg_server_dsn, autocommit=True) as admin:
        admin.execute(f"CREATE ROLE {role} LOGIN PASSWORD 'right-password'")
        try:
            bad = conninfo.make_conninfo(pg_server_dsn, user=role, password="wrong-password")
            try:
                psycopg.connect(bad, connect_timeout=5).close()
            except psycopg.OperationalError:
                pass
            else:
                pytest.skip("the machine PostgreSQL does not check passwords on 127.0.0.1")
            assert_one_error(
                run_cli("stats", dsn=bad), 1, "authentication failed", f'user "{role}"'
            )
        finally:
            admin.execute(f"DROP ROLE {role}")


async def test_a_payload_too_deep_for_python_inserted_by_sql_fails_only_its_own_job(
    dsn: str, aconn: psycopg.AsyncConnection
) -> None:
    """An article-style producer can INSERT jsonb 5000 levels deep (PostgreSQL accepts it);
    Python's decoder cannot read it back. That job fails with a clear error and ends dead;
    the jobs claimed in the same batch run normally."""
    reg = Registry()
    seen: list[Any] = []

    @reg.handler("deep", max_attempts=1)
    async def deep(p: Any) -> None:
        seen.append(p)

    await aconn.execute(
        "INSERT INTO jobs (kind, payload) VALUES ('deep', %s::jsonb)", ("[" * 5000 + "]" * 5000,)
    )
    ok = [await enqueue(aconn, "deep", {"n": i}) for i in range(5)]
    async with running_worker(dsn, reg, concurrency=10):
        await wait_until(
            lambda: fetchval(aconn, "SELECT count(*) = 1 FROM dead_letters"), what="dead"
        )
        for job_id in ok:
            await wait_until(functools.partial(succeeded, aconn, job_id), what="the other jobs")
    _, last_error, _, reason, attempts = await dead_row(aconn, "deep")
    assert last_error == (
        "UndecodablePayload: payload is nested too deeply for Python's JSON decoder "
        "(10000 characters)"
    )
    assert (reason, attempts) == ("failed", 1)
    assert sorted(p["n"] for p in seen) == [0, 1, 2, 3, 4]


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"max_attempts": 2**31}, "max_attempts of 'k' must be an integer from 1 to 2147483647"),
        ({"max_attempts": -1}, "max_attempts of 'k' must be an integer from 1 to 2147483647"),
        ({"backoff_cap": float("inf")}, "backoff_cap of 'k' must be at most 3.1536e+08, not inf"),
        (
            {"backoff_base": 1e12},
            "backoff_base of 'k' must be at most 3.1536e+08, not 1000000000000.0",
        ),
    ],
)
def test_handler_options_the_database_could_not_hold_are_refused(
    options: dict[str, Any], message: str
) -> None:
    """A retry whose run_at or max_attempts PostgreSQL cannot store would fail the outcome
    write on every try, holding up every other outcome: refused when the handler is declared."""
    with pytest.raises(ValueError) as info:
        Registry().handler("k", **options)
    assert str(info.value) == message


# ------------------------------------------- known gaps in files this suite does not own


def test_a_lone_surrogate_in_a_payload_is_refused_with_invalid_job(
    conn: psycopg.Connection,
) -> None:
    with pytest.raises(InvalidJob, match="surrogate"):
        enqueue(conn, "k", {"name": "caf\udce9"})


def test_a_run_at_past_year_9999_is_refused_with_invalid_job(conn: psycopg.Connection) -> None:
    with pytest.raises(InvalidJob, match="9999"):
        enqueue(
            conn,
            "k",
            {},
            run_at=datetime(9999, 12, 31, tzinfo=UTC),
            delay=timedelta(days=2),
        )


async def test_rows_python_cannot_decode_do_not_break_job_listings(
    aconn: psycopg.AsyncConnection,
) -> None:
    await enqueue(aconn, "fine", {})
    await aconn.execute(
        "INSERT INTO jobs (kind, payload) VALUES ('deep', %s::jsonb)", ("[" * 5000 + "]" * 5000,)
    )
    await aconn.execute(
        "INSERT INTO jobs (kind, payload, run_at) VALUES ('far', '{}', '10000-01-02+00')"
    )
    page = await browse.list_jobs(aconn, "public", JobFilter())
    assert len(page.rows) == 3


async def test_a_handler_raising_a_10mb_message_stores_its_head_and_the_traceback_tail(
    dsn: str, aconn: psycopg.AsyncConnection
) -> None:
    """The message keeps its head (the exception type groups failures), the traceback its
    tail (where the error is); both bounded, the worker unharmed."""
    from jobtui.worker.outcomes import MAX_ERROR_CHARS, MAX_TRACEBACK_CHARS

    reg = Registry()

    @reg.handler("loud", max_attempts=1)
    def loud(p: Any) -> None:
        raise ValueError("start " + "x" * 10_000_000 + " end")

    await enqueue(aconn, "loud", {})
    async with running_worker(dsn, reg):
        await wait_until(
            lambda: fetchval(aconn, "SELECT count(*) = 1 FROM dead_letters"), what="dead"
        )
    _, last_error, errors, _, _ = await dead_row(aconn, "loud")
    assert last_error.startswith("ValueError: start xxx") and last_error.endswith("x…")
    assert len(last_error) == MAX_ERROR_CHARS
    tb = errors[0]["traceback"]
    assert tb.startswith("…") and tb.endswith("x end\n") and len(tb) == MAX_TRACEBACK_CHARS


def test_a_kind_too_long_for_a_notify_is_one_line_from_the_cli(
    dsn: str, conn: psycopg.Connection
) -> None:
    proc = run_cli("enqueue", "k" * 10_000, "{}", dsn=dsn)
    assert_one_error(proc, 1, "jobtui: error: ")
    assert conn.execute("SELECT count(*) FROM jobs").fetchone() == (0,)
