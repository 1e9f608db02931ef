"""Issue 11, safe to act: the console's dialogs, its write path and the detail screen, driven
through Textual's Pilot against a real PostgreSQL; every test asserts on the screen and on the
rows (and audit rows) in the database."""

from __future__ import annotations

import base64
import os
import stat
from datetime import timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import conninfo
from psycopg.types.json import Jsonb
from rich.console import Group
from rich.text import Text
from test_tui_console import notifications, rendered, until
from textual.content import Content
from textual.widget import Widget
from textual.widgets import Button, Footer, Input, Static

from jobtui.console_config import ConsoleConfig
from jobtui.enqueue import JobSpec, enqueue, enqueue_many
from jobtui.inert import payload_json
from jobtui.tui.actions import CANCEL, RUN_NOW, applicable
from jobtui.tui.app import JobtuiApp
from jobtui.tui.clipboard import osc52_blocked
from jobtui.tui.host import WriteAsked
from jobtui.tui.screens.confirm import BACK_LABEL, ConfirmScreen
from jobtui.tui.screens.detail import DetailScreen
from jobtui.tui.screens.export_prompt import ExportPathScreen
from jobtui.tui.widgets.keyed_table import KeyedTable
from jobtui.tui.widgets.status import StatusBar

SIZE = (100, 40)
TRACE = 'Traceback (most recent call last):\n  File "h.py", line 3, in send\nOSError: refused'


def add_dead(conn: psycopg.Connection, kind: str, error: str, n: int = 1) -> list[int]:
    """Dead letters with three attempts whose tracebacks are identical."""
    ids = []
    for i in range(n):
        errors = [
            {"attempt": a, "at": f"2026-01-01T00:0{a}:00+00:00", "error": error,
             "traceback": TRACE, "worker": "h:1:a"}
            for a in (1, 2, 3)
        ]  # fmt: skip
        row = conn.execute(
            """INSERT INTO dead_letters (id, kind, payload, attempts, max_attempts, created_at,
                   run_at, last_error, errors, reason)
               VALUES (nextval(pg_get_serial_sequence('jobs', 'id')), %s, %s, 3, 3,
                   now() - interval '1 hour', now() - interval '1 hour', %s, %s, 'failed')
               RETURNING id""",
            (kind, Jsonb({"i": i, "to": "a@example.com"}), error, Jsonb(errors)),
        ).fetchone()
        assert row is not None
        ids.append(int(row[0]))
    return ids


def add_finished(conn: psycopg.Connection, kind: str = "mail", **cols: Any) -> int:
    """A job that succeeded after a 2-second run (or with `cols` overriding that)."""
    values: dict[str, Any] = {
        "payload": Jsonb({"to": "b@example.com"}),
        "attempts": 1,
        "locked_at": "2026-01-01T00:00:00+00:00",
        "finished_at": "2026-01-01T00:00:02+00:00",
        "locked_by": "h:1:a",
        **cols,
    }
    names = ["kind", *values]
    row = conn.execute(
        f"INSERT INTO jobs ({', '.join(names)}) VALUES ({', '.join(['%s'] * len(names))}) "
        "RETURNING id",
        [kind, *values.values()],
    ).fetchone()
    assert row is not None
    return int(row[0])


def config(**changes: Any) -> ConsoleConfig:
    return ConsoleConfig(refresh_s=0.5).with_(**changes)


def text_of(widget: Widget) -> str:
    """`rendered`, plus button labels and the grouped errors section of the detail view."""
    if isinstance(widget, Button):
        label = widget.label
        return label.plain if isinstance(label, (Text, Content)) else str(label)
    if isinstance(widget, Static) and isinstance(widget.content, Group):
        return "\n".join(r.plain for r in widget.content.renderables if isinstance(r, Text))
    return rendered(widget)


def noted(app: JobtuiApp, text: str, *, anywhere: bool = False) -> bool:
    """Whether a notification starts with (or, `anywhere`, contains) `text`."""
    return any((text in m) if anywhere else m.startswith(text) for m in notifications(app))


