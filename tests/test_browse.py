"""Browsing: keyset pages with every filter, counts, groups, kinds, and the write check."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable, Iterator

import psycopg
import pytest
from psycopg import conninfo
from psycopg.types.json import Jsonb

from jobtui import browse
from jobtui.models import DeadFilter, JobFilter
from jobtui.sql import queries

S = "public"


def add_job(conn: psycopg.Connection, kind: str, payload: object = None, **cols: object) -> int:
    """Insert one jobs row with the given column values."""
    names = ["kind", "payload", *cols]
    values: list[object] = [kind, Jsonb(payload if payload is not None else {}), *cols.values()]
    row = conn.execute(
        f"INSERT INTO jobs ({', '.join(names)}) VALUES ({', '.join(['%s'] * len(names))}) "
        "RETURNING id",
        values,
    ).fetchone()
    assert row is not None
    return int(row[0])


def add_dead(
    conn: psycopg.Connection,
    kind: str,
    error: str,
    *,
    id: int | None = None,
    payload: object = None,
    attempts: int = 3,
) -> int:
    """Insert one dead letter (with a fresh id from the jobs sequence unless given)."""
    if id is None:
        row = conn.execute("SELECT nextval(pg_get_serial_sequence('jobs', 'id'))").fetchone()
        assert row is not None
        id = int(row[0])
    errors = [
        {
            "attempt": a,
            "at": "2026-01-01T00:00:00+00:00",
            "error": error,
            "traceback": "tb",
            "worker": "w",
        }
        for a in range(1, attempts + 1)
    ]
    conn.execute(
        """INSERT INTO dead_letters (id, kind, payload, attempts, max_attempts, created_at,
               run_at, last_error, errors, reason)
           VALUES (%s, %s, %s, %s, %s, now(), now(), %s, %s, 'failed')""",
        (
            id,
            kind,
            Jsonb(payload if payload is not None else {}),
            attempts,
            attempts,
            error,
            Jsonb(errors),
        ),
    )
    return id


@pytest.fixture
def jobs_fixture(conn: psycopg.Connection) -> dict[str, list[int]]:
    """A small set with every state, two kinds and awkward payloads."""
    ids: dict[str, list[int]] = {
        s: [] for s in ("ready", "scheduled", "retrying", "running", "succeeded", "cancelled")
    }
    for i in range(7):
        ids["ready"].append(add_job(conn, "email" if i % 2 else "report", {"n": i}))
    for i in range(3):
        ids["scheduled"].append(add_job(conn, "email", {"n": 100 + i}))
    conn.execute(
        "UPDATE jobs SET run_at = now() + interval '1 hour' WHERE id = ANY(%s)", (ids["scheduled"],)
    )
    for i in range(2):
        ids["retrying"].append(
            add_job(
                conn, "report", {"n": 200 + i}, attempts=1, last_error="ValueError: boom 50% off"
            )
        )
    ids["retrying_later"] = [add_job(conn, "email", {"n": 250}, attempts=2)]
    conn.execute(
        "UPDATE jobs SET run_at = now() + interval '10 minutes' WHERE id = %s",
        (ids["retrying_later"][0],),
    )
    for i in range(2):
        ids["running"].append(add_job(conn, "email", {"n": 300 + i}, attempts=1))
    conn.execute(
        "UPDATE jobs SET locked_at = now(), locked_by = 'w1' WHERE id = ANY(%s)", (ids["running"],)
    )
    for i in range(4):
        ids["succeeded"].append(add_job(conn, "report", {"n": 400 + i}, attempts=1))
    conn.execute("UPDATE jobs SET finished_at = now() WHERE id = ANY(%s)", (ids["succeeded"],))
    ids["cancelled"].append(add_job(conn, "email", {"n": 500}))
    conn.execute(
        "UPDATE jobs SET finished_at = now(), cancelled_at = now() WHERE id = ANY(%s)",
        (ids["cancelled"],),
    )
    ids["odd"] = [
        add_job(conn, "email", {"note": "100% sure"}),
        add_job(conn, "email", {"note": "a_b"}),
        add_job(conn, "email", {"note": "back\\slash"}),
        add_job(conn, "email", {"note": "'; DROP TABLE jobs; --"}),
    ]
    ids["ready"].extend(ids["odd"])
    return ids


def page_order(conn: psycopg.Connection, ids: Iterable[int]) -> list[int]:
    """`ids` in the order of a page of jobs: running rows newest first, then waiting rows in
    claim order (priority DESC, run_at, id), then finished rows newest first."""
    rows = conn.execute(
        "SELECT id, finished_at IS NOT NULL, locked_at IS NOT NULL, priority,"
        " extract(epoch FROM run_at)::float8"
        " FROM jobs WHERE id = ANY(%s)",
        (list(ids),),
    ).fetchall()
    running = sorted((r[0] for r in rows if r[2] and not r[1]), reverse=True)
    waiting = [r[0] for r in sorted((r for r in rows if not r[1] and not r[2]),
                                    key=lambda r: (-r[3], r[4], r[0]))]  # fmt: skip
    finished = sorted((r[0] for r in rows if r[1]), reverse=True)
    return running + waiting + finished


async def all_pages(
    aconn: psycopg.AsyncConnection,
    flt: JobFilter,
    limit: int = 2,
    between: Callable[[int], None] | None = None,
) -> list[int]:
    """Every page's ids, walked as the console does; `between(n)` runs after page n (from 1)."""
    seen: list[int] = []
    before = None
    pages = 0
    while True:
        page = await browse.list_jobs(aconn, S, flt, before=before, limit=limit)
        seen.extend(r.id for r in page.rows)
        pages += 1
        assert pages < 100
        if page.next_before is None:
            return seen
        assert page.next_before == page.rows[-1].id
        if between is not None:
            between(pages)
        before = page.next_before


