"""Issue 11 "fast to the problem" and issue 12's capped counts in the Jobs and Dead letters
tabs, driven through Textual's Pilot against a real PostgreSQL: the capped count and `#`, `o`
on the true oldest ready job, `y`/`Y` from a table row, a search's first page."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg.types.json import Jsonb
from test_tui_actions import add_dead, choices, confirm, noted
from test_tui_console import fresh, goto, rendered, table, until

from jobtui import browse
from jobtui.console_config import ConsoleConfig
from jobtui.inert import payload_json
from jobtui.tui.app import JobtuiApp
from jobtui.tui.panes.jobs import JobsPane
from jobtui.tui.screens.filter_prompt import FilterScreen

SIZE = (120, 40)


def config(**changes: Any) -> ConsoleConfig:
    return ConsoleConfig(refresh_s=0.5).with_(**changes)


def add_jobs(conn: psycopg.Connection, kind: str, n: int, **cols: Any) -> list[int]:
    """`n` jobs of `kind` inserted in id order; `cols` (SQL expressions of `g`, 1..n) set
    other columns, e.g. run_at."""
    names = ["kind", "payload", *cols]
    values = ["%(kind)s", "jsonb_build_object('n', g)", *cols.values()]
    rows = conn.execute(
        f"INSERT INTO jobs ({', '.join(names)}) SELECT {', '.join(values)} "
        "FROM generate_series(1, %(n)s) g ORDER BY g RETURNING id",
        {"kind": kind, "n": n},
    ).fetchall()
    return sorted(r[0] for r in rows)


def info(app: JobtuiApp) -> str:
    return rendered(app.query_one("#jobs-info"))


async def filter_jobs(app: JobtuiApp, pilot: Any, text: str) -> None:
    await pilot.press("slash")
    await until(pilot, lambda: isinstance(app.screen, FilterScreen))
    app.screen.query_one("#filter-input").value = text  # type: ignore[attr-defined]
    await pilot.press("enter")
    await until(pilot, lambda: not isinstance(app.screen, FilterScreen))


async def test_count_is_capped_until_asked_exactly(dsn: str, conn: psycopg.Connection) -> None:
    add_jobs(conn, "mail", 8)
    add_jobs(conn, "mail", 2, finished_at="now()")
    app = JobtuiApp(dsn, "public", config=config(page_size=3))
    async with app.run_test(size=SIZE) as pilot:
        app.query_one(JobsPane).count_cap = 5
        await goto(app, pilot, "2")
        # Unfinished jobs (five states): summed from the state counts, exact at once.
        await until(pilot, lambda: "3 shown of 8" in info(app))
        assert "#" not in info(app)
        # Ready or cancelled: the counts cannot tell which cancelled jobs are also ready, so
        # the rows are counted, reading at most cap + 1.
        await filter_jobs(app, pilot, "state:ready,cancelled")
        await until(pilot, lambda: "3 shown of 5+" in info(app))
        assert "(# exact)" in info(app)
        await pilot.press("number_sign")
        await until(pilot, lambda: "3 shown of 8" in info(app))
        assert "5+" not in info(app) and "#" not in info(app)
        # A new filter counts afresh, from the state counts: unfinished (`a` from a state set
        # that is not the unfinished one), then all jobs.
        await pilot.press("a")
        await until(pilot, lambda: "unfinished" in info(app) and "shown of 8" in info(app))
        await pilot.press("a")
        await until(pilot, lambda: "shown of 10" in info(app) and "#" not in info(app))
    assert conn.execute("SELECT count(*) FROM jobs WHERE finished_at IS NULL").fetchone() == (8,)


async def test_o_goes_to_the_oldest_ready_job_beyond_the_first_page(
    dsn: str, conn: psycopg.Connection
) -> None:
    # Pages go in claim order (priority first): the ready jobs that have waited longest have
    # the lowest priorities, so the pages reach them last.
    sms = add_jobs(conn, "sms", 2, run_at="now() - interval '5 hours' + interval '1 minute' * g")
    # Older than every ready job but not ready: running, exhausted, and scheduled ones.
    add_jobs(conn, "mail", 1, run_at="now() - interval '9 hours'", locked_at="now()")
    add_jobs(conn, "mail", 1, run_at="now() - interval '9 hours'", attempts="3", max_attempts="3")
    # Ready mail jobs: the first inserted (lowest id) has waited longest, and runs last of them
    # (priorities 1..8, above the sms jobs' 0).
    mail = add_jobs(conn, "mail", 8, run_at="now() - interval '1 minute' * (100 - g)", priority="g")
    add_jobs(conn, "sms", 1, run_at="now() + interval '1 hour'")
    add_jobs(conn, "later", 1, run_at="now() + interval '1 hour'")  # no ready job at all
    assert await_oldest(conn, None) == sms[0] and await_oldest(conn, "mail") == mail[0]
    app = JobtuiApp(dsn, "public", config=config(page_size=3))
    async with app.run_test(size=SIZE) as pilot:
        await goto(app, pilot, "2")
        jobs = table(app, "#jobs-table")
        await until(pilot, lambda: len(jobs.keys) == 3)
        assert str(sms[0]) not in jobs.keys  # the first page does not hold it
        await pilot.press("o")
        await until(pilot, lambda: jobs.current_key == str(sms[0]))
        assert f"oldest ready #{sms[0]}: beyond the pages" in info(app)
        assert "state:ready" in info(app)
        # Within the kind in force: the oldest ready mail job, also pages away.
        await filter_jobs(app, pilot, "kind:mail")
        await until(pilot, lambda: str(mail[0]) not in jobs.keys and len(jobs.keys) == 3)
        await pilot.press("o")
        await until(pilot, lambda: jobs.current_key == str(mail[0]))
        assert {jobs.get_cell(k, "kind").plain for k in jobs.keys} == {"mail"}
        # Claimed by a worker: it is no longer ready (it leaves these ready rows), and the
        # next-oldest ready mail job, also pages away, takes its place; `o` goes to it.
        conn.execute("UPDATE jobs SET locked_at = now() WHERE id = %s", (mail[0],))
        await until(pilot, lambda: str(mail[0]) not in jobs.keys and str(mail[1]) in jobs.keys)
        await pilot.press("o")
        await until(pilot, lambda: jobs.current_key == str(mail[1]))
        assert f"oldest ready #{mail[1]}: beyond the pages" in info(app)
        # A kind with no ready job: said, and the cursor stays where it is.
        await filter_jobs(app, pilot, "kind:later")
        await until(pilot, lambda: len(jobs.keys) == 1)
        await pilot.press("o")
        await until(pilot, lambda: noted(app, "No job of kind later is ready."))
        assert jobs.keys == [] and "0 shown of 0" in info(app)


def await_oldest(conn: psycopg.Connection, kind: str | None) -> int | None:
    """The oldest ready job as the statement `o` runs finds it (through the sync connection)."""
    sql = browse.statement("public", "browse_oldest_ready_job")
    row = conn.execute(sql, {"kind": kind}).fetchone()
    return None if row is None else int(row[0])


def record_writes(app: JobtuiApp) -> list[str]:
    """What the app writes to its terminal from now on."""
    sent: list[str] = []
    driver = app._driver
    assert driver is not None
    original = driver.write

    def recording(data: str) -> None:
        sent.append(data)
        original(data)

    driver.write = recording  # type: ignore[method-assign]
    return sent


async def test_copy_and_save_from_the_rows_of_jobs_and_dead_letters(
    dsn: str, conn: psycopg.Connection, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path))
    monkeypatch.setenv("TERM", "xterm-256color")
    monkeypatch.delenv("TMUX", raising=False)
    monkeypatch.delenv("TERM_PROGRAM", raising=False)
    job_ids = add_jobs(conn, "mail", 2)
    (dead,) = add_dead(conn, "export_crm", "OSError: refused")
    app = JobtuiApp(dsn, "public", config=config())
    saved = tmp_path / "jobtui" / "clipboard"
    async with app.run_test(size=SIZE) as pilot:
        await goto(app, pilot, "2")
        jobs = table(app, "#jobs-table")
        await until(pilot, lambda: len(jobs.keys) == 2)
        await pilot.press("down")
        assert jobs.current_key == str(job_ids[1])  # claim order: the second row
        sent = record_writes(app)
        await pilot.press("y")
        dialog = await confirm(pilot)
        assert choices(dialog)[:2] == [
            f"1  id of job #{job_ids[1]}",
            f"2  payload of job #{job_ids[1]}",
        ]
        await pilot.press("1")
        await until(pilot, lambda: noted(app, f"Sent the id of job #{job_ids[1]}"))
        assert app.clipboard == str(job_ids[1])
        assert f"\x1b]52;c;{base64.b64encode(str(job_ids[1]).encode()).decode()}\a" in sent
        assert not saved.exists()  # no file unless asked
        await pilot.press("Y")
        await confirm(pilot)
        await pilot.press("2")
        await until(pilot, lambda: noted(app, "Saved the payload"))
        (path,) = saved.glob(f"job-{job_ids[1]}-payload-*.txt")
        assert path.read_text() == payload_json({"n": 2}) + "\n"

        # Dead letters: only the rows table copies (a group is not one row).
        await goto(app, pilot, "3")
        rows = table(app, "#dead-rows")
        await until(pilot, lambda: len(rows.keys) == 1)
        pane = app.query_one("#dead-pane")
        assert pane.check_action("copy", (False,)) is False  # the groups table has the focus
        rows.focus()
        await pilot.pause()
        await pilot.press("y")
        await confirm(pilot)
        await pilot.press("2")
        payload = payload_json({"i": 0, "to": "a@example.com"})
        await until(pilot, lambda: app.clipboard == payload)
        await pilot.press("Y")
        await confirm(pilot)
        await pilot.press("3")
        await until(pilot, lambda: noted(app, "Saved the traceback"))
        assert len(list(saved.glob(f"dead-{dead}-traceback-*.txt"))) == 1


async def test_a_search_draws_its_first_scope_and_says_it_goes_on(
    dsn: str, conn: psycopg.Connection, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(browse, "SEARCH_SCOPE", 50)  # each call examines 50 rows
    ids = add_jobs(conn, "mail", 120)
    # The needle: in two of the newest 50 rows, and in one far below them.
    needles = [ids[4], ids[99], ids[109]]
    conn.execute(
        "UPDATE jobs SET payload = payload || %s WHERE id = ANY(%s)",
        (Jsonb({"tag": "needle"}), needles),
    )
    app = JobtuiApp(dsn, "public", config=config())
    async with app.run_test(size=SIZE) as pilot:
        await goto(app, pilot, "2")
        jobs = table(app, "#jobs-table")
        await until(pilot, lambda: len(jobs.keys) == 100)  # one page
        await filter_jobs(app, pilot, "needle")
        # Fewer matches than a page in the newest rows: the search goes on to older rows by
        # itself (issue 26: a text search never looks empty while matches exist).
        await until(pilot, lambda: set(jobs.keys) == {str(i) for i in needles})
        await until(pilot, lambda: "searching" not in info(app))
        await pilot.press("number_sign")
        await until(pilot, lambda: "3 shown of 3" in info(app))


async def test_dead_info_line_keeps_its_spaces(dsn: str, conn: psycopg.Connection) -> None:
    add_dead(conn, "export_crm", "OSError: refused")
    app = JobtuiApp(dsn, "public", config=config())
    async with app.run_test(size=(80, 24)) as pilot:
        await goto(app, pilot, "3")
        groups = table(app, "#dead-groups")
        await until(pilot, lambda: len(groups.keys) == 2)
        await pilot.press("down")  # the export_crm group
        line = app.query_one("#dead-info")
        await until(pilot, lambda: "group export_crm" in rendered(line))
        assert rendered(line).startswith("filter none (all dead letters)  group export_crm   1 ")


async def test_run_again_from_the_jobs_table(dsn: str, conn: psycopg.Connection) -> None:
    (done,) = add_jobs(conn, "mail", 1, finished_at="now()", attempts="1")
    (ready,) = add_jobs(conn, "mail", 1)
    app = JobtuiApp(dsn, "public", config=config())
    async with app.run_test(size=SIZE) as pilot:
        await goto(app, pilot, "2")
        jobs = table(app, "#jobs-table")
        await pilot.press("a")  # every job: the finished one too
        await until(pilot, lambda: len(jobs.keys) == 2)
        pane = app.query_one(JobsPane)
        assert jobs.current_key == str(ready)
        assert pane.check_action("run_again", ()) is None  # unfinished: cannot run again
        await pilot.press("R")
        await pilot.pause(0.2)
        assert not conn.execute("SELECT 1 FROM jobs WHERE rerun_of IS NOT NULL").fetchall()
        await pilot.press("down")
        assert jobs.current_key == str(done) and pane.check_action("run_again", ()) is True
        await pilot.press("R")
        dialog = await confirm(pilot)
        assert dialog._title == f"Run job #{done} again?"
        await pilot.press("1")
        await until(pilot, lambda: noted(app, f"Job #{done} run again as job #"))
        new = conn.execute("SELECT id, finished_at FROM jobs WHERE rerun_of = %s", (done,))
        ((new_id, finished),) = new.fetchall()
        assert finished is None
        await until(pilot, lambda: str(new_id) in jobs.keys)


async def test_a_refresh_remakes_only_the_rows_that_changed(
    dsn: str, conn: psycopg.Connection
) -> None:
    """Rows that look the same keep their cells (the table skips them); a job that changed
    state, or whose payload changed, is drawn afresh."""
    # Due in 10 days and half an hour: the `when` they show ("in 10d0h") holds for 30 minutes.
    ids = add_jobs(conn, "mail", 4, run_at="now() + interval '10 days 30 minutes'")
    app = JobtuiApp(dsn, "public", config=config())
    async with app.run_test(size=SIZE) as pilot:
        await goto(app, pilot, "2")
        jobs = table(app, "#jobs-table")
        await until(pilot, lambda: len(jobs.keys) == 4)
        before = {key: jobs._rows[key] for key in jobs.keys}
        conn.execute(
            "UPDATE jobs SET locked_at = now(), locked_by = 'w:1' WHERE id = %s", (ids[0],)
        )
        conn.execute("""UPDATE jobs SET payload = '{"changed": 1}' WHERE id = %s""", (ids[1],))
        await fresh(app, pilot)
        await until(pilot, lambda: jobs.get_cell(str(ids[0]), "state").plain == "running")
        after = {key: jobs._rows[key] for key in jobs.keys}
        assert after[str(ids[0])] is not before[str(ids[0])]
        assert after[str(ids[1])] is not before[str(ids[1])]
        assert "changed" in jobs._rows[str(ids[1])][5].plain
        assert all(after[str(i)] is before[str(i)] for i in ids[2:])
