"""The kind screen behind a transaction pooler (attack, round 7): there the console sets no
session statement_timeout, so its reads are bounded only on the client, inside
`Link.refresh()`. The kind screen's reads ran outside it: one blocked by a lock on `jobs`
waited as long as the lock was held, and held the console's one link, so every other read
(the tabs behind the screen) queued behind it."""

from __future__ import annotations

import psycopg
import pytest
from test_tui_kind_reads import lock_past_the_timeout
from topology import Bouncer


async def test_a_read_behind_a_pooler_is_bounded_on_the_client(
    dsn: str,
    conn: psycopg.Connection,
    pgbouncer_transaction: Bouncer,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    await lock_past_the_timeout(pgbouncer_transaction.to(dsn), dsn, conn, monkeypatch)
