"""Issue 24: one INSERT of 200,000 reminders due over the next 30 days, with no worker running.

Prints the INSERT's time, how many rows job_counts holds after it, and what the snapshot's state
counts then cost (10 reads). Before migration 0025 the statement left one count row per kind and
due minute until some later writer's 1-in-64 fold; since 0025 it folds them itself.

    .venv/bin/python benchmarks/spread_insert.py [--dsn ADMIN_DSN] [--jobs 200000]
"""

from __future__ import annotations

import argparse
import time

import psycopg
from psycopg import conninfo

from jobtui.schema import migrate
from jobtui.sql import queries

DB = "jobtui_bench_spread_insert"
BACKLOG = """INSERT INTO jobs (kind, payload, run_at)
             SELECT 'k' || (g %% 20), '{}', now() - interval '1 hour'
             FROM generate_series(1, %s) g"""
REMINDERS = """INSERT INTO jobs (kind, payload, run_at)
               SELECT 'k' || (g %% 20), '{}', now() + interval '30 days' * random()
               FROM generate_series(1, %s) g"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dsn", default="postgresql://root@127.0.0.1:5432/postgres")
    ap.add_argument("--jobs", type=int, default=200_000)
    args = ap.parse_args()
    with psycopg.connect(args.dsn, autocommit=True) as admin:
        admin.execute(f"DROP DATABASE IF EXISTS {DB}")
        admin.execute(f"CREATE DATABASE {DB}")
    try:
        with psycopg.connect(conninfo.make_conninfo(args.dsn, dbname=DB), autocommit=True) as c:
            migrate(c, "public")
            c.execute(BACKLOG, (args.jobs,))
            c.execute("SELECT jobtui_fold_job_counts()")
            started = time.perf_counter()
            c.execute(REMINDERS, (args.jobs,))
            insert_ms = (time.perf_counter() - started) * 1000
            row = c.execute("SELECT count(*) FROM job_counts").fetchone()
            assert row is not None
            reads = []
            for _ in range(10):
                started = time.perf_counter()
                c.execute(queries("public").metrics_state_counts).fetchall()
                reads.append((time.perf_counter() - started) * 1000)
        reads.sort()
        print(
            f"INSERT of {args.jobs:,} jobs due over 30 days: {insert_ms:,.0f} ms; job_counts then"
            f" holds {row[0]:,} rows; state counts p50 {reads[5]:.1f} ms, max {reads[-1]:.1f} ms"
        )
    finally:
        with psycopg.connect(args.dsn, autocommit=True) as admin:
            admin.execute(f"DROP DATABASE IF EXISTS {DB}")


if __name__ == "__main__":
    main()
