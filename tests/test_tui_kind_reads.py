"""The kind screen's reads (review of round 7): a read that fails is said on the screen and
the console stays up; reads slower than the refresh interval still land, one at a time; the
count said above the retries' groups is of the same read as the groups. Against the real
database: the slow and failing reads are the real ones, behind a lock, a statement timeout or a
revoked privilege."""

from __future__ import annotations

import asyncio
import re
import time
from typing import Any

import psycopg
import pytest
from targets_support import locked, read_only_role
from test_tui_console import config, rendered, until
from test_tui_kind import history, open_kind

from jobtui import kindinfo
from jobtui.tui.app import JobtuiApp
from jobtui.tui.connection import APPLICATION_NAME
from jobtui.tui.screens import kind as kind_screen
from jobtui.tui.screens.kind import KindScreen


def head_text(screen: KindScreen) -> str:
    return rendered(screen.query_one("#kind-head"))


async def lock_past_the_timeout(
    console_dsn: str, dsn: str, conn: psycopg.Connection, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Open the kind screen on `console_dsn` with a 1 s statement timeout, hold a lock on `jobs`
    from another session (on `dsn`) until a read says it took too long, then let it go: the
    screen keeps its figures meanwhile, and the next read lands."""
    history(conn)
    monkeypatch.setattr(kind_screen, "MIN_RELOAD_S", 0.3)
    app = JobtuiApp(console_dsn, "public", config=config())
    app.link.statement_timeout_s = 1.0  # set on the session when the link connects
    async with app.run_test(size=(100, 30)) as pilot:
        screen = await open_kind(app, pilot)
        assert "5 unfinished" in head_text(screen)
        with locked(dsn):
            await until(pilot, lambda: "took longer than 1 s" in head_text(screen))
            assert app.is_running and app.screen is screen
            text = head_text(screen)
            assert "kind export_crm" in text and "5 unfinished" in text, text  # kept
        await until(pilot, lambda: "took longer" not in head_text(screen))
        assert "5 unfinished" in head_text(screen)
        assert app.is_running


async def test_a_read_past_the_statement_timeout_is_said_and_the_next_one_lands(
    dsn: str, conn: psycopg.Connection, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another session holds a lock on `jobs`: the kind's reads wait past the console's
    statement timeout. The screen says so under the title, its figures kept; once the lock
    goes, the next refresh shows the kind again (before: the console ended on a traceback)."""
    await lock_past_the_timeout(dsn, dsn, conn, monkeypatch)


async def test_a_privilege_revoked_is_said_and_the_screen_recovers_when_granted_again(
    pg_server_dsn: str, dsn: str, conn: psycopg.Connection, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The console's role loses SELECT on `jobs` while the kind screen is up: the refresh says
    "permission denied" on the screen (before: a traceback ended the console); granted again,
    the next refresh shows the figures without it."""
    history(conn)
    monkeypatch.setattr(kind_screen, "MIN_RELOAD_S", 0.3)
    with read_only_role(pg_server_dsn, dsn) as (role, ro_dsn):
        app = JobtuiApp(ro_dsn, "public", config=config())
        async with app.run_test(size=(100, 30)) as pilot:
            screen = await open_kind(app, pilot)
            conn.execute(f'REVOKE SELECT ON jobs FROM "{role}"')
            await until(pilot, lambda: "permission denied" in head_text(screen))
            assert app.is_running and app.screen is screen
            assert "5 unfinished" in head_text(screen)
            conn.execute(f'GRANT SELECT ON jobs TO "{role}"')
            await until(pilot, lambda: "permission denied" not in head_text(screen))
            assert "5 unfinished" in head_text(screen)


async def test_reads_slower_than_the_interval_land_one_at_a_time(
    dsn: str, conn: psycopg.Connection, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The row read takes 1.2 s, the interval 0.5 s: the screen still completes its figures
    and refreshes them again, never more than one read in flight and none cancelled (before:
    each tick cancelled the read in flight, and the figures never came)."""
    history(conn)
    monkeypatch.setattr(kind_screen, "MIN_RELOAD_S", 0.1)  # config(): refresh_s 0.5
    real = kindinfo.load_rows
    started = landed = cancelled = in_flight = most = 0

    async def slow_rows(*args: Any) -> kindinfo.RowFigures:
        nonlocal started, landed, cancelled, in_flight, most
        started += 1
        in_flight += 1
        most = max(most, in_flight)
        try:
            await asyncio.sleep(1.2)
            out = await real(*args)
        except asyncio.CancelledError:
            cancelled += 1
            raise
        finally:
            in_flight -= 1
        landed += 1
        return out

    monkeypatch.setattr(kindinfo, "load_rows", slow_rows)
    app = JobtuiApp(dsn, "public", config=config())
    async with app.run_test(size=(100, 30)) as pilot:
        screen = await open_kind(app, pilot, complete=False)
        await until(pilot, lambda: screen.info is not None, timeout=6)
        await until(pilot, lambda: landed >= 2, timeout=6)  # and refreshed after it
        assert cancelled == 0 and most == 1, (started, landed, cancelled, most)
        assert started - landed <= 1


def _retry_section(errors: str) -> tuple[int, int]:
    """The count said above the retries' groups, and the sum of the groups shown."""
    said = re.search(r"waiting to retry, by error \(([\d,]+) jobs?\)", errors)
    assert said is not None, errors
    part = errors[said.end() :]
    groups = [int(m.replace(",", "")) for m in re.findall(r"^\s*([\d,]+) next run", part, re.M)]
    return int(said.group(1).replace(",", "")), sum(groups)


async def test_the_retries_count_is_of_the_same_read_as_their_groups(
    dsn: str, conn: psycopg.Connection, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A job fails an attempt between the screen's two reads: the count above the groups is
    the groups' own (2 = 1 + 1), not the first read's (1) beside groups of 2 jobs."""
    history(conn)  # one job waiting to retry
    real = kindinfo.load_rows
    calls = 0

    async def rows_after_a_failure(*args: Any) -> kindinfo.RowFigures:
        nonlocal calls
        calls += 1
        if calls == 1:  # committed between the first read and this one
            conn.execute(
                "INSERT INTO jobs (kind, payload, run_at, attempts, last_error) VALUES "
                "('export_crm', '{}', now() + interval '1 minute', 1, 'OSError: disk full')"
            )
        return await real(*args)

    monkeypatch.setattr(kindinfo, "load_rows", rows_after_a_failure)
    monkeypatch.setattr(kind_screen, "MIN_RELOAD_S", 60.0)  # one read: no refresh mends it
    app = JobtuiApp(dsn, "public", config=config())
    async with app.run_test(size=(100, 40)) as pilot:
        screen = await open_kind(app, pilot)
        assert screen.info is not None and screen.info.retrying == 1  # the first read's count
        said, shown = _retry_section(rendered(screen.query_one("#kind-errors")))
        assert (said, shown) == (2, 2)


async def test_load_rows_counts_every_group_not_only_the_top_ones(
    aconn: psycopg.AsyncConnection, conn: psycopg.Connection
) -> None:
    """Seven distinct errors, five groups returned: the total is of all seven jobs."""
    conn.execute(
        "INSERT INTO jobs (kind, payload, attempts, last_error) "
        "SELECT 'k', '{}', 1, 'E' || g FROM generate_series(1, 7) g"
    )
    rows = await kindinfo.load_rows(aconn, "public", "k")
    assert len(rows.retry_errors) == kindinfo.TOP_ERRORS == 5
    assert rows.retry_jobs == 7
    full = await kindinfo.load(aconn, "public", "k", "hour")
    assert full.retry_jobs == 7 and full.retrying == 7


def _row_read_at_the_server(conn: psycopg.Connection, within_s: float = 2.0) -> bool:
    """Whether the console's session has been sent the row read's last statement (its
    `min(u.max_attempts)`), within `within_s` seconds."""
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        row = conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE application_name = %s "
            "AND position('min(u.max_attempts)' in query) > 0",
            (APPLICATION_NAME,),
        ).fetchone()
        if row is not None and row[0] > 0:
            return True
        time.sleep(0.01)
    return False


async def test_the_row_read_is_at_the_server_before_the_first_figures_are_drawn(
    dsn: str, conn: psycopg.Connection, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 24, the kind screen at scale: the statements of the row read (its own
    transaction) are sent before the first read's figures are put on the screen, so the
    server reads the rows while the console draws them. When the first figures are shown,
    the console's session has the row read already (before: it was sent only after the
    first figures were shown and drawn; here the showing waits 2 s for it, holding the
    console, so it never came). Then the row figures land."""
    history(conn)
    monkeypatch.setattr(kind_screen, "MIN_RELOAD_S", 60.0)  # one read
    at_first_show: list[bool] = []
    real_show = KindScreen._show

    def show(self: KindScreen, info: kindinfo.KindInfo) -> None:
        if not info.rows_read:
            at_first_show.append(_row_read_at_the_server(conn))
        real_show(self, info)

    monkeypatch.setattr(KindScreen, "_show", show)
    app = JobtuiApp(dsn, "public", config=config())
    async with app.run_test(size=(100, 40)) as pilot:
        screen = await open_kind(app, pilot)
        assert "unfinished:" in head_text(screen)
        errors = rendered(screen.query_one("#kind-errors"))
    assert at_first_show == [True]
    assert "waiting to retry, by error (1 job)" in errors, errors
