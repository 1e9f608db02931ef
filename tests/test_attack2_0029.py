"""Second attack pass on migration 0029 (a limited kind's jobs claimed in the claim order of
every kind, priority DESC, run_at, id): NULL priorities, extreme priorities, a rate-limited
kind under a flood of higher priorities, why and the Jobs tab against the claim.
"""

from __future__ import annotations

from typing import Any

import psycopg
import pytest
from apps.helpers import running_worker, wait_until

from benchmarks.article import ARTICLE_DDL
from jobtui import enqueue
from jobtui.registry import Registry
from jobtui.schema import MigrationRefused, migrate


@pytest.mark.parametrize(
    "column", ["priority int", "cancel_requested boolean", "created_at timestamptz"]
)
def test_an_article_table_with_a_nullable_column_jobtui_needs_not_null_is_refused(
    empty_dsn: str, column: str
) -> None:
    """An article table that already has `priority int` (nullable, no default) was accepted and
    kept it so: `ADD COLUMN IF NOT EXISTS priority int not null default 0` is skipped. The
    article's producer (`INSERT INTO jobs (kind, payload)`) then stored NULL priorities, which
    `priority DESC` sorts first: both claims (a limited kind's too since 0029) took them ahead
    of every priority while `jobtui jobs why` (`priority > %s`, `priority = %s`) counted none
    of them and put each NULL job first. A NULL cancel_requested kept a job from ever being
    claimed (`NOT cancel_requested`). The migrator refuses such a table, nothing changed."""
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        conn.execute(ARTICLE_DDL)
        conn.execute(f"ALTER TABLE jobs ADD COLUMN {column}")
        conn.execute("INSERT INTO jobs (kind, payload) VALUES ('k', '{}')")
        name = column.split()[0]
        with pytest.raises(MigrationRefused, match=f"column {name} allows NULL"):
            migrate(conn, "public")
        tables = conn.execute(
            "SELECT count(*) FROM information_schema.tables WHERE table_schema = 'public'"
        ).fetchone()
        assert tables == (1,)


async def test_a_worker_with_one_slot_fills_it_from_its_limited_kind_first_whatever_the_priority(
    dsn: str, aconn: psycopg.AsyncConnection
) -> None:
    """The console's docs said the Jobs tab's order (one claim order over every kind) is "the
    order the workers take them, in a kind with a limit too". Not across kinds: a worker with
    one slot handling `lim` (concurrency 5) and `free` (no limit) runs `lim`'s jobs of priority
    0 before `free`'s of priority 9, as its claim calls claim_limited first with every free
    slot (jobtui/worker/dispatcher.py). docs/handlers.md and docs/operating/console.md now say
    so; this pins what they say."""
    reg = Registry()
    ran: list[str] = []

    @reg.handler("lim", concurrency=5)
    async def lim(payload: Any) -> None:
        ran.append("lim")

    @reg.handler("free")
    async def free(payload: Any) -> None:
        ran.append("free")

    await enqueue(aconn, "lim", {}, priority=0)
    await enqueue(aconn, "lim", {}, priority=0)
    await enqueue(aconn, "free", {}, priority=9)
    await enqueue(aconn, "free", {}, priority=9)
    async with running_worker(dsn, reg, concurrency=1):
        await wait_until(lambda: len(ran) == 4, what="4 jobs run")
    assert ran == ["lim", "lim", "free", "free"], ran
