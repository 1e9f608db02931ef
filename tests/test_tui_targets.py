"""Issue 28: the console over several targets (the targets overview) and a target's console.

Real databases on the test server: eu (the test's own, marked danger), us (a second one, read
by a role that may only SELECT), stuck (a third one whose jobs table is locked mid-test), and
gone (a closed port). Assertions are on the screen (rendered rows) and on the rows behind it.
"""

from __future__ import annotations

import contextlib
import re
import sys
import time
from pathlib import Path

import psycopg
import pytest
from psycopg import conninfo
from targets_support import closed_port_dsn, locked, read_only_role, write_config
from test_tui_console import SIZE, add_dead, config, rendered, until

from benchmarks.common import ScenarioSkipped
from benchmarks.console_bytes import ConsolePty
from jobtui.enqueue import enqueue
from jobtui.targets import Target
from jobtui.tui.app import JobtuiApp
from jobtui.tui.screens.confirm import ConfirmScreen
from jobtui.tui.targets_screen import DOWN, NEXT, OK, SLOW, WARN, Row, TargetsApp, Watch, cells
from jobtui.tui.widgets.status import StatusBar


def _rows(app: TargetsApp) -> dict[str, list[str]]:
    table = app.table
    return {
        str(row.key.value): [c.plain for c in table.get_row(row.key)] for row in table.ordered_rows
    }


def _screen(app: TargetsApp) -> str:
    return rendered(app.table)


def _allow(server: str, dsn: str, allow: bool) -> None:
    """Open or close a database to new connections; closing ends the ones it has."""
    name = conninfo.conninfo_to_dict(dsn)["dbname"]
    with psycopg.connect(server, autocommit=True) as c:
        c.execute(f'ALTER DATABASE "{name}" ALLOW_CONNECTIONS {"true" if allow else "false"}')
        if not allow:
            c.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s",
                (name,),
            )


async def test_overview_isolates_down_locked_and_read_only_targets(
    pg_server_dsn: str, dsn: str, conn: psycopg.Connection, second_dsn: str, third_dsn: str
) -> None:
    for _ in range(3):
        enqueue(conn, "mail", {})
    add_dead(conn, "export", "E: boom", n=2)
    with read_only_role(pg_server_dsn, second_dsn) as (_role, ro_dsn):
        targets = [
            Target("eu", dsn, label="EU prod", danger=True, colour="magenta"),
            Target("us", ro_dsn),
            Target("stuck", third_dsn, timeout_s=0.5),
            Target("gone", closed_port_dsn(), timeout_s=0.5),
        ]
        app = TargetsApp(targets, "public", config=config())
        async with app.run_test(size=SIZE) as pilot:
            with locked(third_dsn):
                await until(pilot, lambda: _rows(app)["stuck"][1] == SLOW)
                eu_polls = app.watches["eu"].polls
                await until(pilot, lambda: app.watches["eu"].polls >= eu_polls + 3, 10)
                rows = _rows(app)
                assert rows["stuck"][1] == SLOW and "refresh dropped" in rows["stuck"][7]
                assert rows["eu"][0] == "EU prod ⚠" and rows["eu"][1] == WARN
                assert rows["eu"][2:5] == ["3", rows["eu"][3], "2"]  # depth, oldest, dead
                assert rows["eu"][6].endswith("WARN")
                assert rows["us"][1] == OK and rows["us"][2] == "0"  # SELECT-only role
                assert rows["gone"][1] == DOWN and "could not connect" in rows["gone"][7]
                screen = _screen(app)
                assert "EU prod" in screen and "DB DOWN" in screen and "SLOW" in screen
                head = rendered(app.query_one("#targets-head"))
                assert "4 targets" in head and "3 in trouble" in head
            # The lock is gone: the stuck target comes back by itself.
            await until(pilot, lambda: _rows(app)["stuck"][1] == OK, 10)
            # Keys: n walks the targets in trouble; enter opens the one under the cursor.
            assert app.cursor_key == "eu"
            await pilot.press("n")
            assert app.cursor_key == "gone"
            await pilot.press("n")
            assert app.cursor_key == "eu"
            await pilot.press("enter")
            await until(pilot, lambda: app.return_value == "eu")


