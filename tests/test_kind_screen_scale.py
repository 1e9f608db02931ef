"""Issue 24, the console at scale: the kind screen opens within 150 ms at any backlog.

- The figures that read the kind's unfinished rows (its rows' own max_attempts, the errors of
  its jobs waiting to retry) are read after the rest (`kindinfo.load(..., rows=False)`, then
  `kindinfo.load_rows`): the screen opens on the other figures and says "loading…" where
  these will be, until their read replaces them.
- The dead letters by signature come from the per-group counts and one index probe per
  signature, not from every dead letter of the kind.
- Every figure is exactly what a plain query over the rows says, on varied data: several
  kinds, retries (multi-line errors), exhausted rows, running rows that failed before, finished
  rows, a handler's max_attempts override, a handler that declares none, dead letters of
  several signatures (some deleted and requeued, so the count table holds negative rows).
"""

from __future__ import annotations

import asyncio
from dataclasses import replace
from typing import Any

import psycopg
import pytest
from test_tui_console import add_dead, config, rendered, until

from jobtui import kindinfo
from jobtui.sql import queries
from jobtui.tui.app import JobtuiApp
from jobtui.tui.screens.kind import KindScreen
from jobtui.tui.widgets.keyed_table import KeyedTable

Q = queries("public")
KINDS = ("mail", "crm.sync", "report", "k'quote", "idle", "nobody")

REF_DEAD = """
SELECT d.error_signature, count(*) AS n, max(d.died_at) AS last_at
FROM dead_letters d WHERE d.kind = %(kind)s
GROUP BY 1 ORDER BY n DESC, last_at DESC, 1
"""
REF_RETRY = """
SELECT left(split_part(j.last_error, E'\\n', 1), 300), count(*) AS n, max(j.run_at) AS last_at
FROM jobs j
WHERE j.kind = %(kind)s AND j.finished_at IS NULL AND j.attempts > 0
  AND j.last_error IS NOT NULL
GROUP BY 1 ORDER BY n DESC, last_at DESC, 1
"""
REF_ROW_MAX = """
SELECT min(j.max_attempts), max(j.max_attempts) FROM jobs j
WHERE j.kind = %(kind)s AND j.finished_at IS NULL
  AND NOT EXISTS (SELECT 1 FROM kind_handlers h
                  WHERE h.kind = %(kind)s AND h.max_attempts IS NOT NULL)
"""


def varied(conn: psycopg.Connection) -> None:
    """Rows of every sort over several kinds, by generate_series (varied by g)."""
    errors = (
        "ARRAY['OSError: disk full' || E'\\n' || 'at line 3', 'KeyError: ''x''', "
        "'TimeoutError: upstream took 31s', 'ValueError: bad ' || repeat('v', 400)]"
    )
    for i, kind in enumerate(KINDS[:4]):
        conn.execute(
            f"""
            INSERT INTO jobs (kind, payload, run_at, attempts, max_attempts, last_error)
            SELECT %(kind)s, '{{}}', now() + make_interval(mins => (g * 7) %% 90 - 30),
                   CASE WHEN g %% 3 = 0 THEN 1 + g %% 4 ELSE 0 END,
                   3 + (g * %(i)s) %% 5,
                   CASE WHEN g %% 3 = 0 THEN ({errors})[1 + (g * (%(i)s + 1)) %% 4] END
            FROM generate_series(1, 40 + 13 * %(i)s) g
            """,
            {"kind": kind, "i": i},
        )
        # Running, some of which failed an attempt before; and finished rows (not counted).
        conn.execute(
            """
            INSERT INTO jobs (kind, payload, attempts, max_attempts, last_error, locked_at,
                              locked_by)
            SELECT %(kind)s, '{}', g %% 2, 2 + g, CASE WHEN g %% 2 = 1 THEN 'RuntimeError: r'
                   END, now(), 'w:1:a'
            FROM generate_series(1, 1 + %(i)s) g
            """,
            {"kind": kind, "i": i},
        )
        conn.execute(
            """
            INSERT INTO jobs (kind, payload, attempts, max_attempts, last_error, finished_at)
            SELECT %(kind)s, '{}', 2, 1, 'OSError: old', now() FROM generate_series(1, 5)
            """,
            {"kind": kind},
        )
        for j, error in enumerate(("TimeoutError: export took 31 s", "KeyError: 'account'")):
            add_dead(conn, kind, error, n=1 + (i + j) % 3)
    add_dead(conn, "mail", "ValueError: nope 12", n=4)
    # Deleted and requeued dead letters: the counts hold negative rows for them.
    conn.execute(
        "DELETE FROM dead_letters WHERE id IN (SELECT id FROM dead_letters WHERE kind = 'mail'"
        " AND error_signature LIKE 'ValueError%%' ORDER BY id LIMIT 2)"
    )
    conn.execute("INSERT INTO jobs (kind, payload) SELECT 'idle', '{}' FROM generate_series(1, 9)")
    conn.execute(
        "INSERT INTO kind_handlers (kind, max_attempts, timeout_s, backoff_base_s, "
        "backoff_cap_s, declared_by) VALUES ('crm.sync', 7, 45, 30, 3600, 'w:1:abc'), "
        "('report', NULL, NULL, 1, 60, 'w:1:abc')"
    )
    conn.execute("ANALYZE")


