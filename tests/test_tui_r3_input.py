"""Issue 26, "Input is never lost": keys that arrive in one burst with `/` (a paste, or keys
bunched by a slow SSH link) land whole. Measured as the issue did: the real console in a tmux
pane, the keys sent by one `tmux send-keys / 'kind:kind_07' Enter`."""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import psycopg
import pytest
from test_tui_console import config, goto, until
from textual import events

from benchmarks.common import ScenarioSkipped
from benchmarks.console_tmux import TmuxConsole
from jobtui.enqueue import JobSpec, enqueue_many
from jobtui.tui.app import JobtuiApp
from jobtui.tui.panes.jobs import JobsPane

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux"),
]

KINDS = [f"kind_{i:02d}" for i in range(1, 11)]


def _wait(console: TmuxConsole, cond: Callable[[list[str]], bool], timeout: float = 20) -> str:
    deadline = time.monotonic() + timeout
    screen: list[str] = []
    while time.monotonic() < deadline:
        screen = console.screen()
        if cond(screen):
            return "\n".join(screen)
        time.sleep(0.2)
    raise AssertionError("not reached; the screen:\n" + "\n".join(screen))


def _filter_line(screen: list[str]) -> str:
    return next((line for line in screen if line.strip().startswith("filter ")), "")


@pytest.fixture
def console(dsn: str, conn: psycopg.Connection, tmp_path: Path) -> Iterator[TmuxConsole]:
    enqueue_many(conn, [JobSpec(k, {"n": i}) for k in KINDS for i in range(20)])
    try:
        tmux = TmuxConsole(dsn, 80, 24, tmp_path, 2.0)
    except ScenarioSkipped as exc:
        pytest.fail(f"the console did not run in tmux: {exc}")
    try:
        _wait(tmux, lambda s: any("kind_01" in line for line in s))  # the Overview has data
        tmux.press("2")
        _wait(tmux, lambda s: "shown" in _filter_line(s))
        yield tmux
    finally:
        tmux.close()


def test_slash_text_enter_in_one_burst(console: TmuxConsole) -> None:
    for kind in ("kind_07", "kind_03", "kind_07", "kind_10"):
        console.send("/", f"kind:{kind}", "Enter")
        _wait(console, lambda s, k=kind: f"kind:{k}" in _filter_line(s), timeout=10)


def test_ctrl_u_and_text_in_one_burst(console: TmuxConsole) -> None:
    console.send("/", "kind:kind_07", "Enter")
    _wait(console, lambda s: "kind:kind_07" in _filter_line(s), timeout=10)
    for kind in ("kind_03", "kind_05"):
        console.send("/", "C-u", f"kind:{kind}", "Enter")
        screen = _wait(console, lambda s, k=kind: f"kind:{k}" in _filter_line(s), timeout=10)
        line = _filter_line(screen.splitlines())
        assert "kind_07" not in line and line.count("kind:") == 1, line


def _keys(text: str) -> list[tuple[str, str | None]]:
    names = {"_": "underscore", ":": "colon"}
    return [(names.get(c, c), c) for c in text]


@pytest.mark.parametrize("size", [(80, 24), (60, 20)])
async def test_a_burst_posted_at_once_lands_whole(
    dsn: str, conn: psycopg.Connection, size: tuple[int, int]
) -> None:
    """The same bursts through Pilot: every key posted before any is handled."""

    enqueue_many(conn, [JobSpec(k, {"n": i}) for k in KINDS for i in range(3)])
    app = JobtuiApp(dsn, "public", config=config())
    async with app.run_test(size=size) as pilot:
        await goto(app, pilot, "2")
        pane = app.query_one(JobsPane)
        bursts = [
            ([("slash", "/"), *_keys("kind:kind_07"), ("enter", "\r")], "kind_07"),
            (
                [("slash", "/"), ("ctrl+u", None), *_keys("kind:kind_03"), ("enter", "\r")],
                "kind_03",
            ),
        ]
        for keys, kind in bursts:
            for key, char in keys:
                app.post_message(events.Key(key, char))
            await until(pilot, lambda k=kind: pane.flt.kind == k, timeout=5)
            assert not pane.flt.text and pane.flt.kind == kind, pane.flt