async def test_a_dead_target_shows_db_down_and_comes_back(
    pg_server_dsn: str, dsn: str, second_dsn: str
) -> None:
    targets = [Target("eu", dsn), Target("us", second_dsn, timeout_s=1)]
    app = TargetsApp(targets, "public", config=config())
    try:
        async with app.run_test(size=SIZE) as pilot:
            await until(pilot, lambda: _rows(app)["us"][1] == OK)
            _allow(pg_server_dsn, second_dsn, False)
            await until(pilot, lambda: _rows(app)["us"][1] == DOWN)
            assert _rows(app)["eu"][1] == OK
            assert "DB DOWN" in _screen(app)
            _allow(pg_server_dsn, second_dsn, True)
            await until(pilot, lambda: _rows(app)["us"][1] == OK, 20)
    finally:
        _allow(pg_server_dsn, second_dsn, True)


async def test_a_targets_console_names_it_in_the_header_and_every_confirmation(
    dsn: str, conn: psycopg.Connection
) -> None:
    (dead_id,) = add_dead(conn, "export", "E: boom")
    target = Target("eu", dsn, label="EU prod", danger=True, colour="magenta")
    app = JobtuiApp(dsn, "public", config=config(), target=target)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.polls >= 1)
        status = app.query_one("#status", StatusBar).plain
        assert "EU prod ⚠ DANGER" in status
        assert "EU PROD" in rendered(app.query_one("#env-banner"))
        assert app.query_one("#env-banner").has_class("-danger")
        await pilot.press("3")
        await until(pilot, lambda: str(dead_id) in rendered(app.query_one("#dead-rows")))
        await pilot.press("tab", "r")
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        line = rendered(app.screen.query_one("#confirm-target"))
        assert line == "on target EU prod ⚠ DANGER (production)"
        await pilot.press("1")
        await until(pilot, lambda: conn.execute("SELECT count(*) FROM jobs").fetchone() == (1,))
        await pilot.press("exclamation_mark")
        await until(pilot, lambda: app.leave == NEXT)


async def test_one_database_console_has_no_target_keys(dsn: str) -> None:
    app = JobtuiApp(dsn, "public", config=config())
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.polls >= 1)
        await pilot.press("0")
        await pilot.pause()
        assert app.leave is None and app.is_running
        assert "⚠" not in app.query_one("#status", StatusBar).plain


async def test_watch_bounds_a_target_that_never_answers() -> None:
    """A port that accepts and never answers: the row says so within the target's bound."""
    import asyncio
    import socket

    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    port = server.getsockname()[1]
    try:
        w = Watch(Target("mute", f"postgresql://x@127.0.0.1:{port}/db", timeout_s=0.5), "public")
        row = await asyncio.wait_for(w.poll(config()), 10)
        assert row.state in (SLOW, DOWN) and row.error
    finally:
        server.close()


def _plain(data: bytes) -> str:
    text = re.sub(rb"\x1b\[[0-9;?<>=]*[A-Za-z~]", b" ", data).decode(errors="replace")
    return " ".join(text.split())


def _read_until(console: ConsolePty, needle: str, timeout: float = 15) -> str:
    console.captured = bytearray()
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        console.read_for(0.3)
        if needle in _plain(bytes(console.captured)):
            return _plain(bytes(console.captured))
    raise AssertionError(f"{needle!r} not on screen: {_plain(bytes(console.captured))[-400:]}")


def test_the_real_console_goes_from_the_overview_to_a_target_and_back(
    dsn: str, second_dsn: str, tmp_path: Path
) -> None:
    """`jobtui --all-targets` in a pseudo-terminal: enter opens the target's console (named in
    its header), 0 comes back to the overview, q quits."""
    config = write_config(
        tmp_path / "config.toml",
        {
            "eu": {"dsn": dsn, "label": "EU prod", "danger": True},
            "us": {"dsn": second_dsn},
        },
    )
    code = (
        "import sys; from jobtui.cli import main; "
        f"sys.exit(main(['--config', {str(config)!r}, '--all-targets']))"
    )
    with ConsolePty("", cmd=[sys.executable, "-c", code]) as console:
        _read_until(console, "2 targets")
        console.press("\r")
        screen = _read_until(console, "EU prod ⚠ DANGER")
        assert "Overview" in screen
        console.press("0")
        _read_until(console, "2 targets")
        console.press("q")
        deadline = time.monotonic() + 10
        while console.proc.poll() is None and time.monotonic() < deadline:
            with contextlib.suppress(ScenarioSkipped):
                console.read_for(0.2)
        assert console.proc.returncode == 0