def footer(app: JobtuiApp) -> str:
    return text_of(app.screen.query_one(Footer))


def dead_ids(conn: psycopg.Connection) -> set[int]:
    return {r[0] for r in conn.execute("SELECT id FROM dead_letters")}


def audit(conn: psycopg.Connection) -> list[tuple[Any, ...]]:
    return conn.execute("SELECT action, ids, count, filter FROM audit_log ORDER BY id").fetchall()


async def confirm(pilot: Any) -> ConfirmScreen:
    await until(pilot, lambda: isinstance(pilot.app.screen, ConfirmScreen))
    await pilot.pause()
    screen = pilot.app.screen
    assert isinstance(screen, ConfirmScreen)
    return screen


def choices(screen: ConfirmScreen) -> list[str]:
    return [text_of(b) for b in screen.query(Button) if b.id and b.id.startswith("choice-")]


async def dead_tab(app: JobtuiApp, pilot: Any, table: str, rows: int) -> KeyedTable:
    """The Dead letters tab, once `table` shows `rows` rows."""
    await pilot.press("3")
    shown = app.query_one(table, KeyedTable)
    await until(pilot, lambda: len(shown.keys) == rows)
    return shown


async def open_detail(app: JobtuiApp, pilot: Any, what: str, row_id: int) -> DetailScreen:
    await until(pilot, lambda: app.polls >= 1)
    app.open_detail(what, row_id)
    await until(pilot, lambda: isinstance(app.screen, DetailScreen) and app.screen.now is not None)
    await pilot.pause(0.1)
    screen = app.screen
    assert isinstance(screen, DetailScreen)
    return screen


def head(screen: DetailScreen) -> str:
    return text_of(screen.query_one("#detail-head", Static))


# --- bulk scopes: typed confirmation ------------------------------------------------------


async def test_requeue_all_matching_needs_the_count_typed(
    dsn: str, conn: psycopg.Connection
) -> None:
    ids = add_dead(conn, "webhook", "ConnectTimeout: after 10s", n=5)
    app = JobtuiApp(dsn, "public", config=config())
    async with app.run_test(size=SIZE) as pilot:
        await dead_tab(app, pilot, "#dead-rows", 5)
        await pilot.press("tab", "r")  # the cursor row, or all 5 matching
        dialog = await confirm(pilot)
        one, bulk, back = choices(dialog)
        assert one == f"1  requeue dead letter #{max(ids)}" and "ALL" not in one
        assert bulk.startswith("2  ‼ ALL requeue 5 matching the filter") and "(type 5)" in bulk
        assert dialog.query_one("#choice-2", Button).has_class("-bulk")
        assert not dialog.query_one("#choice-1", Button).has_class("-bulk")
        assert back == BACK_LABEL
        await pilot.press("2")  # one keystroke is not enough
        await pilot.pause(0.2)
        assert app.screen is dialog and dialog.query_one("#confirm-typed").display
        await pilot.press("4", "enter")  # the wrong count: nothing happens
        await pilot.pause(0.3)
        assert app.screen is dialog
        assert "Not confirmed" in text_of(dialog.query_one("#confirm-typed-error", Static))
        assert dead_ids(conn) == set(ids) and audit(conn) == []
        await pilot.press(*"yes", "enter")  # nor a word other than the one asked for
        await pilot.pause(0.3)
        assert dead_ids(conn) == set(ids) and audit(conn) == []
        await pilot.press("5", "enter")
        await until(pilot, lambda: dead_ids(conn) == set())
        await until(pilot, lambda: "Requeued 5 dead letters." in notifications(app))
        assert [(a, n) for a, _, n, _ in audit(conn)] == [("requeue_dead_matching", 5)]


