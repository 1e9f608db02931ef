"""Issue 15 item 7: key press to drawn screen in the real console, at scale.

Drives the console (`JobtuiApp.run_test()` + Pilot, 120x40) against benchmarks/scale.py's data
set (2,000,000 finished, 200,000 ready, 50,000 scheduled, 100,000 dead letters, 20 kinds, a
stale visibility map) and prints p50/p95 per key of the time from the key press to the new
data on screen. Targets: every key ≤ 150 ms, a filter ≤ 300 ms. The keys: each tab's digit,
Enter on a job, a dead letter and (another each round) a kind of the Overview, the next dead
letter group, on Jobs `end` (the last row: the next page), `s`, `S` and `#`, and filters typed
into the prompt; between rounds the Jobs tab goes back to how it opens (one page of the
unfinished jobs, the pane's own order).

"Drawn" is measured, not assumed. A key goes in as a terminal's would (a Key event sent through
the app's driver, without Pilot's waits for an idle CPU, which would be timed too). Each pane's
`show` (the call that puts a poll's rows into its widgets) is wrapped to note when it ran, and
so is the app's `_display`, which gets each compositor update (headless, it would drop it:
here its terminal output is rendered to text, as a real terminal's would be, and discarded).
A press is done at the first update rendered once the pane it leads to has shown data loaded
after the press (for Jobs and Dead letters: a non-empty table; for Enter: the detail screen
holding the row; for a filter: the Jobs pane, after the prompt has closed), checked at each
update as it is drawn. Background
refreshes are set to 300 s so only the key's own refresh is timed. "in link" is the wall time
the key's refresh spent inside `Link.run` (its `db_ms`): the database's time plus any wait for
the event loop, which the console's drawing shares, so it is an upper bound of the database's
part (benchmarks/scale.py times the same reads alone). "cpu" is the CPU time the console's own
process used from the press to the drawn update: on a machine shared with other work it moves
far less than the wall time, so compare versions by it (run them interleaved; p95 of 8 rounds
is the slowest round). "gc" is the part of the wall time spent in Python's cycle collector:
a full collection walks the whole heap (jobtui/tui/collector.py says when the console lets it),
and `--each` prints every round, which tells a collector pause from a first press.

    .venv/bin/python benchmarks/console_scale.py --dsn postgresql://root@127.0.0.1:5432/postgres
    PYTHONPATH=/path/to/older/checkout .venv/bin/python benchmarks/console_scale.py   # "before"

Issue 24: `--reminders 200000` adds jobs due over the next 30 days; `--tmux` runs the real
`jobtui console` in a tmux pane instead (keys through `tmux send-keys`, drawn at the first bytes
written to the pane after the pane showed the data: see TmuxKeys), and times the first data
after launch; only the wall time is known from outside the process.

    .venv/bin/python benchmarks/console_scale.py --tmux --rounds 8 --each --reminders 200000
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import psycopg
from psycopg import conninfo, sql

if __package__ in (None, ""):
    sys.path.append(str(Path(__file__).resolve().parent.parent))  # after PYTHONPATH

from benchmarks.scale import KINDS, copy_of, ensure_template, stale
from jobtui.sql import queries

SIZE = (120, 40)
TABS = {
    "1": "overview",
    "2": "jobs",
    "3": "dead",
    "4": "workers",
    "5": "schedules",
    "6": "database",
}
FILTERS = {
    "filter kind:kind03.work": f"kind:{KINDS[3]}",
    "filter state:ready kind:kind07.work": f"state:ready kind:{KINDS[7]}",
    "filter payload text cust-4242": "cust-4242",
    # Finished rows only, and text that matches none of them: the search reads its whole scope.
    "filter state:succeeded + text matching nothing": "state:succeeded no-such-text-zq",
}
TIMEOUT_S = 30.0
# A tab key that has not led to its tab's data after this long is counted as lost (seen with
# quick successive tab switches on a loaded machine: the tab stays on the previous one), and
# sent again, untimed, before the run goes on.
LOST_AFTER_S = 5.0


CHARS = {
    "enter": "\r",
    "slash": "/",
    "escape": "\x1b",
    "down": None,
    "up": None,
    "end": None,
    "number_sign": "#",
}


class Shown:
    """When each pane last put freshly loaded data on screen (its `show` wrapped), and the
    first compositor update for the terminal (`_display` wrapped) drawn while what a press
    waits for (`expect`) holds: the update is composed from the widgets as they are at that
    moment, so it is the one that draws it. Checked at the update itself, not by a loop that
    polls: an update drawn before the loop woke up was missed, and the press then waited for
    a later one (none comes on an idle screen: the press was "lost")."""

    def __init__(self, app: Any) -> None:
        from textual._compositor import CompositorUpdate

        self.at: dict[str, float] = {}
        self.show_ms: dict[str, float] = {}  # how long the last `show` of each pane took
        self.gc_ms = 0.0  # time in the cycle collector so far (gc.callbacks)
        self.finished: tuple[float, float, float] | None = None  # wall, CPU, gc at that update
        self._expected: Callable[[], bool] | None = None
        self._gc_from = 0.0
        for name in TABS.values():
            pane = app.query_one(f"#{name}-pane")
            pane.show = self._wrap(name, pane.show)
        display = app._display

        def displayed(screen: Any, renderable: Any) -> None:
            display(screen, renderable)
            if isinstance(renderable, CompositorUpdate):
                renderable.render_segments(app.console)  # what a terminal would be sent
                if self.finished is None and self._expected is not None and self._expected():
                    self.finished = (time.perf_counter(), time.process_time(), self.gc_ms)

        app._display = displayed
        gc.callbacks.append(self._collected)

    def expect(self, cond: Callable[[], bool]) -> None:
        """Note the first update drawn from now on while `cond` holds (in `finished`)."""
        self._expected, self.finished = cond, None

    def _collected(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._gc_from = time.perf_counter()
        else:
            self.gc_ms += (time.perf_counter() - self._gc_from) * 1000

    def close(self) -> None:
        gc.callbacks.remove(self._collected)

    def _wrap(self, name: str, show: Callable[[Any], None]) -> Callable[[Any], None]:
        def wrapped(data: Any) -> None:
            t0 = time.perf_counter()
            show(data)
            self.at[name] = time.perf_counter()
            self.show_ms[name] = (self.at[name] - t0) * 1000

        return wrapped


def key(app: Any, name: str) -> Callable[[], Awaitable[None]]:
    """Sending `name` as the terminal driver would (what Pilot.press does, minus its waits)."""
    from textual import events

    async def send() -> None:
        event = events.Key(name, CHARS.get(name, name))
        event.set_sender(app)
        app._driver.send_message(event)

    return send


class Lost(Exception):
    """A key that did not lead where it should within LOST_AFTER_S."""


async def until(
    cond: Callable[[], bool], what: str, app: Any = None, timeout: float = TIMEOUT_S
) -> None:
    deadline = time.perf_counter() + timeout
    while not cond():
        if time.perf_counter() > deadline:
            if timeout < TIMEOUT_S:
                raise Lost(what)
            notes = [n.message for n in app._notifications] if app is not None else []
            state = f"; tab {app.active_tab}, notices {notes}" if app is not None else ""
            raise SystemExit(f"console_scale: {what} not reached in {timeout:.0f} s{state}")
        await asyncio.sleep(0.001)


# key → drawn ms, of which in the link ms, this process's CPU ms, of which in the collector ms
Timing = tuple[float, float | None, float, float]


async def timed(
    pilot: Any,
    shown: Shown,
    act: Callable[[], Awaitable[Any]],
    done: Callable[[float], bool],
    what: str,
) -> Timing:
    """Milliseconds from `act` (a key sent) to the first screen update drawn while `done(t0)`
    holds (`done` is given the press time), how many of them the console's link spent in the
    database (None on a version whose Link does not count it), the CPU time the console's
    process used meanwhile (what other processes on a shared machine change least) and how
    much of it went to the cycle collector."""
    await pilot.pause()  # settle: nothing of the previous step is still on its way
    link = pilot.app.link
    db0 = getattr(link, "db_ms", None)
    cpu0, gc0 = time.process_time(), shown.gc_ms
    t0 = time.perf_counter()
    shown.expect(lambda: done(t0))
    await act()
    await until(lambda: shown.finished is not None, what, pilot.app, timeout=LOST_AFTER_S)
    assert shown.finished is not None
    wall, cpu, gc_ms = shown.finished
    db = None if db0 is None else link.db_ms - db0
    return (wall - t0) * 1000, db, (cpu - cpu0) * 1000, gc_ms - gc0


def rows_of(app: Any, selector: str) -> int:
    return int(app.query_one(selector).row_count)


async def drive(
    dsn: str, rounds: int, lost: list[str], size: tuple[int, int] = SIZE
) -> dict[str, list[Timing]]:
    from jobtui.console_config import ConsoleConfig
    from jobtui.tui.app import JobtuiApp

    out: dict[str, list[Timing]] = {}
    app = JobtuiApp(dsn, "public", config=ConsoleConfig(refresh_s=300.0))
    async with app.run_test(size=size) as pilot:
        shown = Shown(app)
        try:
            await rounds_of(app, pilot, shown, rounds, lost, out)
        finally:
            shown.close()
    return out


async def rounds_of(
    app: Any,
    pilot: Any,
    shown: Shown,
    rounds: int,
    lost: list[str],
    out: dict[str, list[Timing]],
) -> None:
    """`rounds` presses of every key timed, into `out`."""
    from jobtui.tui.screens.detail import DetailScreen
    from jobtui.tui.screens.filter_prompt import FilterScreen
    from jobtui.tui.screens.kind import KindScreen

    await until(lambda: "overview" in shown.at, "first Overview")

    def tab_done(name: str) -> Callable[[float], bool]:
        tables = {"jobs": "#jobs-table", "dead": "#dead-rows"}

        def done(t0: float) -> bool:
            if shown.at.get(name, 0.0) <= t0 or app.active_tab != name:
                return False
            return name not in tables or rows_of(app, tables[name]) > 0

        return done

    def record(label: str, ms: Timing) -> None:
        out.setdefault(label, []).append(ms)

    for round_no in range(rounds):
        for digit, name in [*TABS.items(), ("1", "overview")]:
            if app.active_tab == name:
                continue
            try:
                ms = await timed(pilot, shown, key(app, digit), tab_done(name), name)
            except Lost:
                lost.append(f"key {digit} ({name})")
                await pilot.press(digit)
                await until(lambda n=name: app.active_tab == n, f"tab {name} again", app)
                continue
            record(f"key {digit} ({name})", ms)

        # Enter on a row of Jobs: the detail screen with the row read.
        await timed(pilot, shown, key(app, "2"), tab_done("jobs"), "jobs")
        ms = await timed(
            pilot,
            shown,
            key(app, "enter"),
            lambda t0: isinstance(app.screen, DetailScreen) and app.screen.row is not None,
            "job detail",
        )
        record("enter (job detail)", ms)
        await pilot.press("escape")
        await until(lambda: not isinstance(app.screen, DetailScreen), "back")
        await jobs_keys(app, pilot, shown, record)

        # Filters on Jobs, typed into the filter prompt; timed from the Enter.
        for label, text in FILTERS.items():
            await pilot.press("slash")
            await until(lambda: isinstance(app.screen, FilterScreen), "filter prompt")
            app.screen.query_one("Input").value = text
            ms = await timed(
                pilot,
                shown,
                key(app, "enter"),
                lambda t0: (
                    shown.at.get("jobs", 0.0) > t0 and not isinstance(app.screen, FilterScreen)
                ),
                label,
            )
            record(label, ms)
        # Back to the view the tab opens on: an empty filter is every job, `a` the unfinished.
        await pilot.press("slash")
        await until(lambda: isinstance(app.screen, FilterScreen), "filter prompt")
        app.screen.query_one("Input").value = ""
        await timed(pilot, shown, key(app, "enter"), tab_done("jobs"), "no filter")
        await timed(pilot, shown, key(app, "a"), tab_done("jobs"), "unfinished")

        # Dead letters: the cursor onto the next group reloads its rows; Enter on a row.
        await timed(pilot, shown, key(app, "3"), tab_done("dead"), "dead")
        app.query_one("#dead-groups").focus()
        await pilot.pause()
        ms = await timed(pilot, shown, key(app, "down"), tab_done("dead"), "dead group")
        record("down (dead: next group)", ms)
        app.query_one("#dead-rows").focus()
        await pilot.pause()
        ms = await timed(
            pilot,
            shown,
            key(app, "enter"),
            lambda t0: isinstance(app.screen, DetailScreen) and app.screen.row is not None,
            "dead detail",
        )
        record("enter (dead letter detail)", ms)
        await pilot.press("escape")
        await until(lambda: not isinstance(app.screen, DetailScreen), "back")
        app.query_one("#dead-groups").focus()
        await pilot.press("up")  # back to "all" for the next round
        await timed(pilot, shown, key(app, "1"), tab_done("overview"), "overview")

        # Enter on a kind of the Overview: the kind screen with its figures read.
        # Another kind each round (the app keeps its kind screen: reopened on the same kind it
        # would show the figures it has while reading them again); the figures must be read
        # after the press.
        kinds_table = app.query_one("#overview-pane KeyedTable")
        kinds_table.focus()
        kinds_table.move_cursor(row=round_no % max(kinds_table.row_count, 1))
        await pilot.pause()
        kept = getattr(app, "_kind_screen", None)
        before = kept.info if kept is not None else None
        ms = await timed(
            pilot,
            shown,
            key(app, "enter"),
            lambda t0, before=before: (
                isinstance(app.screen, KindScreen)
                and app.screen.info is not None
                and app.screen.info is not before
            ),
            "kind screen",
        )
        record("enter (overview: kind screen)", ms)
        await pilot.press("escape")
        await until(lambda: not isinstance(app.screen, KindScreen), "back")


async def jobs_keys(
    app: Any, pilot: Any, shown: Shown, record: Callable[[str, Timing], None]
) -> None:
    """Keys of the Jobs tab beyond the tab key: `end` (the last row, which loads the next
    page), `s` and `S` (sort by id, then reversed) and `#` (the exact count); then the tab is
    put back as it opens (`a` twice: one page, the pane's own order)."""
    from jobtui.tui.widgets.keyed_table import KeyedTable

    pane = app.query_one("#jobs-pane")
    table = app.query_one("#jobs-table", KeyedTable)
    table.focus()
    await pilot.pause()
    before = table.row_count
    ms = await timed(
        pilot,
        shown,
        key(app, "end"),
        lambda t0: shown.at.get("jobs", 0.0) > t0 and table.row_count > before,
        "next page",
    )
    record("end (jobs: last row, next page)", ms)
    ms = await timed(pilot, shown, key(app, "s"), lambda t0: table.sort_column == "id", "sort")
    record("s (jobs: sort by id)", ms)
    ms = await timed(pilot, shown, key(app, "S"), lambda t0: table.sort_reverse, "reverse sort")
    record("S (jobs: reverse sort)", ms)
    table.sort_by(None)
    # `#` on the default view: since the unfinished count is summed from the state counts it
    # is exact already and the screen does not change, so the press is done when the count is
    # read (no update is drawn to wait for).
    await pilot.pause()
    cpu0, gc0, t0 = time.process_time(), shown.gc_ms, time.perf_counter()
    await key(app, "number_sign")()
    await until(lambda: pane._exact is not None, "exact count", app, timeout=LOST_AFTER_S)
    wall = (time.perf_counter() - t0) * 1000
    record(
        "# (jobs: exact count)",
        (wall, None, (time.process_time() - cpu0) * 1000, shown.gc_ms - gc0),
    )
    for _ in range(2):
        await timed(pilot, shown, key(app, "a"), lambda t0: shown.at.get("jobs", 0.0) > t0, "a")


def p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]