async def test_a_malformed_dsn_never_shows_its_password_in_the_overview() -> None:
    w = Watch(Target("v6", "postgresql://ops:Sekr1tPw@[::1/app", timeout_s=0.5), "public")
    row = await w.poll(config())
    assert row.state == DOWN and row.error and "in URI" in row.error
    assert "Sekr1tPw" not in row.error


async def test_a_dark_colour_still_shows_the_targets_name(dsn: str) -> None:
    """colour = "black" (rich accepts it): the name is drawn black-on-dark nowhere, in the
    overview and in the target's header, but as a badge with a text colour that stands out."""
    from rich.color import Color

    def contrast(style: object) -> float:
        from rich.style import Style

        assert isinstance(style, Style)
        fg, bg = style.color, style.bgcolor
        assert fg is not None and bg is not None  # both set: no theme colour to vanish into
        if style.reverse:
            fg, bg = bg, fg
        lum = [
            (0.299 * r + 0.587 * g + 0.114 * b) / 255
            for r, g, b in (c.get_truecolor() for c in (fg, bg))
        ]
        return abs(lum[0] - lum[1])

    target = Target("b", dsn, label="Beta", colour="black")
    name = cells(target, Row())[0]
    (span,) = name.spans or [None]
    style = name.style if span is None else span.style
    from rich.style import Style

    assert contrast(Style.parse(str(style))) > 0.5
    from jobtui.tui.app import target_badge

    (_text, badge), _space = target_badge(target)
    assert contrast(Style.parse(badge)) > 0.5
    assert Color.parse("black")  # rich accepts it: the config file does too


@pytest.mark.parametrize("size", [(80, 24), (60, 20)])
async def test_the_header_marks_a_danger_target_even_with_a_long_label_on_a_small_screen(
    dsn: str, size: tuple[int, int]
) -> None:
    from test_tui_layout import screen_lines

    label = "Production EU West Frankfurt Primary DB1"  # 40 characters, the most allowed
    target = Target("eu", dsn, label=label, danger=True, colour="grey3")
    app = JobtuiApp(dsn, "public", config=config(), target=target)
    async with app.run_test(size=size) as pilot:
        await until(pilot, lambda: app.polls >= 1)
        await pilot.pause()
        first = screen_lines(app)[0]
        assert "Production EU" in first and "⚠ DANGER" in first, first


async def test_a_label_with_markup_is_shown_as_written_in_the_confirmations_border(
    dsn: str, conn: psycopg.Connection
) -> None:
    """The confirmation's border names the target too: `[on red]` in a label is text there,
    not markup that restyles it or, as `[b]x[/]`, eats part of the name."""
    from test_tui_layout import screen_lines

    (dead_id,) = add_dead(conn, "export", "E: boom")
    target = Target("eu", dsn, label="[b]EU[/b] prod", danger=True)
    app = JobtuiApp(dsn, "public", config=config(), target=target)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.polls >= 1)
        await pilot.press("3")
        await until(pilot, lambda: str(dead_id) in rendered(app.query_one("#dead-rows")))
        await pilot.press("tab", "r")
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        await pilot.pause()
        borders = [line for line in screen_lines(app) if "on target" in line]
        assert len(borders) == 2 and all("[b]EU[/b] prod ⚠ DANGER" in b for b in borders), borders


async def test_next_in_trouble_does_not_jump_once_the_operator_moved_the_cursor(
    dsn: str,
) -> None:
    """`!` in a target's console comes back here and opens the next target in trouble once
    every target was read; moving the cursor meanwhile is the operator's choice: no jump
    to a console they did not pick (one target here is slow to read, so there is time)."""
    import asyncio
    import socket

    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    port = server.getsockname()[1]
    try:
        targets = [
            Target("eu", dsn),
            Target("gone", closed_port_dsn(), timeout_s=0.5),
            Target("mute", f"postgresql://x@127.0.0.1:{port}/db", timeout_s=0.5),
        ]
        app = TargetsApp(targets, "public", config=config(), cursor="eu", after="eu")
        async with app.run_test(size=SIZE) as pilot:
            await pilot.press("down", "down")  # the operator picks mute, not yet read
            assert app.cursor_key == "mute"
            await until(pilot, lambda: all(w.polls for w in app.watches.values()), 15)
            await asyncio.sleep(0.3)
            await pilot.pause()
            assert app.is_running and app.return_value is None
    finally:
        server.close()