async def test_delete_group_typed_and_back_changes_nothing(
    dsn: str, conn: psycopg.Connection
) -> None:
    ids = add_dead(conn, "billing", "CardDeclined: card 1234", n=3)
    app = JobtuiApp(dsn, "public", config=config())
    async with app.run_test(size=SIZE) as pilot:
        await dead_tab(app, pilot, "#dead-groups", 2)
        await pilot.press("down", "d")  # the group: only a bulk scope
        dialog = await confirm(pilot)
        assert dialog.has_class("-danger")
        assert choices(dialog)[0].startswith("1  ‼ ALL delete 3 in this group")
        await pilot.press("1", "escape")  # back from the typed field: nothing deleted
        await until(pilot, lambda: not isinstance(app.screen, ConfirmScreen))
        assert dead_ids(conn) == set(ids) and audit(conn) == []
        await pilot.press("d")
        await confirm(pilot)
        await pilot.press("1", "3", "enter")
        await until(pilot, lambda: dead_ids(conn) == set())
        assert [(a, n) for a, _, n, _ in audit(conn)] == [("delete_dead_matching", 3)]


# --- every action asks first ---------------------------------------------------------------


async def test_single_row_run_now_in_detail_asks(dsn: str, conn: psycopg.Connection) -> None:
    later = int(enqueue(conn, "report", {}, delay=timedelta(hours=2)))
    app = JobtuiApp(dsn, "public", config=config())
    async with app.run_test(size=SIZE) as pilot:
        detail = await open_detail(app, pilot, "job", later)
        assert "Run now" in footer(app) and "Cancel job" in footer(app)
        await pilot.press("r")
        dialog = await confirm(pilot)
        assert dialog._title == f"Run now job #{later}?"
        assert choices(dialog) == [f"1  run now job #{later}", BACK_LABEL]  # no repeated choice
        await pilot.press("escape")
        await until(pilot, lambda: app.screen is detail)
        due = conn.execute("SELECT run_at <= now() FROM jobs WHERE id = %s", (later,)).fetchone()
        assert due == (False,) and audit(conn) == []
        await pilot.press("r")
        await confirm(pilot)
        await pilot.press("1")
        await until(pilot, lambda: "Made 1 job due now." in notifications(app))
        due = conn.execute("SELECT run_at <= now() FROM jobs WHERE id = %s", (later,)).fetchone()
        assert due == (True,)
        await until(pilot, lambda: "Run now" not in footer(app))  # due now: nothing to make due


async def test_pause_and_resume_a_kind_ask(dsn: str, conn: psycopg.Connection) -> None:
    enqueue(conn, "mail", {})
    app = JobtuiApp(dsn, "public", config=config())
    async with app.run_test(size=SIZE) as pilot:
        kinds = app.query_one("#kinds", KeyedTable)
        await until(pilot, lambda: kinds.keys == ["mail"])
        await pilot.press("P")
        dialog = await confirm(pilot)
        assert dialog._title == "Pause kind?" and choices(dialog) == ["1  Pause mail", BACK_LABEL]
        await pilot.press("n")  # back
        await until(pilot, lambda: not isinstance(app.screen, ConfirmScreen))
        assert conn.execute("SELECT count(*) FROM paused_kinds").fetchone() == (0,)
        await pilot.press("P")
        await confirm(pilot)
        await pilot.press("1")
        await until(pilot, lambda: "Paused kind mail." in notifications(app))
        assert conn.execute("SELECT kind FROM paused_kinds").fetchall() == [("mail",)]
        await until(pilot, lambda: "PAUSED" in " ".join(str(c) for c in kinds.get_row("mail")))
        await pilot.press("P")
        dialog = await confirm(pilot)
        assert dialog._title == "Resume kind?"
        await pilot.press("1")
        await until(pilot, lambda: "Resumed kind mail." in notifications(app))
        assert conn.execute("SELECT count(*) FROM paused_kinds").fetchone() == (0,)
        assert [a for a, *_ in audit(conn)] == ["pause_kind", "resume_kind"]


# --- only what applies ---------------------------------------------------------------------