TMUX_FILTERS = {label: text for label, text in FILTERS.items()}
# Each pane's and screen's method that puts freshly read data into its widgets: the child
# notes when each ran (`tmux_child`), and a press is done at the first bytes the console
# writes to the tmux pane after the one it leads to.
SHOWN_BY = {
    "jobtui.tui.panes.overview:OverviewPane.show": "overview",
    "jobtui.tui.panes.jobs:JobsPane.show": "jobs",
    "jobtui.tui.panes.dead:DeadPane.show": "dead",
    "jobtui.tui.panes.workers:WorkersPane.show": "workers",
    "jobtui.tui.panes.schedules:SchedulesPane.show": "schedules",
    "jobtui.tui.panes.database:DatabasePane.show": "database",
    "jobtui.tui.screens.detail:DetailScreen._render_row": "detail",
    "jobtui.tui.screens.kind:KindScreen._show": "kind",
}


def tmux_child(stamps: str, argv: list[str]) -> None:
    """The console as `jobtui ARGV` runs it, with each method of SHOWN_BY wrapped to append
    "NAME MONOTONIC-TIME" to the file `stamps` when it has run (CLOCK_MONOTONIC: the same
    clock in every process of the machine)."""
    import importlib

    from jobtui.cli import main as cli_main

    out = open(stamps, "a", buffering=1)  # noqa: SIM115 - lives as long as the process

    def wrap(cls: Any, method: str, name: str) -> None:
        inner = getattr(cls, method)

        def wrapped(self: Any, *args: Any, **kwargs: Any) -> Any:
            result = inner(self, *args, **kwargs)
            out.write(f"{name} {time.monotonic()}\n")
            if name == "kind" and getattr(args[0], "rows_read", True):
                # The kind screen opens before its row scans (kindinfo.load_rows) come back,
                # saying "loading…" there: this stamp is the screen with every figure.
                out.write(f"kind-full {time.monotonic()}\n")
            return result

        setattr(cls, method, wrapped)

    for where, name in SHOWN_BY.items():
        module, attr = where.split(":")
        cls_name, method = attr.split(".")
        wrap(getattr(importlib.import_module(module), cls_name), method, name)
    sys.exit(cli_main(argv))