async def test_list_jobs_pages_through_each_state_filter(
    aconn: psycopg.AsyncConnection, conn: psycopg.Connection, jobs_fixture: dict[str, list[int]]
) -> None:
    everything = page_order(conn, {i for v in jobs_fixture.values() for i in v})
    assert await all_pages(aconn, JobFilter()) == everything
    f = jobs_fixture
    # DESIGN.md's states: a retry is `retrying` and also `ready` (due) or `scheduled` (later).
    expected = {
        "ready": f["ready"] + f["retrying"],
        "scheduled": f["scheduled"] + f["retrying_later"],
        "retrying": f["retrying"] + f["retrying_later"],
        "running": f["running"],
        "succeeded": f["succeeded"],
        "cancelled": f["cancelled"],
    }
    for state, ids in expected.items():
        got = await all_pages(aconn, JobFilter(states=(state,)))
        assert got == page_order(conn, ids), state
        page = await browse.list_jobs(aconn, S, JobFilter(states=(state,)), limit=100)
        for r in page.rows:  # the row's one-word state names the retry as such
            assert r.state == (
                "retrying"
                if r.attempts and r.locked_at is None and r.finished_at is None
                else state
            ), (state, r)
        assert page.next_before is None
        assert await browse.count_jobs(aconn, S, JobFilter(states=(state,))) == len(got)
    both = await all_pages(aconn, JobFilter(states=("running", "cancelled")), limit=1)
    assert both == page_order(conn, jobs_fixture["running"] + jobs_fixture["cancelled"])


async def test_list_jobs_by_kind_and_state_and_text(
    aconn: psycopg.AsyncConnection, conn: psycopg.Connection, jobs_fixture: dict[str, list[int]]
) -> None:
    kinds: dict[int, str] = dict(conn.execute("SELECT id, kind FROM jobs").fetchall())
    emails = await all_pages(aconn, JobFilter(kind="email"), limit=3)
    assert emails == page_order(conn, (i for i, k in kinds.items() if k == "email"))
    ready_reports = await all_pages(aconn, JobFilter(kind="report", states=("ready",)), limit=1)
    assert ready_reports == page_order(
        conn, (i for i in jobs_fixture["ready"] + jobs_fixture["retrying"] if kinds[i] == "report")
    )
    # Error text, case-insensitive, with a literal % in it.
    assert await all_pages(aconn, JobFilter(text="BOOM 50%")) == sorted(
        jobs_fixture["retrying"], reverse=True
    )
    odd = jobs_fixture["odd"]
    assert await all_pages(aconn, JobFilter(text="100%")) == [odd[0]]
    assert await all_pages(aconn, JobFilter(text="%")) == sorted(
        [odd[0], *jobs_fixture["retrying"]], reverse=True
    )
    assert await all_pages(aconn, JobFilter(text="a_b")) == [odd[1]]
    assert await all_pages(aconn, JobFilter(text="_")) == [odd[1]]
    assert await all_pages(aconn, JobFilter(text="k\\\\s")) == [odd[2]]  # JSON doubles the \
    assert await all_pages(aconn, JobFilter(text="'; DROP TABLE jobs; --")) == [odd[3]]
    assert await browse.count_jobs(aconn, S, JobFilter(text="'; drop table JOBS; --")) == 1
    row = conn.execute("SELECT count(*) FROM jobs").fetchone()
    assert row is not None and row[0] == len({i for v in jobs_fixture.values() for i in v})
    # Digits match the id exactly, as well as payload text containing them.
    target = jobs_fixture["succeeded"][0]
    got = await all_pages(aconn, JobFilter(text=str(target)))
    assert target in got
    assert all(
        i == target
        or str(target)
        in str(
            conn.execute(
                "SELECT payload::text || coalesce(last_error, '') FROM jobs WHERE id = %s", (i,)
            ).fetchone()
        )
        for i in got
    )
    assert await all_pages(aconn, JobFilter(text="no such text anywhere")) == []


