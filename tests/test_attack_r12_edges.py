"""Faults found attacking the newcomer edges of round 12 (tests/test_cli_r12_edges.py).

Each test fails on main at 53d8617 and says what it did there.
"""

from __future__ import annotations

import re

import psycopg
import pytest
from test_cli_support import assert_ok, assert_one_error, run_cli

from benchmarks.article import ARTICLE_DDL

# --- migrate's ALTER hint, run as printed on a real article table ---


@pytest.mark.parametrize(
    ("column", "article", "mine"),
    [
        # ERROR: default for column "payload" cannot be cast automatically to type jsonb
        ("payload", "payload      jsonb not null", "payload      text not null default '{}'"),
        # a serial: ALTER … TYPE bigint left its sequence an integer one (max 2147483647)
        ("id", "id           bigserial primary key", "id           serial primary key"),
    ],
)
def test_the_printed_alter_extends_an_article_table(
    empty_dsn: str, column: str, article: str, mine: str
) -> None:
    assert article in ARTICLE_DDL
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        conn.execute(ARTICLE_DDL.replace(article, mine))
        conn.execute("INSERT INTO jobs (kind, payload) VALUES ('k', '{\"a\": 1}')")
    line = assert_one_error(
        run_cli("migrate", dsn=empty_dsn), 1, f"column {column} is", "run ALTER TABLE public.jobs"
    )
    statements = re.search(r"run (ALTER TABLE public\.jobs .*)$", line)
    assert statements, line
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        for sql in statements[1].split("; "):
            conn.execute(sql)  # what the message says to run
    assert "migrated schema public" in assert_ok(run_cli("migrate", dsn=empty_dsn))
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        if column == "payload":  # the default kept its meaning
            row = conn.execute("INSERT INTO jobs (kind) VALUES ('k') RETURNING payload").fetchone()
            assert row == ({},)
        else:  # ids go on past int4
            conn.execute("SELECT setval(pg_get_serial_sequence('jobs', 'id'), 3000000000)")
            row = conn.execute(
                "INSERT INTO jobs (kind, payload) VALUES ('k', '{}') RETURNING id"
            ).fetchone()
            assert row == (3000000001,)
