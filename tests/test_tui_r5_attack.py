"""Attack on issue 26 item 13 (r5-quiet): `compact_sgr` must leave every cell as the original
writes would, whatever the writes are.

The terminal model of test_tui_r5_quiet (cursor, text, SGR with every off code, ESC[K filling
with the background in force as xterm does) reads the original stream and the rewritten one;
the screens and the style in force at the end must be the same. The driver passes each write()
through `compact_sgr` on its own, so streams are also cut into several writes at arbitrary
points (Textual on Windows writes a frame in 8 KiB chunks: a cut can fall inside a run of
styled text or inside an escape sequence).
"""

from __future__ import annotations

import random
from typing import Any

import psycopg
from test_tui_console import config, goto, until
from test_tui_r5_quiet import screen

from jobtui.enqueue import JobSpec, enqueue_many
from jobtui.tui.app import JobtuiApp
from jobtui.tui.terminal import compact_sgr
from jobtui.tui.widgets.keyed_table import KeyedTable

ATTRS = ["1", "2", "3", "4", "5", "7", "8", "9", "21", "6", "51", "52", "53"]
COLOURS = ["31", "97", "38;5;23", "38;5;253", "38;2;10;20;30", "38;2;255;0;0", "39"]


def _style(rng: random.Random) -> str:
    codes = rng.sample(ATTRS, rng.randint(0, 3))
    codes.sort(key=int)
    if rng.random() < 0.8:
        codes.append(rng.choice(COLOURS))
    if rng.random() < 0.7:
        codes.append(rng.choice(COLOURS).replace("38", "48").replace("3", "4", 1))
    return ";".join(codes)


def _frame(rng: random.Random, textual_only: bool) -> str:
    """One frame as Textual writes it (positions, runs with their style in full and a reset),
    with, unless `textual_only`, the other writes a terminal gets (ESC[K, OSC, mouse, sync)."""
    out = ["\x1b[?2026h"]
    for y in range(1, 5):
        out.append(f"\x1b[{y};{rng.randint(1, 4)}H")
        for _ in range(rng.randint(1, 5)):
            text = "".join(rng.choice("ab c") for _ in range(rng.randint(1, 3)))
            style = _style(rng)
            out.append(f"\x1b[{style}m{text}\x1b[0m" if style else text)
            if not textual_only and rng.random() < 0.15:
                out.append(rng.choice(["\x1b[K", "\x1b]0;title\x07", "\x1b[?1000h", "\r\n"]))
            if not textual_only and rng.random() < 0.1:
                out.append(f"\x1b[{_style(rng) or '1'}m")  # a style added to a style
    out.append("\x1b[?2026l")
    return "".join(out)


def _cut(data: str, rng: random.Random, pieces: int) -> list[str]:
    points = sorted(rng.sample(range(1, len(data)), pieces - 1))
    return [data[a:b] for a, b in zip([0, *points], [*points, len(data)], strict=True)]


def test_one_frame_at_a_time_with_other_codes_mixed_in() -> None:
    rng = random.Random(26)
    for _ in range(3000):
        data = "".join(_frame(rng, textual_only=False) for _ in range(rng.randint(1, 3)))
        assert screen(compact_sgr(data)) == screen(data), repr(data)


def test_writes_cut_at_any_point() -> None:
    """Each write rewritten on its own, as the driver does, the terminal's screen is the
    original's: a write need not start with the terminal's style plain."""
    rng = random.Random(13)
    for _ in range(3000):
        data = "".join(_frame(rng, textual_only=True) for _ in range(2))
        writes = _cut(data, rng, rng.randint(2, 6))
        assert screen("".join(compact_sgr(w) for w in writes)) == screen(data), writes


