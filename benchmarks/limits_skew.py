"""The fast claim when a kind left out of its list has a large backlog ahead of the others.

Limited kinds (issue 13) are left out of worker_claim's kinds list, as paused kinds already
are. worker_claim walks the jobs_claim index in claim order, so it steps over every ready row
of a left-out kind that sits ahead. This prints ms per claim of `--batch` (with the completion
of what it claimed) for worker_claim and for worker_claim_per_kind (the claim a worker uses
while it handles a limited kind; its index comes with migration 0007), with `--backlog` rows
of the left-out kind (`held`, given a limit) enqueued before as many of the claimed one.

    python benchmarks/limits_skew.py [--dsn postgresql://root@127.0.0.1:5432/postgres]
        [--backlog 100000] [--batch 50] [--claims 40] [--runs 3]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
import uuid
from pathlib import Path

import psycopg
from psycopg import conninfo

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from jobtui import enqueue_many
from jobtui.schema import migrate
from jobtui.sql import queries
from jobtui.worker.statements import int_array

Q = queries("public")
# The index worker_claim_per_kind uses (migration 0007 creates it).
PROPOSED_INDEX = (
    "CREATE INDEX IF NOT EXISTS jobs_claim_kind ON jobs (kind, priority DESC, run_at, id)"
    " WHERE finished_at IS NULL AND locked_at IS NULL"
)
CASES = [
    ("worker_claim, both kinds listed", "worker_claim", ["fast", "held"]),
    ("worker_claim, held kind left out", "worker_claim", ["fast"]),
    ("worker_claim_per_kind, held limited", "worker_claim_per_kind", ["fast", "held"]),
    ("worker_claim_per_kind, held left out", "worker_claim_per_kind", ["fast"]),
]


def _ms_per_claim(conn: psycopg.Connection, sql: str, kinds: list[str], args) -> float:
    started = time.perf_counter()
    for _ in range(args.claims):
        params = {"kinds": kinds, "worker": "w", "limit": args.batch, "limits": "{}"}
        rows = conn.execute(sql, params).fetchall()
        pairs = ",".join(f'"{r[0]}":{r[3]}' for r in rows)
        conn.execute(
            Q.worker_complete,
            {"worker": "w", "ids": int_array([r[0] for r in rows]), "by_id": "{" + pairs + "}"},
        )
    return (time.perf_counter() - started) / args.claims * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--dsn",
        default=os.environ.get("JOBTUI_BENCH_DSN", "postgresql://root@127.0.0.1:5432/postgres"),
    )
    parser.add_argument("--backlog", type=int, default=100_000)
    parser.add_argument("--batch", type=int, default=50)
    parser.add_argument("--claims", type=int, default=40)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    figures: dict[str, list[float]] = {label: [] for label, _, _ in CASES}
    for _ in range(args.runs):
        name = f"jobtui_skew_{uuid.uuid4().hex[:8]}"
        with psycopg.connect(args.dsn, autocommit=True) as admin:
            admin.execute(f'CREATE DATABASE "{name}"')
        try:
            with psycopg.connect(conninfo.make_conninfo(args.dsn, dbname=name)) as conn:
                conn.autocommit = True
                migrate(conn, "public")
                enqueue_many(conn, ({"kind": "held"} for _ in range(args.backlog)))
                enqueue_many(conn, ({"kind": "fast"} for _ in range(args.backlog)))
                conn.execute(PROPOSED_INDEX)  # migration 0007 has it now
                conn.execute(
                    "INSERT INTO kind_limits (kind, declared_concurrency) VALUES ('held', 1000000)"
                )
                conn.execute("ANALYZE")
                for label, sql_name, kinds in CASES:
                    figures[label].append(_ms_per_claim(conn, Q[sql_name], kinds, args))
        finally:
            with psycopg.connect(args.dsn, autocommit=True) as admin:
                admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    print(f"backlog {args.backlog} held + {args.backlog} fast, claims of {args.batch}")
    for label, values in figures.items():
        print(
            f"{label:<36} {statistics.median(values):6.1f} ms per claim"
            f" [{min(values):.1f}–{max(values):.1f}] (n={len(values)})"
        )


if __name__ == "__main__":
    main()