async def test_finished_job_offers_no_cancel_or_run_now(dsn: str, conn: psycopg.Connection) -> None:
    done = add_finished(conn)
    app = JobtuiApp(dsn, "public", config=config())
    async with app.run_test(size=SIZE) as pilot:
        await open_detail(app, pilot, "job", done)
        shown = footer(app)
        assert "Cancel" not in shown and "Run now" not in shown and "Run again" in shown
        await pilot.press("c", "r")
        await pilot.pause(0.3)
        assert isinstance(app.screen, DetailScreen)  # no dialog: nothing it could do
        # Asked directly (as a pane with stale rows might), the write path refuses too.
        app.writes.ask(WriteAsked(CANCEL, [done], None))
        expected = f"Nothing to cancel: job #{done} is finished, or already asked to stop."
        await until(pilot, lambda: expected in notifications(app))
        assert not isinstance(app.screen, ConfirmScreen) and audit(conn) == []
    assert applicable("succeeded") == () and applicable("cancelled") == ()
    assert applicable("ready") == (CANCEL,)
    assert applicable("scheduled") == (CANCEL, RUN_NOW)
    assert applicable("retrying", due=True) == (CANCEL,)
    assert applicable("running", cancel_requested=True) == ()


async def test_marked_jobs_some_finished_are_left_alone(dsn: str, conn: psycopg.Connection) -> None:
    done = add_finished(conn)
    enqueue_many(conn, [JobSpec("mail", {"n": i}) for i in range(2)])
    waiting = sorted(r[0] for r in conn.execute("SELECT id FROM jobs WHERE finished_at IS NULL"))
    app = JobtuiApp(dsn, "public", config=config())
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.polls >= 1)
        app.writes.ask(WriteAsked(CANCEL, [done, *waiting], None))
        dialog = await confirm(pilot)
        assert dialog._title == "Cancel jobs?"
        assert choices(dialog) == ["1  cancel these 2 jobs", BACK_LABEL]
        assert "cancel" not in BACK_LABEL.lower()  # the way out never reads as the action
        assert "1 more selected left alone: finished" in text_of(dialog.query_one("#confirm-body"))
        await pilot.press("1")
        await until(pilot, lambda: "Cancelled 2 jobs." in notifications(app))
        assert audit(conn)[0][1] == waiting  # the finished job was never asked for


# --- the detail screen ---------------------------------------------------------------------


async def test_requeue_in_detail_links_to_the_job(dsn: str, conn: psycopg.Connection) -> None:
    (dead,) = add_dead(conn, "export_crm", "OSError: refused")
    app = JobtuiApp(dsn, "public", config=config())
    async with app.run_test(size=SIZE) as pilot:
        detail = await open_detail(app, pilot, "dead", dead)
        assert "Requeue" in footer(app) and "Delete" in footer(app)
        await pilot.press("r")
        dialog = await confirm(pilot)
        assert dialog._title == f"Requeue dead letter #{dead}?"
        assert choices(dialog) == [f"1  requeue dead letter #{dead}", BACK_LABEL]
        await pilot.press("1")
        await until(pilot, lambda: "now job" in head(detail))
        assert head(detail).startswith(f"Dead letter #{dead} was requeued: it is now job #{dead}")
        shown = footer(app)
        assert "Requeue" not in shown and "Delete" not in shown and "Open linked" in shown
        await pilot.press("d")  # not offered: the row is gone
        await pilot.pause(0.3)
        assert app.screen is detail
        await pilot.press("o")
        await until(
            pilot,
            lambda: (
                isinstance(app.screen, DetailScreen)
                and app.screen.what == "job"
                and app.screen.row is not None
            ),
        )
        job = app.screen
        assert isinstance(job, DetailScreen) and job.row_id == dead
        assert f"#{dead}  export_crm  ready" in head(job)
        assert [a for a, *_ in audit(conn)] == ["requeue_dead"]