def test_an_attribute_sharing_its_off_code_with_one_dropped_stays() -> None:
    """Underline and double underline both end with 24, blink and rapid blink with 25, frame
    and encircle with 54: dropping one must not drop the other."""
    for before, after in (("4;21", "4"), ("5;6", "6"), ("51;52", "52"), ("1;2", "2")):
        data = f"\x1b[{before}mA\x1b[0m\x1b[{after}mB\x1b[0m"
        assert screen(compact_sgr(data)) == screen(data), data


# --- the Jobs tab's held rows (KeyedTable.settle_s) under live changes, on a real database ---


def _enqueue(conn: psycopg.Connection, n: int, priority: int = 0) -> int:
    enqueue_many(conn, [JobSpec("report", {"n": n}, priority=priority)])
    row = conn.execute("SELECT max(id) FROM jobs").fetchone()
    assert row is not None
    return int(row[0])


def _info(app: JobtuiApp) -> str:
    return app.query_one("#jobs-info").content.plain  # type: ignore[union-attr]


async def _live_jobs_tab(app: JobtuiApp, pilot: Any, conn: psycopg.Connection) -> KeyedTable:
    """The Jobs tab with 5 ready jobs, after a first live change (shown at once): the next
    change of rows within the settle time is held."""
    await goto(app, pilot, "2")
    table = app.query_one("#jobs-table", KeyedTable)
    await until(pilot, lambda: len(table.keys) == 4)
    await pilot.pause(0.6)
    _enqueue(conn, 4)  # a first live change: at once
    await until(pilot, lambda: len(table.keys) == 5, timeout=5)
    return table


async def test_new_rows_that_left_again_are_not_announced_for_ever(
    dsn: str, conn: psycopg.Connection
) -> None:
    """A job that came and went within the hold leaves the rows as shown: "new rows (any key
    shows them)" may stay for the hold (it flapped the line otherwise), not after it, when
    there is nothing new to show (it stayed until some other row came or went, or a key)."""
    enqueue_many(conn, [JobSpec("report", {"n": i}) for i in range(4)])
    app = JobtuiApp(dsn, "public", config=config())
    async with app.run_test(size=(80, 24)) as pilot:
        table = await _live_jobs_tab(app, pilot, conn)
        new = _enqueue(conn, 99)
        await until(pilot, lambda: table.waiting == 1 and "new rows" in _info(app), timeout=5)
        conn.execute("UPDATE jobs SET finished_at = now() WHERE id = %s", (new,))
        polls = app.polls
        await until(pilot, lambda: app.polls >= polls + 2)
        table.settle_s = 0.5  # the hold is over (20 s in the console): nothing is new
        await until(pilot, lambda: "new rows" not in _info(app), timeout=5)
        assert table.waiting == 0 and len(table.keys) == 5


async def test_a_row_pushed_off_the_page_twice_is_struck_through_twice(
    dsn: str, conn: psycopg.Connection
) -> None:
    """The first page is the first rows in claim order: a job of higher priority pushes the
    last row off it (struck through while held), that row comes back when the job leaves, and
    is pushed off again by the next one: struck through again, not shown as if still there."""
    enqueue_many(conn, [JobSpec("report", {"n": i}) for i in range(4)])
    app = JobtuiApp(dsn, "public", config=config(page_size=5))
    async with app.run_test(size=(80, 24)) as pilot:
        table = await _live_jobs_tab(app, pilot, conn)
        last = table.keys[-1]

        def struck() -> bool:
            return "strike" in str(table.get_row(last)[1].style)

        urgent = _enqueue(conn, 98, priority=10)
        await until(pilot, lambda: table.waiting == 1 and struck(), timeout=5)
        conn.execute("UPDATE jobs SET finished_at = now() WHERE id = %s", (urgent,))
        await until(pilot, lambda: not struck() and table.waiting == 1, timeout=5)
        _enqueue(conn, 97, priority=10)  # off the page again
        polls = app.polls
        await until(pilot, lambda: app.polls >= polls + 2)
        assert len(table.shown_keys) == 5 and "1 gone" in _info(app), _info(app)
        assert struck(), table.get_row(last)