async def test_get_job_and_row_contents(
    aconn: psycopg.AsyncConnection, conn: psycopg.Connection, jobs_fixture: dict[str, list[int]]
) -> None:
    jid = jobs_fixture["retrying"][0]
    conn.execute(
        """UPDATE jobs SET errors = '[{"attempt": 1, "at": "2026-01-01T00:00:00Z",
             "error": "ValueError: boom", "traceback": "Traceback...", "worker": "w1"}]'
           WHERE id = %s""",
        (jid,),
    )
    job = await browse.get_job(aconn, S, jid)
    assert job is not None
    assert job.state == "retrying" and job.kind == "report" and job.attempts == 1
    assert job.payload == {"n": 200}
    assert job.errors[0].error == "ValueError: boom" and job.errors[0].worker == "w1"
    assert await browse.get_job(aconn, S, 10**12) is None
    assert await browse.get_job(aconn, S, 2**70) is None
    running = await browse.get_job(aconn, S, jobs_fixture["running"][0])
    assert running is not None and running.state == "running" and running.locked_by == "w1"


async def test_bad_filters_are_refused_with_a_clear_error(aconn: psycopg.AsyncConnection) -> None:
    with pytest.raises(browse.InvalidFilter, match="unknown job state"):
        await browse.list_jobs(aconn, S, JobFilter(states=("dead",)))
    with pytest.raises(browse.InvalidFilter, match="limit"):
        await browse.list_jobs(aconn, S, JobFilter(), limit=0)
    with pytest.raises(browse.InvalidFilter, match="NUL"):
        await browse.list_jobs(aconn, S, JobFilter(text="a\x00b"))
    with pytest.raises(browse.InvalidFilter, match="kind"):
        await browse.list_dead(aconn, S, DeadFilter(kind=7))  # type: ignore[arg-type]
    # A lone state name is taken as that state, not as its letters.
    assert (await browse.list_jobs(aconn, S, JobFilter(states="ready"))).rows == []  # type: ignore[arg-type]


@pytest.fixture
def dead_fixture(conn: psycopg.Connection) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {"timeout": [], "keyerror": [], "report": [], "odd": []}
    for i in range(5):
        out["timeout"].append(
            add_dead(
                conn,
                "email",
                f"TimeoutError: host 10.0.0.{i} after {i}s",
                payload={"to": f"u{i}@x"},
            )
        )
    for i in range(3):
        out["keyerror"].append(add_dead(conn, "email", f"KeyError: 'user_{i}'"))
    for _ in range(2):
        out["report"].append(add_dead(conn, "report", "ValueError: bad 100% _x_"))
    out["odd"].append(
        add_dead(conn, "report", "RuntimeError: x", payload={"q": "'; DROP TABLE dead_letters; --"})
    )
    return out


async def all_dead(aconn: psycopg.AsyncConnection, flt: DeadFilter, limit: int = 2) -> list[int]:
    seen: list[int] = []
    before = None
    while True:
        page = await browse.list_dead(aconn, S, flt, before=before, limit=limit)
        seen.extend(r.id for r in page.rows)
        if page.next_before is None:
            return seen
        before = page.next_before