async def test_detail_status_times_and_tracebacks(dsn: str, conn: psycopg.Connection) -> None:
    (dead,) = add_dead(conn, "export_crm", "OSError: refused")
    done = add_finished(conn)
    app = JobtuiApp(dsn, "public", config=config(read_only=True))
    async with app.run_test(size=(80, 24)) as pilot:
        detail = await open_detail(app, pilot, "dead", dead)
        status = detail.query_one("#detail-status", StatusBar)
        await until(pilot, lambda: "READ-ONLY" in status.plain)
        assert status.region.y == 0 and status.region.height == 1  # one line, at the top
        assert "Requeue" not in footer(app) and "Delete" not in footer(app)
        errors = text_of(detail.query_one("#detail-errors", Static))
        assert errors.count("Traceback (most recent call last)") == 1  # shown once, under #3
        assert errors.count("traceback same as attempt 3") == 2
        assert "attempt 3 · 2026-01-01 00:03:00 UTC · worker h:1:a" in errors
        assert "UTC (1h00m ago)" in head(detail)  # the age never runs into the timestamp
        await pilot.press("escape")
        job = await open_detail(app, pilot, "job", done)
        assert "this run attempt 1 ran 2.0s" in head(job)


async def test_run_again_makes_a_linked_job(dsn: str, conn: psycopg.Connection) -> None:
    done = add_finished(conn, unique_key="invoice:42", priority=3, max_attempts=7)
    app = JobtuiApp(dsn, "public", config=config())
    async with app.run_test(size=SIZE) as pilot:
        detail = await open_detail(app, pilot, "job", done)
        titles = [t for t, _, _ in detail.palette_entries()]
        assert "Run this job again" in titles and "Cancel this job" not in titles
        await pilot.press("a")
        dialog = await confirm(pilot)
        assert dialog._title == f"Run job #{done} again?"
        await pilot.press("1")
        await until(pilot, lambda: noted(app, "run again as job", anywhere=True))
        new = conn.execute(
            "SELECT id, kind, payload, priority, max_attempts, unique_key, attempts, "
            "finished_at FROM jobs WHERE rerun_of = %s",
            (done,),
        ).fetchall()
        assert len(new) == 1
        new_id = new[0][0]
        assert new[0][1:] == ("mail", {"to": "b@example.com"}, 3, 7, "invoice:42", 0, None)
        assert f"Job #{done} run again as job #{new_id}." in notifications(app)
        await until(pilot, lambda: f"run again as job #{new_id}" in head(detail))
        assert audit(conn) == [("rerun_job", [done], 1, {"new_jobs": {str(done): new_id}})]
        # The key is held by the unfinished rerun: a second run again makes nothing.
        await pilot.press("a")
        await confirm(pilot)
        await pilot.press("1")
        held = f"Not run again: job #{new_id} holds its unique key and is unfinished."
        await until(pilot, lambda: held in notifications(app))
        assert conn.execute(
            "SELECT count(*) FROM jobs WHERE rerun_of = %s", (done,)
        ).fetchone() == (1,)
        assert audit(conn)[-1][:3] == ("rerun_job", [done], 0)
        await pilot.press("o")  # the link opens the new job, which names its original
        await until(
            pilot,
            lambda: (
                isinstance(app.screen, DetailScreen)
                and app.screen.row_id == new_id
                and app.screen.row is not None
            ),
        )
        assert f"rerun of job #{done}" in head(app.screen)  # type: ignore[arg-type]


# --- copy ----------------------------------------------------------------------------------


async def test_copy_sends_osc52_and_saves_to_a_file(
    dsn: str, conn: psycopg.Connection, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path))
    monkeypatch.setenv("TERM", "xterm-256color")
    monkeypatch.delenv("TMUX", raising=False)
    monkeypatch.delenv("TERM_PROGRAM", raising=False)
    (dead,) = add_dead(conn, "export_crm", "OSError: refused")
    app = JobtuiApp(dsn, "public", config=config())
    async with app.run_test(size=SIZE) as pilot:
        detail = await open_detail(app, pilot, "dead", dead)
        sent: list[str] = []
        driver = app._driver
        assert driver is not None
        original = driver.write

        def recording(data: str) -> None:
            sent.append(data)
            original(data)

        driver.write = recording  # type: ignore[method-assign]
        await pilot.press("y")
        dialog = await confirm(pilot)
        assert choices(dialog)[:3] == [
            f"1  id of dead letter #{dead}",
            f"2  payload of dead letter #{dead}",
            f"3  traceback of attempt 3 of dead letter #{dead}",
        ]
        await pilot.press("2")
        await until(pilot, lambda: noted(app, "Sent the payload"))
        payload = payload_json({"i": 0, "to": "a@example.com"})
        assert app.clipboard == payload
        encoded = base64.b64encode(payload.encode()).decode()
        assert f"\x1b]52;c;{encoded}\a" in sent
        assert not (tmp_path / "jobtui" / "clipboard").exists()  # no file unless asked
        await pilot.press("Y")
        await confirm(pilot)
        await pilot.press("3")
        await until(pilot, lambda: noted(app, "Saved the traceback"))
        (saved,) = (tmp_path / "jobtui" / "clipboard").glob(f"dead-{dead}-traceback-*.txt")
        assert saved.read_text() == TRACE + "\n"
        assert stat.S_IMODE(os.stat(saved).st_mode) == 0o600
        assert app.screen is detail