def rows(conn: psycopg.Connection, sql: str, kind: str) -> list[tuple[Any, ...]]:
    return [tuple(r) for r in conn.execute(sql, {"kind": kind}).fetchall()]


def keys(groups: list[kindinfo.ErrorGroup]) -> list[tuple[int, Any]]:
    return [(g.count, g.last_at) for g in groups]


async def test_every_figure_equals_a_plain_query_over_the_rows(
    conn: psycopg.Connection, aconn: psycopg.AsyncConnection
) -> None:
    varied(conn)
    seen_retry = seen_dead = seen_range = 0
    for kind in KINDS:
        full = await kindinfo.load(aconn, "public", kind, "hour")
        first = await kindinfo.load(aconn, "public", kind, "hour", False)
        later = await kindinfo.load_rows(aconn, "public", kind)
        assert full.rows_read and not first.rows_read
        assert first.row_max_attempts is None and first.retry_errors == []
        assert first.with_rows(later) == replace(full, taken_at=first.taken_at), kind

        dead = rows(conn, REF_DEAD, kind)
        assert keys(full.dead_errors) == [(n, at) for _, n, at in dead[:5]], kind
        assert {(g.text, g.count, g.last_at) for g in full.dead_errors} <= {
            (s or "(no error text)", n, at) for s, n, at in dead
        }, kind
        assert full.dead == sum(n for _, n, _ in dead), kind

        retry = rows(conn, REF_RETRY, kind)
        assert keys(later.retry_errors) == [(n, at) for _, n, at in retry[:5]], kind
        assert {(g.text, g.count, g.last_at) for g in later.retry_errors} <= {
            (s, n, at) for s, n, at in retry
        }, kind

        low, high = rows(conn, REF_ROW_MAX, kind)[0]
        assert later.max_attempts == (None if low is None else (low, high)), kind
        seen_retry += bool(retry)
        seen_dead += bool(dead)
        seen_range += low is not None and low != high
    # The data exercised what it is meant to: groups of each sort, and spread max_attempts.
    assert seen_retry >= 3 and seen_dead >= 4 and seen_range >= 2
    # The override hides the rows' own; a handler without max_attempts does not.
    assert (await kindinfo.load_rows(aconn, "public", "crm.sync")).max_attempts is None
    assert (await kindinfo.load_rows(aconn, "public", "report")).max_attempts is not None


def rows_visited(conn: psycopg.Connection, sql: str, relation: str, kind: str) -> int:
    """Rows of `relation` the plan of `sql` visited (returned or filtered out), planned as at
    scale: by index (a table this small would be read whole)."""
    conn.execute("SET enable_seqscan = off")
    row = conn.execute("EXPLAIN (ANALYZE, FORMAT JSON) " + sql, {"kind": kind, "limit": 5})
    plan = row.fetchone()
    assert plan is not None
    seen = ("Actual Rows", "Rows Removed by Filter", "Rows Removed by Index Recheck")

    def walk(node: dict[str, Any]) -> int:
        own = 0
        if node.get("Relation Name") == relation:
            own = sum(int(node.get(k, 0)) * int(node.get("Actual Loops", 1)) for k in seen)
        return own + sum(walk(n) for n in node.get("Plans", []))

    return walk(plan[0][0]["Plan"])