async def test_list_dead_filters_groups_and_counts(
    aconn: psycopg.AsyncConnection, conn: psycopg.Connection, dead_fixture: dict[str, list[int]]
) -> None:
    d = dead_fixture
    everything = sorted((i for v in d.values() for i in v), reverse=True)
    assert await all_dead(aconn, DeadFilter()) == everything
    emails = sorted(d["timeout"] + d["keyerror"], reverse=True)
    assert await all_dead(aconn, DeadFilter(kind="email")) == emails
    assert await all_dead(aconn, DeadFilter(error="timeouterror")) == sorted(
        d["timeout"], reverse=True
    )
    assert await all_dead(aconn, DeadFilter(error="100%")) == sorted(d["report"], reverse=True)
    assert await all_dead(aconn, DeadFilter(error="_x_")) == sorted(d["report"], reverse=True)
    assert await all_dead(aconn, DeadFilter(text="'; DROP TABLE dead_letters; --")) == d["odd"]
    assert await all_dead(aconn, DeadFilter(text=str(d["keyerror"][1]))) == [d["keyerror"][1]]
    assert await all_dead(aconn, DeadFilter(text="u3@x")) == [d["timeout"][3]]

    groups = await browse.dead_groups(aconn, S, DeadFilter())
    assert [(g.kind, g.count) for g in groups] == [
        ("email", 5),
        ("email", 3),
        ("report", 2),
        ("report", 1),
    ]
    top = groups[0]
    assert top.error_signature == "TimeoutError: host N.N after Ns"
    assert top.sample_id == max(d["timeout"])
    assert top.first_seen <= top.last_seen
    assert groups[1].error_signature == "KeyError: ?"
    sig = DeadFilter(kind="email", signature=top.error_signature)
    assert await all_dead(aconn, sig, limit=2) == sorted(d["timeout"], reverse=True)
    assert await browse.count_dead(aconn, S, sig) == 5
    assert await browse.count_dead(aconn, S, DeadFilter()) == len(everything)
    assert [g.count for g in await browse.dead_groups(aconn, S, DeadFilter(kind="report"))] == [
        2,
        1,
    ]
    assert len(await browse.dead_groups(aconn, S, DeadFilter(), limit=1)) == 1

    row = await browse.get_dead(aconn, S, d["timeout"][0])
    assert row is not None and row.reason == "failed" and len(row.errors) == 3
    assert row.errors[0].traceback == "tb" and row.payload == {"to": "u0@x"}
    assert await browse.get_dead(aconn, S, 123456789) is None
    n = conn.execute("SELECT count(*) FROM dead_letters").fetchone()
    assert n is not None and n[0] == len(everything)


async def test_kinds_lists_pending_dead_and_paused(
    aconn: psycopg.AsyncConnection, conn: psycopg.Connection
) -> None:
    assert await browse.kinds(aconn, S) == []
    add_job(conn, "b_pending")
    done = add_job(conn, "finished_only")
    conn.execute("UPDATE jobs SET finished_at = now() WHERE id = %s", (done,))
    add_dead(conn, "a_dead", "E: x")
    add_dead(conn, "b_pending", "E: x")
    conn.execute("INSERT INTO paused_kinds (kind, paused_by) VALUES ('c_paused', 'me')")
    assert await browse.kinds(aconn, S) == ["a_dead", "b_pending", "c_paused"]


@pytest.fixture
def ro_dsn(dsn: str, conn: psycopg.Connection) -> Iterator[str]:
    """A DSN for a new login role that may only SELECT (dropped afterwards)."""
    role = f"jobtui_ro_{uuid.uuid4().hex[:10]}"
    conn.execute(f'CREATE ROLE "{role}" LOGIN')
    conn.execute(f'GRANT USAGE ON SCHEMA public TO "{role}"')
    conn.execute(f'GRANT SELECT ON ALL TABLES IN SCHEMA public TO "{role}"')
    try:
        yield conninfo.make_conninfo(dsn, user=role)
    finally:
        conn.execute(f'DROP OWNED BY "{role}"')
        conn.execute(f'DROP ROLE "{role}"')


async def test_can_write_follows_role_and_session(
    aconn: psycopg.AsyncConnection, ro_dsn: str
) -> None:
    assert await browse.can_write(aconn, S) is True
    async with await psycopg.AsyncConnection.connect(ro_dsn, autocommit=True) as ro:
        assert await browse.can_write(ro, S) is False
        # Reading still works for the read-only role.
        assert (await browse.list_jobs(ro, S, JobFilter())).rows == []
    await aconn.execute("SET default_transaction_read_only = on")
    assert await browse.can_write(aconn, S) is False