class TmuxKeys:
    """The real console (`jobtui console --refresh 300s`) in a tmux pane of COLS×ROWS (the
    harness of console_tmux.py), keys sent with `tmux send-keys`, and every byte the console
    writes to the pane copied to a file (`pipe-pane`) whose growth is watched every
    millisecond. A press is drawn at the first growth of that file after the pane or screen
    it leads to has put data read after the press into its widgets (`tmux_child`'s stamps);
    a key that reads nothing (a sort) at the first growth after the press."""

    def __init__(self, dsn: str, cols: int, rows: int, workdir: Path) -> None:
        from benchmarks.console_bytes import console_argv
        from benchmarks.console_tmux import TmuxConsole

        self.stamps = workdir / "stamps"
        self.stamps.touch()
        self._offset = 0
        self.seen: list[tuple[str, float]] = []
        root = str(Path(__file__).resolve().parent.parent)
        # jobtui from PYTHONPATH first, as in this process (an older checkout: "before"), this
        # checkout after it (child_env puts it first, for the benchmarks package)
        first = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
        code = (
            f"import sys; sys.path[:0] = {first!r}; sys.path.append({root!r}); "
            "from benchmarks.console_scale import tmux_child; "
            f"tmux_child({str(self.stamps)!r}, {console_argv(dsn, 300.0)!r})"
        )
        self.launched = time.monotonic()
        self.console = TmuxConsole(dsn, cols, rows, workdir, 300.0, [sys.executable, "-c", code])
        self.console.start_capture()
        self._size = self.console.captured()
        self.growths: list[float] = []
        self.sent_at = 0.0  # when the last press was sent

    def _poll(self) -> None:
        size = self.console.captured()
        if size != self._size:
            self._size = size
            self.growths.append(time.monotonic())
        with open(self.stamps) as fh:
            fh.seek(self._offset)
            text = fh.read()
        if text.endswith("\n"):
            self._offset += len(text)
            for line in text.splitlines():
                name, at = line.split()
                self.seen.append((name, float(at)))

    def wait(self, shown: str | None, t0: float, timeout: float = LOST_AFTER_S) -> float | None:
        """The time of the first growth after `shown`'s first stamp after `t0` (after `t0`
        itself when `shown` is None); None after `timeout` seconds."""
        deadline = t0 + timeout
        while time.monotonic() < deadline:
            self._poll()
            after = t0
            if shown is not None:
                stamps = [at for name, at in self.seen if name == shown and at > t0]
                if not stamps:
                    time.sleep(0.001)
                    continue
                after = stamps[0]
            drawn = [g for g in self.growths if g > after]
            if drawn:
                return drawn[0]
            time.sleep(0.001)
        return None

    def quiet(self, seconds: float = 0.3, limit: float = 1.5) -> None:
        """Wait until the console has written nothing for `seconds` (animations ended), or
        `limit` seconds: a screen may keep redrawing (seen here: several KB/s for seconds
        after some presses), and presses are timed by the stamps anyway."""
        start = time.monotonic()
        while time.monotonic() - start < limit:
            self._poll()
            last = self.growths[-1] if self.growths else 0.0
            if time.monotonic() - max(last, start) >= seconds:
                return
            time.sleep(0.005)

    def press(self, keys: tuple[str, ...], shown: str | None) -> float | None:
        """Milliseconds from sending `keys` to the drawn result; None if lost."""
        self.quiet()
        t0 = self.sent_at = time.monotonic()
        self.console.send(*keys)
        drawn = self.wait(shown, t0)
        return None if drawn is None else (drawn - t0) * 1000

    def close(self) -> None:
        self.console.close()