def test_dead_signatures_read_one_index_entry_per_signature(conn: psycopg.Connection) -> None:
    conn.execute(
        """INSERT INTO dead_letters (id, kind, payload, attempts, max_attempts, created_at,
               run_at, last_error, reason, died_at)
           SELECT g, CASE WHEN g <= 2400 THEN 'mail' ELSE 'other' END, '{}', 1, 1, now(), now(),
                  CASE WHEN g <= 400 THEN 'AlphaError: x ' || g
                       WHEN g <= 1200 THEN 'BetaError: x'
                       ELSE 'GammaError: x' END,
                  'failed', now() - make_interval(secs => (g * 7919) % 5000)
           FROM generate_series(1, 4400) g"""
    )
    conn.execute("ANALYZE dead_letters")
    got = conn.execute(Q.kind_dead_signatures, {"kind": "mail", "limit": 5}).fetchall()
    assert [(s, n) for s, n, _ in got] == [
        ("GammaError: x", 1200),
        ("BetaError: x", 800),
        ("AlphaError: x N", 400),
    ]
    assert got == conn.execute(REF_DEAD, {"kind": "mail"}).fetchall()
    assert rows_visited(conn, Q.kind_dead_signatures, "dead_letters", "mail") <= 3


def test_row_max_attempts_reads_the_waiting_rows_from_the_index(
    conn: psycopg.Connection,
) -> None:
    """Planned as last in its transaction (after kind_rows_by_index): no bitmap heap scan
    (every heap page with a waiting row of the kind), no sequential scan of `jobs`."""
    conn.execute(
        "INSERT INTO jobs (kind, payload, max_attempts) "
        "SELECT 'k' || (g % 20), '{}', 3 + (g / 20) % 4 FROM generate_series(1, 20000) g"
    )
    conn.execute("VACUUM ANALYZE jobs")
    with conn.transaction():
        conn.execute(Q.kind_rows_by_index)
        plan = conn.execute(
            "EXPLAIN (FORMAT JSON) " + Q.kind_row_max_attempts, {"kind": "k3"}
        ).fetchone()
        assert plan is not None
        got = conn.execute(Q.kind_row_max_attempts, {"kind": "k3"}).fetchone()
    assert got == (3, 6)
    scans: list[str] = []

    def walk(node: dict[str, Any]) -> None:
        if node.get("Relation Name") == "jobs":
            scans.append(node["Node Type"])
        for n in node.get("Plans", []):
            walk(n)

    walk(plan[0][0]["Plan"])
    assert "Index Only Scan" in scans and "Bitmap Heap Scan" not in scans, scans
    assert "Seq Scan" not in scans, scans
    # The settings end with the transaction.
    assert conn.execute("SHOW enable_bitmapscan").fetchone() == ("on",)


async def test_the_screen_opens_before_the_row_figures_and_says_they_are_loading(
    dsn: str, conn: psycopg.Connection, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The kind's figures are drawn at once; its retries and the rows' max attempts say
    "loading…" until their own read (made slow here) replaces them; the screen never shows
    one kind's row figures under another."""
    varied(conn)
    real = kindinfo.load_rows
    gate = asyncio.Event()

    async def slow_rows(*args: Any) -> kindinfo.RowFigures:
        # Held once read: the first figures are shown when the row read has been sent
        # (kindinfo.load_then_rows), so a read held before that would hold them too.
        rows = await real(*args)
        await gate.wait()
        return rows

    monkeypatch.setattr(kindinfo, "load_rows", slow_rows)
    app = JobtuiApp(dsn, "public", config=config())
    async with app.run_test(size=(100, 40)) as pilot:
        table = app.query_one("#overview-pane KeyedTable", KeyedTable)
        await until(pilot, lambda: "report" in table.keys)
        table.focus()
        table.move_cursor(row=table.get_row_index("report"))
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, KindScreen))
        screen = app.screen
        assert isinstance(screen, KindScreen)
        await until(pilot, lambda: "unfinished:" in rendered(screen.query_one("#kind-head")))
        await pilot.pause(0.1)
        assert screen.info is None  # not complete yet
        head = rendered(screen.query_one("#kind-head"))
        assert "kind report" in head and "loading" not in head, head
        errors = rendered(screen.query_one("#kind-errors"))
        assert "jobs waiting to retry, by error: loading…" in errors, errors
        assert "last died" in errors  # the dead letters are there already
        settings = rendered(screen.query_one("#kind-settings"))
        assert "each job row's own (unfinished rows: loading…)" in settings, settings
        gate.set()
        await until(pilot, lambda: "loading" not in rendered(screen.query_one("#kind-errors")))
        errors = rendered(screen.query_one("#kind-errors"))
        retry = rows(conn, REF_RETRY, "report")
        assert f"{retry[0][1]:>6,} next run" in errors, errors
        low, high = rows(conn, REF_ROW_MAX, "report")[0]
        settings = rendered(screen.query_one("#kind-settings"))
        assert f"unfinished rows say {low}–{high}" in settings, settings