async def test_read_only_reason_names_the_role_or_the_session(
    aconn: psycopg.AsyncConnection, ro_dsn: str
) -> None:
    assert await browse.read_only_reason(aconn, S) is None
    async with await psycopg.AsyncConnection.connect(ro_dsn, autocommit=True) as ro:
        assert await browse.read_only_reason(ro, S) == "the database role cannot write"
    await aconn.execute("SET default_transaction_read_only = on")
    reason = await browse.read_only_reason(aconn, S)
    assert reason is not None and "session is read-only" in reason


async def test_exhausted_rows_are_their_own_state_and_no_other(
    aconn: psycopg.AsyncConnection, conn: psycopg.Connection
) -> None:
    """Rows a consumer gave up on (attempts >= max_attempts, unlocked) are `exhausted` only."""
    given_up = add_job(conn, "legacy", attempts=3, max_attempts=3)
    retry = add_job(conn, "legacy", attempts=1, max_attempts=3)
    fresh = add_job(conn, "legacy")

    async def ids(*states: str) -> list[int]:
        page = await browse.list_jobs(aconn, S, JobFilter(states=states))
        return sorted(r.id for r in page.rows)

    assert await ids("exhausted") == [given_up]
    assert await ids("ready") == sorted([retry, fresh])
    assert await ids("retrying") == [retry]
    job = await browse.get_job(aconn, S, given_up)
    assert job is not None and job.state == "exhausted"
    assert await browse.count_jobs(aconn, S, JobFilter(states=("exhausted",))) == 1


async def test_key_filter_finds_jobs_and_dead_letters_by_exact_unique_key(
    aconn: psycopg.AsyncConnection, conn: psycopg.Connection
) -> None:
    keyed = add_job(conn, "invoice", unique_key="invoice:42")
    add_job(conn, "invoice", unique_key="invoice:420")
    add_job(conn, "invoice")
    page = await browse.list_jobs(aconn, S, JobFilter(unique_key="invoice:42"))
    assert [r.id for r in page.rows] == [keyed] and page.rows[0].unique_key == "invoice:42"
    dead_id = add_dead(conn, "invoice", "E: x")
    conn.execute("UPDATE dead_letters SET unique_key = 'invoice:7' WHERE id = %s", (dead_id,))
    add_dead(conn, "invoice", "E: y")
    dpage = await browse.list_dead(aconn, S, DeadFilter(unique_key="invoice:7"))
    assert [r.id for r in dpage.rows] == [dead_id] and dpage.rows[0].unique_key == "invoice:7"
    hostile = "x' OR 1=1; --%_\\"
    assert (await browse.list_jobs(aconn, S, JobFilter(unique_key=hostile))).rows == []
    with pytest.raises(browse.InvalidFilter):
        await browse.list_jobs(aconn, S, JobFilter(unique_key="a\x00b"))