def drive_tmux(
    dsn: str, rounds: int, lost: list[str], size: tuple[int, int], workdir: Path
) -> dict[str, list[Timing]]:
    """Every key of `rounds_of` that reads data, sent through tmux, and "first data after
    launch" once. Left out: `#` (it changes nothing on screen) and `s`/`S` (a sort reads
    nothing, and with a screen that redraws on its own the first bytes after the press need
    not be the sort's; the Pilot run times them at the update that shows them)."""
    out: dict[str, list[Timing]] = {}
    keys = TmuxKeys(dsn, size[0], size[1], workdir)

    def timed_key(
        label: str, send: tuple[str, ...], shown: str | None, record: bool = True
    ) -> None:
        ms = keys.press(send, shown)
        if ms is None:
            lost.append(label)
            keys.quiet(1.0)
        elif record:
            out.setdefault(label, []).append((ms, None, 0.0, 0.0))

    try:
        first = keys.wait("overview", keys.launched, timeout=TIMEOUT_S)
        if first is None:
            keys.console.check_alive()
            raise SystemExit("console_scale: no first Overview in 30 s")
        out["first data after launch (process start)"] = [
            ((first - keys.launched) * 1000, None, 0.0, 0.0)
        ]
        for round_no in range(rounds):
            for digit, name in [*list(TABS.items())[1:], ("1", "overview")]:  # from Overview
                timed_key(f"key {digit} ({name})", (digit,), name)
            timed_key("2", ("2",), "jobs", record=False)
            timed_key("enter (job detail)", ("Enter",), "detail")
            timed_key("escape", ("Escape",), None, record=False)
            timed_key("end (jobs: last row, next page)", ("End",), "jobs")
            for label, text in TMUX_FILTERS.items():
                timed_key("/", ("/",), None, record=False)
                timed_key("clear", ("C-u",), None, record=False)
                keys.console.press(text)
                keys.quiet()
                timed_key(label, ("Enter",), "jobs")
            timed_key("/", ("/",), None, record=False)
            timed_key("clear", ("C-u",), None, record=False)
            timed_key("no filter", ("Enter",), "jobs", record=False)
            timed_key("unfinished", ("a",), "jobs", record=False)
            timed_key("3", ("3",), "dead", record=False)
            timed_key("down (dead: next group)", ("Down",), "dead")
            timed_key("tab", ("Tab",), None, record=False)
            timed_key("enter (dead letter detail)", ("Enter",), "detail")
            timed_key("escape", ("Escape",), None, record=False)
            timed_key("back-tab", ("BTab",), None, record=False)
            timed_key("up", ("Up",), "dead", record=False)
            timed_key("1", ("1",), "overview", record=False)
            for _ in range(round_no):  # another kind each round
                timed_key("down", ("Down",), None, record=False)
            timed_key("enter (overview: kind screen)", ("Enter",), "kind")
            full = keys.wait("kind-full", keys.sent_at)
            if full is not None:
                label = "  … every figure (its row scans too)"
                out.setdefault(label, []).append(((full - keys.sent_at) * 1000, None, 0.0, 0.0))
            timed_key("escape", ("Escape",), None, record=False)
            for _ in range(round_no):
                timed_key("up", ("Up",), None, record=False)
    finally:
        keys.close()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dsn", default="postgresql://root@127.0.0.1:5432/postgres")
    ap.add_argument("--rounds", type=int, default=10, help="presses of each key (default 10)")
    ap.add_argument("--rebuild", action="store_true", help="build the data set again")
    ap.add_argument(
        "--each", action="store_true", help="also print every round's times (ms, cpu ms)"
    )
    ap.add_argument(
        "--size", default=f"{SIZE[0]}x{SIZE[1]}", help="terminal columns x lines (default 120x40)"
    )
    ap.add_argument(
        "--reminders",
        type=int,
        default=0,
        help="add this many jobs due over the next 30 days (issue 24: 200000)",
    )
    ap.add_argument(
        "--tmux",
        action="store_true",
        help="the real console in a tmux pane, keys sent through tmux (not Pilot)",
    )
    args = ap.parse_args()
    try:
        columns, lines = (int(n) for n in args.size.lower().split("x"))
    except ValueError:
        sys.exit(f"console_scale: --size must be COLUMNSxLINES, not {args.size!r}")
    if args.rounds < 1:
        sys.exit("console_scale: --rounds must be at least 1")
    if args.reminders < 0:
        sys.exit("console_scale: --reminders must be 0 or more")
    import jobtui

    print(f"jobtui from {Path(jobtui.__file__).parent}", flush=True)
    try:
        template = ensure_template(args.dsn, args.rebuild)
    except psycopg.Error as exc:
        sys.exit(f"console_scale: cannot build the data set: {exc}")
    db = copy_of(args.dsn, template)
    try:
        dsn = conninfo.make_conninfo(args.dsn, dbname=db)
        stale(dsn, args.reminders)
        # As a worker's housekeeper does (jobtui/worker/housekeeper.py, _fold_counts): fold the
        # count deltas, then VACUUM the count tables. Without the VACUUM (autovacuum is off here)
        # the fold's deleted rows stayed: job_counts was 13 MB for ~1,100 live rows with the
        # reminders, and every read of the state counts (each tab's, the kind screen's twice)
        # read all of it, 10-20 ms each, which no running worker leaves.
        with psycopg.connect(dsn, autocommit=True) as conn:
            q = queries("public")
            conn.execute(q.worker_fold_counts)
            conn.execute(q.worker_vacuum_counts)
        print(
            f"data set ready ({db}, {args.reminders:,} reminders over the next 30 days); "
            f"{args.rounds} rounds at {columns}x{lines}"
            f"{' through tmux' if args.tmux else ' (Pilot)'}",
            flush=True,
        )
        lost: list[str] = []
        if args.tmux:
            with tempfile.TemporaryDirectory(prefix="console-scale-") as workdir:
                results = drive_tmux(dsn, args.rounds, lost, (columns, lines), Path(workdir))
        else:
            results = asyncio.run(drive(dsn, args.rounds, lost, (columns, lines)))
        print(
            f"\n{'key → drawn':48} {'p50 ms':>7} {'p95 ms':>7} {'target':>7}"
            f" {'in link p50':>11} {'p95':>6} {'cpu p50':>8} {'p95':>6} {'gc p95':>7}  n"
        )
        for label, timings in results.items():
            target = 300 if label.startswith("filter") else 150
            if args.tmux:  # only the key-to-screen time is known from outside the process
                total = sorted(t for t, _, _, _ in timings)
                print(
                    f"{label:48} {statistics.median(total):7.1f} {p95(total):7.1f}"
                    f" {'–' if label.startswith('first') else '≤' + str(target):>7}"
                    f"  (min {total[0]:.0f}, max {total[-1]:.0f})  {len(total)}"
                )
                continue
            total = [t for t, _, _, _ in timings]
            spent = [d for _, d, _, _ in timings if d is not None]
            cpu = [c for _, _, c, _ in timings]
            in_gc = [g for _, _, _, g in timings]
            in_db = (
                f"{statistics.median(spent):11.1f} {p95(spent):6.1f}"
                if spent
                else f"{'n/a':>11} {'':6}"
            )
            print(
                f"{label:48} {statistics.median(total):7.1f} {p95(total):7.1f}"
                f" {'≤' + str(target):>7} {in_db} {statistics.median(cpu):8.1f}"
                f" {p95(cpu):6.1f} {p95(in_gc):7.1f}  {len(total)}"
            )
        if args.each:
            print("\nevery round, in order: key → drawn ms / cpu ms / of it in the collector ms")
            for label, timings in results.items():
                each = "  ".join(f"{t:.0f}/{c:.0f}/{g:.0f}" for t, _, c, g in timings)
                print(f"{label:48} {each}")
        if lost:
            print(f"keys lost (sent again, not timed): {', '.join(lost)}")
        print(f"load average while measuring: {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs")
    finally:
        with psycopg.connect(args.dsn, autocommit=True) as conn:
            conn.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(db))
            )


if __name__ == "__main__":
    main()
