"""The kind screen: Enter on a kind opens its charts, errors and settings, read from a real
database holding per-minute history (kind_stats), jobs, dead letters, a pause, limits, a
declared handler and workers; its keys jump to the kind's jobs and dead letters, and pause."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

import psycopg
import pytest
from rich.text import Text
from test_tui_console import add_dead, config, notifications, rendered, until

from jobtui import kindinfo
from jobtui.stats import N_BUCKETS, bucket_index
from jobtui.tui.app import JobtuiApp
from jobtui.tui.screens.confirm import ConfirmScreen
from jobtui.tui.screens.kind import KindScreen, head, settings
from jobtui.tui.widgets.keyed_table import KeyedTable


def hist(*ms: float) -> list[int]:
    h = [0] * N_BUCKETS
    for m in ms:
        h[bucket_index(m)] += 1
    return h


def history(conn: psycopg.Connection, kind: str = "export_crm") -> None:
    """A kind with a known past: per-minute stats, unfinished and finished jobs, dead letters,
    retries, a pause, limits, a declared handler and two workers (one stale)."""
    minute = conn.execute("SELECT date_trunc('minute', now())").fetchone()[0]  # type: ignore[index]
    # Ten minutes ago: 30 done (run times 40 ms), 6 failed; three hours ago: 100 done (2 s).
    conn.execute(
        "INSERT INTO kind_stats (minute, kind, done, failed, dead, hist) VALUES "
        "(%s, %s, 30, 6, 2, %s), (%s, %s, 100, 0, 0, %s), (%s, 'other', 500, 50, 0, %s)",
        (
            minute - timedelta(minutes=10),
            kind,
            hist(*[40.0] * 30),
            minute - timedelta(hours=3),
            kind,
            hist(*[2000.0] * 100),
            minute - timedelta(minutes=10),
            hist(5.0),
        ),
    )
    # Five unfinished (2 ready, 1 retrying with an error, 2 scheduled later), created 30 min
    # ago; four that finished 5 min ago (so the depth 6 to 29 min ago was 9).
    conn.execute(
        "INSERT INTO jobs (kind, payload, created_at, run_at) "
        "SELECT %s, '{}', now() - interval '30 minutes', now() - interval '30 minutes' "
        "FROM generate_series(1, 2)",
        (kind,),
    )
    conn.execute(
        "INSERT INTO jobs (kind, payload, created_at, run_at, attempts, last_error) VALUES "
        "(%s, '{}', now() - interval '30 minutes', now() + interval '1 minute', 1, "
        "'ConnectionError: crm.example.com refused' || E'\\n' || 'more')",
        (kind,),
    )
    conn.execute(
        "INSERT INTO jobs (kind, payload, created_at, run_at) "
        "SELECT %s, '{}', now() - interval '30 minutes', now() + interval '1 hour' "
        "FROM generate_series(1, 2)",
        (kind,),
    )
    conn.execute(
        "INSERT INTO jobs (kind, payload, created_at, run_at, attempts, finished_at) "
        "SELECT %s, '{}', now() - interval '30 minutes', now() - interval '30 minutes', 1, "
        "now() - interval '5 minutes' FROM generate_series(1, 4)",
        (kind,),
    )
    add_dead(conn, kind, "TimeoutError: export took 31 s", n=3)
    add_dead(conn, kind, "KeyError: 'account'", n=1)
    # The flow of that story, as the count triggers write it when it happens (the rows above
    # were written now, with past times): 9 arrived 30 min ago, 4 departed 5 min ago (done),
    # 4 departed now (into dead_letters).
    conn.execute("DELETE FROM job_flow WHERE kind = %s", (kind,))
    conn.execute(
        "INSERT INTO job_flow (minute, kind, arrived, departed) VALUES "
        "(%(m)s - interval '30 minutes', %(k)s, 9, 0), (%(m)s - interval '5 minutes', %(k)s, 0, 4),"
        " (%(m)s, %(k)s, 0, 4)",
        {"m": minute, "k": kind},
    )
    add_dead(conn, "other", "ValueError: nope", n=2)
    conn.execute("INSERT INTO paused_kinds (kind, paused_by) VALUES (%s, 'ann@ops')", (kind,))
    conn.execute(
        "INSERT INTO kind_limits (kind, declared_concurrency, declared_rate, declared_period_s) "
        "VALUES (%s, 5, 100, 60)",
        (kind,),
    )
    conn.execute(
        "INSERT INTO kind_handlers (kind, max_attempts, timeout_s, backoff_base_s, "
        "backoff_cap_s, declared_by) VALUES (%s, 7, 45, 30, 3600, 'w:1:abc')",
        (kind,),
    )
    conn.execute(
        "INSERT INTO workers (id, host, pid, kinds, concurrency, running, control_applied) "
        "VALUES ('web-1:10:aaa', 'web-1', 10, %s, 8, 2, NULL), "
        "('web-2:20:bbb', 'web-2', 20, '{*}', 4, 0, 'quiet')",
        ([kind, "other"],),
    )
    conn.execute(
        "INSERT INTO workers (id, host, pid, kinds, concurrency, heartbeat_at) "
        "VALUES ('old:1:zzz', 'old', 1, %s, 1, now() - interval '10 minutes')",
        ([kind],),
    )


async def test_load_reads_history_errors_and_settings(
    dsn: str, conn: psycopg.Connection, aconn: psycopg.AsyncConnection
) -> None:
    history(conn)
    info = await kindinfo.load(aconn, "public", "export_crm", "hour")
    assert len(info.buckets) == 60
    ten_ago = info.buckets[-11]
    assert (ten_ago.done_per_min, ten_ago.failed_per_min) == (30, 6)
    assert ten_ago.p50_ms is not None and 20 < ten_ago.p50_ms <= 50
    assert sum(b.done_per_min for b in info.buckets) == 30  # three hours ago is outside
    assert info.failed == 6
    # Depth: the 4 dead letters were unfinished from an hour ago until they died (now, in the
    # current minute); 9 jobs joined them 30 minutes ago, 4 of which finished 5 minutes ago.
    depths = [b.depth for b in info.buckets]
    assert depths[-1] == 5
    assert depths[-2] == 9
    assert depths[-10] == 13 and depths[-29] == 13
    assert depths[-40] == 4
    # The finished jobs pruned (deleted, as `jobtui prune` does): the depth before is what it
    # was (it came from the rows themselves before migration 0022 and read 9 from 6 to 29
    # minutes ago); an INSERT now arrives in the current minute.
    conn.execute("DELETE FROM jobs WHERE kind = 'export_crm' AND finished_at IS NOT NULL")
    conn.execute("INSERT INTO jobs (kind, payload) VALUES ('export_crm', '{}')")
    again = await kindinfo.load(aconn, "public", "export_crm", "hour")
    assert [b.depth for b in again.buckets] == [*depths[:-1], 6]
    assert (info.unfinished, info.ready, info.retrying) == (5, 2, 1)
    assert info.dead == 4
    assert [(g.text, g.count) for g in info.dead_errors] == [
        ("TimeoutError: export took N s", 3),
        ("KeyError: ?", 1),
    ]
    assert [(g.text, g.count) for g in info.retry_errors] == [
        ("ConnectionError: crm.example.com refused", 1)
    ]
    assert info.paused_by == "ann@ops"
    assert info.handler is not None and (info.handler.max_attempts, info.handler.timeout_s) == (
        7,
        45,
    )
    assert info.limits is not None and (info.limits.concurrency, info.limits.rate) == (5, 100)
    assert [(w.id, w.stale, w.control) for w in info.workers] == [
        ("web-1:10:aaa", False, None),
        ("web-2:20:bbb", False, "quiet"),
        ("old:1:zzz", True, None),
    ]
    unknown = await kindinfo.load(aconn, "public", "never_seen", "hour")
    assert (unknown.unfinished, unknown.dead, unknown.handler) == (0, 0, None)
    assert {b.depth for b in unknown.buckets} == {0} and len(unknown.buckets) == 60
    assert [w.id for w in unknown.workers] == ["web-2:20:bbb"]  # it handles every kind ('*')
    conn.execute("DELETE FROM workers WHERE id = 'web-2:20:bbb'")
    unknown = await kindinfo.load(aconn, "public", "never_seen", "hour")
    assert unknown.workers == []
    assert "! no live worker handles this kind" in head(unknown).plain
    with pytest.raises(kindinfo.InvalidSpan):
        await kindinfo.load(aconn, "public", "export_crm", "week")
    day = await kindinfo.load(aconn, "public", "export_crm", "day")
    assert len(day.buckets) == 72
    assert sum(b.done_per_min * b.minutes for b in day.buckets) == 130


def screen_text(app: JobtuiApp) -> str:
    return "\n".join(
        rendered(w)
        for w in app.screen.query("#kind-head, #kind-charts, #kind-errors, #kind-settings")
    )


async def open_kind(
    app: JobtuiApp, pilot: Any, kind: str = "export_crm", *, complete: bool = True
) -> KindScreen:
    """Enter on `kind` in the Overview; its screen once its figures are read (all of them,
    unless not `complete`: then as soon as it is up)."""
    table = app.query_one("#overview-pane KeyedTable", KeyedTable)
    await until(pilot, lambda: kind in table.keys)
    table.focus()
    table.move_cursor(row=table.get_row_index(kind))
    await pilot.press("enter")
    await until(pilot, lambda: isinstance(app.screen, KindScreen))
    screen = app.screen
    assert isinstance(screen, KindScreen)
    if complete:
        await until(pilot, lambda: screen.info is not None)
        await pilot.pause()
    return screen


def history_and_sms(conn: psycopg.Connection) -> None:
    """`history`, and another kind: 7 ready sms.send jobs."""
    history(conn)
    conn.execute(
        "INSERT INTO jobs (kind, payload) SELECT 'sms.send', '{}' FROM generate_series(1, 7)"
    )


async def reopen_slowly(
    app: JobtuiApp, pilot: Any, monkeypatch: pytest.MonkeyPatch, kept: KindScreen, kind: str
) -> None:
    """Enter on `kind` in the Overview, its read made slow (the real one, after a pause), so
    the kept screen is seen before it: returns once the screen is up, its figures unread."""
    real_load = kindinfo.load

    async def slow_load(*args: Any) -> kindinfo.KindInfo:
        await asyncio.sleep(0.3)
        return await real_load(*args)

    monkeypatch.setattr(kindinfo, "load", slow_load)
    table = app.query_one("#overview-pane KeyedTable", KeyedTable)
    table.focus()
    table.move_cursor(row=table.get_row_index(kind))
    await pilot.press("enter")
    await until(pilot, lambda: app.screen is kept)
    await pilot.pause(0.05)


async def test_the_kept_kind_screen_never_shows_one_kind_under_another(
    dsn: str, conn: psycopg.Connection, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The app builds the kind screen once: opened on another kind it clears what the last
    kind showed before its own figures come, and opens on the last hour as a new one would."""
    history_and_sms(conn)
    app = JobtuiApp(dsn, "public", config=config())
    async with app.run_test(size=(100, 30)) as pilot:
        first = await open_kind(app, pilot)
        assert "export_crm" in rendered(first.query_one("#kind-head"))
        await pilot.press("t")  # the last day
        await until(pilot, lambda: first.info is not None and first.info.span == "day")
        await pilot.press("escape")
        await until(pilot, lambda: not isinstance(app.screen, KindScreen))
        await reopen_slowly(app, pilot, monkeypatch, first, "sms.send")
        assert first.info is None and "loading" in rendered(first.query_one("#kind-head"))
        assert "export_crm" not in rendered(first)
        await until(pilot, lambda: first.info is not None)
        await pilot.pause()
        text = rendered(first.query_one("#kind-head"))
        assert "sms.send" in text and "7 unfinished" in text and "last hour" in text
        assert first.info.kind == "sms.send" and first.info.span == "hour"


