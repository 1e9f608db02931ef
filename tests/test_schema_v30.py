"""Migration 0030: the limited claim (jobtui_claim_limited) is told the worker's other kinds
(p_others, default '{}') and claims a limited job only where one claim order over all the
worker's kinds puts it among the free slots; the function is all it changes (the old
four-argument function is dropped, a four-argument call resolves to the new one). The head
schema is tests/data/schema_v30.txt, `tools/schema_describe.py DSN --fresh --up-to 30`; the
merged order is tests/test_claim_merged_order.py's.
"""

from __future__ import annotations

from pathlib import Path

import psycopg
import pytest

from jobtui import limits
from jobtui.limits import claim_limited
from jobtui.schema import migrate
from jobtui.schema.describe import describe

DATA = Path(__file__).parent / "data"
SNAPSHOT = DATA / "schema_v30.txt"
# The words a description's entries start with (jobtui.schema.describe).
ENTRY = (
    "column ", "constraint ", "function ", "grant ", "index ", "sequence ", "table ", "trigger ",
    "view ",
)  # fmt: skip


def entries(text: str) -> dict[str, str]:
    """A schema description's entries by their first line's name (a function's body is part
    of its entry up to the next line that starts an entry)."""
    out: dict[str, str] = {}
    key = ""
    for line in text.splitlines():
        if line.startswith(ENTRY):
            key = line.split("(")[0]
        out[key] = out.get(key, "") + line + "\n"
    return out


def test_the_head_schema_is_its_description(empty_dsn: str) -> None:
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        assert [m.version for m in migrate(conn, "Queue_2", up_to=30)][-1] == 30
        assert describe(conn, "Queue_2") == SNAPSHOT.read_text("utf-8")


def test_0030_changes_only_the_limited_claim_function() -> None:
    """Against 0029's description: every changed line is in jobtui_claim_limited's entry."""
    old = (DATA / "schema_v29.txt").read_text("utf-8")
    new = SNAPSHOT.read_text("utf-8")

    a, b = entries(old), entries(new)
    assert a.keys() == b.keys()
    assert [k for k in a if a[k] != b[k]] == ["function jobtui_claim_limited"]


def test_a_restored_schema_without_0030_is_recognised_and_0030_applies(empty_dsn: str) -> None:
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        migrate(conn, "public", up_to=29)
        conn.execute("DELETE FROM jobtui_migrations")  # a schema-only restore, say
        assert [m.version for m in migrate(conn, "public", up_to=30)] == [30]
        assert describe(conn, "public") == SNAPSHOT.read_text("utf-8")
        conn.execute("DELETE FROM jobtui_migrations")
        assert [m.version for m in migrate(conn, "public", up_to=30)] == []


def _at_0029_with_two_kinds(conn: psycopg.Connection) -> None:
    """Schema public at 0029 with `lim` (concurrency 5) at priority 0 (ids 1, 2) and `free`
    at priority 9 (id 3), all ready."""
    migrate(conn, "public", up_to=29)
    conn.execute(
        "INSERT INTO jobs (kind, payload, priority)"
        " SELECT k, '{}', p FROM (VALUES ('lim', 0), ('lim', 0), ('free', 9)) v(k, p)"
    )
    conn.execute("INSERT INTO kind_limits (kind, declared_concurrency) VALUES ('lim', 5)")


def test_0030_applies_on_a_database_with_waiting_rows_and_four_argument_calls_still_work(
    empty_dsn: str,
) -> None:
    """A database at 0029 with waiting rows of a limited kind and of an unlimited one: after
    0030 a caller with 0029's four arguments claims as before (no other kinds: no merge), one
    with the fifth leaves the slot to the other kind's higher priority and says wait 0."""
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        _at_0029_with_two_kinds(conn)
        assert [m.version for m in migrate(conn, "public", up_to=30)] == [30]
        merged = conn.execute(
            "SELECT id, kind, wait_s FROM jobtui_claim_limited(ARRAY['lim'], 'w1', 1, 1.0,"
            " ARRAY['free'])"
        ).fetchall()
        assert merged == [(None, "lim", 0.0)]
        old = conn.execute(
            "SELECT id FROM jobtui_claim_limited(ARRAY['lim'], 'w1', 1, 1.0) WHERE id IS NOT NULL"
        ).fetchall()
        assert old == [(1,)]


async def test_a_worker_started_before_0030_is_applied_still_claims_its_limited_kinds(
    empty_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The five-argument call does not exist at 0029: claim_limited told other kinds falls back
    to the four-argument one (0029's claim, limited kinds alone), so a worker started before
    `jobtui migrate` ran keeps claiming; after 0030 the same call merges (once the connection
    tries five arguments again: at once here, after limits.MERGE_RETRY_S in a worker)."""
    monkeypatch.setattr(limits, "MERGE_RETRY_S", 0.0)
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        _at_0029_with_two_kinds(conn)
        async with await psycopg.AsyncConnection.connect(empty_dsn, autocommit=True) as a:
            got = await claim_limited(a, "public", "w", ["lim"], 1, ["free"])
            assert [r[0] for r in got] == [1]
            migrate(conn, "public", up_to=30)
            got = await claim_limited(a, "public", "w", ["lim"], 1, ["free"])
            assert list(got) == [] and got.wait_s == {"lim": 0.0}
