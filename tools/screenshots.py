"""`python tools/screenshots.py OUTDIR` (`make screenshots`): SVGs of each tab over demo data.

Starts an embedded PostgreSQL in a temporary directory, migrates it, seeds it as `jobtui demo`
does (jobtui.demo.data: its kinds, dead letters, an hour of history), runs the demo's worker and
trickle of new jobs for a few seconds, and saves one SVG per tab plus the detail, kind, help and
"why" views, at 120×40 and at 80×24 (`NAME-80x24.svg`): what a reader of the README sees is
what `make demo` shows.
"""

from __future__ import annotations

import asyncio
import random
import sys
import tempfile
import threading
import time
from pathlib import Path

import psycopg

from jobtui import ops
from jobtui.console_config import ConsoleConfig

SIZE = (120, 40)
WARM_UP_S = 8.0  # the demo's worker runs this long before the first screenshot


async def capture(
    dsn: str,
    outdir: Path,
    schema: str = "public",
    *,
    size: tuple[int, int] = SIZE,
    suffix: str = "",
    paused_kind: str = "generate_report",
) -> list[Path]:
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
        saved.append(Path(app.save_screenshot(f"{name}{suffix}.svg", str(outdir))))

    async with app.run_test(size=size) as pilot:
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
        actor = ops.Actor("ops@screenshots")
        async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
            await ops.pause_kind(conn, schema, paused_kind, actor=actor)
            cur = await conn.execute(
                "SELECT id FROM jobs WHERE kind = %s AND finished_at IS NULL "
                "AND locked_at IS NULL AND run_at <= now() ORDER BY id LIMIT 1",
                (paused_kind,),
            )
            row = await cur.fetchone()
            if row is None:  # the worker got them all: one more, so there is one to ask about
                await conn.execute(
                    'INSERT INTO jobs (kind, payload) VALUES (%s, \'{"period": "2026-11"}\')'
                    " RETURNING id",
                    (paused_kind,),
                )
                cur = await conn.execute("SELECT max(id) FROM jobs WHERE kind = %s", (paused_kind,))
                row = await cur.fetchone()
            if row is not None and row[0] is not None:
                app.open_detail("job", int(row[0]))
                await pilot.pause(1.5)
                save("why")
            await ops.resume_kind(conn, schema, paused_kind, actor=actor)
    return saved


def main(argv: list[str] | None = None) -> int:
    """The screenshots over what `jobtui demo` shows: its seed (jobs, dead letters, an hour
    of history), its worker running its handlers (long-running kinds included) and its
    trickle of new jobs, at 120×40 and 80×24 (`-80x24` names)."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python tools/screenshots.py OUTDIR", file=sys.stderr)
        return 2
    outdir = Path(args[0])
    from jobtui.demo import background, data
    from jobtui.embedded import EmbeddedUnavailable, start_embedded
    from jobtui.schema import migrate

    with tempfile.TemporaryDirectory(prefix="jobtui-shots-") as tmp:
        root = Path(tmp)
        try:
            server = start_embedded(root / "pg")
        except EmbeddedUnavailable as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 1
        stop = threading.Event()
        worker = None
        try:
            with psycopg.connect(server.dsn, autocommit=True) as conn:
                migrate(conn, "public")
                data.seed(conn, "public", rng=random.Random(7))
            log = background.open_log(root / "worker.log")
            worker = background.start_worker(server.dsn, "public", root, log)
            trickle = threading.Thread(
                target=data.run_trickle, args=(server.dsn, "public", stop.is_set), daemon=True
            )
            trickle.start()
            time.sleep(WARM_UP_S)  # jobs run, fail, retry; the long kinds start
            for size, suffix in ((SIZE, ""), ((80, 24), "-80x24")):
                for path in asyncio.run(capture(server.dsn, outdir, size=size, suffix=suffix)):
                    print(path)
        finally:
            stop.set()
            if worker is not None:
                background.stop_worker(worker, root)
            server.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