async def test_another_kind_opens_on_blank_regions_of_the_same_height(
    dsn: str, conn: psycopg.Connection, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Opened on another kind, the kept screen blanks each region but keeps its height (the
    charts' is the same for every kind), so the figures that come take that room: drawn into
    emptied regions, every region grew back and Textual laid the screen out twice over
    (benchmarks/console_scale.py's "every figure"). Nothing of the last kind is shown, and the
    head names the new kind as loading."""
    history_and_sms(conn)
    app = JobtuiApp(dsn, "public", config=config())
    async with app.run_test(size=(100, 30)) as pilot:
        screen = await open_kind(app, pilot)
        regions = ("#kind-head", "#kind-charts", "#kind-errors", "#kind-settings")
        heights = {r: screen.query_one(r).size.height for r in regions}
        lines = {r: rendered(screen.query_one(r)).count("\n") for r in regions}
        assert all(heights.values()) and lines["#kind-charts"] > 10, (heights, lines)
        await pilot.press("escape")
        await until(pilot, lambda: not isinstance(app.screen, KindScreen))
        await reopen_slowly(app, pilot, monkeypatch, screen, "sms.send")
        assert screen.info is None
        head_text = rendered(screen.query_one("#kind-head"))
        assert "sms.send" in head_text and "loading…" in head_text, head_text
        for r in regions:
            text = rendered(screen.query_one(r))
            assert screen.query_one(r).size.height == heights[r], r
            if r != "#kind-head":
                assert not text.strip(), (r, text)
        assert "export_crm" not in rendered(screen)
        await until(pilot, lambda: screen.info is not None)
        await pilot.pause()
        assert "7 unfinished" in rendered(screen.query_one("#kind-head"))
        assert screen.query_one("#kind-charts").size.height == heights["#kind-charts"]


async def test_t_says_at_once_which_span_is_loading(
    dsn: str, conn: psycopg.Connection, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 26 (the kind screen's feedback): `t` names the new span with "loading…" at once,
    and the charts of the old span make way, before the read of the new one comes back (at
    2.45 M jobs the title stayed on the old span until then, with no sign the key landed)."""
    history(conn)
    app = JobtuiApp(dsn, "public", config=config())
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await open_kind(app, pilot)
        assert "last hour" in rendered(screen.query_one("#kind-head"))
        # The real read, made slow, so the screen is seen while it runs.
        real_load = kindinfo.load

        async def slow_load(*args: Any) -> kindinfo.KindInfo:
            await asyncio.sleep(0.5)
            return await real_load(*args)

        monkeypatch.setattr(kindinfo, "load", slow_load)
        await pilot.press("t")
        await pilot.pause(0.05)
        assert screen.info is not None and screen.info.span == "hour"  # not read yet
        head_text = rendered(screen.query_one("#kind-head"))
        assert "last day" in head_text and "loading…" in head_text, head_text
        assert "export_crm" in head_text and "5 unfinished" in head_text, head_text
        assert "loading the last day" in rendered(screen.query_one("#kind-charts"))
        await until(pilot, lambda: screen.info is not None and screen.info.span == "day")
        await pilot.pause()
        head_text = rendered(screen.query_one("#kind-head"))
        assert "last day" in head_text and "loading" not in head_text, head_text
        assert "1.9s┤" in rendered(screen.query_one("#kind-charts"))


async def test_enter_on_a_kind_opens_its_screen_at_80x24(
    dsn: str, conn: psycopg.Connection
) -> None:
    history(conn)
    app = JobtuiApp(dsn, "public", config=config())
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await open_kind(app, pilot)
        text = screen_text(app)
        assert "kind export_crm" in text
        assert "⏸ PAUSED by ann@ops" in text
        assert "✗ 4 dead letters" in text and "✗ 6 failed attempts in the hour" in text
        assert "5 unfinished: 2 ready · 0 running · 1 retrying" in text
        # Charts: scale on the side, clock times and "now" under them, within 80 columns.
        charts = rendered(screen.query_one("#kind-charts"))
        assert "✗ failed attempts per minute" in charts
        assert "35ms┤" in charts  # p50 of 40 ms runs, interpolated in the 20-50 ms bucket
        assert " now" in charts
        assert max(len(line) for line in charts.splitlines()) <= 79
        errors = rendered(screen.query_one("#kind-errors"))
        assert "3 last died" in errors and "TimeoutError: export took N s" in errors
        assert "ConnectionError: crm.example.com refused" in errors
        settings = rendered(screen.query_one("#kind-settings"))
        assert "7 (the handler's" in settings and "45s" in settings
        assert "≤5 running, 100/m (declared on the handler)" in settings
        assert "2 live: web-1:10:aaa (2/8), web-2:20:bbb (quiet); 1 stale" in settings
        # Severity without colour: the failures chart's title and the pause are in reverse
        # (and marked ✗ / ⏸), where healthy titles are plain bold.
        content = screen.query_one("#kind-charts").content
        assert isinstance(content, Text)
        styled = {content.plain[s.start : s.end]: str(s.style) for s in content.spans}
        assert styled["failed attempts per minute"] == "bold reverse"
        assert styled["done per minute"] == "bold"
        head = screen.query_one("#kind-head").content
        assert isinstance(head, Text)
        assert any(
            head.plain[s.start : s.end] == "⏸ PAUSED" and "reverse" in str(s.style)
            for s in head.spans
        )
        await pilot.press("t")
        await until(pilot, lambda: screen.info is not None and screen.info.span == "day")
        await pilot.pause()
        day = rendered(screen.query_one("#kind-charts"))
        assert max(len(line) for line in day.splitlines()) <= 79
        assert "1.9s┤" in day  # p95 of three hours ago's 2 s run times
        assert "last day" in rendered(screen.query_one("#kind-head"))


async def test_at_60x20_the_charts_show_the_recent_part_that_fits(
    dsn: str, conn: psycopg.Connection
) -> None:
    history(conn)
    app = JobtuiApp(dsn, "public", config=config())
    async with app.run_test(size=(60, 20)) as pilot:
        screen = await open_kind(app, pilot)
        charts = rendered(screen.query_one("#kind-charts"))
        assert "(the last 52m00s fit this width)" in charts
        assert max(len(line) for line in charts.splitlines()) <= 59
        assert "✗ failed attempts per minute" in charts and " now" in charts
        assert "⏸ PAUSED" in rendered(screen.query_one("#kind-head"))


async def test_kind_screen_keys_jump_to_jobs_and_dead_letters(
    dsn: str, conn: psycopg.Connection
) -> None:
    history(conn)
    app = JobtuiApp(dsn, "public", config=config())
    async with app.run_test(size=(80, 24)) as pilot:
        await open_kind(app, pilot)
        await pilot.press("d")
        await until(pilot, lambda: app.active_tab == "dead" and len(app.screen_stack) == 1)
        rows = app.query_one("#dead-rows", KeyedTable)
        await until(pilot, lambda: len(rows.keys) == 4)
        assert "kind:export_crm" in rendered(app.query_one("#dead-info"))
        await pilot.press("1")
        await open_kind(app, pilot)
        await pilot.press("j")
        await until(pilot, lambda: app.active_tab == "jobs" and len(app.screen_stack) == 1)
        jobs = app.query_one("#jobs-table", KeyedTable)
        unfinished = conn.execute(
            "SELECT count(*) FROM jobs WHERE kind = 'export_crm' AND finished_at IS NULL"
        ).fetchone()[0]
        assert 0 < unfinished < 9  # the kind's jobs open on its unfinished ones
        await until(pilot, lambda: len(jobs.keys) == unfinished)
        await pilot.press("1")
        screen = await open_kind(app, pilot)
        await pilot.press("escape")
        await until(pilot, lambda: len(app.screen_stack) == 1)
        # The screen is kept for the next kind, and reads nothing while it is not shown.
        assert app.active_tab == "overview" and app.screen is not screen
        assert screen._timer is not None and not screen._timer._active.is_set()


async def test_kind_screen_resumes_the_kind(dsn: str, conn: psycopg.Connection) -> None:
    history(conn)
    app = JobtuiApp(dsn, "public", config=config())
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await open_kind(app, pilot)
        await pilot.press("P")
        for _ in range(100):  # a confirmation, when the write flow asks one
            if isinstance(app.screen, ConfirmScreen):
                await pilot.press("1")
                break
            if any("Resumed kind export_crm" in n for n in notifications(app)):
                break
            await pilot.pause(0.05)
        await until(pilot, lambda: any("Resumed kind export_crm" in n for n in notifications(app)))
        assert conn.execute("SELECT count(*) FROM paused_kinds").fetchone() == (0,)
        screen.reload()
        await until(pilot, lambda: screen.info is not None and screen.info.paused_by is None)
        await pilot.pause()
        assert "PAUSED" not in rendered(screen.query_one("#kind-head"))


async def test_a_starting_worker_records_its_handlers_for_the_kind_screen(
    dsn: str, aconn: psycopg.AsyncConnection
) -> None:
    from apps.helpers import running_worker, wait_until

    from jobtui.registry import Registry

    reg = Registry()

    @reg.handler("export_crm", max_attempts=4, timeout=12.5, backoff_base=2.0, backoff_cap=90.0)
    async def export(payload: Any) -> None:
        return None

    @reg.handler("plain")
    async def plain(payload: Any) -> None:
        return None

    async def recorded() -> kindinfo.KindInfo | None:
        got = await kindinfo.load(aconn, "public", "export_crm", "hour")
        return got if got.handler is not None else None

    async with running_worker(dsn, reg) as worker:
        # The worker registers, then records its handlers before its first claim.
        info = await wait_until(recorded, what="the handlers recorded")
        other = await kindinfo.load(aconn, "public", "plain", "hour")
        worker_id = worker.id
    assert info.handler is not None
    assert (info.handler.max_attempts, info.handler.timeout_s) == (4, 12.5)
    assert (info.handler.backoff_base_s, info.handler.backoff_cap_s) == (2.0, 90.0)
    assert info.handler.declared_by == worker_id
    assert [w.id for w in info.live_workers] == [worker_id]
    assert other.handler is not None and other.handler.max_attempts is None
    assert other.handler.timeout_s is None
    text = settings(other).plain
    assert "each job row's own" in text and "timeout        none" in text