async def test_a_targets_console_never_shows_a_malformed_dsns_password() -> None:
    """Opened from the overview on a target whose DSN libpq cannot parse: its DATABASE
    UNREACHABLE line quotes the URI, without the password."""
    bad = "postgresql://ops:Sekr1tPw@[::1/app"
    app = JobtuiApp(bad, "public", config=config(), target=Target("v6", bad))
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.db_error is not None)
        await pilot.pause()
        assert app.db_error is not None and "in URI" in app.db_error
        assert "Sekr1tPw" not in app.db_error
        from test_tui_layout import screen_lines

        screen = "\n".join(screen_lines(app))
        assert "UNREACHABLE" in screen and "Sekr1tPw" not in screen


@pytest.mark.parametrize(
    ("env", "danger", "shown", "red"),
    [
        ("staging", True, "EU PROD · STAGING", True),  # a global env never hides the danger
        ("production", False, "EU PROD · PRODUCTION", True),  # nor the env's own pattern
        (None, False, "EU PROD", False),
    ],
)
async def test_the_banner_names_the_target_and_stays_red_under_a_global_env(
    dsn: str, env: str | None, danger: bool, shown: str, red: bool
) -> None:
    target = Target("eu", dsn, label="EU prod", danger=danger)
    app = JobtuiApp(dsn, "public", config=config(), env=env, target=target)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.polls >= 1)
        banner = app.query_one("#env-banner")
        assert shown in rendered(banner)
        assert banner.has_class("-danger") is red


async def test_a_target_not_migrated_or_without_privilege_says_so_and_is_not_slow(
    pg_server_dsn: str, dsn: str, second_dsn: str
) -> None:
    """Reachable but unreadable targets: ERROR with the line `stats` gives ("run `jobtui
    migrate` first"), or the privilege refused, not SLOW (which is a read past its timeout)."""
    from jobtui.tui.targets_screen import ERROR

    with psycopg.connect(second_dsn, autocommit=True) as c:
        c.execute("DROP SCHEMA public CASCADE")
        c.execute("CREATE SCHEMA public")
    with psycopg.connect(dsn, autocommit=True) as c:
        c.execute("CREATE ROLE jobtui_noread_t LOGIN")
    try:
        nopriv = conninfo.make_conninfo(dsn, user="jobtui_noread_t")
        targets = [
            Target("eu", dsn),
            Target("bare", second_dsn),
            Target("other", dsn, schema="nosuch"),
            Target("nopriv", nopriv),
        ]
        app = TargetsApp(targets, "public", config=config())
        async with app.run_test(size=SIZE) as pilot:
            await until(pilot, lambda: all(w.polls for w in app.watches.values()), 15)
            await pilot.pause(0.7)
            rows = _rows(app)
            assert rows["eu"][1] == OK
            assert rows["bare"][1] == ERROR and "run `jobtui migrate` first" in rows["bare"][7]
            assert rows["other"][1] == ERROR and "'nosuch'" in rows["other"][7]
            assert rows["nopriv"][1] == ERROR and "permission denied" in rows["nopriv"][7]
            assert "4 targets" in rendered(app.query_one("#targets-head"))
    finally:
        with psycopg.connect(pg_server_dsn, autocommit=True) as c:
            c.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = %s",
                ("jobtui_noread_t",),
            )
            c.execute("DROP ROLE IF EXISTS jobtui_noread_t")


async def test_the_note_line_says_why_the_target_under_the_cursor_is_down_at_60x20(
    dsn: str,
) -> None:
    """At 60 columns the note column is gone: the line under the table gives the error of
    the target under the cursor, and the keys again on a healthy one."""
    from test_tui_layout import screen_lines

    targets = [Target("eu", dsn), Target("gone", closed_port_dsn(), timeout_s=0.5)]
    app = TargetsApp(targets, "public", config=config())
    async with app.run_test(size=(60, 20)) as pilot:
        await until(pilot, lambda: all(w.polls for w in app.watches.values()), 15)
        await pilot.pause(0.7)
        assert "could not connect" not in "\n".join(screen_lines(app))  # no room for it
        await pilot.press("down")
        await pilot.pause()
        assert "gone: could not connect" in "\n".join(screen_lines(app))
        await pilot.press("up")
        await pilot.pause()
        assert "enter open a target's console" in "\n".join(screen_lines(app))