async def test_copy_falls_back_to_a_file_where_osc52_cannot_work(
    dsn: str, conn: psycopg.Connection, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path))
    monkeypatch.setenv("TERM", "linux")
    done = add_finished(conn)
    app = JobtuiApp(dsn, "public", config=config())
    async with app.run_test(size=SIZE) as pilot:
        await open_detail(app, pilot, "job", done)
        await pilot.press("y")
        await confirm(pilot)
        await pilot.press("1")
        await until(pilot, lambda: noted(app, "Clipboard unavailable", anywhere=True))
        (saved,) = (tmp_path / "jobtui" / "clipboard").glob(f"job-{done}-id-*.txt")
        assert saved.read_text() == f"{done}\n"
        assert app.clipboard == ""  # nothing was sent
    assert osc52_blocked({"TERM": "dumb"}) and osc52_blocked({"TERM_PROGRAM": "Apple_Terminal"})
    assert osc52_blocked({"TERM": "xterm-256color"}) is None


# --- export --------------------------------------------------------------------------------


async def test_export_asks_where_and_never_overwrites_unasked(
    dsn: str,
    conn: psycopg.Connection,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    state = tmp_path / "state"
    monkeypatch.setenv("XDG_STATE_HOME", str(state))
    work = tmp_path / "checkout"
    work.mkdir()
    monkeypatch.chdir(work)
    add_dead(conn, "email.send", "SMTPError: boom", n=2)
    app = JobtuiApp(dsn, "public", config=config())
    async with app.run_test(size=SIZE) as pilot:
        await dead_tab(app, pilot, "#dead-rows", 2)

        async def export_to(path: str | None) -> ExportPathScreen:
            await pilot.press("e")
            await confirm(pilot)
            await pilot.press("1")  # all 2 matching → JSONL
            await until(pilot, lambda: isinstance(app.screen, ExportPathScreen))
            prompt = app.screen
            assert isinstance(prompt, ExportPathScreen)
            if path is not None:
                prompt.query_one(Input).value = path
            await pilot.press("enter")
            return prompt

        prompt = await export_to(None)  # the proposal: a new file in the state directory
        proposed = prompt.default
        assert proposed.parent == state / "jobtui" / "exports" and proposed.suffix == ".jsonl"
        await until(pilot, lambda: noted(app, "Exported 2"))
        assert len(proposed.read_text().splitlines()) == 2
        assert list(work.iterdir()) == []  # nothing in the current directory

        target = tmp_path / "out.jsonl"
        target.write_text("keep me\n")
        await export_to(str(target))
        exists = await confirm(pilot)
        assert exists._title == "File exists" and exists.has_class("-danger")
        await pilot.press("2")  # choose another name: back at the prompt
        await until(pilot, lambda: isinstance(app.screen, ExportPathScreen))
        await pilot.press("escape")
        await until(pilot, lambda: len(app.screen_stack) == 1)
        assert target.read_text() == "keep me\n"

        prompt = await export_to(str(tmp_path / "missing" / "x.jsonl"))
        await pilot.pause(0.2)
        assert app.screen is prompt
        assert "no folder" in text_of(prompt.query_one("#export-error", Static))
        await pilot.press("escape")

        await export_to(str(target))
        await confirm(pilot)
        await pilot.press("1")  # replace it
        await until(
            pilot, lambda: notifications(app).count(f"Exported 2 dead letters to {target}.") == 1
        )
        assert len(target.read_text().splitlines()) == 2


async def test_detail_shows_db_down(dsn: str, conn: psycopg.Connection) -> None:
    """The detail screen keeps the status line's alarms: here, a database that is unreachable."""
    unreachable = conninfo.make_conninfo(dsn, port=1, connect_timeout=1)
    app = JobtuiApp(unreachable, "public", config=config())
    async with app.run_test(size=(80, 24)) as pilot:
        await until(pilot, lambda: app.db_error is not None)
        app.open_detail("job", 1)
        await until(
            pilot,
            lambda: isinstance(app.screen, DetailScreen) and bool(app.screen.query("#detail-head")),
        )
        detail = app.screen
        assert isinstance(detail, DetailScreen)
        status = detail.query_one("#detail-status", StatusBar)
        await until(pilot, lambda: "DB DOWN" in status.plain)
        await until(pilot, lambda: "database unreachable" in head(detail))
        assert "Copy" not in footer(app) and "Cancel" not in footer(app)


async def test_job_detail_says_why_it_is_not_running(dsn: str, conn: psycopg.Connection) -> None:
    """Issue 12: the detail of a waiting job carries the live answer of `jobs why`."""
    later = int(enqueue(conn, "report", {}, delay=timedelta(hours=2)))
    paused = int(enqueue(conn, "mail", {}))
    conn.execute("INSERT INTO paused_kinds (kind, paused_by) VALUES ('mail', 'ops-alice')")
    app = JobtuiApp(dsn, "public", config=config())
    async with app.run_test(size=SIZE) as pilot:
        detail = await open_detail(app, pilot, "job", later)
        why = detail.query_one("#detail-why", Static)
        await until(pilot, lambda: "scheduled" in rendered(why))
        assert "2h" in rendered(why) or "1h59m" in rendered(why)
        await pilot.press("escape")
        detail = await open_detail(app, pilot, "job", paused)
        why = detail.query_one("#detail-why", Static)
        await until(pilot, lambda: "paused" in rendered(why))
        assert "ops-alice" in rendered(why)


def test_each_attempt_shows_its_own_run_time() -> None:
    """Entries written since the worker records `started` show their run time; older ones
    (no `started`) show none rather than a guess."""
    from jobtui.models import ErrorEntry
    from jobtui.tui.screens.detail import _errors

    entries = [
        ErrorEntry(
            1, "2026-12-01T10:00:03.5+00:00", "E: one", None, "w", "2026-12-01T10:00:00+00:00"
        ),
        ErrorEntry(2, "2026-12-01T10:02:00+00:00", "E: two", None, "w"),
    ]
    parts = _errors(entries, None, None).renderables
    text = "\n".join(p.plain for p in parts if isinstance(p, Text))
    assert "attempt 1" in text and "ran 3.5s" in text
    assert text.count("ran ") == 1


async def test_rows_arriving_while_the_count_is_typed_are_never_acted_on(
    dsn: str, conn: psycopg.Connection
) -> None:
    """The operator types the count the dialog showed; if more rows match by then, nothing
    is done and the console says so (acting on 8 after confirming 5 was the bug)."""
    ids = add_dead(conn, "webhook", "ConnectTimeout: after 10s", n=5)
    app = JobtuiApp(dsn, "public", config=config())
    async with app.run_test(size=SIZE) as pilot:
        await dead_tab(app, pilot, "#dead-rows", 5)
        await pilot.press("tab", "r")
        await confirm(pilot)
        await pilot.press("2")
        later = add_dead(conn, "webhook", "ConnectTimeout: after 10s", n=3)  # meanwhile
        await pilot.press("5", "enter")
        await until(pilot, lambda: any("Nothing was done: 8 rows" in n for n in notifications(app)))
        assert dead_ids(conn) == set(ids) | set(later) and audit(conn) == []