async def test_text_search_pages_through_bounded_scopes(
    aconn: psycopg.AsyncConnection, conn: psycopg.Connection, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A search examines SEARCH_SCOPE rows per page: short pages continue until None."""
    ids = [
        add_job(conn, "email" if i % 2 else "sms", {"tag": "hit" if i % 3 == 0 else "x"})
        for i in range(40)
    ]
    hits = sorted((ids[i] for i in range(40) if i % 3 == 0), reverse=True)
    email_hits = sorted((ids[i] for i in range(40) if i % 3 == 0 and i % 2), reverse=True)
    monkeypatch.setattr(browse, "SEARCH_SCOPE", 5)
    first = await browse.list_jobs(aconn, S, JobFilter(text="hit"), limit=100)
    assert len(first.rows) < 5 and first.next_before == ids[-5]
    for flt, expected in (
        (JobFilter(text="hit"), hits),
        (JobFilter(text="HIT", kind="email"), email_hits),
    ):
        for limit in (1, 2, 100):
            seen: list[int] = []
            before, pages = None, 0
            while True:
                page = await browse.list_jobs(aconn, S, flt, before=before, limit=limit)
                seen.extend(r.id for r in page.rows)
                pages += 1
                if page.next_before is None:
                    break
                before = page.next_before
            assert seen == expected, (flt, limit)
            assert pages >= len(expected) // limit

    for i, job_id in enumerate(ids[:12]):
        add_dead(
            conn, "email", "E: x", id=10_000 + job_id, payload={"tag": "hit" if i % 2 else "x"}
        )
    dead_hits = sorted(10_000 + ids[i] for i in range(12) if i % 2)
    seen = []
    before = None
    while True:
        dpage = await browse.list_dead(aconn, S, DeadFilter(text="hit"), before=before, limit=2)
        seen.extend(r.id for r in dpage.rows)
        if dpage.next_before is None:
            break
        before = dpage.next_before
    assert seen == sorted(dead_hits, reverse=True)


async def test_page_queries_use_their_indexes(
    aconn: psycopg.AsyncConnection, conn: psycopg.Connection
) -> None:
    """On a table big enough for plans to matter, each filtered page reads through an index."""
    conn.execute(
        """INSERT INTO jobs (kind, payload, run_at, attempts, locked_at, finished_at,
                             cancelled_at)
           SELECT 'k' || (g % 10), jsonb_build_object('n', g), now() - interval '1 day',
                  1, now(), now(), CASE WHEN g % 1000 = 0 THEN now() END
           FROM generate_series(1, 30000) g"""
    )
    conn.execute(
        """INSERT INTO jobs (kind, payload, run_at, attempts)
           SELECT 'k' || (g % 10), '{}', now() - interval '1 minute', 0
           FROM generate_series(1, 3000) g"""
    )
    conn.execute(
        """UPDATE jobs SET locked_at = now() WHERE id IN (
             SELECT id FROM jobs WHERE finished_at IS NULL ORDER BY id LIMIT 5)"""
    )
    for _ in range(5):
        add_dead(conn, "k1", "Rare: x")
    conn.execute(
        """INSERT INTO dead_letters (id, kind, payload, attempts, max_attempts, created_at,
               run_at, last_error, reason)
           SELECT 1000000 + g, 'k' || (g % 10), '{}', 1, 1, now(), now(),
                  'E' || (g % 7) || ': x', 'failed'
           FROM generate_series(1, 10000) g"""
    )
    conn.execute("VACUUM ANALYZE jobs")
    conn.execute("VACUUM ANALYZE dead_letters")

    def plan(name: str, params: dict[str, object], phased: bool = False) -> str:
        conn.execute(queries(S).browse_read_settings, {"serial": phased})  # as fetch_dicts does
        rows = conn.execute(
            "EXPLAIN " + browse.statement(S, name, phased), params, prepare=False
        ).fetchall()
        return "\n".join(r[0] for r in rows)

    def jobs_plan(flt: JobFilter) -> str:
        params = {**browse.job_filter_params(flt), **browse.NO_CURSOR, "limit": 100}
        return plan("browse_jobs_page", params, True)

    assert "jobs_running" in jobs_plan(JobFilter(states=("running",)))
    assert "jobs_cancelled_id" in jobs_plan(JobFilter(states=("cancelled",)))
    ready = jobs_plan(JobFilter(states=("ready",)))  # some index of waiting rows only
    assert any(f"using {i} " in ready for i in ("jobs_claim", "jobs_pending")), ready
    # No filter: running rows, waiting rows through an index of them only (claim order at
    # scale, benchmarks/browse_waiting.py), finished rows down the primary key.
    everything = jobs_plan(JobFilter())
    assert "Seq Scan on jobs" not in everything and "Backward using jobs_pkey" in everything
    assert any(f"using {i} " in everything for i in ("jobs_claim", "jobs_pending")), everything
    # Migration 0020: a kind's rows in every state, each phase through an index of that phase
    # only: finished rows (most of the table) by kind; waiting rows (few here) through whichever
    # index of waiting rows the estimates favour; running rows (fewer) through jobs_running.
    of_kind = jobs_plan(JobFilter(kind="k3"))
    assert "Seq Scan on jobs" not in of_kind and "jobs_pkey" not in of_kind, of_kind
    assert "jobs_finished_kind_id" in of_kind and "jobs_running" in of_kind, of_kind
    group = DeadFilter(kind="k1", signature="Rare: x")
    dead = plan(
        "browse_dead_page", {**browse.dead_filter_params(group), "before": None, "limit": 100}
    )
    assert "dead_letters_group" in dead
    kinds_plan = plan("browse_kinds", {})  # paused_kinds is tiny: a seq scan of it is fine
    assert "Seq Scan on jobs" not in kinds_plan
    assert "Seq Scan on dead_letters" not in kinds_plan
    page = await browse.list_dead(aconn, S, group, limit=5)
    assert len(page.rows) == 5 and {r.error_signature for r in page.rows} == {"Rare: x"}
